"""The fingerprints of word n-grams that the index and the scanner share.

  words             normalize_words(text, keep_offsets=True) (data/dedup/words.py): each word is a stretch of
                    the original text, so that a match can be cut out of it
  word hash   w_j   = xxh3_64(utf-8 bytes of the normalized word)
  window hash h     = sum_{j<L} w_{i+j} * C^j  (mod 2^64)  — computed for all windows at once from prefix sums
                                                 (words.NgramPolynomial, the polynomial of dedup's shingles too)
  fingerprint f     = splitmix64(h ^ salt(L))  — the window length is folded in, so a short item's 9-word
                                                 fingerprint can never equal a 13-gram of another item.

The scheme is recorded in every saved index (HASH_SCHEME): changing any part of it changes every fingerprint.
"""
from __future__ import annotations

import numpy as np
import xxhash

from .words import ngram_polynomial, normalize_words

HASH_SCHEME = "xxh3_64-words/poly-prefix-C=0x9E3779B97F4A7C15/splitmix64-length-salted/v1"
_BASE = 0x9E3779B97F4A7C15  # C above
_MASK64 = (1 << 64) - 1


def text_words(text: str) -> list[str]:
    """The words of a text as decontamination compares them: lowercase, punctuation and symbols dropped."""
    return normalize_words(text, keep_offsets=True)


def word_prefix_sums(words: list[str]) -> np.ndarray:
    """Prefix sums of the words' hashes, from which window_fingerprints reads windows of any length."""
    hashes = np.fromiter(map(xxhash.xxh3_64_intdigest, map(str.encode, words)), dtype=np.uint64, count=len(words))
    return ngram_polynomial(_BASE).prefix_sums(hashes)


def window_fingerprints(prefix: np.ndarray, length: int) -> np.ndarray:
    """Fingerprints of all windows of `length` words; entry i is the window starting at word i."""
    return _mix(ngram_polynomial(_BASE).window_hashes(prefix, length), length)


def _mix(x: np.ndarray, length: int) -> np.ndarray:
    """splitmix64 finalizer over the window hash with its length folded in."""
    x = x ^ np.uint64((length * 0xD6E8FEB86659FD93) & _MASK64)
    x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return x ^ (x >> np.uint64(31))
