"""Tokenize a stream of documents on every core (or a Ray cluster), in order, with bounded memory.

The main process reads documents and cuts them into chunks of about CHUNK_CHARS; the executor (executor.py:
worker processes, or Ray tasks) encodes chunks and sends back one flat token array plus the document lengths
(cheap to pickle, no per-token Python objects); the main process writes results in submission order, so the
shards are identical whatever the number of workers or the executor. At most `2 * workers` chunks are in
flight, which bounds memory however large the corpus is.

Each worker runs the tokenizer single-threaded (TOKENIZERS_PARALLELISM=false): the processes already use the
cores, and rayon threads on top would only compete with them. Encoding in this process (one worker) keeps them.
(Local workers are spawned and die with this process, pool.py: a script that encodes keeps its top level under
`if __name__ == "__main__":`.)
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Iterable, Iterator

import numpy as np
import xxhash

from ..executor import Executor, LocalExecutor, in_worker

CHUNK_CHARS = 1 << 18  # small enough that many cores stay busy to the end, large enough to amortize pickling
CHUNK_DOCS = 4096

# The tokenizer this process loaded, by the encoder's args (its file's digest among them): a worker loads it once
# per encoder, and a Ray worker that outlives one never encodes with a replaced file.
_loaded: dict = {}
Args = tuple[str, tuple[int, int] | None, str, str]  # tokenizer path, wrap, dtype, file digest


def _tokenizer(args: Args):
    if _loaded.get("args") != args:
        from .bpe import load_tokenizer

        _loaded.update(args=args, tok=load_tokenizer(Path(args[0])))
    return _loaded["tok"]


def _encode(task: tuple[Args, list[str]]) -> tuple[np.ndarray, np.ndarray]:
    """(all token ids of the chunk, concatenated; tokens per document), each document between wrap's ids."""
    args, texts = task
    if in_worker():
        os.environ["TOKENIZERS_PARALLELISM"] = "false"  # read by tokenizers at each batch call
    tok, (_, wrap, dtype, _) = _tokenizer(args), args
    encode_batch = getattr(tok, "encode_batch_fast", tok.encode_batch)  # _fast (tokenizers>=0.20) skips offsets
    encoded = encode_batch(texts, add_special_tokens=False)
    lengths = np.fromiter((len(e.ids) for e in encoded), dtype=np.int64, count=len(encoded))
    extra = 0 if wrap is None else len(wrap)
    out = np.empty(int(lengths.sum()) + extra * len(encoded), dtype=np.dtype(dtype))
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
    """`encode(chunks)` yields (tokens, lengths) per chunk, in order, from `executor` (default: a local pool of
    `workers` processes; one worker encodes in this process).

    `wrap`: the (opening, closing) token ids put around every document (bpe.document_wrap_ids); None: bare text.
    """

    def __init__(self, tokenizer_path: Path, dtype: np.dtype, wrap: tuple[int, int] | None, workers: int = 0,
                 executor: Executor | None = None):
        self.executor = executor or LocalExecutor(workers)
        self.workers = self.executor.workers
        digest = xxhash.xxh3_128_hexdigest(Path(tokenizer_path).read_bytes())
        self.args: Args = (str(tokenizer_path), wrap, np.dtype(dtype).str, digest)
        _loaded.clear()  # encoding in this process: load it anew too

    def encode(self, chunks: Iterable[list[str]]) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        return self.executor.imap(_encode, ((self.args, chunk) for chunk in chunks))

    def close(self) -> None:
        self.executor.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
