"""The corpus-wide dedup steps, across every source, in input order (the first occurrence is kept, so an earlier
source wins): whole documents (exact hash, MinHash near duplicates, containment) right after reading, and
paragraphs (plus the skeletons cuts leave behind) after the filters.

They only decide; the per-unit `dedup` and `paragraphs` steps apply the decisions in parallel and record them
in the ledger. Decisions go to one small file per unit, keyed by everything upstream, so a rerun with the same
upstream outputs reuses them without reading the corpus again.
"""
from __future__ import annotations

import os
import re
import shutil
from collections import Counter, defaultdict
from pathlib import Path

from ..config import DataConfig
from ..ids import content_id, read_json, write_json
from ..progress import bar, log
from .clean.structure import similarity_text
from .jsonl import ShardWriter
from .step_runner import StepRunner, temp_beside

BATCH = 1024
EXAMPLES = 5
_PARAGRAPH_BREAK = re.compile(r"\r?\n(?:[ \t]*\r?\n)+")  # the dedup package's paragraph boundary


def _paragraph_texts(text: str, indices: list[int]) -> list[str]:
    paragraphs = _PARAGRAPH_BREAK.split(text)
    return [paragraphs[i] for i in indices if i < len(paragraphs)]


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


def _cached(out: Path, decide) -> tuple[dict, dict]:
    """Run `decide(tmp_dir) -> (report, survivors)` unless its result for this key is already on disk."""
    if (out / "report.json").exists():
        saved = read_json(out / "report.json")
        return saved["report"], saved["survivors"]
    with temp_beside(out) as tmp:
        report, survivors = decide(tmp)
        write_json(tmp / "report.json", {"report": report, "survivors": survivors})
        shutil.rmtree(out, ignore_errors=True)
        os.replace(tmp, out)
    return report, survivors


def _writers(run: StepRunner, out: Path) -> dict[str, ShardWriter]:
    return {u.name: ShardWriter(out, u.name, per_shard=1 << 62, level=1) for u in run.units}


def _close(writers: dict[str, ShardWriter], out: Path) -> None:
    for w in writers.values():
        w.close()
    for name in writers:  # a unit without decisions has no file
        if (path := out / f"{name}-00000.jsonl.zst").exists():
            path.rename(out / f"{name}.jsonl.zst")


def document_duplicates(run: StepRunner, d: DataConfig, cache: Path) -> tuple[dict[str, str], dict]:
    """(unit name -> decisions file, report) for whole documents: exact, near (MinHash) and partial copies
    (containment), decided on the text as read, across every source, before any rule counts lines across
    documents or cuts per source (a page copied five times keeps one copy; the same page in two sources is one
    page)."""
    skip = sorted(set(d.skip) & {"exact_dedup", "fuzzy_dedup"})
    settings = {"skip": skip, "fuzzy_threshold": d.fuzzy_threshold, "containment": d.containment_threshold,
                "code_sources": sorted(_code_sources(d)), "version": 4}
    out = cache / "dedup" / content_id("document_dedup", [run.keys[u.name] for u in run.units], settings)
    report, _ = _cached(out, lambda tmp: (_decide_documents(run, d, skip, tmp), {}))
    return _decision_files(out, run), report


def _decision_files(out: Path, run: StepRunner) -> dict[str, str]:
    """Unit name -> its decisions file, relative to the cache: the path is part of the apply step's key, which
    must not change when the workdir moves."""
    return {u.name: f"{out.parent.name}/{out.name}/{u.name}.jsonl.zst" for u in run.units}


def _code_sources(d: DataConfig) -> set[str]:
    """Sources whose documents are compared whole: a code file is all code, there is no prose to compare."""
    return {s.name for s in d.sources if s.filter_profile == "code"}


def _decide_documents(run: StepRunner, d: DataConfig, skip: list[str], out: Path) -> dict:
    from .dedup import ContainmentConfig, ContainmentFinder, ExactDeduper, FuzzyDeduper, MinHashConfig

    exact = ExactDeduper() if "exact_dedup" not in skip else None
    fuzzy = FuzzyDeduper(MinHashConfig(threshold=d.fuzzy_threshold)) if "fuzzy_dedup" not in skip else None
    contained = ContainmentFinder(ContainmentConfig(threshold=d.containment_threshold)) \
        if "fuzzy_dedup" not in skip else None
    exact_of: dict[str, tuple[str, float | None]] = {}
    excerpts: dict[str, str] = {}
    total = sum(run.stats[run.steps[-1]].get(u.name, {}).get("docs_out", 0) for u in run.units) or None

    ids, texts = [], []

    def flush() -> None:
        if ids:
            fuzzy.add_batch(ids, texts)
            contained.add_batch(ids, texts)
            ids.clear()
            texts.clear()

    code_sources, code_ids = _code_sources(d), set()
    for unit, doc in bar(run.iter_docs(), total=total, desc="dedup: exact, minhash, containment", unit="doc"):
        if exact is not None and (kept := exact.check(doc["id"], doc["text"])) is not None:
            exact_of[doc["id"]] = (kept, None)
            excerpts.setdefault(kept, doc["text"][:160])
            continue
        if fuzzy is not None:
            ids.append(doc["id"])
            if unit.source in code_sources:  # a code file is compared whole, and a near copy is a copy
                code_ids.add(doc["id"])
            texts.append(doc["text"] if unit.source in code_sources else similarity_text(doc["text"]))
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

    writers = _writers(run, out)
    wanted = set(exact_of) | set(near_of) | set(part_of) | {k for k, _ in near_of.values()} \
        | {k for k, _ in part_of.values()}
    for unit, doc in run.iter_docs():
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
    _close(writers, out)
    log(f"dedup: {len(exact_of)} exact, {len(near_of)} near and {len(part_of)} partial copies; {len(own_text)} "
        f"pages that share most of their text with another but have words of their own kept")
    return {"exact": _cluster_summary(exact_of, excerpts), "fuzzy": _cluster_summary(near_of, excerpts),
            "contained": _cluster_summary(part_of, excerpts), "kept_with_own_text": len(own_text), "skipped": skip}


def paragraph_duplicates(run: StepRunner, d: DataConfig, cache: Path,
                         paragraph_units: set[str]) -> tuple[dict[str, str], dict, dict]:
    """(unit name -> decisions file, report, domain -> [(doc id, kept chars, unit name)] of the survivors).
    Duplicate paragraphs are cut only from documents of `paragraph_units` (prose, not code); a document that
    cuts leave as a skeleton (too short, or mostly headings) is dropped with the rule `skeleton`."""
    skip = sorted(set(d.skip) & {"paragraph_dedup"})
    settings = {"skip": skip, "fuzzy_threshold": d.fuzzy_threshold, "min_paragraph_words": d.min_paragraph_words,
                "min_docs": d.paragraph_min_docs, "min_chars": d.min_chars,
                "paragraph_units": sorted(paragraph_units), "version": 3}
    out = cache / "dedup" / content_id("paragraph_dedup", [run.keys[u.name] for u in run.units], settings)
    report, survivors = _cached(out, lambda tmp: _decide_paragraphs(run, d, skip, paragraph_units, tmp))
    return _decision_files(out, run), report, survivors


def _decide_paragraphs(run: StepRunner, d: DataConfig, skip: list[str], paragraph_units: set[str],
                       out: Path) -> tuple[dict, dict]:
    from .clean.structure import skeleton_reason, structural_paragraphs
    from .dedup import ParagraphDedupConfig, ParagraphDeduper

    def deduper() -> ParagraphDeduper:
        return ParagraphDeduper(ParagraphDedupConfig(min_words=d.min_paragraph_words, threshold=d.fuzzy_threshold))

    def dedups(unit) -> bool:
        return unit.name in paragraph_units and "paragraph_duplicate" not in unit.skip_rules

    paragraphs, accept = (None, None) if skip else (deduper(), None)
    total = sum(run.stats[run.steps[-1]].get(u.name, {}).get("docs_out", 0) for u in run.units) or None
    # Structural paragraphs per document, parsed once when there are two passes; only non-empty sets are kept
    # (small beside the deduper's index, which holds a signature per paragraph).
    protected: dict[str, frozenset[int]] | None = None

    def structural(doc: dict) -> frozenset[int]:
        return structural_paragraphs(doc["text"]) if protected is None else protected.get(doc["id"], frozenset())

    if paragraphs is not None and d.paragraph_min_docs > 2:
        # First pass: how many documents hold each paragraph. A paragraph in a few pages is documentation they
        # share (a stock option text, the alphabet list of every iso_8859 page); one in many is a template.
        copies: Counter = Counter()
        counter, found = deduper(), {}
        for unit, doc in bar(run.iter_docs(), total=total, desc="dedup: paragraph copies", unit="doc"):
            if dedups(unit):
                if kept_apart := structural_paragraphs(doc["text"]):
                    found[doc["id"]] = kept_apart
                copies.update(r.first for r in counter.process(doc["id"], doc["text"], kept_apart)[1])
        protected = found
        accept = lambda r: copies[r.first] + 1 >= d.paragraph_min_docs  # noqa: E731
    para_stats = Counter()
    skeletons = 0
    survivors: dict[str, list] = defaultdict(list)
    writers = _writers(run, out)
    for unit, doc in bar(run.iter_docs(), total=total, desc="dedup: paragraphs", unit="doc"):
        doc_id, text, decision = doc["id"], doc["text"], None
        if paragraphs is not None and dedups(unit):
            text, removed = paragraphs.process(doc_id, doc["text"], structural(doc), accept)
            if removed:
                pieces = _paragraph_texts(doc["text"], [r.index for r in removed])
                para_stats["docs"] += 1
                para_stats["paragraphs"] += len(removed)
                para_stats["chars"] += sum(len(p) for p in pieces)
                kinds = Counter(r.kind for r in removed)
                detail = (f"{', '.join(f'{n} {k}' for k, n in sorted(kinds.items()))} duplicate paragraphs of "
                          f"earlier documents, e.g. {removed[0].first_doc_id}")
                decision = {"action": "cut", "text": text, "removed": pieces, "detail": detail}
        why = None if "skeleton" in unit.skip_rules or unit.name not in paragraph_units \
            else skeleton_reason(text, doc.get("chars_read", len(doc["text"])), d.min_chars)
        if why:
            decision = {"action": "drop", "rule": "skeleton", "detail": why}
            skeletons += 1
        else:
            survivors[unit.domain].append((doc_id, len(text), unit.name))
        if decision is not None:
            writers[unit.name].write({"id": doc_id, **decision})
    _close(writers, out)
    log(f"dedup: {para_stats['paragraphs']} duplicate paragraphs cut from {para_stats['docs']} documents; "
        f"{skeletons} documents left as skeletons dropped")
    return {"paragraph": dict(para_stats), "skeletons": skeletons, "skipped": skip}, survivors
