"""A domain's clean documents in the validation draw's order, sorted on disk: memory does not grow with the corpus.

The draw (val_split.py) walks a domain's documents in a seeded hash order of their IDs, from the first, once or
twice per round. Held as a Python list, that order costs about 320 bytes per document of the corpus (tens of GB
at the mission's scale), so it is sorted externally: runs of run_rows(sort_mb) rows are sorted in memory and spilled to
zstd JSONL files, and every walk merges them (heapq.merge reads one row of each run at a time). A domain that
fits in one run stays in memory and touches no file.
"""
from __future__ import annotations

import heapq
import shutil
from pathlib import Path
from typing import Iterable, Iterator

import xxhash

from .jsonl import ShardWriter, read_jsonl

RUN_ROWS = 500_000  # rows sorted in memory at a time by default
ROW_BYTES = 320  # a row as a Python tuple of an int, two strings and an int (measured, IDs like "web/a.jsonl:123")


def run_rows(sort_mb: int) -> int:
    """The rows of one run that fit in data.sort_mb, the memory one on-disk sort may take."""
    return max(1000, (sort_mb << 20) // ROW_BYTES)


def rank(doc_id: str, seed: int) -> int:
    return xxhash.xxh3_64_intdigest(doc_id.encode(), seed=seed)


class RankedDocs:
    """(doc id, chars, unit name) of a domain's documents, iterated in (rank, doc id) order as often as needed.
    `docs` and `chars` are their count and total length; spilled runs live in `spill` until close()."""

    def __init__(self, items: Iterable[tuple[str, int, str]], seed: int, spill: Path | None = None,
                 run_rows: int = RUN_ROWS):
        self.docs = self.chars = 0
        self.spill = spill
        self._runs: list[Path] = []
        self._rows: list[tuple[int, str, int, str]] = []
        for doc_id, chars, unit in items:
            self._rows.append((rank(doc_id, seed), doc_id, chars, unit))
            self.docs += 1
            self.chars += chars
            if len(self._rows) >= run_rows:
                self._spill()
        self._rows.sort()
        if self._runs and self._rows:
            self._spill()

    def _spill(self) -> None:
        if self.spill is None:
            raise ValueError("RankedDocs: more rows than one run holds, and no directory to spill them to")
        self._rows.sort()
        with ShardWriter(self.spill, f"run{len(self._runs):05d}", per_shard=1 << 62, level=1) as w:
            for row in self._rows:
                w.write(row)
        self._runs += w.paths
        self._rows = []

    def __iter__(self) -> Iterator[tuple[str, int, str]]:
        rows = heapq.merge(*(map(tuple, read_jsonl(p)) for p in self._runs)) if self._runs else self._rows
        for _, doc_id, chars, unit in rows:
            yield doc_id, chars, unit

    def close(self) -> None:
        if self._runs:
            shutil.rmtree(self.spill, ignore_errors=True)
            self._runs = []
