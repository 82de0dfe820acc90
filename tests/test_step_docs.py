"""A step's documents stored as what it changed: rebuilt exactly, whatever the step did to them, and the whole
stage's outputs the same as when every step stored whole documents."""
import json
import random
import shutil
from pathlib import Path

import pytest

from scratchlm.config import config_from_dict, parse_config
from scratchlm.data.prepare import prepare_data
from scratchlm.stages import size_estimate
from scratchlm.data.jsonl import ShardWriter, read_jsonl
from scratchlm.data.step_docs import (CHANGES, DOCS, GONE, KEPT, ChangeWriter, apply, change, input_chain, kept_spans,
                                      read_docs)


def rebuilt(before: dict, after: dict | None) -> dict | None:
    return apply(dict(before), change(before, after))


@pytest.mark.parametrize("old,new", [
    ("a\nb\nc\n", "a\nc\n"),  # a line cut
    ("a\nb\nc", "b"),  # a part of a line kept: the lines around it cut
    ("x\n\nx\n\nx\n", "x\n\nx\n"),  # repeated lines: the earliest place of each
    ("  padded  \n", "padded"),  # stripped
    ("héllo wörld\r\nzwei\u2028drei\n", "héllo wörld\r\ndrei\n"),  # line ends str.splitlines knows
    ("abc", ""),  # nothing left
])
def test_text_made_of_its_inputs_pieces_is_stored_as_spans(old, new):
    spans = kept_spans(old, new)
    assert spans is not None and "".join(old[a:b] for a, b in spans) == new
    assert "spans" in json.loads(change({"text": old}, {"text": new}))


def test_text_with_new_words_is_stored_whole():
    record = json.loads(change({"id": "1", "text": "one two\nthree\n"}, {"id": "1", "text": "one two\nfour\n"}))
    assert record == {"set": {"text": "one two\nfour\n"}}


def test_every_kind_of_change_rebuilds_the_document():
    before = {"id": "d", "text": "first line\nsecond line\nthird\n", "meta": {"url": "u"}, "n": 1}
    assert change(before, dict(before)) == KEPT and rebuilt(before, dict(before)) == before
    assert change(before, None) == GONE and rebuilt(before, None) is None
    cases = [
        {**before, "text": "first line\nthird\n"},  # cut
        {**before, "lang": "en"},  # a field added
        {k: v for k, v in before.items() if k != "n"},  # a field removed
        {**before, "meta": {"url": "v"}, "text": "third\nfirst line\n"},  # a nested value set anew; text reordered
    ]
    for after in cases:
        assert rebuilt(before, after) == after, after


def test_random_cuts_rebuild_exactly():
    rng = random.Random(0)
    words = ["a", "b", "ab", "\n", " ", "é", "\r\n", "x\u0085y"]
    for _ in range(2000):
        old = "".join(rng.choice(words) for _ in range(rng.randint(0, 40)))
        keep = sorted(rng.sample(range(len(old) + 1), min(len(old) + 1, rng.randint(0, 6))))
        new = "".join(old[a:b] for a, b in zip(keep[::2], keep[1::2]))
        assert rebuilt({"text": old}, {"text": new}) == {"text": new}


def test_a_chain_of_steps_is_read_back_from_any_result(tmp_path):
    cache = tmp_path / "cache"
    docs = [{"id": str(i), "text": f"line {i}\nchrome\nbody {i}\n"} for i in range(50)]
    base = cache / "read" / "k0"
    with ShardWriter(base, "docs", per_shard=1 << 62, level=1) as w:
        for d in docs:
            w.write(d)
    assert (base / DOCS).exists()

    def step(source, name, fn):
        out = cache / name / "k"
        out.mkdir(parents=True)
        writer = ChangeWriter(out, input_chain(source))
        for d in read_docs(source):
            writer.write(dict(d), fn(d))
        writer.close()
        return out

    def cut_chrome(d):
        d["text"] = d["text"].replace("chrome\n", "")
        return d

    cut = step(base, "cut", cut_chrome)
    tagged = step(cut, "tag", lambda d: None if int(d["id"]) % 7 == 0 else {**d, "lang": "en"})
    same = step(tagged, "same", lambda d: d)
    assert (same / CHANGES).exists() and not (same / DOCS).exists()
    want = [{"id": str(i), "text": f"line {i}\nbody {i}\n", "lang": "en"} for i in range(50) if i % 7]
    assert list(read_docs(same)) == want
    assert list(read_docs(cut)) == [{"id": str(i), "text": f"line {i}\nbody {i}\n"} for i in range(50)]
    assert list(read_docs(cache / "none" / "k")) == []
    moved = tmp_path / "moved"
    cache.rename(moved)  # the chain names directories relative to the cache
    assert list(read_docs(moved / "same" / "k")) == want


def test_prepare_stores_whole_documents_only_at_the_ends(tmp_path, core_corpus, micro_config):
    """The stage through every step on real text: only read and split keep whole documents, every step between
    is read back through its changes, and train/ holds what split's result reads back as."""
    cfg = parse_config(micro_config(tmp_path, core_corpus))
    out = tmp_path / "data"
    manifest = prepare_data(cfg, out, size_estimate(cfg))
    cache = cfg.workdir / "data" / "cache"
    stored = {step: {p.name for p in cache.glob(f"{step}/*/*.jsonl.zst")} for step in manifest["steps"]}
    assert sorted(s for s, files in stored.items() if DOCS in files) == ["read", "split"], stored
    changed = {s for s, files in stored.items() if CHANGES in files}
    assert {"dedup", "boilerplate", "language", "quality", "paragraphs"} <= changed, changed
    for unit, info in manifest["units"].items():
        steps = [Path(info["steps"][s]) for s in manifest["steps"] if s in info["steps"]]
        counts = [sum(1 for _ in read_docs(result)) for result in steps]
        stats = [manifest_docs_out(result) for result in steps]
        assert counts == stats, (unit, counts, stats)
        assert list(read_docs(steps[-1])) == list(read_jsonl(out / "train" / f"{unit}.jsonl.zst"))


def manifest_docs_out(result: Path) -> int:
    return json.loads((result / "stats.json").read_text())["docs_out"]


def _upper(doc, ctx):
    doc["text"] = doc["text"].upper()
    return doc


def _cut_first_line(doc, ctx):
    if doc["text"].startswith("DROP"):
        ctx.drop(doc["id"], "drop_me")
        return None
    doc["text"] = doc["text"].split("\n", 1)[-1]
    return doc


def _count(doc, ctx):
    ctx.note("seen", "docs")
    return doc


def test_a_run_of_steps_reruns_from_the_first_step_not_cached(tmp_path):
    """Three steps through each unit in one task: their results are each step's own, and a unit whose middle
    result is gone reruns from there while the other unit is read from cache."""
    from scratchlm.data.read_step import READ
    from scratchlm.data.step import Corpus, DocumentRun, DocumentStep
    from scratchlm.data.step_runner import StepRunner
    from scratchlm.data.units import Unit, UnitFile
    from scratchlm.executor import LocalExecutor

    units = []
    for i in range(2):
        path = tmp_path / f"in{i}.jsonl"
        path.write_text("".join(json.dumps({"text": f"{'drop' if k == 3 else 'head'} {k}\nbody {i} {k}\n"}) + "\n"
                                for k in range(6)))
        units.append(Unit("s", "web", "text", i, (UnitFile(str(path), f"s/in{i}", "jsonl"),), f"key{i}", 100))
    steps = DocumentRun((DocumentStep("upper", _upper), DocumentStep("cut", _cut_first_line),
                         DocumentStep("count", _count, writes_docs=False)))
    source = {"name": "s", "domain": "web", "path": str(path)}
    corpus = Corpus(config_from_dict({"data": {"min_chars": 1, "sources": [source]}}))

    def run():
        runner = StepRunner(units, tmp_path / "cache", LocalExecutor(1))
        READ.run(runner, corpus)
        steps.run(runner, corpus)
        return runner

    first = run()
    want = [[f"BODY {i} {k}" for k in range(6) if k != 3] for i in range(2)]  # read strips the text
    assert [[d["text"] for _, d in first.iter_docs([u])] for u in units] == want
    assert first.stats["cut"]["s-00000"]["dropped"] == {"drop_me": 1}
    assert first.stats["count"]["s-00001"]["notes"] == {"seen": {"docs": 5}}
    shutil.rmtree(first.outputs["upper"]["s-00000"])
    again = run()
    assert again.cached == {"read": 2, "upper": 1, "cut": 1, "count": 1}
    assert [[d["text"] for _, d in again.iter_docs([u])] for u in units] == want
    assert again.stats == first.stats
