"""The index of eval-item fingerprints the scanner looks training windows up in.

Items shorter than n words (but at least min_words) are fingerprinted whole, as one window of their own length;
the scanner hashes every training window of each such length. Items under min_words are too generic to check
("the answer is 4") and are counted in the report as too short.
"""
from __future__ import annotations

import functools
import json
import os
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Iterable

import numpy as np
import xxhash

from ...errors import UserError
from .fingerprint import HASH_SCHEME, text_words, window_fingerprints, word_prefix_sums

if TYPE_CHECKING:
    from .ngram_scan import Match

INDEX_FORMAT = "scratchlm-contamination-index/1"
DEFAULT_NGRAM = 13  # as in GPT-3
DEFAULT_MIN_WORDS = 8


@dataclass
class ContaminationIndex:
    """Fingerprints of eval items. Per window length L: sorted fingerprints and, in parallel, the item each
    belongs to (a fingerprint shared by several items appears once per item)."""

    n: int
    min_words: int
    set_names: list[str]
    item_ids: list[str]
    item_sets: np.ndarray  # int32, index into set_names, per item
    item_checked: np.ndarray  # bool, per item: False = too short to check
    fingerprints: dict[int, np.ndarray]  # length -> sorted uint64
    fingerprint_items: dict[int, np.ndarray]  # length -> int32 item index, parallel to fingerprints[length]
    _prefilters: dict[int, tuple[np.ndarray, np.uint64]] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def build(
        cls, items: Iterable[tuple[str, str, str]], n: int = DEFAULT_NGRAM, min_words: int = DEFAULT_MIN_WORDS
    ) -> "ContaminationIndex":
        """Index (eval_set_name, item_id, text) items. Items of >= n words give their n-grams; items of
        min(min_words, n)..n-1 words give one whole-item fingerprint; shorter ones are only counted."""
        if n < 1:
            raise UserError(f"decontamination n-gram size must be at least 1, got {n}")
        threshold = min(min_words, n)
        set_names: list[str] = []
        set_index: dict[str, int] = {}
        item_ids: list[str] = []
        item_sets: list[int] = []
        checked: list[bool] = []
        by_length: dict[int, tuple[list[np.ndarray], list[np.ndarray]]] = {}
        for set_name, item_id, text in items:
            if set_name not in set_index:
                set_index[set_name] = len(set_names)
                set_names.append(set_name)
            item = len(item_ids)
            item_ids.append(str(item_id))
            item_sets.append(set_index[set_name])
            words = text_words(text)
            checked.append(len(words) >= threshold)
            if not checked[-1]:
                continue
            length = min(n, len(words))
            fps = np.unique(window_fingerprints(word_prefix_sums(words), length))
            fp_lists, item_lists = by_length.setdefault(length, ([], []))
            fp_lists.append(fps)
            item_lists.append(np.full(len(fps), item, dtype=np.int32))
        fingerprints: dict[int, np.ndarray] = {}
        fingerprint_items: dict[int, np.ndarray] = {}
        for length, (fp_lists, item_lists) in sorted(by_length.items()):
            fps, owners = np.concatenate(fp_lists), np.concatenate(item_lists)
            order = np.lexsort((owners, fps))
            fingerprints[length], fingerprint_items[length] = fps[order], owners[order]
        return cls(
            n=n,
            min_words=min_words,
            set_names=set_names,
            item_ids=item_ids,
            item_sets=np.asarray(item_sets, dtype=np.int32),
            item_checked=np.asarray(checked, dtype=bool),
            fingerprints=fingerprints,
            fingerprint_items=fingerprint_items,
        )

    def prefilter(self, length: int) -> tuple[np.ndarray, np.uint64]:
        """A bitmap over the top bits of the fingerprints of one window length (about 16 slots per fingerprint).
        One gather rules out nearly every training window, so the binary search only sees the few left: 10x
        faster than searchsorted over all windows."""
        if length not in self._prefilters:
            fps = self.fingerprints[length]
            bits = min(26, max(16, int(len(fps) * 16).bit_length()))
            table = np.zeros(1 << bits, dtype=bool)
            shift = np.uint64(64 - bits)
            table[fps >> shift] = True
            self._prefilters[length] = (table, shift)
        return self._prefilters[length]

    @functools.cached_property
    def item_windows(self) -> tuple[np.ndarray, np.ndarray]:
        """Per item: its number of distinct fingerprints and their window length (0, 0 when too short)."""
        counts = np.zeros(len(self.item_ids), dtype=np.int64)
        lengths = np.zeros(len(self.item_ids), dtype=np.int64)
        for length, owners in self.fingerprint_items.items():
            here = np.bincount(owners, minlength=len(self.item_ids))
            counts += here
            lengths[here > 0] = length
        return counts, lengths

    def coverage(self, match: Match) -> float:
        """Share of the item's fingerprints a match holds: the windows of its span over the item's distinct
        windows (capped at 1, as an item that repeats itself has fewer distinct windows than words)."""
        item = self._item_number[match.item_id, match.eval_set]
        counts, lengths = self.item_windows
        windows = match.word_end - match.word_start - int(lengths[item]) + 1
        return min(1.0, windows / max(int(counts[item]), 1))

    @functools.cached_property
    def _item_number(self) -> dict[tuple[str, str], int]:
        return {(item_id, self.set_names[s]): k for k, (item_id, s) in enumerate(zip(self.item_ids,
                                                                                    self.item_sets.tolist()))}

    @property
    def num_fingerprints(self) -> int:
        return sum(len(f) for f in self.fingerprints.values())

    @property
    def content_id(self) -> str:
        """Identifies what the index matches: xxh3 of all fingerprints, sorted (lengths are folded into them)."""
        flat = [f for _, f in sorted(self.fingerprints.items())]
        every = np.sort(np.concatenate(flat)) if flat else np.empty(0, dtype=np.uint64)
        return xxhash.xxh3_64_hexdigest(every.astype("<u8").tobytes())

    def save(self, path: str | os.PathLike[str]) -> None:
        """The index as one .npz, its metadata (hash scheme included) as JSON bytes in the `meta` array."""
        lengths = sorted(self.fingerprints)
        meta = {
            "format": INDEX_FORMAT,
            "hash_scheme": HASH_SCHEME,
            "n": self.n,
            "min_words": self.min_words,
            "set_names": self.set_names,
            "item_ids": self.item_ids,
            "content_id": self.content_id,
        }
        arrays = {
            "meta": np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8),
            "item_sets": self.item_sets,
            "item_checked": self.item_checked,
            "lengths": np.asarray([len(self.fingerprints[k]) for k in lengths], dtype=np.int64),
            "window_lengths": np.asarray(lengths, dtype=np.int64),
            "fingerprints": _concat([self.fingerprints[k] for k in lengths], np.uint64),
            "fingerprint_items": _concat([self.fingerprint_items[k] for k in lengths], np.int32),
        }
        with open(path, "wb") as f:  # a file object, so numpy does not append ".npz" to the name
            np.savez_compressed(f, **arrays)


def _concat(parts: list[np.ndarray], dtype: type) -> np.ndarray:
    return np.concatenate(parts).astype(dtype) if parts else np.empty(0, dtype=dtype)
