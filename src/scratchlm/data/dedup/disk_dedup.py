"""Whole-document copies decided from the units' sketches (sketch.py) by sorting on disk, in bounded memory.

The in-memory deduplicators (exact.py, minhash.py, containment.py) hold every document's key, signature and
shingle sample at once: about 2-3 KB per document, tens of GB at the mission's scale. Here, as in datatrove's
MinHash stages, every corpus-wide question is a sort of (key, document) rows, cut into buckets by key so that
one bucket at a time is in memory:

  exact      rows (xxh3 key, doc) bucketed by key: the first document of each key keeps it;
  near       rows (LSH band key, doc) of the documents that are no exact copy, bucketed by key: documents sharing
             a band key are candidates (each with the earliest `max_candidates_per_bucket` before it); the
             candidates, bucketed by the unit of the later one, are verified on their signatures (estimated
             Jaccard >= threshold), and the verified edges joined by a union-find whose root, the first document
             of its cluster, is kept;
  contained  rows (sampled shingle, doc) of the documents left, bucketed by hash: documents sharing an uncommon
             shingle are pairs, counted per pair in buckets by a hash of the pair, then judged as
             ContainmentFinder.contained judges them.

A document is a number, its unit's position << 32 | its position in the unit, so numbers sort in input order
and the first occurrence is the smallest. What stays in memory grows only with the copies found (the edges, the
clusters joined over the documents in them, the decisions): about 150 bytes per copy, measured at 1M documents
(docs/benchmarks.md). The decisions are those of the in-memory path (tests/test_disk_dedup.py compares them).
"""
from __future__ import annotations

import math
import shutil
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .containment import ContainmentConfig, own_count
from .minhash import MinHashConfig, band_keys, pairs_within_batch

SORT_BYTES_PER_ROW = 80  # a bucket row of 2-3 int64 values, with the copies a sort and its indexing make
MAPPED = 4  # unit arrays kept mapped at once: a mapped file's pages count in this process's memory while mapped
_LOCAL = (1 << 32) - 1


def numbers(unit: int, n: int) -> np.ndarray:
    return (np.int64(unit) << 32) | np.arange(n, dtype=np.int64)


def unit_of(doc: np.ndarray) -> np.ndarray:
    return doc >> 32


def local(doc: np.ndarray) -> np.ndarray:
    return doc & _LOCAL


class Buckets:
    """Rows of `width` int64 values appended to one file per bucket number, read back a bucket at a time."""

    def __init__(self, root: Path, name: str, width: int):
        self.dir, self.width = root / name, width
        self.dir.mkdir(parents=True)

    def add(self, bucket: np.ndarray, rows: np.ndarray) -> None:
        if not len(rows):
            return
        order = np.argsort(bucket, kind="stable")
        bucket, rows = bucket[order], np.ascontiguousarray(rows[order], dtype=np.int64)
        cuts = np.flatnonzero(np.diff(bucket)) + 1
        for part, part_rows in zip(bucket[np.r_[0, cuts]].tolist(), np.split(rows, cuts)):
            with open(self.dir / f"{part}.bin", "ab") as f:
                part_rows.tofile(f)

    def read(self, bucket: int) -> np.ndarray:
        path = self.dir / f"{bucket}.bin"
        rows = np.fromfile(path, dtype=np.int64) if path.exists() else np.empty(0, np.int64)
        return rows.reshape(-1, self.width)


class Sketches:
    """The units' sketch arrays, loaded one unit at a time (memory-mapped: a gather touches only its rows)."""

    def __init__(self, dirs: list[Path]):
        self.dirs = dirs
        self._maps: dict[tuple[int, str], np.ndarray] = {}
        self.sizes = [len(self.load(u, "shingles")) for u in range(len(dirs))]

    def load(self, unit: int, name: str) -> np.ndarray:
        # own_text reads two units' samples per copy: each file is mapped once, not per copy
        key = (unit, name)
        if key not in self._maps:
            if len(self._maps) >= MAPPED:
                self._maps.pop(next(iter(self._maps)))
            self._maps[key] = np.load(self.dirs[unit] / f"{name}.npy", mmap_mode="r")
        return self._maps[key]

    def gather(self, name: str, docs: np.ndarray) -> np.ndarray:
        """The rows of `name` of these documents, in their order."""
        return gather(lambda u: self.load(u, name), docs)

    def sample(self, doc: int) -> np.ndarray:
        at = self.load(doc >> 32, "sample_at")
        i = doc & _LOCAL
        return np.asarray(self.load(doc >> 32, "sample")[at[i]:at[i + 1]])


def gather(load, docs: np.ndarray) -> np.ndarray:
    """Rows of the per-unit arrays `load(unit)` for these document numbers, in their order; one unit at a time."""
    units = unit_of(docs)
    out = None
    for u in np.unique(units).tolist():
        at = np.flatnonzero(units == u)
        order = np.argsort(local(docs[at]), kind="stable")  # read forward through the unit's (mapped) array
        rows = load(u)[local(docs[at])[order]]
        if out is None:  # strings (IDs) as objects: each unit's array has its own width
            out = np.empty((len(docs), *rows.shape[1:]), dtype=object if rows.dtype.kind == "U" else rows.dtype)
        out[at[order]] = rows
    return out if out is not None else np.empty(0)


@dataclass
class Copies:
    """(copy, kept original) document numbers, with the estimated Jaccard or containment where there is one."""
    exact: np.ndarray  # [n, 2]
    near: np.ndarray  # [n, 2]
    near_jaccard: np.ndarray
    contained: np.ndarray  # [n, 2]
    contained_share: np.ndarray


def buckets_for(rows: int, sort_mb: int) -> int:
    """Enough buckets that sorting one takes about sort_mb: the only corpus-sized data, cut to fit."""
    return max(1, math.ceil(rows * SORT_BYTES_PER_ROW / (sort_mb << 20)))


def bucket_of(keys: np.ndarray, parts: int) -> np.ndarray:
    """The bucket of each 64-bit key, from its high half: the sampled shingle hashes all end in sample_bits zeros,
    so their low bits would fill one bucket in eight."""
    return ((keys.view(np.uint64) >> np.uint64(32)) % np.uint64(parts)).astype(np.int64)


def first_of_key(keys: np.ndarray, docs: np.ndarray) -> np.ndarray:
    """For rows sorted by (key..., doc): the row of the first doc of each row's key."""
    starts = np.ones(len(docs), dtype=bool)
    starts[1:] = (keys[1:] != keys[:-1]).any(axis=1)
    return np.maximum.accumulate(np.where(starts, np.arange(len(docs)), 0))


def exact_copies(sk: Sketches, work: Path, sort_mb: int) -> np.ndarray:
    """[n, 2] (copy, first document with the same normalized text), by the copy's number."""
    parts = buckets_for(sum(sk.sizes), sort_mb)
    rows = Buckets(work, "exact", 3)
    for u, n in enumerate(sk.sizes):
        keys = np.asarray(sk.load(u, "exact"))
        rows.add(bucket_of(keys[:, 0], parts), np.column_stack([keys.view(np.int64),
                                                                                   numbers(u, n)]))
    found = []
    for part in range(parts):
        r = rows.read(part)
        r = r[np.lexsort((r[:, 2], r[:, 1], r[:, 0]))]
        first = first_of_key(r[:, :2], r[:, 2])
        copy = first != np.arange(len(r))
        found.append(np.column_stack([r[copy, 2], r[first[copy], 2]]))
    return _sorted_pairs(found)


def _sorted_pairs(parts: list[np.ndarray], width: int = 2) -> np.ndarray:
    pairs = np.concatenate(parts) if parts else np.empty((0, width), np.int64)
    return pairs[np.argsort(pairs[:, 0], kind="stable")] if len(pairs) else pairs.reshape(0, width)


def _masks(sk: Sketches, gone: np.ndarray) -> list[np.ndarray]:
    """Per unit, which of its documents are in `gone` (document numbers)."""
    _masks = [np.zeros(n, dtype=bool) for n in sk.sizes]
    units = unit_of(gone)
    for u in np.unique(units).tolist():
        _masks[u][local(gone[units == u])] = True
    return _masks


def near_copies(sk: Sketches, work: Path, cfg: MinHashConfig, skip: list[np.ndarray],
                sort_mb: int) -> tuple[np.ndarray, np.ndarray]:
    """([n, 2] (copy, first document of its cluster), estimated Jaccard of the two), documents in `skip` aside."""
    parts = buckets_for(sum(sk.sizes) * cfg.bands, sort_mb)
    rows = Buckets(work, "bands", 2)
    for u, n in enumerate(sk.sizes):
        docs = np.flatnonzero(~skip[u] & (np.asarray(sk.load(u, "shingles")) > 0))
        keys = band_keys(np.asarray(sk.load(u, "sig"))[docs], cfg.bands, cfg.rows).ravel().view(np.int64)
        rows.add(bucket_of(keys, parts),
                 np.column_stack([keys, np.repeat(numbers(u, n)[docs], cfg.bands)]))
    candidates = Buckets(work, "candidates", 2)
    for part in range(parts):
        r = rows.read(part)
        r = r[np.lexsort((r[:, 1], r[:, 0]))]
        later, earlier = pairs_within_batch(r[:, 0], cfg.max_candidates_per_bucket, np.arange(len(r)))
        candidates.add(unit_of(r[later, 1]), np.column_stack([r[later, 1], r[earlier, 1]]))
    edges = []
    for u in range(len(sk.sizes)):
        pairs = np.unique(candidates.read(u), axis=0)  # a pair often shares several bands
        if len(pairs):
            edges.append(pairs[signature_jaccard(sk, pairs) >= cfg.threshold])
    edges = np.concatenate(edges) if edges else np.empty((0, 2), np.int64)
    nodes = np.unique(edges)
    roots = smallest_connected(len(nodes), np.searchsorted(nodes, edges))  # the first document of each cluster
    copy = roots != np.arange(len(nodes))
    pairs = np.column_stack([nodes[copy], nodes[roots[copy]]])
    return pairs, signature_jaccard(sk, pairs)


def smallest_connected(n: int, edges: np.ndarray) -> np.ndarray:
    """For nodes 0..n-1 joined by `edges` [m, 2]: the smallest node connected to each. A union-find in whole
    arrays (a Python loop over the edges would hold an object per edge): each round, the root of each edge's
    larger side is hooked under the smaller side's root, then every node jumps to its root. A hook only ever
    points to a smaller node, so there are no cycles and each root is the smallest of its tree."""
    roots = np.arange(n, dtype=np.int64)
    a, b = edges[:, 0], edges[:, 1]
    while True:
        ra, rb = roots[a], roots[b]
        apart = ra != rb
        if not apart.any():
            return roots
        np.minimum.at(roots, np.maximum(ra, rb)[apart], np.minimum(ra, rb)[apart])
        while True:
            jumped = roots[roots]
            if np.array_equal(jumped, roots):
                break
            roots = jumped


SIGNATURE_BYTES = 4 << 20  # the two signatures of the pairs compared at once (1M pairs of signatures: 2 GB)


def signature_jaccard(sk: Sketches, pairs: np.ndarray) -> np.ndarray:
    out = np.empty(len(pairs))
    if not len(pairs):
        return out
    sig = sk.load(int(unit_of(pairs[0, 0])), "sig")
    step = max(1, SIGNATURE_BYTES // (2 * sig.shape[1] * sig.itemsize))
    for lo in range(0, len(pairs), step):
        chunk = pairs[lo:lo + step]
        out[lo:lo + len(chunk)] = (sk.gather("sig", chunk[:, 0]) == sk.gather("sig", chunk[:, 1])).mean(axis=1)
    return out


def contained_copies(sk: Sketches, work: Path, cfg: ContainmentConfig, skip: list[np.ndarray],
                     sort_mb: int) -> tuple[np.ndarray, np.ndarray]:
    """([n, 2] (partial copy, the longer document holding it), estimated containment), documents in `skip`
    aside; ContainmentFinder.contained's rules, pair by pair."""
    total = sum(len(sk.load(u, "sample")) for u in range(len(sk.sizes)))
    parts = buckets_for(total, sort_mb)
    rows = Buckets(work, "samples", 2)
    for u, n in enumerate(sk.sizes):
        at = np.asarray(sk.load(u, "sample_at"))
        owner = np.repeat(numbers(u, n), np.diff(at))
        keep = ~np.repeat(skip[u], np.diff(at))
        hashes = np.asarray(sk.load(u, "sample"))[keep]
        rows.add(bucket_of(hashes, parts), np.column_stack([hashes, owner[keep]]))
    evidence, shared = Buckets(work, "evidence", 1), Buckets(work, "shared", 2)
    # A group of k documents makes k(k-1)/2 pairs: at most (max_postings - 1) / 2 per row. The pairs are cut by a
    # hash of the pair, so all counts of one pair meet in one bucket of bounded size.
    pair_parts = buckets_for(total * (cfg.max_postings - 1) // 2, sort_mb)
    for part in range(parts):
        r = rows.read(part)
        r = r[np.lexsort((r[:, 1], r[:, 0]))]
        hashes, docs = r[:, 0], r[:, 1]
        starts = np.flatnonzero(np.concatenate(([True], hashes[1:] != hashes[:-1]))) if len(r) else np.empty(0, int)
        sizes = np.diff(np.append(starts, len(r)))
        common = np.repeat(sizes <= cfg.max_postings, sizes)  # a common phrase counts on neither side
        evidence.add(unit_of(docs[common]), docs[common, None])
        for k in range(2, cfg.max_postings + 1):
            groups = starts[sizes == k]
            if len(groups):
                members = docs[groups[:, None] + np.arange(k)]
                i, j = np.triu_indices(k, 1)
                a, b = members[:, i].ravel(), members[:, j].ravel()
                mixed = a.view(np.uint64) ^ (b.view(np.uint64) * np.uint64(0x9E3779B97F4A7C15))
                shared.add(bucket_of(mixed, pair_parts), np.column_stack([a, b]))
    counts = work / "evidence_counts"  # per document, its sampled shingles that are evidence: kept on disk too
    counts.mkdir()
    for u, n in enumerate(sk.sizes):
        np.save(counts / f"{u}.npy", np.bincount(local(evidence.read(u)[:, 0]), minlength=n))

    def samples_of(docs: np.ndarray) -> np.ndarray:
        return gather(lambda u: np.load(counts / f"{u}.npy", mmap_mode="r"), docs)

    found = []
    for part in range(pair_parts):
        pairs, count = np.unique(shared.read(part), axis=0, return_counts=True)
        if not len(pairs):
            continue
        a, b = pairs[:, 0], pairs[:, 1]
        samples_a, samples_b = samples_of(a), samples_of(b)
        in_b, in_a = count / np.maximum(samples_a, 1), count / np.maximum(samples_b, 1)
        judged = (samples_a >= cfg.min_samples) & (samples_b >= cfg.min_samples)
        mutual = judged & (in_b >= cfg.threshold) & (in_a >= cfg.threshold)
        a_goes = judged & ~mutual & (in_b >= cfg.threshold) & (samples_b > samples_a)
        b_goes = judged & (mutual | ((in_a >= cfg.threshold) & (samples_a > samples_b)))
        found += [np.column_stack([b[b_goes], a[b_goes], in_a[b_goes].view(np.int64)]),
                  np.column_stack([a[a_goes], b[a_goes], in_b[a_goes].view(np.int64)])]
    rows = np.concatenate(found) if found else np.empty((0, 3), np.int64)
    if not len(rows):
        return np.empty((0, 2), np.int64), np.empty(0)
    share = rows[:, 2].view(np.float64)
    # each copy once: the document holding most of it, the earliest of those on a tie
    order = np.lexsort((rows[:, 1], -share, rows[:, 0]))
    rows, share = rows[order], share[order]
    first = np.concatenate(([True], rows[1:, 0] != rows[:-1, 0]))
    return rows[first, :2], np.minimum(share[first], 1.0)


def own_text(sk: Sketches, pairs: np.ndarray, run: int) -> np.ndarray:
    """For each (copy, original): the text the copy has of its own (containment.own_count)."""
    return np.array([own_count(sk.sample(a), sk.sample(b), run) for a, b in pairs.tolist()], dtype=np.int64)


def find_copies(dirs: list[Path], work: Path, exact: bool, near: MinHashConfig | None,
                contained: ContainmentConfig | None, sort_mb: int = 256) -> tuple[Sketches, Copies]:
    """Every copy among the documents sketched in `dirs` (one per unit, in input order); `work` is scratch space,
    removed when done; sort_mb: about the memory one bucket's sort takes (data.sort_mb)."""
    sk = Sketches(dirs)
    work.mkdir(parents=True, exist_ok=True)
    try:
        none = np.empty((0, 2), np.int64), np.empty(0)
        exact_pairs = exact_copies(sk, work, sort_mb) if exact else none[0]
        gone = _masks(sk, exact_pairs[:, 0])  # an exact copy is no near copy, a near copy no partial one
        near_pairs, jaccard = near_copies(sk, work, near, gone, sort_mb) if near else none
        for u, mask in enumerate(_masks(sk, near_pairs[:, 0])):
            gone[u] |= mask
        part_pairs, share = contained_copies(sk, work, contained, gone, sort_mb) if contained else none
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return sk, Copies(exact_pairs, near_pairs, jaccard, part_pairs, share)
