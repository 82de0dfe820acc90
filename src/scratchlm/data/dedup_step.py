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

from ..progress import bar, log
from .clean.structure import similarity_text
from .jsonl import ShardWriter, read_jsonl
from .step import Corpus, CorpusContext, CorpusStep, DocumentStep
from .step_context import StepContext
from .units import Unit

BATCH = 1024
EXAMPLES = 5


def decision_writers(units: list[Unit], out: Path) -> dict[str, ShardWriter]:
    return {u.name: ShardWriter(out, u.name, per_shard=1 << 62, level=1) for u in units}


def close_decisions(writers: dict[str, ShardWriter], out: Path) -> None:
    for w in writers.values():
        w.close()
    for name in writers:  # a unit without decisions has no file
        if (path := out / f"{name}-00000.jsonl.zst").exists():
            path.rename(out / f"{name}.jsonl.zst")


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


def _cluster_summary(kept_of: dict[str, tuple[str, float | None]], excerpts: dict[str, str]) -> dict:
    """Clusters (a kept document and its duplicates): count, size histogram and the largest as examples."""
    members: dict[str, list[tuple[str, float | None]]] = defaultdict(list)
    for dup, (kept, score) in kept_of.items():
        members[kept].append((dup, score))
    sizes = Counter(len(m) + 1 for m in members.values())
    largest = sorted(members.items(), key=lambda kv: (-len(kv[1]), kv[0]))[:EXAMPLES]
    return {"clusters": len(members), "duplicates": len(kept_of),
            "sizes": {str(k): v for k, v in sorted(sizes.items())},
            "examples": [{"kept": kept, "size": len(m) + 1, "duplicates": [d for d, _ in m[:3]],
                          "excerpt": excerpts.get(kept, "")} for kept, m in largest]}


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


def find_duplicates(ctx: CorpusContext) -> dict:
    """Whole documents: exact, near (MinHash) and partial copies (containment), decided on the text as read,
    across every source, before any rule counts lines across documents or cuts per source (a page copied five
    times keeps one copy; the same page in two sources is one page)."""
    from .dedup import ContainmentConfig, ContainmentFinder, ExactDeduper, FuzzyDeduper, MinHashConfig

    s: DocumentDedupSettings = ctx.settings
    exact = ExactDeduper() if "exact_dedup" not in s.skip else None
    fuzzy = FuzzyDeduper(MinHashConfig(threshold=s.fuzzy_threshold)) if "fuzzy_dedup" not in s.skip else None
    contained = ContainmentFinder(ContainmentConfig(threshold=s.containment_threshold)) \
        if "fuzzy_dedup" not in s.skip else None
    exact_of: dict[str, tuple[str, float | None]] = {}
    excerpts: dict[str, str] = {}

    ids, texts = [], []

    def flush() -> None:
        if ids:
            fuzzy.add_batch(ids, texts)
            contained.add_batch(ids, texts)
            ids.clear()
            texts.clear()

    code_ids = set()
    for unit, doc in bar(ctx.docs(), total=ctx.docs_total(), desc="dedup: exact, minhash, containment", unit="doc"):
        if exact is not None and (kept := exact.check(doc["id"], doc["text"])) is not None:
            exact_of[doc["id"]] = (kept, None)
            excerpts.setdefault(kept, doc["text"][:160])
            continue
        if fuzzy is not None:
            ids.append(doc["id"])
            whole = unit.source in s.code_sources  # a code file is compared whole, and a near copy is a copy
            if whole:
                code_ids.add(doc["id"])
            texts.append(doc["text"] if whole else similarity_text(doc["text"]))
            if len(ids) >= BATCH:
                flush()
    if fuzzy is not None:
        flush()
    near_of = dict(fuzzy.duplicates()) if fuzzy is not None else {}
    part_of = contained.contained(set(near_of)) if contained is not None else {}
    # A page that says something of its own is no copy, however much it shares (containment.py, own_min).
    own_text = {doc_id for doc_id, (kept, _) in {**near_of, **part_of}.items()
                if doc_id not in code_ids and contained.own(doc_id, kept) >= contained.cfg.own_min} \
        if contained is not None else set()
    for doc_id in own_text:
        near_of.pop(doc_id, None)
        part_of.pop(doc_id, None)

    writers = decision_writers(ctx.units, ctx.out)
    wanted = set(exact_of) | set(near_of) | set(part_of) | {k for k, _ in near_of.values()} \
        | {k for k, _ in part_of.values()}
    for unit, doc in ctx.docs():
        doc_id = doc["id"]
        if doc_id not in wanted:
            continue
        excerpts.setdefault(doc_id, doc["text"][:160])
        if doc_id in exact_of:
            decision = {"rule": "exact_duplicate", "detail": f"same normalized text as {exact_of[doc_id][0]}"}
        elif doc_id in near_of:
            kept, jaccard = near_of[doc_id]
            decision = {"rule": "near_duplicate", "score": round(float(jaccard), 4),
                        "detail": f"estimated Jaccard {float(jaccard):.2f} with {kept}"}
        elif doc_id in part_of:
            kept, share = part_of[doc_id]
            decision = {"rule": "contained_duplicate", "score": round(share, 4),
                        "detail": f"{share:.0%} of its word 5-grams are in the longer {kept}"}
        else:
            continue
        writers[unit.name].write({"id": doc_id, "action": "drop", **decision})
    close_decisions(writers, ctx.out)
    log(f"dedup: {len(exact_of)} exact, {len(near_of)} near and {len(part_of)} partial copies; {len(own_text)} "
        f"pages that share most of their text with another but have words of their own kept")
    return {"exact": _cluster_summary(exact_of, excerpts), "fuzzy": _cluster_summary(near_of, excerpts),
            "contained": _cluster_summary(part_of, excerpts), "kept_with_own_text": len(own_text),
            "skipped": list(s.skip)}


FIND_DUPLICATES = CorpusStep("find_duplicates", find_duplicates, DocumentDedupSettings.of)
DEDUP = DocumentStep("dedup", apply_dedup, state=decisions_of(FIND_DUPLICATES))
