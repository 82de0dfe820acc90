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

Each document's sample is kept in the order of its text (first occurrences), so that the text a copy has of its
own can be told from words changed here and there (own_count).
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
    # Documents with fewer distinct, uncommon sampled shingles (about 160 words of their own) are left to exact and
    # near dedup: on a short page the shared boilerplate (credits, a package's stock paragraphs) is most of it.
    min_samples: int = 20
    # A phrase in more documents than this is a template (a package's stock notes, translation credits), not
    # evidence that one page copies another; copies in bulk are exact or near duplicates, caught before. At 16,
    # the nine mtools pages of man-es, which share their texinfo notes, were "copies" of each other; at 8 a page
    # partly copied into the editions of up to 7 other language sources still is one.
    max_postings: int = 8
    # A copy (contained, or a near duplicate) with at least this many sampled shingles that its original lacks,
    # about 130 words of its own at the 1/8 sample, says something of its own and is no copy: git-diff-files(1)
    # is 97% the diff options git includes in several pages, and its synopsis and description are nowhere else.
    # Like paragraph dedup (paragraph_min_docs), this leaves the text a few sibling pages share to each of them.
    # The copies on the cleaning benchmark and its holdout had at most 11; the pages of their own, 18 to 160.
    own_min: int = 16
    # Only passages count as text of its own: own_count counts the sampled shingles the original lacks that come
    # in runs of at least this many in a row (in the copy's order), a passage of about 50 words or more. A word
    # changed here and there changes the 5 shingles around it, so a page of over ~900 words with 3% of its words
    # changed had 16 such shingles, scattered in runs of 1 to 4, and was kept as a page "of its own"
    # (bench/near_copies.py, two seeds: 37% of those copies, 13% of those with 1% changed); at 6, 0-1.2% (pages
    # of 10,000 words and more), while the natural pages kept for their own text go from 86 to 29 (partial
    # translations whose own words are headings and short phrases now count as copies).
    own_run: int = 6
    seed: int = 7


def sampled_shingles(texts: list[str], cfg: ContainmentConfig) -> tuple[np.ndarray, np.ndarray]:
    """(text number, sampled shingle hash as int64) of each text's distinct sampled shingles: by text, and within
    a text in the order they first occur in it."""
    hashes, offsets = shingle_hashes(texts, cfg.ngram, cfg.seed)
    mask = np.uint64((1 << cfg.sample_bits) - 1)
    doc = np.repeat(np.arange(len(texts)), np.diff(offsets))
    keep = (hashes & mask) == 0
    doc, sampled = doc[keep], hashes[keep].view(np.int64)
    _, first = np.unique(np.stack([doc, sampled], axis=1), axis=0, return_index=True)  # distinct per doc
    first.sort()  # doc never decreases along the text: sorted by doc, then by position
    return doc[first], sampled[first]


def own_count(copy: np.ndarray, original: np.ndarray, run: int) -> int:
    """The text `copy` has of its own: how many of its sampled shingles (in text order) `original`'s sample
    lacks, counting only those in runs of `run` or more in a row (a passage, not words changed here and there)."""
    own = ~np.isin(copy, original)
    edges = np.flatnonzero(np.diff(np.concatenate(([0], own.view(np.int8), [0]))))
    lengths = edges[1::2] - edges[::2]
    return int(lengths[lengths >= run].sum())


class ContainmentFinder:
    def __init__(self, cfg: ContainmentConfig = ContainmentConfig()) -> None:
        self.cfg = cfg
        self._ids: list[str] = []
        self._hashes: list[np.ndarray] = []
        self._docs: list[np.ndarray] = []
        self._sets: dict[str, np.ndarray] | None = None

    def add_batch(self, ids: list[str], texts: list[str]) -> None:
        docs, hashes = sampled_shingles(texts, self.cfg)
        self._docs.append(docs + len(self._ids))
        self._hashes.append(hashes)
        self._ids.extend(ids)
        self._sets = None

    def own(self, doc_id: str, other_id: str) -> int:
        """The text doc_id has of its own, next to other_id (own_count)."""
        if self._sets is None:
            docs, hashes = np.concatenate(self._docs), np.concatenate(self._hashes)
            order = np.argsort(docs, kind="stable")  # stable: each document's sample stays in text order
            bounds = np.searchsorted(docs[order], np.arange(len(self._ids) + 1))
            ordered = hashes[order]
            self._sets = {doc: ordered[bounds[i]:bounds[i + 1]] for i, doc in enumerate(self._ids)}
        return own_count(self._sets[doc_id], self._sets[other_id], self.cfg.own_run)

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
        firsts, seconds = [], []
        for k in range(2, cfg.max_postings + 1):
            groups = starts[sizes == k]
            if not len(groups):
                continue
            members = docs[groups[:, None] + np.arange(k)]  # (groups, k), ascending within a group
            i, j = np.triu_indices(k, 1)
            firsts.append(members[:, i].ravel())
            seconds.append(members[:, j].ravel())
        if not firsts:
            return {}
        codes, shared = np.unique(np.concatenate(firsts) * n + np.concatenate(seconds), return_counts=True)
        a, b = codes // n, codes % n  # a < b: a came first
        in_b = shared / np.maximum(samples[a], 1)  # share of a inside b
        in_a = shared / np.maximum(samples[b], 1)
        judged = (samples[a] >= cfg.min_samples) & (samples[b] >= cfg.min_samples)
        # Each inside the other: one text in two versions, and the first one is kept, as for exact and near
        # copies. Otherwise the one that is inside goes and the one that holds it stays.
        mutual = judged & (in_b >= cfg.threshold) & (in_a >= cfg.threshold)
        a_goes = judged & ~mutual & (in_b >= cfg.threshold) & (samples[b] > samples[a])
        b_goes = judged & (mutual | ((in_a >= cfg.threshold) & (samples[a] > samples[b])))
        out: dict[str, tuple[str, float]] = {}
        for gone, kept, share in ((b[b_goes], a[b_goes], in_a[b_goes]), (a[a_goes], b[a_goes], in_b[a_goes])):
            for i, j, s in zip(gone.tolist(), kept.tolist(), share.tolist()):
                best = out.get(self._ids[i])
                if best is None or s > best[1]:
                    out[self._ids[i]] = (self._ids[j], min(float(s), 1.0))
        return out
