"""Binary token shards: a 32-byte header, then the tokens, plus an index of document starts and domains.

Header: magic (8 bytes), version (u32), bytes per token (u32: 2 or 4), token count (u64), doc count (u64).
uint16 when the vocabulary fits, which halves disk and page-cache use for vocabularies up to 65536.
The index `<shard>.idx.npy` is an int64 array [n_docs, 2] of (start offset, domain id).
Training reads shards through `np.memmap`, so a 10B-token corpus costs no RAM.
A source larger than `shards.shard_tokens` is split at document boundaries into `<source>-00000.bin`, ...;
shards.json lists each source's files, and records the content ID of the tokenizer that made them.
"""
from __future__ import annotations

import struct
from pathlib import Path

import numpy as np

from ..errors import UserError
from .provenance import ProvenanceWriter, sidecar_path

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
        self.n_tokens = self.n_docs = 0
        self.index: list[np.ndarray] = []  # one [n, 2] block per add: no Python object per document

    def add(self, ids, domain_id: int) -> None:
        arr = np.asarray(ids, dtype=self.dtype)
        self.add_many(arr, np.asarray([len(arr)]), domain_id)

    def add_many(self, tokens: np.ndarray, lengths: np.ndarray, domain_id: int) -> None:
        """Documents given as one flat token array and the length of each."""
        if not len(lengths):
            return
        starts = self.n_tokens + np.concatenate(([0], np.cumsum(lengths[:-1]))).astype(np.int64)
        self.index.append(np.stack([starts, np.full(len(lengths), domain_id, dtype=np.int64)], axis=1))
        self.f.write(np.ascontiguousarray(tokens, dtype=self.dtype).tobytes())
        self.n_tokens += int(lengths.sum())
        self.n_docs += len(lengths)

    def close(self) -> int:
        self.f.seek(0)
        self.f.write(HEADER.pack(MAGIC, VERSION, self.dtype.itemsize, self.n_tokens, self.n_docs))
        self.f.close()
        index = np.concatenate(self.index) if self.index else np.zeros((0, 2), dtype=np.int64)
        np.save(self.path.with_suffix(".idx.npy"), index)
        return self.n_tokens


class SourceShardWriter:
    """One source's documents into `<name>.bin`, or `<name>-00000.bin`, ... when it passes `shard_tokens`."""

    def __init__(self, directory: Path, name: str, vocab_size: int, shard_tokens: int):
        self.directory, self.name, self.vocab_size, self.shard_tokens = Path(directory), name, vocab_size, shard_tokens
        self.done: list[Path] = []
        self.n_tokens = 0
        self.current = self._open()

    def _open(self) -> TokenShardWriter:
        writer = TokenShardWriter(self.directory / f"{self.name}-{len(self.done):05d}.bin", self.vocab_size)
        self.provenance = ProvenanceWriter(writer.path)  # which document each token range came from
        return writer

    def add_many(self, tokens: np.ndarray, lengths: np.ndarray, domain_id: int, docs: list[dict]) -> None:
        """`docs` are the documents of `lengths`, in order: recorded in the shard's provenance sidecar."""
        # Cut at the document where the running total crosses shard_tokens, so no document spans two files.
        self.n_tokens += int(lengths.sum())
        while len(lengths):
            room = self.shard_tokens - self.current.n_tokens
            ends = np.cumsum(lengths)
            n = max(int(np.searchsorted(ends, room, side="right")), 0 if self.current.n_tokens else 1)
            if n:
                self.current.add_many(tokens[:ends[n - 1]], lengths[:n], domain_id)
                for doc, length in zip(docs[:n], lengths[:n]):
                    self.provenance.add(doc, int(length))
                tokens, lengths, docs = tokens[ends[n - 1]:], lengths[n:], docs[n:]
            if len(lengths):
                self._close_current()
                self.done.append(self.current.path)
                self.current = self._open()

    def _close_current(self) -> None:
        self.current.close()
        self.provenance.close()

    def close(self) -> list[str]:
        """Close the last file; a source that fits in one file is renamed to plain `<name>.bin`."""
        self._close_current()
        paths = self.done + [self.current.path]
        if len(paths) == 1:
            single = self.directory / f"{self.name}.bin"
            paths[0].rename(single)
            paths[0].with_suffix(".idx.npy").rename(single.with_suffix(".idx.npy"))
            sidecar_path(paths[0]).rename(sidecar_path(single))
            paths = [single]
        return [p.name for p in paths]


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
        size, expected = self.path.stat().st_size, HEADER.size + n_tokens * width
        if size < expected:  # np.memmap would raise "mmap length is greater than file size"
            raise UserError(f"{self.path}: token shard cut short ({size:,} bytes, its header says {expected:,}); "
                            "rebuild the shards with `scratchlm tokenizer encode -c CONFIG --force`")
        self.tokens = (np.memmap(self.path, dtype=dtype, mode="r", offset=HEADER.size, shape=(n_tokens,))
                       if n_tokens else np.zeros(0, dtype=dtype))
        try:
            self.docs = np.load(self.path.with_suffix(".idx.npy"))
        except (OSError, ValueError, EOFError) as e:
            raise UserError(f"{self.path.with_suffix('.idx.npy')}: cannot read the shard's document index ({e}); "
                            "rebuild the shards with `scratchlm tokenizer encode -c CONFIG --force`") from None
        if len(self.docs) != n_docs:
            raise UserError(f"{self.path}: index has {len(self.docs)} documents, header says {n_docs}")

    def __len__(self) -> int:
        return len(self.tokens)


def source_files(name: str, info: dict) -> list[str]:
    """The .bin files of one source's entry in shards.json (entries written before `files` existed: one)."""
    return info.get("files") or [f"{name}.bin"]


def check_tokenizer_matches(summary: dict, tokenizer_path: Path, shards_dir: Path) -> None:
    """Token IDs are meaningless under another tokenizer: refuse shards made by a different one."""
    from .bpe import tokenizer_content_id

    made_with = summary.get("tokenizer_id")
    if made_with is None:
        return  # shards from before the ID was recorded; the vocabulary-size check is all we have
    now = tokenizer_content_id(tokenizer_path)
    if now != made_with:
        raise UserError(f"{tokenizer_path} (tokenizer id {now}) is not the tokenizer the shards in {shards_dir} "
                        f"were made with (id {made_with}); retokenize with `scratchlm tokenizer encode --force`")
