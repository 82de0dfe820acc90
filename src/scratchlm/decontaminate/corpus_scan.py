"""Scan a stream of training documents against the index, in order, over a pool of processes, into a report.

The scan only finds what to remove: the caller learns it through on_removal and rewrites what it owns (the
stage rewrites only the training files that lose text). At most 2*workers chunks of documents are in flight, so
the corpus is streamed, never held in memory. Workers are spawned, not forked (pool.py): the parent may hold
threads that a fork would copy mid-lock; each worker receives the index once, pickled, and dies with the parent.
"""
from __future__ import annotations

from collections import deque
from concurrent.futures import Future
from contextlib import closing
from typing import Callable, Iterable, Iterator, Mapping

from ..data.dedup.ngram_index import ContaminationIndex
from ..data.dedup.ngram_scan import Match, item_coverage, scan_texts
from ..pool import spawn_pool
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
    with closing(_scanned_chunks(index, _chunks(docs, chunk_docs, chunk_chars), workers)) as scanned:
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


def _chunks(docs: Iterable[dict], max_docs: int, max_chars: int) -> Iterator[list[dict]]:
    chunk: list[dict] = []
    chars = 0
    for doc in docs:
        chunk.append(doc)
        chars += len(doc["text"])
        if len(chunk) >= max_docs or chars >= max_chars:
            yield chunk
            chunk, chars = [], 0
    if chunk:
        yield chunk


def _scanned_chunks(index: ContaminationIndex, chunks: Iterator[list[dict]],
                    workers: int) -> Iterator[tuple[list[dict], list[list[Match]]]]:
    """(chunk, its matches per document), in the order of the chunks."""
    if workers <= 1:
        for chunk in chunks:
            yield chunk, scan_texts(index, [d["text"] for d in chunk])
        return
    pool = spawn_pool(workers, _receive_index, (index,))
    try:
        pending: deque[tuple[list[dict], Future]] = deque()
        for chunk in chunks:
            pending.append((chunk, pool.submit(_scan_chunk, [d["text"] for d in chunk])))
            if len(pending) >= 2 * workers:
                done, future = pending.popleft()
                yield done, future.result()
        while pending:
            done, future = pending.popleft()
            yield done, future.result()
    finally:
        pool.shutdown(cancel_futures=True)  # after a failure, the chunks not started yet are not scanned


_worker_index: ContaminationIndex | None = None


def _receive_index(index: ContaminationIndex) -> None:
    global _worker_index
    _worker_index = index


def _scan_chunk(texts: list[str]) -> list[list[Match]]:
    assert _worker_index is not None, "the pool's initializer sets the index"
    return scan_texts(_worker_index, texts)
