"""The corpus-wide dedup step: exact (normalized hash), fuzzy (MinHash + LSH) and paragraph-level, across
every source, in input order (the first occurrence is kept, so an earlier source wins).

It only decides; the per-unit `dedup` step applies the decisions in parallel and records them in the
ledger. Decisions go to one small file per unit, keyed by everything upstream, so a rerun with the same
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
from .jsonl import ShardWriter
from .step_runner import StepRunner

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


def dedup_corpus(run: StepRunner, d: DataConfig, cache: Path,
                 paragraph_units: set[str]) -> tuple[dict[str, str], dict, dict]:
    """(unit name -> decisions file, dedup report, domain -> [(doc id, kept chars, unit name)] of the survivors).
    Duplicate paragraphs are cut only from documents of `paragraph_units` (prose, not code)."""
    settings = {"skip": sorted(set(d.skip) & {"exact_dedup", "fuzzy_dedup", "paragraph_dedup"}),
                "fuzzy_threshold": d.fuzzy_threshold, "min_paragraph_words": d.min_paragraph_words,
                "min_chars": d.min_chars, "paragraph_units": sorted(paragraph_units), "version": 1}
    key = content_id("dedup", [run.keys[u.name] for u in run.units], settings)
    out = cache / "dedup" / key
    files = {u.name: str(out / f"{u.name}.jsonl.zst") for u in run.units}
    if (out / "report.json").exists():
        saved = read_json(out / "report.json")
        return files, saved["report"], saved["survivors"]
    tmp = out.with_name(f".{key}.tmp{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    report, survivors = _decide(run, d, settings["skip"], paragraph_units, tmp)
    write_json(tmp / "report.json", {"report": report, "survivors": survivors})
    shutil.rmtree(out, ignore_errors=True)
    os.replace(tmp, out)
    return files, report, survivors


def _decide(run: StepRunner, d: DataConfig, skip: list[str], paragraph_units: set[str],
            out: Path) -> tuple[dict, dict]:
    exact = fuzzy = paragraphs = None
    if "exact_dedup" not in skip:
        from .dedup import ExactDeduper

        exact = ExactDeduper()
    if "fuzzy_dedup" not in skip:
        from .dedup import FuzzyDeduper, MinHashConfig

        fuzzy = FuzzyDeduper(MinHashConfig(threshold=d.fuzzy_threshold))
    if "paragraph_dedup" not in skip:
        from .dedup import ParagraphDedupConfig, ParagraphDeduper

        paragraphs = ParagraphDeduper(ParagraphDedupConfig(min_words=d.min_paragraph_words,
                                                           threshold=d.fuzzy_threshold))
    exact_of: dict[str, tuple[str, float | None]] = {}
    excerpts: dict[str, str] = {}
    total = sum(run.stats[run.steps[-1]].get(u.name, {}).get("docs_out", 0) for u in run.units) or None

    # Pass 1: exact duplicates out, survivors into the MinHash index.
    ids, texts = [], []
    for unit, doc in bar(run.iter_docs(), total=total, desc="dedup: exact + minhash", unit="doc"):
        if exact is not None and (kept := exact.check(doc["id"], doc["text"])) is not None:
            exact_of[doc["id"]] = (kept, None)
            excerpts.setdefault(kept, doc["text"][:160])
            continue
        if fuzzy is not None:
            ids.append(doc["id"])
            texts.append(doc["text"])
            if len(ids) >= BATCH:
                fuzzy.add_batch(ids, texts)
                ids, texts = [], []
    if fuzzy is not None and ids:
        fuzzy.add_batch(ids, texts)
    near_of = dict(fuzzy.duplicates()) if fuzzy is not None else {}

    # Pass 2: paragraph dedup over the documents that survive both, and the decisions per unit.
    para_stats = Counter()
    survivors: dict[str, list] = defaultdict(list)
    writers = {u.name: ShardWriter(out, u.name, per_shard=1 << 62, level=1) for u in run.units}
    near_kept = {kept for kept, _ in near_of.values()}
    for unit, doc in bar(run.iter_docs(), total=total, desc="dedup: paragraphs", unit="doc"):
        doc_id, decision = doc["id"], None
        if doc_id in near_kept:
            excerpts[doc_id] = doc["text"][:160]
        if doc_id in exact_of:
            kept = exact_of[doc_id][0]
            decision = {"action": "drop", "rule": "exact_duplicate", "detail": f"same normalized text as {kept}"}
        elif doc_id in near_of:
            kept, jaccard = near_of[doc_id]
            decision = {"action": "drop", "rule": "near_duplicate", "score": round(float(jaccard), 4),
                        "detail": f"estimated Jaccard {float(jaccard):.2f} with {kept}"}
        elif paragraphs is not None and unit.name in paragraph_units:
            text, removed = paragraphs.process(doc_id, doc["text"])
            if removed:
                pieces = _paragraph_texts(doc["text"], [r.index for r in removed])
                para_stats["docs"] += 1
                para_stats["paragraphs"] += len(removed)
                para_stats["chars"] += sum(len(p) for p in pieces)
                kinds = Counter(r.kind for r in removed)
                detail = (f"{', '.join(f'{n} {k}' for k, n in sorted(kinds.items()))} duplicate paragraphs of "
                          f"earlier documents, e.g. {removed[0].first_doc_id}")
                if len(text) < d.min_chars:
                    decision = {"action": "drop", "rule": "paragraph_duplicate_doc",
                                "detail": f"{detail}; {len(text)} chars left"}
                else:
                    decision = {"action": "cut", "text": text, "removed": pieces, "detail": detail}
        if decision is None or decision["action"] == "cut":
            survivors[unit.domain].append((doc_id, len(decision["text"]) if decision else len(doc["text"]),
                                            unit.name))
        if decision is not None:
            writers[unit.name].write({"id": doc_id, **decision})
    for w in writers.values():
        w.close()
    for name in writers:  # a unit without decisions has no file
        if (path := out / f"{name}-00000.jsonl.zst").exists():
            path.rename(out / f"{name}.jsonl.zst")
    report = {"exact": _cluster_summary(exact_of, excerpts), "fuzzy": _cluster_summary(near_of, excerpts),
              "paragraph": dict(para_stats), "skipped": skip}
    log(f"dedup: {len(exact_of)} exact and {len(near_of)} near duplicates, {para_stats['paragraphs']} duplicate "
        f"paragraphs cut from {para_stats['docs']} documents")
    return report, survivors
