"""Scan a stream of documents against an n-gram index, in order, over a pool of processes: the decontaminate
guard's scan (decontaminate/corpus_scan.py) and the validation draw's (data/val_guard.py) share it.

At most 2*workers chunks of documents are in flight, so the corpus is streamed, never held in memory. Workers
are spawned, not forked (pool.py): the parent may hold threads that a fork would copy mid-lock; each worker
receives the index once, pickled, and dies with the parent.
"""
from __future__ import annotations

from collections import deque
from concurrent.futures import Future
from typing import Iterable, Iterator

from ...pool import spawn_pool
from .ngram_index import ContaminationIndex
from .ngram_scan import Match, scan_texts


def chunks(docs: Iterable[dict], max_docs: int, max_chars: int) -> Iterator[list[dict]]:
    """Consecutive documents, at most max_docs or about max_chars characters together."""
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


def scanned_chunks(index: ContaminationIndex, batches: Iterator[list[dict]],
                   workers: int) -> Iterator[tuple[list[dict], list[list[Match]]]]:
    """(chunk, its matches per document), in the order of the chunks."""
    if workers <= 1:
        for chunk in batches:
            yield chunk, scan_texts(index, [d["text"] for d in chunk])
        return
    pool = spawn_pool(workers, _receive_index, (index,))
    try:
        pending: deque[tuple[list[dict], Future]] = deque()
        for chunk in batches:
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
