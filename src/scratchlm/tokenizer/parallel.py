"""Tokenize a stream of documents on every core, in order, with bounded memory.

The main process reads documents and cuts them into chunks of about CHUNK_CHARS; a pool of worker processes
encodes chunks and sends back one flat token array plus the document lengths (cheap to pickle, no per-token
Python objects); the main process writes results in submission order, so the shards are identical whatever
the number of workers. At most `2 * workers` chunks are in flight, which bounds memory however large the
corpus is.

Each worker runs the tokenizer single-threaded (TOKENIZERS_PARALLELISM=false): the processes already use the
cores, and rayon threads on top would only compete with them. Workers are spawned, not forked, because the
parent may already have started rayon or torch threads, and forking a threaded process can deadlock; and they
die with the parent (pool.py). (As with any spawned pool, a script that calls this must keep its top level under
`if __name__ == "__main__":`.)
"""
from __future__ import annotations

import os
from collections import deque
from concurrent.futures import Future, ProcessPoolExecutor
from pathlib import Path
from typing import Iterable, Iterator

import numpy as np

from ..pool import spawn_pool

CHUNK_CHARS = 1 << 18  # small enough that many cores stay busy to the end, large enough to amortize pickling
CHUNK_DOCS = 4096

_worker: dict = {}


def _load(tokenizer_path: str, wrap: tuple[int, int] | None, dtype: str) -> None:
    from .bpe import load_tokenizer

    _worker.update(tok=load_tokenizer(Path(tokenizer_path)), wrap=wrap, dtype=np.dtype(dtype))


def _init_worker(tokenizer_path: str, wrap: tuple[int, int] | None, dtype: str) -> None:
    os.environ["TOKENIZERS_PARALLELISM"] = "false"  # read by tokenizers at each batch call
    _load(tokenizer_path, wrap, dtype)


def _encode(texts: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """(all token ids of the chunk, concatenated; tokens per document), each document between wrap's ids."""
    tok, wrap, dtype = _worker["tok"], _worker["wrap"], _worker["dtype"]
    encode_batch = getattr(tok, "encode_batch_fast", tok.encode_batch)  # _fast (tokenizers>=0.20) skips offsets
    encoded = encode_batch(texts, add_special_tokens=False)
    lengths = np.fromiter((len(e.ids) for e in encoded), dtype=np.int64, count=len(encoded))
    extra = 0 if wrap is None else len(wrap)
    out = np.empty(int(lengths.sum()) + extra * len(encoded), dtype=dtype)
    pos = 0
    for enc, n in zip(encoded, lengths):
        if wrap is None:
            out[pos:pos + n] = enc.ids
        else:
            out[pos], out[pos + 1:pos + 1 + n], out[pos + 1 + n] = wrap[0], enc.ids, wrap[1]
        pos += extra + n
    return out, lengths + extra


def chunked(texts: Iterable[str], max_chars: int = CHUNK_CHARS, max_docs: int = CHUNK_DOCS) -> Iterator[list[str]]:
    chunk: list[str] = []
    size = 0
    for text in texts:
        chunk.append(text)
        size += len(text)
        if size >= max_chars or len(chunk) >= max_docs:
            yield chunk
            chunk, size = [], 0
    if chunk:
        yield chunk


class ParallelEncoder:
    """`encode(chunks)` yields (tokens, lengths) per chunk, in order. workers=1 encodes in this process.

    `wrap`: the (opening, closing) token ids put around every document (bpe.document_wrap_ids); None: bare text.
    """

    def __init__(self, tokenizer_path: Path, dtype: np.dtype, wrap: tuple[int, int] | None, workers: int = 0,
                 force_pool: bool = False):
        self.workers = workers or os.cpu_count() or 1
        self.args = (str(tokenizer_path), wrap, np.dtype(dtype).str)
        self.pool: ProcessPoolExecutor | None = None
        if self.workers > 1 or force_pool:
            self.pool = spawn_pool(self.workers, _init_worker, self.args)
        else:
            _load(*self.args)

    def encode(self, chunks: Iterable[list[str]]) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        if self.pool is None:
            yield from map(_encode, chunks)
            return
        pending: deque[Future] = deque()
        for chunk in chunks:
            pending.append(self.pool.submit(_encode, chunk))
            if len(pending) >= 2 * self.workers:
                yield pending.popleft().result()
        while pending:
            yield pending.popleft().result()

    def close(self) -> None:
        if self.pool is not None:
            self.pool.shutdown(cancel_futures=True)
            self.pool = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
