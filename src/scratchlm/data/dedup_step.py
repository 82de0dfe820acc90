"""The corpus-wide dedup steps, across every source, in input order (the first occurrence is kept, so an earlier
source wins): whole documents (exact hash, MinHash near duplicates, containment) right after reading, and
paragraphs (plus the skeletons cuts leave behind) after the filters (paragraph_step.py).

They only decide, into one small decisions file per unit; the document steps `dedup` and `paragraphs` apply the
decisions in parallel and record them in the ledger.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np

from ..progress import log
from .dedup.sketch import save_sketch, sketch_doc
from .jsonl import ShardWriter, read_jsonl
from .step import Corpus, CorpusContext, CorpusStep, DocumentStep
from .step_context import StepContext
from .units import Unit

EXAMPLES = 5


class DecisionFiles:
    """One small decisions file per unit (`<unit>.jsonl.zst`; a unit without decisions has none), written in
    input order, so one compressor is open at a time: each holds about a megabyte, and a corpus has hundreds
    of units."""

    def __init__(self, out: Path):
        self.out = out
        self._unit: str | None = None
        self._writer: ShardWriter | None = None
        self._done: set[str] = set()

    def write(self, unit: str, decision: dict) -> None:
        if unit != self._unit:
            if unit in self._done:
                raise RuntimeError(f"decisions for unit {unit} written out of input order")
            self.close()
            self._unit, self._writer = unit, ShardWriter(self.out, unit, per_shard=1 << 62, level=1)
        self._writer.write(decision)

    def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
            (self.out / f"{self._unit}-00000.jsonl.zst").rename(self.out / f"{self._unit}.jsonl.zst")
            self._done.add(self._unit)
            self._writer = None


def decisions_of(step: CorpusStep) -> Callable[[Corpus, Unit], str]:
    """The state of the step that applies `step`'s decisions: the unit's decisions file, relative to the cache."""
    return lambda corpus, unit: corpus.decision(step, unit).file(f"{unit.name}.jsonl.zst")


def _decisions(ctx: StepContext) -> dict[str, dict]:
    if "decisions" not in ctx.memo:
        path = ctx.cache / ctx.state
        ctx.memo["decisions"] = {r.pop("id"): r for r in read_jsonl(path)} if path.exists() else {}
    return ctx.memo["decisions"]


def apply_dedup(doc: dict, ctx: StepContext) -> dict | None:
    """Apply the corpus-wide decisions for this unit: drop duplicates (and skeletons), cut duplicate paragraphs."""
    decision = _decisions(ctx).get(doc["id"])
    if decision is None or ctx.skips(decision.get("rule", "paragraph_duplicate")):
        return doc
    if decision["action"] == "drop":
        ctx.drop(doc["id"], decision["rule"], decision["detail"], doc["text"], decision.get("score"))
        return None
    original = doc["text"]
    doc["text"] = decision["text"]
    ctx.removed(doc["id"], "paragraph_duplicate", decision["removed"], "paragraph", decision["detail"], original)
    return doc


def _cluster_summary(sk, pairs: np.ndarray) -> tuple[dict, dict[str, int]]:
    """Clusters (a kept document and its copies) from (copy, kept) pairs sorted by copy: count, size histogram and
    the largest as examples; and the examples' kept documents by ID -> number, for their excerpts."""
    kept, copies = np.unique(pairs[:, 1], return_counts=True)
    sizes = Counter((copies + 1).tolist())
    floor = np.sort(copies)[-EXAMPLES] if len(copies) >= EXAMPLES else 0
    big = np.flatnonzero(copies >= floor)  # the largest, with every cluster tied with the last of them
    largest = sorted(zip(sk.gather("ids", kept[big]).tolist(), copies[big].tolist(), kept[big].tolist()),
                     key=lambda c: (-c[1], c[0]))[:EXAMPLES]
    examples = [{"kept": kept_id, "size": n + 1, "excerpt": "",
                 "duplicates": sk.gather("ids", pairs[pairs[:, 1] == doc, 0][:3]).tolist()}
                for kept_id, n, doc in largest]
    summary = {"clusters": len(kept), "duplicates": len(pairs), "examples": examples,
               "sizes": {str(k): v for k, v in sorted(sizes.items())}}
    return summary, {kept_id: doc for kept_id, _, doc in largest}


@dataclass(frozen=True)
class DocumentDedupSettings:
    skip: tuple[str, ...]  # of exact_dedup and fuzzy_dedup, those in data.skip
    fuzzy_threshold: float
    containment_threshold: float
    code_sources: tuple[str, ...]  # compared whole: a code file is all code, there is no prose to compare

    @classmethod
    def of(cls, corpus: Corpus) -> DocumentDedupSettings:
        d = corpus.data
        return cls(tuple(sorted(set(d.skip) & {"exact_dedup", "fuzzy_dedup"})), d.fuzzy_threshold,
                   d.containment_threshold, tuple(sorted(s.name for s in d.sources if s.filter_profile == "code")))


def sketch_settings(corpus: Corpus, unit: Unit):
    from .dedup.containment import ContainmentConfig
    from .dedup.minhash import MinHashConfig
    from .dedup.sketch import SketchSettings

    # the thresholds are applied when deciding: they do not change a sketch
    return SketchSettings(MinHashConfig(), ContainmentConfig(), corpus.source(unit).filter_profile == "code")


def find_duplicates(ctx: CorpusContext) -> dict:
    """Whole documents: exact, near (MinHash) and partial copies (containment), decided on the text as read,
    across every source, before any rule counts lines across documents or cuts per source (a page copied five
    times keeps one copy; the same page in two sources is one page). From the units' sketches, sorted on disk
    (dedup/disk_dedup.py): memory grows with the copies found, not with the corpus."""
    from .dedup import ContainmentConfig, MinHashConfig
    from .dedup.disk_dedup import find_copies

    s: DocumentDedupSettings = ctx.settings
    fuzzy = "fuzzy_dedup" not in s.skip
    contained_cfg = ContainmentConfig(threshold=s.containment_threshold)
    sk, copies = find_copies([ctx.runner.outputs[SKETCH.name][u.name] for u in ctx.units], ctx.out / ".work",
                             "exact_dedup" not in s.skip, MinHashConfig(threshold=s.fuzzy_threshold) if fuzzy else None,
                             contained_cfg if fuzzy else None, ctx.corpus.data.sort_mb)
    code = np.array([u.source in s.code_sources for u in ctx.units], dtype=bool)
    near, near_own = _without_own_text(sk, copies.near, copies.near_jaccard, code, contained_cfg)
    part, part_own = _without_own_text(sk, copies.contained, copies.contained_share, code, contained_cfg)
    found = {"exact_duplicate": (copies.exact, None), "near_duplicate": near, "contained_duplicate": part}
    _write_decisions(sk, found, DecisionFiles(ctx.out), ctx.units)
    own = near_own + part_own
    log(f"dedup: {len(copies.exact)} exact, {len(near[0])} near and {len(part[0])} partial copies; {own} pages that "
        f"share most of their text with another but have words of their own kept")
    summaries, kept_docs = {}, {}
    for kind, rule in (("exact", "exact_duplicate"), ("fuzzy", "near_duplicate"), ("contained", "contained_duplicate")):
        summaries[kind], docs = _cluster_summary(sk, found[rule][0])
        kept_docs |= docs
    _add_excerpts(ctx, summaries, {kept: ctx.units[doc >> 32] for kept, doc in kept_docs.items()})
    return {**summaries, "kept_with_own_text": own, "skipped": list(s.skip)}


def _without_own_text(sk, pairs: np.ndarray, scores: np.ndarray, code: np.ndarray,
                      cfg) -> tuple[tuple[np.ndarray, np.ndarray], int]:
    """The (copy, original) pairs and scores, less the copies with cfg.own_min sampled shingles of their own (in
    passages, containment.own_count): a page that says something of its own is no copy, however much it shares
    (containment.py). Code files are copies or not as a whole. Returns them, and how many were kept for their own
    text."""
    from .dedup.disk_dedup import own_text, unit_of

    judged = np.flatnonzero(~code[unit_of(pairs[:, 0])]) if len(pairs) else np.empty(0, np.int64)
    keep = np.setdiff1d(np.arange(len(pairs)), judged[own_text(sk, pairs[judged], cfg.own_run) >= cfg.own_min])
    return (pairs[keep], scores[keep]), len(pairs) - len(keep)


def _write_decisions(sk, found: dict[str, tuple[np.ndarray, np.ndarray | None]], decisions: DecisionFiles,
                     units: list[Unit]) -> None:
    """One drop per copy, in input order, a unit at a time: the IDs of one unit's copies in memory at once."""
    rules = list(found)
    copy = np.concatenate([pairs[:, 0] for pairs, _ in found.values()])
    kept = np.concatenate([pairs[:, 1] for pairs, _ in found.values()])
    rule = np.repeat(np.arange(len(rules)), [len(pairs) for pairs, _ in found.values()])
    score = np.concatenate([np.full(len(pairs), np.nan) if scores is None else scores
                            for pairs, scores in found.values()])
    order = np.argsort(copy, kind="stable")
    copy, kept, rule, score = copy[order], kept[order], rule[order], score[order]
    bounds = np.searchsorted(copy >> 32, np.arange(len(units) + 1))
    for u, (lo, hi) in enumerate(zip(bounds[:-1].tolist(), bounds[1:].tolist())):
        if lo == hi:
            continue
        rows = zip(sk.gather("ids", copy[lo:hi]).tolist(), sk.gather("ids", kept[lo:hi]).tolist(),
                   rule[lo:hi].tolist(), score[lo:hi].tolist())
        for copy_id, kept_id, r, sc in rows:
            decisions.write(units[u].name, {"id": copy_id, "action": "drop",
                                            **_decision(rules[r], kept_id, None if sc != sc else sc)})
    decisions.close()


def _decision(rule: str, kept: str, score: float | None) -> dict:
    if rule == "exact_duplicate":
        return {"rule": rule, "detail": f"same normalized text as {kept}"}
    if rule == "near_duplicate":
        return {"rule": rule, "score": round(score, 4), "detail": f"estimated Jaccard {score:.2f} with {kept}"}
    return {"rule": rule, "score": round(score, 4),
            "detail": f"{score:.0%} of its word 5-grams are in the longer {kept}"}


def _add_excerpts(ctx: CorpusContext, summaries: dict, unit_of_kept: dict[str, Unit]) -> None:
    """The start of each example cluster's kept document (a few: read from the units that hold them only)."""
    wanted = {e["kept"] for summary in summaries.values() for e in summary["examples"]}
    units = {unit_of_kept[kept].name: unit_of_kept[kept] for kept in wanted}
    found: dict[str, str] = {}
    for _, doc in ctx.runner.iter_docs([u for u in ctx.units if u.name in units]):
        if doc["id"] in wanted:
            found[doc["id"]] = doc["text"][:160]
            if len(found) == len(wanted):
                break
    for summary in summaries.values():
        for e in summary["examples"]:
            e["excerpt"] = found.get(e["kept"], "")


def dedups(corpus: Corpus, unit: Unit) -> bool:
    return not {"exact_dedup", "fuzzy_dedup"} <= set(corpus.data.skip)


SKETCH = DocumentStep("dedup_sketch", sketch_doc, sketch_settings, applies=dedups, finish=save_sketch,
                      writes_docs=False)
FIND_DUPLICATES = CorpusStep("find_duplicates", find_duplicates, DocumentDedupSettings.of, reads=SKETCH)
DEDUP = DocumentStep("dedup", apply_dedup, state=decisions_of(FIND_DUPLICATES))
