"""Paragraph dedup sorted on disk (dedup/paragraph_copies.py) cuts what the in-memory ParagraphDeduper cuts."""
import json
import random
from collections import Counter

import numpy as np
import pytest

from scratchlm.config import config_from_dict
from scratchlm.data.clean.structure import structural_paragraphs
from scratchlm.data.dedup import ParagraphDedupConfig, ParagraphDeduper, disk_dedup
from scratchlm.data.dedup.paragraph_copies import Cut, find_paragraph_copies
from scratchlm.data.paragraph_split import paragraphs_and_breaks
from scratchlm.data.paragraph_step import PARAGRAPH_SKETCH
from scratchlm.data.read_step import READ
from scratchlm.data.step import Corpus
from scratchlm.data.step_runner import StepRunner
from scratchlm.data.units import plan_units
from scratchlm.executor import LocalExecutor
from scratchlm.ids import DigestCache


def _planted(corpus, tmp_path) -> dict[str, str]:
    """The built-in prose documents with paragraphs of others planted in them: exact copies, copies with a word
    changed, a paragraph repeated inside its own document, and a boilerplate paragraph in dozens of documents."""
    rng = random.Random(7)
    paths = {}
    chains = [_chain(rng) for _ in range(12)]
    boiler = ("This manual is distributed in the hope that it will be useful, but without any warranty; see the "
              "license for the conditions under which copies may be made and shared with others.")
    for name in ("web", "docs", "code"):
        docs = [json.loads(line)["text"] for line in corpus[name].read_text().splitlines()][:300]
        if name != "code":
            sources = [p for d in docs for p in paragraphs_and_breaks(d)[0] if len(p.split()) >= 20]
            for i in range(len(docs)):
                planted = rng.sample(sources, 2)
                words = planted[1].split()
                words[len(words) // 3] = "planted"
                extra = [planted[0], " ".join(words)] + ([boiler] if i % 5 == 0 else [])
                if i % 17 == 0:
                    extra.append(extra[0])  # twice in one document
                docs[i] = "\n\n".join([docs[i], *extra])
            for k, (a, b, c) in enumerate(chains):  # A and B early in web, C at the end of docs (a later unit)
                if name == "web":
                    docs[k] += "\n\n" + a
                    docs[k + 40] += "\n\n" + b
                else:
                    docs[-1 - k] += "\n\n" + c
        paths[name] = tmp_path / f"{name}.jsonl"
        paths[name].write_text("".join(json.dumps({"text": d}) + "\n" for d in docs))
    return paths


def _chain(rng: random.Random) -> tuple[str, str, str]:
    """Paragraphs A, B, C: B is A with two words changed, C is B with two more (A ~ B ~ C, A less like C). B is cut
    as a copy of A; C's only similar candidate may then be B, which was cut: C stays."""
    a = [f"v{rng.randrange(10**6)}" for _ in range(100)]
    b, c = list(a), list(a)
    for i in (20, 60):
        b[i] = c[i] = "changed"
    for i in (40, 80):
        c[i] = "again"
    return " ".join(a), " ".join(b), " ".join(c)


def _sketched(tmp_path, paths):
    cfg = config_from_dict({"data": {"sources": [{"name": n, "domain": n, "path": str(p), **(
        {"profile": "code"} if n == "code" else {})} for n, p in paths.items()],
        "workers": 1, "unit_mb": 1, "min_chars": 50, "sort_mb": 16}})
    cfg.path = tmp_path / "c.toml"
    corpus = Corpus(cfg)
    run = StepRunner(plan_units(cfg, DigestCache(tmp_path / "digests.json")), tmp_path / "cache", LocalExecutor(1))
    READ.run(run, corpus)
    PARAGRAPH_SKETCH.run(run, corpus)
    return run, corpus


def _in_memory(run, corpus, cfg: ParagraphDedupConfig, min_docs: int) -> dict[str, list[tuple]]:
    """The cuts of the in-memory path this replaced (paragraph_step.py as it stood before issue 20)."""
    def docs():
        return ((doc, structural_paragraphs(doc["text"])) for unit, doc in run.iter_docs() if corpus.prose(unit))

    accept = None
    if min_docs > 2:
        counter, copies = ParagraphDeduper(cfg), Counter()
        for doc, protected in docs():
            copies.update(r.first for r in counter.process(doc["id"], doc["text"], protected)[1])
        accept = lambda r: copies[r.first] + 1 >= min_docs  # noqa: E731
    deduper, out = ParagraphDeduper(cfg), {}
    for doc, protected in docs():
        if removed := deduper.process(doc["id"], doc["text"], protected, accept)[1]:
            out[doc["id"]] = [(r.index, r.kind, r.first_doc_id) for r in removed]
    return out


def _on_disk(run, corpus, cfg: ParagraphDedupConfig, min_docs: int, tmp_path) -> dict[str, list[tuple]]:
    work = tmp_path / "work"
    dirs = [run.outputs[PARAGRAPH_SKETCH.name][u.name] for u in run.units]
    copies = find_paragraph_copies(dirs, work, cfg, min_docs, sort_mb=16)
    out = {}
    for u, unit in enumerate(run.units):
        cuts = copies.of_unit(u)
        for position, (_, doc) in enumerate(run.iter_docs([unit])):
            if position in cuts:
                out[doc["id"]] = [(c.paragraph, c.kind, c.first_doc_id) for c in cuts[position]]
    return out


@pytest.mark.parametrize("min_docs,row_bytes", [(2, disk_dedup.SORT_BYTES_PER_ROW), (5, 1 << 20),
                                                (25, disk_dedup.SORT_BYTES_PER_ROW)])
def test_disk_paragraph_dedup_cuts_what_the_in_memory_path_cuts(core_corpus, tmp_path, monkeypatch, min_docs,
                                                                row_bytes):
    # a "row" of 1 MiB: 16 MB sorts hold 16 rows, so every kind of row is cut into hundreds of buckets
    monkeypatch.setattr(disk_dedup, "SORT_BYTES_PER_ROW", row_bytes)
    run, corpus = _sketched(tmp_path, _planted(core_corpus, tmp_path))
    assert len(run.units) > 3
    cfg = ParagraphDedupConfig(min_words=corpus.data.min_paragraph_words,
                               threshold=corpus.data.paragraph_fuzzy_threshold)
    expected = _in_memory(run, corpus, cfg, min_docs)
    kinds = Counter(kind for cuts in expected.values() for _, kind, _ in cuts)
    assert kinds["exact"] > 20 and (kinds["near"] > 20 or min_docs > 2), kinds
    assert _on_disk(run, corpus, cfg, min_docs, tmp_path) == expected


def test_a_paragraph_like_only_a_cut_one_stays(tmp_path):
    """A ~ B ~ C by their signatures, A not like C: B is cut in favour of A; C, whose only similar candidate is
    the cut B (in an earlier unit), stays, as ParagraphDeduper, which only indexes kept paragraphs, keeps it."""
    rng = np.random.default_rng(3)
    a = rng.integers(0, 2**32, 64, dtype=np.uint64).astype(np.uint32)
    b, c = a.copy(), a.copy()
    b[:8] = c[:8] = 1  # bands 0-1 (4 rows each): B and C share them, A does not; estimated J(A, B) = 56/64
    c[8:16] = 2  # bands 2-3: C alone; J(B, C) = 56/64, J(A, C) = 48/64, below 0.8
    units = [(["a", "b"], [a, b]), (["c"], [c])]
    dirs = []
    for u, (ids, sigs) in enumerate(units):
        dirs.append(tmp_path / f"u{u}")
        dirs[-1].mkdir()
        arrays = {"ids": np.array(ids), "doc": np.arange(len(ids)), "para": np.zeros(len(ids), np.int64),
                  "exact": rng.integers(0, 2**63, (len(ids), 2)).astype(np.uint64), "sig": np.stack(sigs),
                  "shingles": np.full(len(ids), 98)}
        for name, array in arrays.items():
            np.save(dirs[-1] / f"{name}.npy", array)
    copies = find_paragraph_copies(dirs, tmp_path / "work", ParagraphDedupConfig(), min_docs=2, sort_mb=16)
    assert copies.of_unit(0) == {1: [Cut(0, "near", "a")]} and copies.of_unit(1) == {}
