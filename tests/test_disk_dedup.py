"""Document dedup sorted on disk (dedup/disk_dedup.py) decides what the in-memory deduplicators decide."""
import json
import random

import numpy as np
import pytest

from scratchlm.config import config_from_dict
from scratchlm.data import dedup_step
from scratchlm.data.clean.structure import similarity_text
from scratchlm.data.dedup import ContainmentConfig, ContainmentFinder, ExactDeduper, FuzzyDeduper, MinHashConfig
from scratchlm.data.dedup import disk_dedup
from scratchlm.data.dedup.minhash import UnionFind
from scratchlm.data.jsonl import read_jsonl
from scratchlm.data.read_step import READ
from scratchlm.data.step import Corpus
from scratchlm.data.step_runner import RESULT, StepRunner
from scratchlm.data.units import plan_units
from scratchlm.executor import LocalExecutor
from scratchlm.ids import DigestCache


def _planted(corpus, tmp_path) -> dict[str, str]:
    """The built-in corpus's documents with copies planted among them: exact, a word changed, a page inside a
    longer one, and a copy with a long passage of its own (which stays)."""
    rng = random.Random(5)
    paths = {}
    for name in ("web", "docs", "code"):
        docs = [json.loads(line)["text"] for line in corpus[name].read_text().splitlines()][:250]
        prose = [d for d in docs if len(d.split()) > 250]
        for i in range(12):
            a, b = rng.choice(prose or docs), rng.choice(docs)
            words = a.split()
            words[len(words) // 2] = "planted"
            docs.insert(rng.randrange(len(docs)), a)  # exact
            docs.insert(rng.randrange(len(docs)), " ".join(words))  # near
            docs.append(a + "\n\n" + b)  # holds a: a is the partial copy
            docs.append(a + "\n\n" + " ".join(f"own{rng.randrange(10**6)}" for _ in range(400)))
        paths[name] = tmp_path / f"{name}.jsonl"
        paths[name].write_text("".join(json.dumps({"text": d}) + "\n" for d in docs))
    return paths


def _runner(tmp_path, paths):
    cfg = config_from_dict({"data": {"sources": [{"name": n, "domain": n, "path": str(p)} for n, p in paths.items()],
                                     "workers": 1, "unit_mb": 1, "min_chars": 50, "sort_mb": 16}})
    cfg.path = tmp_path / "c.toml"
    corpus = Corpus(cfg)
    run = StepRunner(plan_units(cfg, DigestCache(tmp_path / "digests.json")), tmp_path / "cache", LocalExecutor(1))
    READ.run(run, corpus)
    return run, corpus


def _in_memory(run, corpus) -> dict[str, dict]:
    """The decisions of the in-memory path this replaced (as it stood before issue 20)."""
    s = dedup_step.DocumentDedupSettings.of(corpus)
    exact, fuzzy = ExactDeduper(), FuzzyDeduper(MinHashConfig(threshold=s.fuzzy_threshold))
    contained = ContainmentFinder(ContainmentConfig(threshold=s.containment_threshold))
    exact_of, code_ids, ids, texts = {}, set(), [], []
    for unit, doc in run.iter_docs():
        if (kept := exact.check(doc["id"], doc["text"])) is not None:
            exact_of[doc["id"]] = kept
            continue
        whole = unit.source in s.code_sources
        code_ids |= {doc["id"]} if whole else set()
        ids.append(doc["id"])
        texts.append(doc["text"] if whole else similarity_text(doc["text"]))
    for lo in range(0, len(ids), 1024):
        fuzzy.add_batch(ids[lo:lo + 1024], texts[lo:lo + 1024])
        contained.add_batch(ids[lo:lo + 1024], texts[lo:lo + 1024])
    near_of = dict(fuzzy.duplicates())
    part_of = contained.contained(set(near_of))
    own = {d for d, (k, _) in {**near_of, **part_of}.items()
           if d not in code_ids and contained.own(d, k) >= contained.cfg.own_min}
    out = {d: {"rule": "exact_duplicate", "detail": f"same normalized text as {k}"} for d, k in exact_of.items()}
    out |= {d: {"rule": "near_duplicate", "score": round(j, 4), "detail": f"estimated Jaccard {j:.2f} with {k}"}
            for d, (k, j) in near_of.items() if d not in own}
    out |= {d: {"rule": "contained_duplicate", "score": round(c, 4),
                "detail": f"{c:.0%} of its word 5-grams are in the longer {k}"} for d, (k, c) in part_of.items()
            if d not in own}
    return out


def _on_disk(run, corpus) -> dict[str, dict]:
    dedup_step.SKETCH.run(run, corpus)
    dedup_step.FIND_DUPLICATES.run(run, corpus)
    decided = corpus.decision(dedup_step.FIND_DUPLICATES)
    out = {}
    for path in sorted((run.cache / decided.where).glob("*.jsonl.zst")):
        for r in read_jsonl(path):
            doc_id = r.pop("id")
            out[doc_id] = {k: v for k, v in r.items() if k != "action"}
    assert (run.cache / decided.where / RESULT).exists() and not (run.cache / decided.where / ".work").exists()
    return out


@pytest.mark.parametrize("row_bytes", [disk_dedup.SORT_BYTES_PER_ROW, 1 << 20])
def test_disk_dedup_decides_what_the_in_memory_path_decides(core_corpus, tmp_path, monkeypatch, row_bytes):
    # a "row" of 1 MiB: 16 MB sorts hold 16 rows, so every kind of row is cut into hundreds of buckets, and
    # signatures are compared a pair at a time
    monkeypatch.setattr(disk_dedup, "SORT_BYTES_PER_ROW", row_bytes)
    if row_bytes > disk_dedup.SORT_BYTES_PER_ROW:
        monkeypatch.setattr(disk_dedup, "SIGNATURE_BYTES", 1)
    run, corpus = _runner(tmp_path, _planted(core_corpus, tmp_path))
    assert len(run.units) > 3
    expected = _in_memory(run, corpus)
    rules = {r["rule"] for r in expected.values()}
    assert rules == {"exact_duplicate", "near_duplicate", "contained_duplicate"}, rules
    assert _on_disk(run, corpus) == expected
    report = corpus.decision(dedup_step.FIND_DUPLICATES).result
    # copies with words of their own kept: how many depends on the corpus, that the path ran does not
    assert report["kept_with_own_text"] > 0 and report["exact"]["examples"][0]["excerpt"]


def test_a_corpus_without_copies_has_none(tmp_path):
    """Pages that share a passage, none a copy of another: every kind comes back empty, not an error."""
    rng = random.Random(2)

    def words(n: int) -> str:
        return " ".join(f"w{rng.randrange(10**6)}" for _ in range(n))

    shared = [words(60) for _ in range(10)]
    path = tmp_path / "docs.jsonl"
    path.write_text("".join(json.dumps({"text": words(300) + "\n\n" + shared[i % 10]}) + "\n" for i in range(40)))
    run, corpus = _runner(tmp_path, {"docs": path})
    assert _on_disk(run, corpus) == {} and _in_memory(run, corpus) == {}


@pytest.mark.parametrize("seed", range(5))
def test_clusters_in_whole_arrays_are_those_of_the_union_find(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 400))
    edges = rng.integers(0, n, size=(int(rng.integers(0, 2 * n)), 2))
    edges = np.concatenate([edges, np.column_stack([np.arange(n - 1), np.arange(1, n)])[: n // 3]])  # a long chain
    sets = UnionFind()
    sets.grow(n)
    for a, b in edges.tolist():
        sets.union(a, b)
    assert np.array_equal(disk_dedup.smallest_connected(n, edges), sets.roots())
