"""What document dedup needs of each document, computed per work unit in the workers: its sketch.

Per unit, in document order (arrays beside the unit's step result, see dedup_step.py):
  ids.npy        the document IDs;
  exact.npy      [n, 2] uint64: the 128-bit xxh3 of the normalized text (exact.py);
  sig.npy        [n, num_perm] uint32: the MinHash signature (minhash.py), of the whole text for a code file,
                 of its similarity text otherwise; shingles.npy: its shingle count (0: no words);
  sample.npy     the distinct sampled shingle hashes of each document (containment.py), concatenated, with
                 sample_at.npy [n + 1] the start of each document's.
The corpus step then decides from these alone (disk_dedup.py): no process holds more than a unit of them.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..clean.structure import similarity_text
from ..step_context import StepContext
from .containment import ContainmentConfig, sampled_shingles
from .exact import exact_key
from .minhash import MinHashConfig, signatures_and_counts

BATCH = 1024


@dataclass(frozen=True)
class SketchSettings:
    minhash: MinHashConfig
    containment: ContainmentConfig
    whole: bool  # a code file is compared whole: it is all code, there is no prose to set apart


def sketch_doc(doc: dict, ctx: StepContext) -> dict:
    """Observe only: the document's exact key now, its text for the batch _sketch_batch sketches."""
    memo = _started(ctx.memo)
    memo["ids"].append(doc["id"])
    memo["exact"].append(np.frombuffer(exact_key(doc["text"]), dtype=np.uint64))
    memo["texts"].append(doc["text"] if ctx.settings.whole else similarity_text(doc["text"]))
    if len(memo["texts"]) >= BATCH:
        _sketch_batch(ctx)
    return doc


def _started(memo: dict) -> dict:
    if "ids" not in memo:
        memo.update(ids=[], exact=[], texts=[], sig=[], shingles=[], sample_docs=[], sample=[], done=0)
    return memo


def _sketch_batch(ctx: StepContext) -> None:
    memo, s = ctx.memo, ctx.settings
    texts = memo["texts"]
    signatures, shingles = signatures_and_counts(texts, s.minhash)
    docs, hashes = sampled_shingles(texts, s.containment)
    memo["sig"].append(signatures)
    memo["shingles"].append(shingles.astype(np.int64))
    memo["sample_docs"].append(docs + memo["done"])
    memo["sample"].append(hashes)
    memo["done"] += len(texts)
    memo["texts"] = []


def save_sketch(ctx: StepContext) -> None:
    memo, s = _started(ctx.memo), ctx.settings  # started here for a unit without documents
    if memo["texts"]:
        _sketch_batch(ctx)
    n = len(memo["ids"])
    sample_docs = np.concatenate(memo["sample_docs"]) if memo["sample_docs"] else np.empty(0, np.int64)
    ctx.sides.update(
        ids=np.array(memo["ids"], dtype=str),
        exact=np.array(memo["exact"], dtype=np.uint64).reshape(n, 2),
        sig=np.concatenate(memo["sig"]) if memo["sig"] else np.empty((0, s.minhash.num_perm), np.uint32),
        shingles=np.concatenate(memo["shingles"]) if memo["shingles"] else np.empty(0, np.int64),
        sample=np.concatenate(memo["sample"]) if memo["sample"] else np.empty(0, np.int64),
        sample_at=np.searchsorted(sample_docs, np.arange(n + 1)))
