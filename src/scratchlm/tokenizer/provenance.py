"""Provenance of token shards: which document every training token came from.

Beside each shard `<name>.bin` (and its `<name>.idx.npy` of (start, domain) per document) sits `<name>.docs.jsonl`:
one line per document, in shard order, {"id", "source", "orig_id", "start", "tokens"}. `id` is the data stage's
document ID (`source/relative/path[:line]`, with `#k` for a piece left by span-mode decontamination), `orig_id`
the ID field of the original record when it had one, `start`/`tokens` its token range in the shard.
Plain JSONL, so `grep` finds a document; `trace` finds the document of a token offset with one binary search
(`scratchlm data trace`).
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from ..errors import UserError
from ..pipeline import Artifact, require

SUFFIX = ".docs.jsonl"


def sidecar_path(shard: Path) -> Path:
    return Path(shard).with_suffix(SUFFIX)


class ProvenanceWriter:
    def __init__(self, shard: Path):
        self.path = sidecar_path(shard)
        self.f = open(self.path, "w", encoding="utf-8")
        self.offset = 0

    def add(self, doc: dict, n_tokens: int) -> None:
        record = {"id": doc["id"], "source": doc.get("source"), "orig_id": doc.get("orig_id"),
                  "start": self.offset, "tokens": int(n_tokens)}
        self.f.write(json.dumps(record, ensure_ascii=False) + "\n")
        self.offset += int(n_tokens)

    def close(self) -> None:
        self.f.close()


def document_at(shard_path: Path, doc_index: int) -> dict:
    path = sidecar_path(shard_path)
    if not path.exists():
        raise UserError(f"{path}: no provenance sidecar for this shard; retokenize with `scratchlm tokenizer "
                        f"encode -c CONFIG --force`")
    with open(path, encoding="utf-8") as f:
        for k, line in enumerate(f):
            if k == doc_index:
                return json.loads(line)
    raise UserError(f"{path}: has no line for document {doc_index}; the sidecar does not match its shard")


def resolve_shard(shards_dir: Path, shard: str) -> Path:
    """A shard named as a path, as `train/code`, `code` (train first, then val) or `code.bin`."""
    name = shard if shard.endswith(".bin") else f"{shard}.bin"
    for candidate in (Path(shard), shards_dir / name, shards_dir / "train" / name, shards_dir / "val" / name):
        if candidate.is_file() and candidate.suffix == ".bin":
            return candidate
    found = sorted(p.relative_to(shards_dir).with_suffix("").as_posix() for p in shards_dir.rglob("*.bin"))
    raise UserError(f"no token shard `{shard}` in {shards_dir}; shards: {', '.join(found)}")


def trace(shard_path: Path, offset: int, tokenizer, context: int = 24) -> dict:
    """The document holding token `offset` of a shard, and the text around that token."""
    from .shards import TokenShard  # not at the top: shards.py writes the sidecars with this module

    shard = TokenShard(shard_path)
    if not 0 <= offset < len(shard):
        raise UserError(f"{shard_path}: offset {offset} is outside the shard (0..{len(shard) - 1})")
    starts = shard.docs[:, 0]
    k = int(np.searchsorted(starts, offset, side="right") - 1)
    doc = document_at(shard_path, k)
    start = int(starts[k])
    end = int(starts[k + 1]) if k + 1 < len(starts) else len(shard)
    if doc["start"] != start or doc["start"] + doc["tokens"] != end:
        raise UserError(f"{sidecar_path(shard_path)}: line {k} says tokens {doc['start']}..{doc['start'] + doc['tokens']}"
                        f" but the shard index says {start}..{end}; the sidecar does not match its shard")

    def text(a: int, b: int) -> str:
        return tokenizer.decode(shard.tokens[a:b].tolist(), skip_special_tokens=False)

    return {**doc, "shard": str(shard_path), "offset": offset, "offset_in_doc": offset - start,
            "before": text(max(start, offset - context), offset), "token": text(offset, offset + 1),
            "after": text(offset + 1, min(end, offset + 1 + context))}


def format_trace(t: dict) -> str:
    origin = f" (original id {t['orig_id']})" if t.get("orig_id") not in (None, "") else ""
    return (f"token {t['offset']} of {t['shard']} is token {t['offset_in_doc']} of {t['tokens']} in document "
            f"{t['id']}{origin}, source {t['source']}\n"
            f"{t['before']}[[{t['token']}]]{t['after']}")


def run_trace_command(args, art: dict[str, Artifact]) -> int:
    """`scratchlm data trace`: print the document a token of a shard came from, with the text around it."""
    from .bpe import load_tokenizer

    shards_dir = require(art, "shards").dir
    tokenizer = load_tokenizer(require(art, "tokenizer").dir / "tokenizer.json")
    print(format_trace(trace(resolve_shard(shards_dir, args.shard), args.offset, tokenizer, args.context)))
    return 0
