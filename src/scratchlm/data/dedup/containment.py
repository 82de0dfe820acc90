"""Partial copies: documents whose word n-grams are mostly contained in a longer document.

MinHash estimates Jaccard similarity, which is low when one document holds another: a half-translated page that
is mostly the English original, a section copied into a longer manual, a README inside the docs page that
embeds it. Containment C(A, B) = |shingles(A) & shingles(B)| / |shingles(A)| is what says "A is a copy".

Every document keeps the shingle hashes that fall in a fixed 1/2^sample_bits slice of hash space (the same
slice for all documents), so if A is inside B, A's sample is inside B's sample, and the share of A's sample
found in B estimates C(A, B) without bias. Candidate pairs come from a sort of (hash, document) and are counted
in numpy; a hash shared by more than max_postings documents is a common phrase, not evidence, and is left out
of both sides of the count.
Memory: 16 bytes per sampled shingle, about 2 bytes per word of the corpus at the default 1/8 sample.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from scratchlm.data.dedup.minhash import shingle_hashes


@dataclass(frozen=True)
class ContainmentConfig:
    ngram: int = 5
    threshold: float = 0.8  # share of the shorter document's n-grams found in the longer one
    sample_bits: int = 3  # keep 1/8 of the shingles
    min_samples: int = 8  # documents with fewer sampled shingles (about 60 words) are left to exact/near dedup
    max_postings: int = 64
    seed: int = 7


class ContainmentFinder:
    def __init__(self, cfg: ContainmentConfig = ContainmentConfig()) -> None:
        self.cfg = cfg
        self._ids: list[str] = []
        self._hashes: list[np.ndarray] = []
        self._docs: list[np.ndarray] = []

    def add_batch(self, ids: list[str], texts: list[str]) -> None:
        hashes, offsets = shingle_hashes(texts, self.cfg.ngram, self.cfg.seed)
        mask = np.uint64((1 << self.cfg.sample_bits) - 1)
        doc = np.repeat(np.arange(len(self._ids), len(self._ids) + len(ids)), np.diff(offsets))
        keep = (hashes & mask) == 0
        pairs = np.unique(np.stack([doc[keep], hashes[keep].view(np.int64)], axis=1), axis=0)  # distinct per doc
        self._docs.append(pairs[:, 0])
        self._hashes.append(pairs[:, 1])
        self._ids.extend(ids)

    def contained(self, exclude: set[str] = frozenset()) -> dict[str, tuple[str, float]]:
        """{id of a partial copy: (id of the longer document holding it, estimated containment)}. Documents in
        `exclude` (already dropped as exact or near duplicates) take no part."""
        cfg, n = self.cfg, len(self._ids)
        if not n:
            return {}
        docs = np.concatenate(self._docs)
        hashes = np.concatenate(self._hashes)
        if exclude:
            gone = np.array([self._ids[i] in exclude for i in range(n)])
            docs, hashes = docs[~gone[docs]], hashes[~gone[docs]]
        order = np.lexsort((docs, hashes))
        docs, hashes = docs[order], hashes[order]
        starts = np.flatnonzero(np.concatenate(([True], hashes[1:] != hashes[:-1])))
        sizes = np.diff(np.append(starts, len(hashes)))
        evidence = np.repeat(sizes <= cfg.max_postings, sizes)  # common phrases count on neither side
        samples = np.bincount(docs[evidence], minlength=n)
        small, big = [], []
        for k in range(2, cfg.max_postings + 1):
            groups = starts[sizes == k]
            if not len(groups):
                continue
            members = docs[groups[:, None] + np.arange(k)]  # (groups, k)
            a = np.repeat(members, k, axis=1).ravel()
            b = np.tile(members, (1, k)).ravel()
            pair = a != b
            small.append(a[pair])
            big.append(b[pair])
        if not small:
            return {}
        a, b = np.concatenate(small), np.concatenate(big)
        # b must be the longer document (ties: the earlier one), so two equal copies never remove each other.
        longer = (samples[b] > samples[a]) | ((samples[b] == samples[a]) & (b < a))
        a, b = a[longer], b[longer]
        codes, counts = np.unique(a * n + b, return_counts=True)
        a, b = codes // n, codes % n
        share = counts / np.maximum(samples[a], 1)
        hit = (share >= cfg.threshold) & (samples[a] >= cfg.min_samples)
        out: dict[str, tuple[str, float]] = {}
        for i, j, s in zip(a[hit].tolist(), b[hit].tolist(), share[hit].tolist()):
            best = out.get(self._ids[i])
            if best is None or s > best[1]:
                out[self._ids[i]] = (self._ids[j], min(float(s), 1.0))
        return out
