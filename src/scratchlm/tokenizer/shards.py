"""Binary token shards: a 32-byte header, then the tokens, plus an index of document starts and domains.

Header: magic (8 bytes), version (u32), bytes per token (u32: 2 or 4), token count (u64), doc count (u64).
uint16 when the vocabulary fits, which halves disk and page-cache use for vocabularies up to 65536.
The index `<shard>.idx.npy` is an int64 array [n_docs, 2] of (start offset, domain id).
Training reads shards through `np.memmap`, so a 10B-token corpus costs no RAM.
"""
from __future__ import annotations

import struct
from pathlib import Path

import numpy as np

from ..errors import UserError

MAGIC = b"SLMTOK\x00\x01"
VERSION = 1
HEADER = struct.Struct("<8sIIQQ")  # 32 bytes


def dtype_for_vocab(vocab_size: int) -> np.dtype:
    return np.dtype(np.uint16) if vocab_size <= 65536 else np.dtype(np.uint32)


class TokenShardWriter:
    def __init__(self, path: Path, vocab_size: int):
        self.path = Path(path)
        self.dtype = dtype_for_vocab(vocab_size)
        self.f = open(self.path, "wb")
        self.f.write(b"\x00" * HEADER.size)
        self.n_tokens = 0
        self.index: list[tuple[int, int]] = []

    def add(self, ids, domain_id: int) -> None:
        arr = np.asarray(ids, dtype=self.dtype)
        self.index.append((self.n_tokens, domain_id))
        self.f.write(arr.tobytes())
        self.n_tokens += len(arr)

    def close(self) -> int:
        self.f.seek(0)
        self.f.write(HEADER.pack(MAGIC, VERSION, self.dtype.itemsize, self.n_tokens, len(self.index)))
        self.f.close()
        np.save(self.path.with_suffix(".idx.npy"), np.asarray(self.index, dtype=np.int64).reshape(-1, 2))
        return self.n_tokens


class TokenShard:
    """A memory-mapped shard: `tokens` is an np.memmap, `docs` the (start, domain) index."""

    def __init__(self, path: Path):
        self.path = Path(path)
        try:
            with open(self.path, "rb") as f:
                magic, version, width, n_tokens, n_docs = HEADER.unpack(f.read(HEADER.size))
        except (OSError, struct.error) as e:
            raise UserError(f"{self.path}: cannot read token shard ({e})") from None
        if magic != MAGIC or version != VERSION or width not in (2, 4):
            raise UserError(f"{self.path}: not a scratchlm token shard (bad header)")
        dtype = np.uint16 if width == 2 else np.uint32
        self.tokens = (np.memmap(self.path, dtype=dtype, mode="r", offset=HEADER.size, shape=(n_tokens,))
                       if n_tokens else np.zeros(0, dtype=dtype))
        self.docs = np.load(self.path.with_suffix(".idx.npy"))
        if len(self.docs) != n_docs:
            raise UserError(f"{self.path}: index has {len(self.docs)} documents, header says {n_docs}")

    def __len__(self) -> int:
        return len(self.tokens)
