"""Scan a stream of training documents against the index, in order, over a pool of processes (ngram_pool.py),
into a report.

The scan only finds what to remove: the caller learns it through on_removal and rewrites what it owns (the
stage rewrites only the training files that lose text).
"""
from __future__ import annotations

from contextlib import closing
from typing import Callable, Iterable, Mapping

from ..data.dedup.ngram_index import ContaminationIndex
from ..data.dedup.ngram_pool import chunks, scanned_chunks
from ..data.dedup.ngram_scan import Match, item_coverage
from .cut import Decontaminated, check_mode, remove_matches
from .report import ContaminationReport


def scan_corpus(
    index: ContaminationIndex,
    docs: Iterable[dict],
    mode: str = "document",
    workers: int = 1,
    *,
    span_window: int = 200,
    min_piece_chars: int = 200,
    error_fraction: float = 0.5,
    error_train_share: float = 0.2,
    chunk_docs: int = 256,
    chunk_chars: int = 2_000_000,
    min_coverage: Mapping[str, float] | None = None,
    on_removal: Callable[[dict, list[Match], Decontaminated], None] | None = None,
    exempt: Callable[[dict, Match], bool] | None = None,
) -> ContaminationReport:
    """Scan training documents ({"id", "text", ...}) against the index over `workers` processes and report
    what would be removed in `mode` ("document": the whole document; "span": the matches and span_window
    characters around them, pieces under min_piece_chars too).

    min_coverage (per eval set name, default 0: any shared n-gram) is the share of an item's n-grams a document
    must hold to count as contaminated; smaller overlaps are counted in the report and left in. on_removal is
    called with (document, its matches, what is removed) for every document that loses text. A match for which
    exempt(document, match) is true is no copy (a held-out piece found in the rest of its own document).
    Verdict error per eval set: more than error_fraction of its items found, or more than error_train_share of
    the training text removed because of it (the set is then training data, not held-out data)."""
    check_mode(mode)
    report = ContaminationReport.for_index(index, mode, error_fraction, min_coverage, error_train_share)
    thresholds = {name: s.min_coverage for name, s in report.sets.items() if s.min_coverage > 0}
    with closing(scanned_chunks(index, chunks(docs, chunk_docs, chunk_chars), workers)) as scanned:
        for chunk, chunk_matches in scanned:
            for doc, matches in zip(chunk, chunk_matches):
                if exempt is not None and matches:
                    matches = [m for m in matches if not exempt(doc, m)]
                if thresholds and matches:
                    matches = _drop_partial(index, matches, thresholds, report)
                result = remove_matches(doc["text"], matches, mode, span_window, min_piece_chars)
                report.record(str(doc["id"]), doc["text"], matches, result, span_window)
                if matches and on_removal is not None:
                    on_removal(doc, matches, result)
    for s in report.sets.values():
        s.train_chars = report.chars_scanned
    return report


def _drop_partial(index: ContaminationIndex, matches: list[Match], thresholds: Mapping[str, float],
                  report: ContaminationReport) -> list[Match]:
    """Keep the matches that cover enough of their item (item_coverage); count the others."""
    covered = item_coverage(index, matches)
    kept = []
    for m in matches:
        if covered[m.eval_set, m.item_id] >= thresholds.get(m.eval_set, 0.0):
            kept.append(m)
    for (name, item), share in covered.items():
        if share < thresholds.get(name, 0.0):
            report.sets[name].partial_overlaps += 1
    return kept
