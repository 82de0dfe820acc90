"""The corpus-wide dedup steps, across every source, in input order (the first occurrence is kept, so an earlier
source wins): whole documents (exact hash, MinHash near duplicates, containment) right after reading, and
paragraphs (plus the skeletons cuts leave behind) after the filters (paragraph_step.py).

They only decide, into one small decisions file per unit; the document steps `dedup` and `paragraphs` apply the
decisions in parallel and record them in the ledger.
"""
from __future__ import annotations

from collections import Counter, defaultdict
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


def _cluster_summary(kept_of: dict[str, tuple[str, float | None]]) -> dict:
    """Clusters (a kept document and its duplicates): count, size histogram and the largest as examples."""
    members: dict[str, list[tuple[str, float | None]]] = defaultdict(list)
    for dup, (kept, score) in kept_of.items():
        members[kept].append((dup, score))
    sizes = Counter(len(m) + 1 for m in members.values())
    largest = sorted(members.items(), key=lambda kv: (-len(kv[1]), kv[0]))[:EXAMPLES]
    return {"clusters": len(members), "duplicates": len(kept_of),
            "sizes": {str(k): v for k, v in sorted(sizes.items())},
            "examples": [{"kept": kept, "size": len(m) + 1, "duplicates": [d for d, _ in m[:3]],
                          "excerpt": ""} for kept, m in largest]}


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
    near, near_own = _without_own_text(sk, copies.near, copies.near_jaccard, code, contained_cfg.own_min)
    part, part_own = _without_own_text(sk, copies.contained, copies.contained_share, code, contained_cfg.own_min)
    found = {"exact_duplicate": (copies.exact, None), "near_duplicate": near, "contained_duplicate": part}
    named = {rule: _named(sk, pairs, scores) for rule, (pairs, scores) in found.items()}
    decisions = DecisionFiles(ctx.out)
    drops = sorted((doc, rule, doc_id) for rule, (pairs, _) in found.items()
                   for doc, doc_id in zip(pairs[:, 0].tolist(), named[rule]))
    for doc, rule, doc_id in drops:  # in input order, as the units' documents
        decisions.write(ctx.units[doc >> 32].name, {"id": doc_id, "action": "drop",
                                                    **_decision(rule, *named[rule][doc_id])})
    decisions.close()
    own = near_own + part_own
    log(f"dedup: {len(named['exact_duplicate'])} exact, {len(named['near_duplicate'])} near and "
        f"{len(named['contained_duplicate'])} partial copies; {own} pages that share most of their text with "
        f"another but have words of their own kept")
    summaries = {kind: _cluster_summary(named[rule]) for kind, rule in
                 (("exact", "exact_duplicate"), ("fuzzy", "near_duplicate"), ("contained", "contained_duplicate"))}
    unit_of_kept = {kept: ctx.units[doc >> 32] for rule, (pairs, _) in found.items()
                    for (kept, _), doc in zip(named[rule].values(), pairs[:, 1].tolist())}
    _add_excerpts(ctx, summaries, unit_of_kept)
    return {**summaries, "kept_with_own_text": own, "skipped": list(s.skip)}


def _without_own_text(sk, pairs: np.ndarray, scores: np.ndarray, code: np.ndarray,
                      own_min: int) -> tuple[tuple[np.ndarray, np.ndarray], int]:
    """The (copy, original) pairs and scores, less the copies with own_min sampled shingles of their own: a page
    that says something of its own is no copy, however much it shares (containment.py). Code files are copies
    or not as a whole. Returns them, and how many were kept for their own text."""
    from .dedup.disk_dedup import own_text, unit_of

    judged = np.flatnonzero(~code[unit_of(pairs[:, 0])]) if len(pairs) else np.empty(0, np.int64)
    keep = np.setdiff1d(np.arange(len(pairs)), judged[own_text(sk, pairs[judged]) >= own_min])
    return (pairs[keep], scores[keep]), len(pairs) - len(keep)


def _named(sk, pairs: np.ndarray, scores: np.ndarray | None) -> dict[str, tuple[str, float | None]]:
    """{copy's ID: (kept original's ID, score)}, in the pairs' order."""
    if not len(pairs):
        return {}
    copy, kept = (sk.gather("ids", pairs[:, i]).tolist() for i in (0, 1))
    return dict(zip(copy, zip(kept, [None] * len(pairs) if scores is None else scores.tolist())))


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
