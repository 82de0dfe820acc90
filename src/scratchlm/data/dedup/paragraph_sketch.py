"""What paragraph dedup needs of each paragraph, computed per work unit in the workers: its sketch.

Per unit, one row per paragraph dedup may cut (paragraphs.eligible_paragraphs: long enough, not structural), in
input order, in arrays beside the unit's step result:
  doc.npy       the document's position in the unit; para.npy: the paragraph's index in the document;
  exact.npy     [m, 2] uint64: the 128-bit xxh3 of the normalized paragraph;
  sig.npy       [m, num_perm] uint32: its MinHash signature; shingles.npy: its shingle count;
and ids.npy, the IDs of all the unit's documents. paragraph_copies.py decides from these alone.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import xxhash

from ..step_context import StepContext
from .minhash import signatures_and_counts
from .paragraphs import ParagraphDedupConfig, eligible_paragraphs

BATCH = 4096  # paragraphs signed at once


@dataclass(frozen=True)
class ParagraphSketchSettings:
    dedup: ParagraphDedupConfig | None  # None: nothing of this unit is cut (code, the rule skipped): IDs only


def sketch_paragraphs(doc: dict, ctx: StepContext) -> dict:
    """Observe only: the document's eligible paragraphs, their exact keys now, their signatures by the batch."""
    from ..clean.structure import structural_paragraphs

    memo, cfg = _started(ctx.memo), ctx.settings.dedup
    memo["ids"].append(doc["id"])
    if cfg is None:
        return doc
    # Code blocks, tables and option lists stay: a translated manual needs its command examples.
    _, _, normalized, eligible = eligible_paragraphs(doc["text"], cfg.min_words, structural_paragraphs(doc["text"]))
    for i in eligible:
        memo["doc"].append(len(memo["ids"]) - 1)
        memo["para"].append(i)
        memo["exact"].append(xxhash.xxh3_128_digest(normalized[i]))
        memo["texts"].append(normalized[i].decode("utf-8"))
    if len(memo["texts"]) >= BATCH:
        _sign(memo, cfg)
    return doc


def _started(memo: dict) -> dict:
    if "ids" not in memo:
        memo.update(ids=[], doc=[], para=[], exact=[], texts=[], sig=[], shingles=[])
    return memo


def _sign(memo: dict, cfg: ParagraphDedupConfig) -> None:
    signatures, shingles = signatures_and_counts(memo["texts"], cfg.minhash())
    memo["sig"].append(signatures)
    memo["shingles"].append(shingles.astype(np.int64))
    memo["texts"] = []


def save_paragraph_sketch(ctx: StepContext) -> None:
    memo, cfg = _started(ctx.memo), ctx.settings.dedup  # started here for a unit without documents
    if memo["texts"]:
        _sign(memo, cfg)
    width = cfg.num_perm if cfg is not None else 0
    ctx.sides.update(
        ids=np.array(memo["ids"], dtype=str),
        doc=np.array(memo["doc"], dtype=np.int64),
        para=np.array(memo["para"], dtype=np.int64),
        exact=np.frombuffer(b"".join(memo["exact"]), dtype=np.uint64).reshape(-1, 2),
        sig=np.concatenate(memo["sig"]) if memo["sig"] else np.empty((0, width), np.uint32),
        shingles=np.concatenate(memo["shingles"]) if memo["shingles"] else np.empty(0, np.int64))
