"""The validation draw's order sorted on disk (ranked_runs.py) is the order sorted in memory, and so is the draw."""
import random

from scratchlm.config import config_from_dict
from scratchlm.data.ranked_runs import RankedDocs
from scratchlm.data.step import Corpus
from scratchlm.data.val_split import ValidationSettings, draw_validation


def _items(n: int) -> list[tuple[str, int, str]]:
    rng = random.Random(3)
    return [(f"s/f{i}.txt", rng.randint(50, 5000), f"s-{i // 100:05d}") for i in range(n)]


def test_spilled_runs_merge_into_the_in_memory_order(tmp_path):
    items = _items(1000)
    whole = list(RankedDocs(items, seed=7))
    spilled = RankedDocs(iter(items), seed=7, spill=tmp_path / "runs", run_rows=64)
    assert len(list((tmp_path / "runs").iterdir())) == 16  # 1000 rows in runs of 64: the last is partial
    assert list(spilled) == whole and list(spilled) == whole  # walked twice, as the draw does
    assert (spilled.docs, spilled.chars) == (1000, sum(c for _, c, _ in items))
    assert sorted(whole) == sorted(items) and whole != items
    spilled.close()
    assert not (tmp_path / "runs").exists()


def test_the_draw_is_the_same_from_spilled_runs(tmp_path):
    cfg = config_from_dict({"data": {"sources": [{"name": "s", "domain": "d", "path": "x"}], "val_max_docs": 40}})
    settings = ValidationSettings.of(Corpus(cfg))
    items = _items(3000)
    excluded = {items[5][0], items[77][0]}
    spilled = {"d": RankedDocs(items, settings.seed, tmp_path / "runs", run_rows=100)}
    for gone in (set(), excluded):
        assert draw_validation(settings, {"d": items}, gone) == draw_validation(settings, spilled, gone)
    chosen, plan = draw_validation(settings, spilled, excluded)
    assert 0 < sum(map(len, chosen.values())) <= 40 and plan["d"]["clean_docs"] == 3000
    assert not excluded & {doc for docs in chosen.values() for doc in docs}
