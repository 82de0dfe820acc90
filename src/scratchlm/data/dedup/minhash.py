"""Near-duplicate detection: MinHash signatures over hashed word n-grams, LSH banding, verification, union-find.

Pipeline for a batch of documents, all vectorized with numpy:
  1. normalize (words.py) and hash every word n-gram to uint64 without building a Python string per word
     or shingle: words are hashed from 8-byte blocks read straight out of the batch's byte buffer, and a
     prefix-sum polynomial over word hashes gives every n-gram's hash from two lookups;
  2. MinHash signature per document: min over its shingles of num_perm universal hashes. Backend "rensa" (Rust,
     fed our flat uint64 shingle hashes) or "numpy" ((a*x+b) mod (2^31-1) for all permutations at once);
  3. LSH: cut the signature into `bands` bands of `rows` values, hash each band to a 64-bit key; documents that
     share a key in any band are candidates;
  4. verify every candidate pair by the signature-estimated Jaccard >= threshold (this is what gives precision:
     a band collision alone only says "maybe");
  5. union-find over verified pairs; the root of each cluster is its first-added document.

The two backends produce different (equally valid) signatures; never mix them in one index.
bench/dedup_bench.py measures both against datasketch; rensa is the default because its signatures are ~100x
cheaper per shingle and its estimates have lower variance (docs/benchmarks.md, "Dedup (MinHash LSH)").
"""

from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from scratchlm.data.dedup.words import ASCII_TABLE, NgramPolynomial, fold_to_bytes, ngram_polynomial
from scratchlm.errors import UserError

try:
    import rensa
except ImportError:  # rensa is a declared dependency, but the numpy backend keeps working without it
    rensa = None

MERSENNE_31 = (1 << 31) - 1
EMPTY_SIGNATURE_VALUE = 0xFFFFFFFF  # signature of a document with no shingles; both backends agree on it
_U64 = np.uint64
_TEXT_CHUNK_CHARS = 1 << 18  # shingle hashing takes ~256K characters at a time: temporaries stay cache-sized
_NUMPY_CHUNK_CELLS = 1 << 18  # shingles x permutations per numpy block (2 MiB of uint64)


@dataclass(frozen=True)
class MinHashConfig:
    """The document defaults find copies with a few percent of their words changed (bench/near_copies.py: the
    Debian documentation, man pages and Python's standard library, with planted copies, three seeds). A word
    changed every 33 words (3%) leaves J = 0.97^5 / (2 - 0.97^5) = 0.75 of the word 5-grams. At 112
    permutations, 14 bands of 8 rows (P(candidate) = 0.77 at J = 0.75) and 0.8, half of such copies were found
    (and a third of the rest taken for pages with text of their own: ContainmentConfig.own_run); datatrove's
    14x8 banding without verification finds 75-79% there, and 12% of what it drops is no near copy.
    Now: 20 bands of 5 rows, P(candidate) = 1 - (1 - J^5)^20 = 0.975 at J = 0.7, every candidate verified at 0.7
    on 256 permutations, whose estimate has a standard deviation of 0.027 at J = 0.75 (0.041 at 112): 96-98.5%
    of them are found, 99-100% of those with 1% changed, and 98% of the near and partial copies dropped are
    true ones (J >= 0.7 or contained >= 0.8). Signatures cost about the same at 256 permutations (rensa); the
    sketch grows by 576 bytes a document. Permutations 101-256 only serve the verification."""
    ngram: int = 5
    num_perm: int = 256
    bands: int = 20
    rows: int = 5
    threshold: float = 0.7  # verified estimated Jaccard needed to call two documents duplicates
    seed: int = 1
    backend: str = "auto"  # "rensa", "numpy", or "auto" (rensa when importable)
    # A band bucket shared by thousands of boilerplate documents would make candidates quadratic; each new
    # document is compared with at most this many (the earliest) members of each bucket it lands in.
    max_candidates_per_bucket: int = 32

    def __post_init__(self) -> None:
        if self.ngram < 1 or self.num_perm < 1 or self.bands < 1 or self.rows < 1:
            raise UserError(f"MinHashConfig: ngram, num_perm, bands and rows must be >= 1, got {self}")
        if self.bands * self.rows > self.num_perm:
            raise UserError(
                f"MinHashConfig: bands*rows = {self.bands * self.rows} exceeds num_perm = {self.num_perm}"
            )
        if not 0.0 < self.threshold <= 1.0:
            raise UserError(f"MinHashConfig: threshold must be in (0, 1], got {self.threshold}")
        if self.backend not in ("auto", "rensa", "numpy"):
            raise UserError(f"MinHashConfig: backend must be 'auto', 'rensa' or 'numpy', got {self.backend!r}")
        if self.backend == "rensa" and rensa is None:
            raise UserError("MinHashConfig: backend='rensa' but the rensa package is not installed")
        if self.max_candidates_per_bucket < 1:
            raise UserError("MinHashConfig: max_candidates_per_bucket must be >= 1")

    @property
    def resolved_backend(self) -> str:
        if self.backend == "auto":
            return "rensa" if rensa is not None else "numpy"
        return self.backend


# ---------------------------------------------------------------------------------------------------------------
# Shingle hashing
#
# Definitions (the slow reference in tests/test_dedup.py spells the same thing out with Python ints):
#   word hash  W(w) = fmix64((block_0 ^ len*LENGTH_MIX) + sum_{k>=1} fmix64(block_k + k*BLOCK_MIX))
#              where block_k is bytes [8k, 8k+8) of the UTF-8 word, little-endian, zero-padded;
#   shingle hash of words w_0..w_{m-1} (m = ngram, or fewer for a short document):
#              fmix64(sum_j W(w_j) * base^j mod 2^64), base an odd 64-bit number drawn from the seed.
#              (the polynomial is words.NgramPolynomial, shared with decontamination's fingerprints).
# Both are computed for a whole batch with a handful of numpy passes over words, never over Python strings.


def fmix64(h: np.ndarray) -> np.ndarray:
    """murmur3's 64-bit finalizer, in place on a uint64 array (array ops wrap mod 2^64 silently)."""
    h ^= h >> _U64(33)
    h *= _U64(0xFF51AFD7ED558CCD)
    h ^= h >> _U64(33)
    h *= _U64(0xC4CEB9FE1A85EC53)
    h ^= h >> _U64(33)
    return h


LENGTH_MIX = 0x9E3779B97F4A7C15
BLOCK_MIX = 0xD6E8FEB86659FD93
_BYTE_MASKS = np.array([(1 << (8 * k)) - 1 for k in range(8)] + [(1 << 64) - 1], dtype=np.uint64)


@lru_cache(maxsize=None)
def polynomial_base(seed: int) -> int:
    """Odd 64-bit base of the shingle polynomial, so it is invertible mod 2^64."""
    return int(np.random.default_rng([seed, 0]).integers(0, 1 << 63, dtype=np.uint64)) * 2 + 1


def ranges(starts: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """Concatenation of arange(s, s + c) for each (s, c), vectorized."""
    ends = np.cumsum(counts)
    return np.repeat(starts - (ends - counts), counts) + np.arange(ends[-1] if len(ends) else 0)


def _word_hashes(buf: bytes, starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """W(word) for words at byte offsets `starts`; buf must have >= 8 bytes after the last word."""
    # An unaligned uint64 view with a 1-byte stride: element i is the 8 bytes starting at offset i.
    eight_bytes_at = np.ndarray((len(buf) - 7,), dtype="<u8", buffer=buf, strides=(1,))
    acc = eight_bytes_at[starts] & _BYTE_MASKS[np.minimum(lengths, 8)]
    acc ^= lengths.astype(np.uint64) * _U64(LENGTH_MIX)
    long_words = np.flatnonzero(lengths > 8)
    if len(long_words):
        extra = (lengths[long_words] - 1) // 8  # blocks after the first
        owner = np.repeat(long_words, extra)
        block_number = ranges(np.ones_like(extra), extra)
        block = eight_bytes_at[starts[owner] + 8 * block_number]
        block &= _BYTE_MASKS[np.minimum(lengths[owner] - 8 * block_number, 8)]
        block += block_number.astype(np.uint64) * _U64(BLOCK_MIX)
        fmix64(block)
        acc[long_words] += np.add.reduceat(block, np.cumsum(extra) - extra)
    return fmix64(acc)


def _hash_chunk(texts: list[str], ngram: int, polynomial: NgramPolynomial) -> tuple[np.ndarray, np.ndarray]:
    # ASCII text is normalized for the whole chunk at once: one bytes.translate maps case, punctuation and
    # whitespace, and word boundaries come from numpy, so runs of spaces never need collapsing. Other text is
    # folded on its own first (the chunk-wide translate is then a no-op on it).
    encoded = [t.encode("ascii") if t.isascii() else fold_to_bytes(t) for t in texts]
    lengths = np.array([len(e) for e in encoded], dtype=np.int64)
    doc_start = np.cumsum(lengths + 1) - lengths  # +1: the buffer starts with a space
    buf = (b" " + b" ".join(encoded) + b" " * 8).translate(ASCII_TABLE)
    is_char = np.frombuffer(buf, dtype=np.uint8) != 0x20
    # The buffer starts and ends with spaces, so changes alternate: word start, word end, start, end, ...
    edges = np.flatnonzero(is_char[1:] != is_char[:-1]) + 1
    word_start, word_end = edges[0::2], edges[1::2]

    first_word = np.searchsorted(word_start, doc_start)
    word_counts = np.searchsorted(word_start, doc_start + lengths) - first_word
    shingle_counts = np.where(word_counts >= ngram, word_counts - ngram + 1, np.minimum(word_counts, 1))
    if len(word_start) == 0:
        return np.empty(0, dtype=np.uint64), shingle_counts
    words = _word_hashes(buf, word_start, word_end - word_start)

    prefix = polynomial.prefix_sums(words)
    first_of_shingle = ranges(first_word, shingle_counts)
    end_of_shingle = np.minimum(first_of_shingle + ngram, np.repeat(first_word + word_counts, shingle_counts))
    return fmix64(polynomial.span_hashes(prefix, first_of_shingle, end_of_shingle)), shingle_counts


def shingle_hashes(texts: list[str], ngram: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """uint64 hashes of every word n-gram of every text (normalized on the way), flattened.

    Returns (hashes [total_shingles], offsets [n_texts + 1]): text i owns hashes[offsets[i]:offsets[i+1]].
    The shingles are exactly words.word_shingles (a text shorter than ngram words gives one shingle).
    """
    polynomial = ngram_polynomial(polynomial_base(seed))
    chars_before = np.cumsum([0] + [len(t) for t in texts])
    # Chunk boundaries every ~_TEXT_CHUNK_CHARS characters (at least one text per chunk).
    marks = np.arange(_TEXT_CHUNK_CHARS, chars_before[-1], _TEXT_CHUNK_CHARS)
    bounds = np.unique(np.concatenate(([0], np.searchsorted(chars_before, marks), [len(texts)])))
    hash_parts, count_parts = [np.empty(0, dtype=np.uint64)], [np.empty(0, dtype=np.int64)]
    for lo, hi in zip(bounds[:-1].tolist(), bounds[1:].tolist()):
        hashes, counts = _hash_chunk(texts[lo:hi], ngram, polynomial)
        hash_parts.append(hashes)
        count_parts.append(counts)
    offsets = np.zeros(len(texts) + 1, dtype=np.int64)
    np.cumsum(np.concatenate(count_parts), out=offsets[1:])
    return np.concatenate(hash_parts), offsets

# ---------------------------------------------------------------------------------------------------------------
# MinHash signatures


@lru_cache(maxsize=None)
def permutation_params(num_perm: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """(a, b) of the universal hashes (a*x + b) mod p, p = 2^31 - 1, a in [1, p), b in [0, p)."""
    rng = np.random.default_rng([seed, 1])
    a = rng.integers(1, MERSENNE_31, num_perm, dtype=np.uint64)
    b = rng.integers(0, MERSENNE_31, num_perm, dtype=np.uint64)
    return a, b


def _mod_mersenne_31(y: np.ndarray) -> np.ndarray:
    """y mod (2^31 - 1) in place for y < 2^63, without a division: 2^31 = 1 (mod p), so fold the high bits down."""
    p = _U64(MERSENNE_31)
    shift = _U64(31)
    for _ in range(2):  # y < 2^63 -> y <= 2^32 -> y <= p + 2
        high = y >> shift
        y &= p
        y += high
    # Final conditional subtract without a mask: when y < p, y - p wraps to a huge value and minimum keeps y.
    np.minimum(y, y - p, out=y)
    return y


def _numpy_signatures(hashes: np.ndarray, offsets: np.ndarray, num_perm: int, seed: int) -> np.ndarray:
    n_docs = len(offsets) - 1
    a, b = permutation_params(num_perm, seed)
    x = hashes % _U64(MERSENNE_31)
    signatures = np.full((n_docs, num_perm), EMPTY_SIGNATURE_VALUE, dtype=np.uint64)
    nonempty = np.flatnonzero(np.diff(offsets) > 0)
    starts = offsets[nonempty]
    block = max(1, _NUMPY_CHUNK_CELLS // num_perm)
    for lo in range(0, len(x), block):
        hi = min(lo + block, len(x))
        values = np.multiply.outer(x[lo:hi], a)  # < 2^31 * 2^31, no overflow
        values += b
        _mod_mersenne_31(values)
        # Documents overlapping shingle rows [lo, hi): the one containing lo, and every one starting before hi.
        first = np.searchsorted(starts, lo, side="right") - 1
        last = np.searchsorted(starts, hi, side="left")
        docs = nonempty[first:last]
        segment_starts = np.maximum(offsets[docs], lo) - lo
        block_min = np.minimum.reduceat(values, segment_starts, axis=0)
        signatures[docs] = np.minimum(signatures[docs], block_min)
    return signatures.astype(np.uint32)


def _rensa_signatures(hashes: np.ndarray, offsets: np.ndarray, num_perm: int, seed: int) -> np.ndarray:
    matrix = rensa.RMinHash.digest_matrix_from_flat_token_hashes(hashes, offsets.astype(np.uint64), num_perm, seed)
    return np.array(matrix.to_rows(), dtype=np.uint32).reshape(len(offsets) - 1, num_perm)


def signatures_and_counts(texts: list[str], cfg: MinHashConfig) -> tuple[np.ndarray, np.ndarray]:
    """(signatures [n, num_perm] uint32, shingle counts [n]); a count of 0 means the text has no words."""
    hashes, offsets = shingle_hashes(texts, cfg.ngram, cfg.seed)
    compute = _rensa_signatures if cfg.resolved_backend == "rensa" else _numpy_signatures
    return compute(hashes, offsets, cfg.num_perm, cfg.seed), np.diff(offsets)


def minhash_signatures(texts: list[str], cfg: MinHashConfig = MinHashConfig()) -> np.ndarray:
    """MinHash signatures [len(texts), num_perm] uint32 of word n-grams; a text without words gets all 0xFFFFFFFF."""
    return signatures_and_counts(texts, cfg)[0]


def estimated_jaccard(sig_a: np.ndarray, sig_b: np.ndarray) -> np.ndarray:
    """Fraction of equal signature slots, row by row: an unbiased estimate of the Jaccard similarity."""
    return (sig_a == sig_b).mean(axis=-1)


# ---------------------------------------------------------------------------------------------------------------
# LSH banding


def band_keys(signatures: np.ndarray, bands: int, rows: int) -> np.ndarray:
    """64-bit key per (document, band) [n, bands]; the band number is mixed in so bands never share keys."""
    n = len(signatures)
    values = signatures[:, : bands * rows].astype(np.uint64).reshape(n, bands, rows)
    keys = np.repeat(fmix64(np.arange(1, bands + 1, dtype=np.uint64))[None, :], n, axis=0)
    for r in range(rows):
        keys *= _U64(0x9E3779B97F4A7C15)
        keys += values[:, :, r]
        fmix64(keys)
    return keys


class BandIndex:
    """A multiset of (band key -> item number) kept as a few sorted runs, LSM-style.

    Adding a batch sorts it into a new run and merges runs of similar size, so inserts cost O(log n) amortized
    and memory is 16 bytes per (item, band) with no Python object per entry. Within a run, equal keys keep
    insertion order, so "the first k items with this key" are the earliest ones.
    """

    def __init__(self, max_candidates_per_key: int) -> None:
        self.max_candidates_per_key = max_candidates_per_key
        self._runs: list[tuple[np.ndarray, np.ndarray]] = []  # (sorted keys uint64, items int64), oldest first

    def __len__(self) -> int:
        return sum(len(keys) for keys, _ in self._runs)

    def lookup(self, keys: np.ndarray, order: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """(query position, stored item) for up to max_candidates_per_key stored items per key per run.

        `order` is an optional precomputed argsort of keys (callers that also add the keys sort once).
        """
        positions, items = [np.empty(0, np.int64)], [np.empty(0, np.int64)]
        # Sorted needles make searchsorted walk the run forward instead of jumping around in memory.
        order = np.argsort(keys, kind="stable") if order is None else order
        sorted_keys = keys[order]
        for run_keys, run_items in self._runs:
            lo = np.searchsorted(run_keys, sorted_keys, side="left")
            hit = np.flatnonzero(run_keys[np.minimum(lo, len(run_keys) - 1)] == sorted_keys)
            if len(hit) == 0:
                continue
            hi = np.searchsorted(run_keys, sorted_keys[hit], side="right")
            counts = np.minimum(hi - lo[hit], self.max_candidates_per_key)
            positions.append(np.repeat(order[hit], counts))
            items.append(run_items[ranges(lo[hit], counts)])
        return np.concatenate(positions), np.concatenate(items)

    def add(self, keys: np.ndarray, items: np.ndarray, order: np.ndarray | None = None) -> None:
        """Stores (key, item) pairs; `order`, if given, must be np.argsort(keys, kind="stable")."""
        if len(keys) == 0:
            return
        order = np.argsort(keys, kind="stable") if order is None else order
        self._runs.append((keys[order], items[order].astype(np.int64)))
        while len(self._runs) >= 2 and len(self._runs[-2][0]) <= 2 * len(self._runs[-1][0]):
            (old_keys, old_items), (new_keys, new_items) = self._runs[-2], self._runs[-1]
            merged_keys = np.concatenate((old_keys, new_keys))
            merged_items = np.concatenate((old_items, new_items))
            order = np.argsort(merged_keys, kind="stable")  # stable: older items stay first among equal keys
            self._runs[-2:] = [(merged_keys[order], merged_items[order])]


def pairs_within_batch(
    keys: np.ndarray, max_candidates_per_key: int, order: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """(later position, earlier position) pairs of equal keys inside one array, earliest partners first.

    `order`, if given, must be np.argsort(keys, kind="stable").
    """
    order = np.argsort(keys, kind="stable") if order is None else order
    sorted_keys = keys[order]
    index = np.arange(len(keys))
    group_start = np.zeros(len(keys), dtype=np.int64)
    if len(keys):
        is_start = np.concatenate(([True], sorted_keys[1:] != sorted_keys[:-1]))
        group_start = np.maximum.accumulate(np.where(is_start, index, 0))
    counts = np.minimum(index - group_start, max_candidates_per_key)
    later = np.repeat(order, counts)
    earlier = order[ranges(group_start, counts)]
    return later, earlier


# ---------------------------------------------------------------------------------------------------------------
# Storage and clustering


class RowStore:
    """A growable 2-D array (amortized doubling) for signatures: one contiguous block, no per-row objects."""

    def __init__(self, width: int, dtype: type) -> None:
        self._data = np.empty((1024, width), dtype=dtype)
        self._size = 0

    def __len__(self) -> int:
        return self._size

    def append(self, rows: np.ndarray) -> int:
        """Appends rows; returns the index of the first one."""
        first = self._size
        needed = first + len(rows)
        if needed > len(self._data):
            grown = np.empty((max(needed, 2 * len(self._data)), self._data.shape[1]), dtype=self._data.dtype)
            grown[:first] = self._data[:first]
            self._data = grown
        self._data[first:needed] = rows
        self._size = needed
        return first

    @property
    def rows(self) -> np.ndarray:
        return self._data[: self._size]


class UnionFind:
    """Disjoint sets over 0..n-1 whose root is always the smallest member (= the first-added document)."""

    def __init__(self) -> None:
        self._parent = np.empty(0, dtype=np.int64)

    def __len__(self) -> int:
        return len(self._parent)

    def grow(self, count: int) -> None:
        self._parent = np.concatenate((self._parent, np.arange(len(self._parent), len(self._parent) + count)))

    def find(self, item: int) -> int:
        parent = self._parent
        while parent[item] != item:
            parent[item] = parent[parent[item]]  # path halving keeps later finds short
            item = int(parent[item])
        return item

    def union(self, a: int, b: int) -> None:
        root_a, root_b = self.find(a), self.find(b)
        if root_a != root_b:
            self._parent[max(root_a, root_b)] = min(root_a, root_b)

    def roots(self, items: np.ndarray | None = None) -> np.ndarray:
        """Root of every item (default: all), by vectorized pointer jumping."""
        roots = self._parent.copy() if items is None else self._parent[items]
        while True:
            jumped = self._parent[roots]
            if np.array_equal(jumped, roots):
                return roots
            roots = jumped


class FuzzyDeduper:
    """Incremental near-duplicate clustering. Feed batches with add_batch; query clusters() at any time.

    add_batch returns a verdict per document: the id of its cluster's representative (the first-added
    document of the cluster) if it was verified similar to anything added before or earlier in the same batch,
    else None. That verdict is final for streaming use; clusters() can later merge clusters when a new document
    bridges two of them (transitivity), so cluster members need not all be pairwise >= threshold.
    Memory per document: num_perm*4 bytes of signature + bands*16 bytes of index + its id.
    """

    def __init__(self, cfg: MinHashConfig = MinHashConfig()) -> None:
        self.cfg = cfg
        self._ids: list[str] = []
        self._signatures = RowStore(cfg.num_perm, np.uint32)
        self._index = BandIndex(cfg.max_candidates_per_bucket)
        self._sets = UnionFind()
        self.num_candidate_pairs = 0
        self._verified: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []  # (later, earlier, est. Jaccard)

    def __len__(self) -> int:
        return len(self._ids)

    def add_batch(self, ids: list[str], texts: list[str]) -> list[str | None]:
        if len(ids) != len(texts):
            raise UserError(f"FuzzyDeduper.add_batch: {len(ids)} ids but {len(texts)} texts")
        cfg = self.cfg
        signatures, shingle_counts = signatures_and_counts(texts, cfg)
        first = self._signatures.append(signatures)
        self._ids.extend(ids)
        self._sets.grow(len(ids))
        items = np.arange(first, first + len(ids))

        # Documents without words have no meaningful signature; exact dedup is the place to catch those.
        has_shingles = shingle_counts > 0
        keys = band_keys(signatures[has_shingles], cfg.bands, cfg.rows).ravel()
        key_items = np.repeat(items[has_shingles], cfg.bands)
        order = np.argsort(keys, kind="stable")
        positions, earlier_items = self._index.lookup(keys, order)
        later_in_batch, earlier_in_batch = pairs_within_batch(keys, cfg.max_candidates_per_bucket, order)
        self._index.add(keys, key_items, order)
        new = np.concatenate((key_items[positions], key_items[later_in_batch]))
        old = np.concatenate((earlier_items, key_items[earlier_in_batch]))
        self._union_verified(new, old)

        roots = self._sets.roots(items)
        return [self._ids[root] if root != item else None for item, root in zip(items.tolist(), roots.tolist())]

    def _union_verified(self, new: np.ndarray, old: np.ndarray) -> None:
        pair_codes = np.unique(new * len(self._ids) + old)  # the same pair often collides in several bands
        new, old = pair_codes // len(self._ids), pair_codes % len(self._ids)
        self.num_candidate_pairs += len(new)
        signatures = self._signatures.rows
        for lo in range(0, len(new), 1 << 16):
            batch_new, batch_old = new[lo : lo + (1 << 16)], old[lo : lo + (1 << 16)]
            jaccard = estimated_jaccard(signatures[batch_new], signatures[batch_old])
            similar = jaccard >= self.cfg.threshold
            self._verified.append((batch_new[similar], batch_old[similar], jaccard[similar].astype(np.float32)))
            for a, b in zip(batch_new[similar].tolist(), batch_old[similar].tolist()):
                self._sets.union(a, b)

    @property
    def num_verified_pairs(self) -> int:
        return sum(len(later) for later, _, _ in self._verified)

    def similar_pairs(self) -> list[tuple[str, str, float]]:
        """Every verified pair (later id, earlier id, estimated Jaccard): the edges the clusters are built from.

        Bucket candidates are capped (max_candidates_per_bucket), so in a large family of near-duplicates not
        every similar pair is an edge; clusters() still joins them through the edges that exist.
        """
        return [
            (self._ids[a], self._ids[b], float(j))
            for later, earlier, jaccard in self._verified
            for a, b, j in zip(later.tolist(), earlier.tolist(), jaccard.tolist())
        ]

    def _cluster_members(self) -> list[np.ndarray]:
        """Item numbers of each cluster with >= 2 members, ascending, clusters ordered by representative."""
        roots = self._sets.roots()
        in_cluster = np.flatnonzero(roots != np.arange(len(roots)))
        members = np.union1d(in_cluster, roots[in_cluster])  # sorted: add order
        order = members[np.argsort(roots[members], kind="stable")]  # stable: the root stays first
        boundaries = np.flatnonzero(np.diff(roots[order])) + 1
        return np.split(order, boundaries) if len(order) else []

    def clusters(self) -> list[list[str]]:
        """Clusters of >= 2 near-duplicates as id lists; the first id of each is the representative to keep."""
        return [[self._ids[i] for i in group.tolist()] for group in self._cluster_members()]

    def duplicates(self) -> dict[str, tuple[str, float]]:
        """{duplicate id: (kept representative id, estimated Jaccard between the two)} for every non-kept doc."""
        signatures = self._signatures.rows
        result: dict[str, tuple[str, float]] = {}
        for group in self._cluster_members():
            kept, dups = group[0], group[1:]
            similarity = estimated_jaccard(signatures[dups], signatures[kept][None, :])
            for dup, sim in zip(dups.tolist(), similarity.tolist()):
                result[self._ids[dup]] = (self._ids[kept], sim)
        return result
