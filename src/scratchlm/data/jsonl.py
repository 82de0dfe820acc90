"""Sharded JSONL.zst writing and reading: the on-disk format of every document-level artifact."""
from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Iterator

import zstandard


class ShardWriter:
    """Writes documents into `{prefix}-00000.jsonl.zst`, `-00001`, ... with at most `per_shard` docs each."""

    def __init__(self, directory: Path, prefix: str, per_shard: int = 50_000, level: int = 3):
        self.directory, self.prefix, self.per_shard, self.level = Path(directory), prefix, per_shard, level
        self.directory.mkdir(parents=True, exist_ok=True)
        self.paths: list[Path] = []
        self._file = self._zst = None
        self._count = 0

    def write(self, doc: dict) -> None:
        if self._zst is None or self._count >= self.per_shard:
            self._rotate()
        self._zst.write((json.dumps(doc, ensure_ascii=False) + "\n").encode("utf-8"))
        self._count += 1

    def _rotate(self) -> None:
        self._close_current()
        path = self.directory / f"{self.prefix}-{len(self.paths):05d}.jsonl.zst"
        self.paths.append(path)
        self._file = open(path, "wb")
        self._zst = zstandard.ZstdCompressor(level=self.level).stream_writer(self._file)
        self._count = 0

    def _close_current(self) -> None:
        if self._zst is not None:
            self._zst.close()  # also closes the file
            self._zst = self._file = None

    def close(self) -> list[Path]:
        self._close_current()
        return self.paths

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def read_lines(path: Path) -> Iterator[str]:
    """The raw text lines of a .jsonl or .jsonl.zst file, for readers that parse only some of them."""
    path = Path(path)
    if path.name.endswith(".zst"):
        with open(path, "rb") as raw:
            yield from io.TextIOWrapper(zstandard.ZstdDecompressor().stream_reader(raw), encoding="utf-8")
    else:
        with open(path, encoding="utf-8") as f:
            yield from f


def read_jsonl(path: Path) -> Iterator[dict]:
    for line in read_lines(path):
        if line.strip():
            yield json.loads(line)


def write_jsonl(path: Path, docs) -> int:
    n = 0
    with open(path, "w", encoding="utf-8") as f:
        for doc in docs:
            f.write(json.dumps(doc, ensure_ascii=False) + "\n")
            n += 1
    return n
