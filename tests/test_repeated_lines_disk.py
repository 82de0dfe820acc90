"""find_repeated_lines merged on disk (line_steps.py) finds what the in-memory merge it replaced found."""
import json
import random

import numpy as np
import pytest

from scratchlm.config import config_from_dict
from scratchlm.data import line_steps
from scratchlm.data.clean.boilerplate import RepeatedLineFinder, line_hash
from scratchlm.data.line_steps import FIND_REPEATED_LINES, FREQUENT, LINE_COUNTS
from scratchlm.data.read_step import READ
from scratchlm.data.step import Corpus, CorpusContext
from scratchlm.data.step_runner import RESULT, StepRunner
from scratchlm.data.units import plan_units
from scratchlm.executor import LocalExecutor
from scratchlm.ids import DigestCache

HEADER = "Acme Widgets Online Store - main navigation bar"  # first line of every page
BODY_NOTE = "New in version 3.3 of the widget library."  # in many pages, always inside the body
HALF_EDGE = "Questions about this page can go to the help desk."  # in many pages, ends half of them
FOUR_FIFTHS = "Prices include sales tax where it applies."  # in 25 pages, ends 20: exactly edge_share, enough


def _pages(rng: random.Random, site: str, n: int) -> str:
    """n pages of one site: its header, lines that end a page or sit in its body (each site line with its own
    number of pages and share of them where it ends the page, many near the thresholds), and words of their own."""
    names = [a + b for a in "abcdef" for b in "abcdefghij"]  # not numbers: normalize_line makes every digit 0
    # (line, share of the pages holding it, share of those it ends)
    lines = [(BODY_NOTE, .3, 0), (HALF_EDGE, .3, .5)] + [
        (f"{site} template line {name} of the site", rng.randint(1, 60) / n, rng.choice([1, .9, .8, .7, .5]))
        for name in names]
    pages = []
    for k in range(n):
        body = [" ".join(f"w{rng.randrange(10**6)}" for _ in range(12)) for _ in range(25)]
        placed = [(FOUR_FIFTHS, k < 20)] if k < 25 else []
        for line, share, edge in lines:
            if rng.random() < share:
                placed.append((line, rng.random() < edge))
        for line, at_edge in placed:
            if not at_edge:
                body.insert(len(body) // 2, line)
        tail = [line for line, at_edge in placed if at_edge]  # among the last lines (unless more than three end it)
        pages.append("\n".join([HEADER] + body + tail))
    return "".join(json.dumps({"text": p}) + "\n" for p in pages)


def _in_memory(sides, s: line_steps.RepeatedLinesSettings) -> np.ndarray:
    """The merge this replaced (as it stood before the disk merge): the units' tables added into one finder."""
    finder, edges = RepeatedLineFinder(), RepeatedLineFinder()
    for side in sides:
        n_docs = int(np.load(side / "n_docs.npy")[0])
        finder.add_table(np.load(side / "keys.npy"), np.load(side / "counts.npy"), n_docs)
        edges.add_table(np.load(side / "edge_keys.npy"), np.load(side / "edge_counts.npy"), n_docs)
    assert len(finder) < finder.max_entries  # under the cap: no pruning, so the two merges must agree exactly
    frequent = finder.frequent(s.min_docs, s.min_share)
    keys, counts = finder.table()
    chrome = set(keys[edges.counts_of(keys) >= s.edge_share * counts].tolist())
    return np.array(sorted(frequent & chrome), dtype=np.uint64)


def _counted(tmp_path, sites: tuple[str, ...], pages: int) -> tuple[StepRunner, Corpus]:
    """A prepare of generated sites run up to their line counts, in units of about 1 MB."""
    rng = random.Random(3)
    paths = {site: tmp_path / f"{site}.jsonl" for site in sites}
    for site, path in paths.items():
        path.write_text(_pages(rng, site, pages))
    sources = [{"name": n, "domain": "web", "path": str(p)} for n, p in paths.items()]
    cfg = config_from_dict({"data": {"sources": sources, "workers": 1, "unit_mb": 1, "min_chars": 50}})
    cfg.path = tmp_path / "c.toml"
    corpus = Corpus(cfg)
    run = StepRunner(plan_units(cfg, DigestCache(tmp_path / "digests.json")), tmp_path / "cache", LocalExecutor(1))
    for step in (READ, LINE_COUNTS):
        step.run(run, corpus)
    return run, corpus


@pytest.mark.parametrize("parts", [None, 48])  # None: as many buckets as sort_mb asks for (one here)
def test_disk_merge_finds_what_the_in_memory_merge_found(tmp_path, monkeypatch, parts):
    real, seen = line_steps.buckets_for, []

    def buckets_for(rows: int, sort_mb: int) -> int:
        seen.append(parts or real(rows, sort_mb))
        return seen[-1]

    monkeypatch.setattr(line_steps, "buckets_for", buckets_for)
    run, corpus = _counted(tmp_path, ("alpha", "beta"), 1800)
    FIND_REPEATED_LINES.run(run, corpus)
    assert len(seen) == 2 and (parts is None or seen == [parts] * 2)
    s = line_steps.RepeatedLinesSettings.of(corpus)
    for site in ("alpha", "beta"):
        units = [u for u in run.units if u.source == site]
        assert len(units) >= 3
        decided = corpus.decision(FIND_REPEATED_LINES, units[0])
        found = np.load(run.cache / decided.file(FREQUENT))
        expected = _in_memory([run.outputs[LINE_COUNTS.name][u.name] for u in units], s)
        assert found.dtype == np.uint64 and np.array_equal(found, expected)
        assert decided.result == {"lines": len(expected)}
        # the rule is exercised both ways: page edges kept, body notes and lines ending only some pages not
        assert {line_hash(HEADER), line_hash(FOUR_FIFTHS)} <= set(expected.tolist()) and 10 < len(expected) < 60
        assert not {line_hash(BODY_NOTE), line_hash(HALF_EDGE)} & set(expected.tolist())
        assert (run.cache / decided.where / RESULT).exists() and not (run.cache / decided.where / ".work").exists()


def test_the_scratch_dir_goes_on_error_too(tmp_path, monkeypatch):
    run, corpus = _counted(tmp_path, ("alpha",), 200)

    def broken(self, bucket):
        raise OSError("disk gone")

    monkeypatch.setattr(line_steps.Buckets, "read", broken)
    out = tmp_path / "out"
    out.mkdir()
    ctx = CorpusContext(run, corpus, line_steps.RepeatedLinesSettings.of(corpus), run.units, out)
    with pytest.raises(OSError, match="disk gone"):
        line_steps.find_repeated_lines(ctx)
    assert not (out / ".work").exists()
