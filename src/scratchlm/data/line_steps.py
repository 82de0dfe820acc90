"""The steps that cut page chrome line by line (not on code): boilerplate lines known by their wording, then
lines repeated across many documents of one source, found corpus-wide from per-unit line counts."""
from __future__ import annotations

import shutil
from dataclasses import dataclass

import numpy as np

from .clean.boilerplate import RepeatedLineFinder, remove_lines, strip_boilerplate_lines
from .dedup.disk_dedup import Buckets, bucket_of, buckets_for
from .short_docs import LengthFloor, too_short
from .step import Corpus, CorpusContext, CorpusStep, DocumentStep
from .step_context import StepContext
from .units import Unit

EDGE_LINES = 3  # the first and last non-blank lines of a page, where its template (chrome) sits
EDGE_SHARE = 0.8  # a frequent line is template when it is among a page's first or last lines this often
FREQUENT = "frequent.npy"  # a source's template line hashes, in its find_repeated_lines result


def boilerplate_doc(doc: dict, ctx: StepContext) -> dict | None:
    """Cookie banners, nav bars, copyright footers, share/newsletter prompts: line rules, no corpus statistics."""
    if ctx.skips("boilerplate_line"):
        return doc
    text, removed = strip_boilerplate_lines(doc["text"])
    ctx.removed(doc["id"], "boilerplate_line", removed, "line", original=doc["text"])
    doc["text"] = text
    return None if too_short(doc, ctx, ctx.settings.min_chars) else doc


def count_lines(doc: dict, ctx: StepContext) -> dict:
    """Observe only: count each line's documents, and its documents where it is among the first or last lines,
    for find_repeated_lines."""
    ctx.memo.setdefault("finder", RepeatedLineFinder()).feed(doc["text"])
    lines = [line for line in doc["text"].split("\n") if line.strip()]
    edge = lines if len(lines) <= 2 * EDGE_LINES else lines[:EDGE_LINES] + lines[-EDGE_LINES:]
    ctx.memo.setdefault("edges", RepeatedLineFinder()).feed("\n".join(edge))
    return doc


def save_line_counts(ctx: StepContext) -> None:
    finder = ctx.memo.get("finder") or RepeatedLineFinder()
    edges = ctx.memo.get("edges") or RepeatedLineFinder()
    keys, counts = finder.table()
    edge_keys, edge_counts = edges.table()
    ctx.sides.update(keys=keys, counts=counts, n_docs=np.array([finder.n_docs]), edge_keys=edge_keys,
                     edge_counts=edge_counts)


@dataclass(frozen=True)
class RepeatedLinesSettings:
    min_docs: int
    min_share: float
    edge_share: float = EDGE_SHARE

    @classmethod
    def of(cls, corpus: Corpus) -> RepeatedLinesSettings:
        return cls(corpus.data.repeated_line_min_docs, corpus.data.repeated_line_min_share)


def find_repeated_lines(ctx: CorpusContext) -> dict:
    """The lines found in many documents of one source, from its units' line counts. Merged on disk, a bucket of
    keys at a time (as dedup/disk_dedup.py): memory is independent of the source's size, and counts are exact
    (no pruning in the merge)."""
    s: RepeatedLinesSettings = ctx.settings
    sides = [ctx.runner.outputs[LINE_COUNTS.name][unit.name] for unit in ctx.units]
    n_docs = sum(int(np.load(side / "n_docs.npy")[0]) for side in sides)
    need = max(s.min_docs, int(np.ceil(s.min_share * n_docs)))  # as RepeatedLineFinder.frequent
    total = sum(len(np.load(side / name, mmap_mode="r")) for side in sides for name in ("keys.npy", "edge_keys.npy"))
    parts = buckets_for(total, ctx.corpus.data.sort_mb)
    work = ctx.out / ".work"
    try:
        rows = Buckets(work, "lines", 3)  # (line hash, documents, documents where it is at a page edge)
        for side in sides:
            for prefix, column in (("", 1), ("edge_", 2)):
                keys = np.load(side / f"{prefix}keys.npy")
                unit_rows = np.zeros((len(keys), 3), np.int64)
                unit_rows[:, 0], unit_rows[:, column] = keys.view(np.int64), np.load(side / f"{prefix}counts.npy")
                rows.add(bucket_of(keys, parts), unit_rows)
        found = []
        for part in range(parts):
            r = rows.read(part)
            keys, inverse = np.unique(r[:, 0], return_inverse=True)
            counts = np.bincount(inverse, weights=r[:, 1], minlength=len(keys))
            edge_counts = np.bincount(inverse, weights=r[:, 2], minlength=len(keys))
            # Template lines sit at the edges of the pages that hold them; a note that recurs in the body
            # ("New in version 3.3.") and sometimes ends a page is content.
            found.append(keys[(counts >= need) & (edge_counts >= s.edge_share * counts)])
    finally:
        shutil.rmtree(work, ignore_errors=True)
    frequent = np.sort(np.concatenate(found).view(np.uint64))
    np.save(ctx.out / FREQUENT, frequent)
    return {"lines": len(frequent)}


def repeated_lines_doc(doc: dict, ctx: StepContext) -> dict | None:
    """Remove lines found in many documents of the same source (templates: site footers, license headers)."""
    if "frequent" not in ctx.memo:  # the state is the path of the source's frequent-line hashes in the cache
        ctx.memo["frequent"] = set(np.load(ctx.cache / ctx.state).tolist())
    if ctx.skips("repeated_line"):
        return doc
    original = doc["text"]
    doc["text"], removed = remove_lines(original, ctx.memo["frequent"])
    ctx.removed(doc["id"], "repeated_line", removed, "line", "page chrome found in many documents of this source",
                original)
    return None if too_short(doc, ctx, ctx.settings.min_chars) else doc


def frequent_lines(corpus: Corpus, unit: Unit) -> str:
    return corpus.decision(FIND_REPEATED_LINES, unit).file(FREQUENT)


BOILERPLATE = DocumentStep("boilerplate", boilerplate_doc, LengthFloor.of, applies=Corpus.prose,
                           skip="boilerplate")
LINE_COUNTS = DocumentStep("line_counts", count_lines, applies=Corpus.prose, skip="repeated_lines",
                           finish=save_line_counts, writes_docs=False)
FIND_REPEATED_LINES = CorpusStep("find_repeated_lines", find_repeated_lines, RepeatedLinesSettings.of,
                                 reads=LINE_COUNTS, per_source=True)
REPEATED_LINES = DocumentStep("repeated_lines", repeated_lines_doc, LengthFloor.of, frequent_lines,
                              applies=Corpus.prose, skip="repeated_lines")
