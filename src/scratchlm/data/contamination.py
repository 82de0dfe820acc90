"""N-gram contamination guard: find eval-set text inside training data, and cut it out.

The classic mistake this catches is training on (a copy of) the benchmark you later report. Every eval item is
normalized (lowercase, punctuation stripped, whitespace collapsed) and fingerprinted as hashed word n-grams
(n=13 by default, as in GPT-3). A training document is normalized the same way, every window of its words is
hashed with numpy, and windows that hit an eval fingerprint are reported and removed.

Hashing scheme (shared by the index and the scanner, recorded in the index metadata):
  word hash   w_j   = xxh3_64(utf-8 bytes of the normalized word)
  window hash h     = sum_{j<L} w_{i+j} * C^j  (mod 2^64)  — computed for all windows at once from prefix sums
  fingerprint f     = splitmix64(h ^ salt(L))  — the window length is folded in, so a short item's 9-word
                                                 fingerprint can never equal a 13-gram of another item.

Items shorter than n words (but at least min_words) are fingerprinted whole, as one window of their own length;
the scanner hashes every training window of each such length. Items under min_words are too generic to check
("the answer is 4") and are counted in the report as too short.
"""

from __future__ import annotations

import functools
import gzip
import io
import json
import os
import re
import sys
import unicodedata
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Mapping, NamedTuple

import numpy as np
import xxhash
import zstandard

from scratchlm.errors import UserError
from scratchlm.pool import exit_with_parent

HASH_SCHEME = "xxh3_64-words/poly-prefix-C=0x9E3779B97F4A7C15/splitmix64-length-salted/v1"
INDEX_FORMAT = "scratchlm-contamination-index/1"
DEFAULT_NGRAM = 13
DEFAULT_MIN_WORDS = 8
MODES = ("document", "span")

# ---------------------------------------------------------------------------------------------------------------
# Normalization


def _class_ranges(codepoints: list[int]) -> str:
    parts: list[str] = []
    start = prev = codepoints[0]
    for c in codepoints[1:] + [-1]:
        if c != prev + 1:
            parts.append(f"{re.escape(chr(start))}-{re.escape(chr(prev))}" if prev > start else re.escape(chr(start)))
            start = c
        prev = c
    return "".join(parts)


@functools.cache
def _word_patterns() -> tuple[re.Pattern[str], re.Pattern[str]]:
    r"""(pattern for text without astral characters, pattern for any text).

    A word is a run of letters, digits and combining marks. Python's \w covers letters, digits and "_", but not
    combining marks, so Devanagari or decomposed accents ("e" + U+0301) would otherwise split mid-word. "_" is
    punctuation (Pc) and is turned into a space before matching. The marks above U+FFFF (rare scripts) are kept
    in a second pattern: with them the character class can no longer be compiled to a bitmap and is 4x slower."""
    marks = [c for c in range(sys.maxunicode + 1) if unicodedata.category(chr(c))[0] == "M"]
    bmp = [c for c in marks if c <= 0xFFFF]
    return re.compile(r"[\w" + _class_ranges(bmp) + r"]+"), re.compile(r"[\w" + _class_ranges(marks) + r"]+")


_ASTRAL = re.compile("[\U00010000-\U0010FFFF]")


def _word_pattern(prepared: str) -> re.Pattern[str]:
    fast, full = _word_patterns()
    return fast if prepared.isascii() or not _ASTRAL.search(prepared) else full


def _prepare(text: str) -> str:
    return text.lower().replace("_", " ")


def normalize_words(text: str) -> list[str]:
    """Lowercase, strip punctuation and symbols (Unicode-aware), split on whitespace: the words n-grams are made of."""
    prepared = _prepare(text)
    return _word_pattern(prepared).findall(prepared)


def _word_char_spans(text: str) -> list[tuple[int, int]]:
    """(start, end) character offsets in `text` of each word normalize_words(text) returns, in the same order."""
    prepared = _prepare(text)
    spans = [m.span() for m in _word_pattern(prepared).finditer(prepared)]
    if len(prepared) == len(text):
        return spans
    # A few characters lowercase to two ("İ" -> "i̇"), which shifts offsets: map prepared offsets back to text.
    origin: list[int] = []
    for i, ch in enumerate(text):
        origin.extend([i] * len(ch.lower()))
    origin.append(len(text))
    return [(origin[s], origin[e - 1] + 1) for s, e in spans]


# ---------------------------------------------------------------------------------------------------------------
# Hashing

_MASK64 = (1 << 64) - 1
_BASE = 0x9E3779B97F4A7C15  # odd, so it is invertible mod 2^64
_BASE_INV = pow(_BASE, -1, 1 << 64)
_powers_cache: dict[str, np.ndarray] = {}


def _powers(length: int) -> tuple[np.ndarray, np.ndarray]:
    """C^j and C^-j for j < length (mod 2^64), cached and grown by doubling."""
    have = _powers_cache.get("pos")
    if have is None or len(have) < length:
        size = max(1024, 1 << (length - 1).bit_length())
        pos = np.full(size, _BASE, dtype=np.uint64)
        neg = np.full(size, _BASE_INV, dtype=np.uint64)
        pos[0] = neg[0] = 1
        _powers_cache["pos"] = np.cumprod(pos, dtype=np.uint64)  # uint64 products wrap mod 2^64, as wanted
        _powers_cache["neg"] = np.cumprod(neg, dtype=np.uint64)
    return _powers_cache["pos"][:length], _powers_cache["neg"][:length]


def _word_hashes(words: list[str]) -> np.ndarray:
    return np.fromiter(map(xxhash.xxh3_64_intdigest, map(str.encode, words)), dtype=np.uint64, count=len(words))


def _prefix_sums(word_hashes: np.ndarray) -> np.ndarray:
    """S[k] = sum_{j<k} w_j C^j, so a window's hash is (S[i+L] - S[i]) * C^-i: O(words) for any window length."""
    pos, _ = _powers(len(word_hashes))
    prefix = np.zeros(len(word_hashes) + 1, dtype=np.uint64)
    np.cumsum(word_hashes * pos, dtype=np.uint64, out=prefix[1:])
    return prefix


def _mix(x: np.ndarray, length: int) -> np.ndarray:
    """splitmix64 finalizer over the window hash with its length folded in."""
    x = x ^ np.uint64((length * 0xD6E8FEB86659FD93) & _MASK64)
    x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return x ^ (x >> np.uint64(31))


def _window_fingerprints(prefix: np.ndarray, length: int) -> np.ndarray:
    """Fingerprints of all windows of `length` words; entry i is the window starting at word i."""
    count = len(prefix) - length
    if count <= 0:
        return np.empty(0, dtype=np.uint64)
    _, neg = _powers(count)
    return _mix((prefix[length:] - prefix[:count]) * neg, length)


# ---------------------------------------------------------------------------------------------------------------
# Index


class Match(NamedTuple):
    """One eval item found in a training document: words [word_start, word_end) of the normalized document,
    which are characters [char_start, char_end) of its original text."""

    eval_set: str
    item_id: str
    word_start: int
    word_end: int
    char_start: int
    char_end: int


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
            raise UserError(f"contamination n-gram size must be at least 1, got {n}")
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
            words = normalize_words(text)
            checked.append(len(words) >= threshold)
            if not checked[-1]:
                continue
            length = min(n, len(words))
            fps = np.unique(_window_fingerprints(_prefix_sums(_word_hashes(words)), length))
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

    def coverage(self, match: "Match") -> float:
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

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> "ContaminationIndex":
        try:
            with np.load(path, allow_pickle=False) as data:
                meta = json.loads(data["meta"].tobytes().decode())
                arrays = {k: data[k] for k in data.files if k != "meta"}
        except FileNotFoundError:
            raise UserError(f"{path}: contamination index not found") from None
        except (OSError, ValueError, KeyError) as err:
            raise UserError(f"{path}: not a contamination index ({err})") from None
        if meta.get("format") != INDEX_FORMAT or meta.get("hash_scheme") != HASH_SCHEME:
            raise UserError(f"{path}: contamination index has format {meta.get('format')!r}, "
                            f"hash scheme {meta.get('hash_scheme')!r}; rebuild it with this version")
        bounds = np.concatenate([[0], np.cumsum(arrays["lengths"])])
        fingerprints, fingerprint_items = {}, {}
        for k, length in enumerate(arrays["window_lengths"].tolist()):
            fingerprints[length] = arrays["fingerprints"][bounds[k]:bounds[k + 1]]
            fingerprint_items[length] = arrays["fingerprint_items"][bounds[k]:bounds[k + 1]]
        index = cls(
            n=meta["n"],
            min_words=meta["min_words"],
            set_names=meta["set_names"],
            item_ids=meta["item_ids"],
            item_sets=arrays["item_sets"],
            item_checked=arrays["item_checked"],
            fingerprints=fingerprints,
            fingerprint_items=fingerprint_items,
        )
        if index.content_id != meta["content_id"]:
            raise UserError(f"{path}: contamination index is corrupt (content id does not match its fingerprints)")
        return index


def _concat(parts: list[np.ndarray], dtype: type) -> np.ndarray:
    return np.concatenate(parts).astype(dtype) if parts else np.empty(0, dtype=dtype)


# ---------------------------------------------------------------------------------------------------------------
# Scanning


def scan_document(index: ContaminationIndex, text: str) -> list[Match]:
    """All eval items found in one training document (overlapping hits of one item merged into one span)."""
    return scan_texts(index, [text])[0]


def scan_texts(index: ContaminationIndex, texts: list[str]) -> list[list[Match]]:
    """scan_document over a batch: the words of all texts are hashed as one array, so small documents do not
    each pay numpy's per-call overhead; windows that straddle two documents are discarded."""
    words: list[str] = []
    starts = np.zeros(len(texts) + 1, dtype=np.int64)
    for k, text in enumerate(texts):
        words.extend(normalize_words(text))
        starts[k + 1] = len(words)
    prefix = _prefix_sums(_word_hashes(words))

    hits: dict[int, list[tuple[int, int, int]]] = {}  # doc -> (item, word_start, word_end)
    for length, fps in index.fingerprints.items():
        windows = _window_fingerprints(prefix, length)
        if len(windows) == 0 or len(fps) == 0:
            continue
        table, shift = index.prefilter(length)
        found = np.flatnonzero(table[windows >> shift])
        where = np.searchsorted(fps, windows[found])
        exact = fps[np.minimum(where, len(fps) - 1)] == windows[found]
        found, where = found[exact], where[exact]
        if len(found) == 0:
            continue
        doc = np.searchsorted(starts, found, side="right") - 1
        inside = found + length <= starts[doc + 1]
        found, doc = found[inside], doc[inside]
        # A fingerprint shared by several items sits in several consecutive slots: expand to all of them.
        first = where[inside]
        last = np.searchsorted(fps, windows[found], side="right")
        counts = last - first
        slots = np.repeat(first - np.cumsum(counts) + counts, counts) + np.arange(counts.sum())
        owners = index.fingerprint_items[length][slots]
        for d, item, start in zip(np.repeat(doc, counts).tolist(), owners.tolist(), np.repeat(found, counts).tolist()):
            local = start - int(starts[d])
            hits.setdefault(d, []).append((item, local, local + length))

    results: list[list[Match]] = [[] for _ in texts]
    for d, doc_hits in hits.items():
        spans = _word_char_spans(texts[d])
        for item, word_start, word_end in _merge_hits(doc_hits):
            results[d].append(Match(
                eval_set=index.set_names[index.item_sets[item]],
                item_id=index.item_ids[item],
                word_start=word_start,
                word_end=word_end,
                char_start=spans[word_start][0],
                char_end=spans[word_end - 1][1],
            ))
    return results


def _merge_hits(hits: list[tuple[int, int, int]]) -> list[tuple[int, int, int]]:
    """Overlapping or touching windows of the same item become one span."""
    merged: list[tuple[int, int, int]] = []
    for item, start, end in sorted(hits):
        if merged and merged[-1][0] == item and start <= merged[-1][2]:
            merged[-1] = (item, merged[-1][1], max(end, merged[-1][2]))
        else:
            merged.append((item, start, end))
    return merged


# ---------------------------------------------------------------------------------------------------------------
# Removal


class Decontaminated(NamedTuple):
    kept: list[str]  # the pieces of the document to keep ([] when it is dropped)
    removed_spans: list[tuple[int, int]]  # character ranges of the original text that were removed
    removed_chars: int


def decontaminate(
    doc_text: str,
    matches: list[Match],
    mode: str = "document",
    span_window: int = 200,
    min_piece_chars: int = 200,
    max_pieces: int = 10,
) -> Decontaminated:
    """Remove contaminated text. "document" drops the whole document. "span" (GPT-3 style) cuts every matched
    span plus span_window characters on each side, and keeps the remaining pieces of at least min_piece_chars;
    a document cut into more than max_pieces pieces is dropped whole, as it is mostly eval text."""
    _check_mode(mode)
    if not matches:
        return Decontaminated([doc_text], [], 0)
    if mode == "document":
        return Decontaminated([], [(0, len(doc_text))], len(doc_text))

    cuts = _merge_ranges([(max(0, m.char_start - span_window), min(len(doc_text), m.char_end + span_window))
                          for m in matches])
    pieces, begin = [], 0
    for start, end in cuts + [(len(doc_text), len(doc_text))]:
        if start > begin:
            pieces.append((begin, start))
        begin = max(begin, end)
    kept = [(s, e) for s, e in pieces if len(doc_text[s:e].strip()) >= min_piece_chars]
    if len(kept) > max_pieces:
        kept = []
    removed, begin = [], 0
    for s, e in kept + [(len(doc_text), len(doc_text))]:
        if s > begin:
            removed.append((begin, s))
        begin = e
    return Decontaminated([doc_text[s:e] for s, e in kept], removed, sum(e - s for s, e in removed))


def _merge_ranges(ranges: list[tuple[int, int]]) -> list[tuple[int, int]]:
    merged: list[tuple[int, int]] = []
    for start, end in sorted(ranges):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(end, merged[-1][1]))
        else:
            merged.append((start, end))
    return merged


def _check_mode(mode: str) -> None:
    if mode not in MODES:
        raise UserError(f"contamination mode must be one of {', '.join(MODES)}; got {mode!r}")


# ---------------------------------------------------------------------------------------------------------------
# Report


@dataclass
class EvalSetReport:
    name: str
    items: int
    too_short: int
    contaminated_items: set[str] = field(default_factory=set)
    docs_touched: set[str] = field(default_factory=set)
    removed_chars: int = 0
    examples: list[dict[str, str]] = field(default_factory=list)
    error_fraction: float = 0.5
    min_coverage: float = 0.0  # share of an item's n-grams a training document must hold to count as a hit
    partial_overlaps: int = 0  # (document, item) overlaps below min_coverage: reported, not removed
    error_train_share: float = 0.2  # removing more than this share of the training text is an error
    train_chars: int = 0  # characters of training text scanned, set when the scan completes

    @property
    def train_share(self) -> float:
        """Share of the training text removed because of this set: large means it is training data, not held out."""
        return self.removed_chars / self.train_chars if self.train_chars else 0.0

    @property
    def checked(self) -> int:
        return self.items - self.too_short

    @property
    def contaminated_fraction(self) -> float:
        return len(self.contaminated_items) / self.checked if self.checked else 0.0

    @property
    def verdict(self) -> str:
        if self.contaminated_fraction > self.error_fraction or self.train_share > self.error_train_share:
            return "error"
        return "warning" if self.contaminated_items else "ok"

    @property
    def message(self) -> str:
        share = f"{len(self.contaminated_items)}/{self.checked} checked items ({self.contaminated_fraction:.0%})"
        if self.verdict == "error" and self.train_share > self.error_train_share:
            return (f"ERROR: eval set '{self.name}' overlaps a large part of the training data: {share} appear in "
                    f"{len(self.docs_touched)} training documents, {self.train_share:.0%} of the training text. "
                    f"It is not held-out data; point the eval set at data kept out of the training sources.")
        if self.verdict == "error":
            return (f"ERROR: eval set '{self.name}' is largely a copy of the training data: {share} appear in "
                    f"{len(self.docs_touched)} training documents. Scores on it would measure memorization; "
                    f"decontaminate the training data or pick another eval set.")
        if self.verdict == "warning":
            return (f"warning: {share} of eval set '{self.name}' appear in {len(self.docs_touched)} training "
                    f"documents.")
        return f"ok: no item of eval set '{self.name}' was found in the training data."

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "items": self.items,
            "too_short_to_check": self.too_short,
            "checked": self.checked,
            "contaminated_items": sorted(self.contaminated_items),
            "contaminated_fraction": self.contaminated_fraction,
            "docs_touched": sorted(self.docs_touched),
            "removed_chars": self.removed_chars,
            "examples": list(self.examples),
            "min_coverage": self.min_coverage,
            "partial_overlaps_kept": self.partial_overlaps,
            "train_share_removed": self.train_share,
            "verdict": self.verdict,
            "message": self.message,
        }


_VERDICT_RANK = {"ok": 0, "warning": 1, "error": 2}


@dataclass
class ContaminationReport:
    """What the guard found. Filled in while scan_corpus's document iterator is consumed; `complete` turns True
    once it is exhausted (to_dict/to_markdown refuse a partial report, so a half-read scan is never shown as ok).
    removed_chars per eval set counts the characters removed because of that set, so a document hit by two sets
    counts in both; chars_removed is the total actually removed."""

    n: int
    mode: str
    index_content_id: str
    sets: dict[str, EvalSetReport]
    docs_scanned: int = 0
    chars_scanned: int = 0
    docs_touched: int = 0
    docs_dropped: int = 0
    chars_removed: int = 0
    complete: bool = False

    @classmethod
    def for_index(cls, index: ContaminationIndex, mode: str, error_fraction: float = 0.5,
                  min_coverage: Mapping[str, float] | None = None,
                  error_train_share: float = 0.2) -> "ContaminationReport":
        sets = {}
        for k, name in enumerate(index.set_names):
            mine = index.item_sets == k
            sets[name] = EvalSetReport(name=name, items=int(mine.sum()),
                                       too_short=int((mine & ~index.item_checked).sum()),
                                       error_fraction=error_fraction,
                                       min_coverage=(min_coverage or {}).get(name, 0.0),
                                       error_train_share=error_train_share)
        return cls(n=index.n, mode=mode, index_content_id=index.content_id, sets=sets)

    @property
    def verdict(self) -> str:
        return max((s.verdict for s in self.sets.values()), key=_VERDICT_RANK.__getitem__, default="ok")

    def record(self, doc_id: str, text: str, matches: list[Match], result: Decontaminated, span_window: int) -> None:
        self.docs_scanned += 1
        self.chars_scanned += len(text)
        if not matches:
            return
        self.docs_touched += 1
        self.docs_dropped += not result.kept
        self.chars_removed += result.removed_chars
        by_set: dict[str, list[Match]] = {}
        for m in matches:
            by_set.setdefault(m.eval_set, []).append(m)
        for name, set_matches in by_set.items():
            report = self.sets[name]
            report.docs_touched.add(doc_id)
            if self.mode == "document":
                report.removed_chars += len(text)
            else:
                cut = _merge_ranges([(max(0, m.char_start - span_window), min(len(text), m.char_end + span_window))
                                     for m in set_matches])
                report.removed_chars += sum(e - s for s, e in cut)
            for m in set_matches:
                report.contaminated_items.add(m.item_id)
                if len(report.examples) < 3:
                    excerpt = " ".join(text[m.char_start:m.char_end].split())
                    report.examples.append({
                        "item_id": m.item_id,
                        "doc_id": doc_id,
                        "excerpt": excerpt if len(excerpt) <= 300 else excerpt[:297] + "...",
                    })

    def _require_complete(self) -> None:
        if not self.complete:
            raise RuntimeError("contamination report is incomplete: consume scan_corpus's documents first")

    def to_dict(self) -> dict[str, Any]:
        self._require_complete()
        return {
            "n": self.n,
            "mode": self.mode,
            "index_content_id": self.index_content_id,
            "docs_scanned": self.docs_scanned,
            "chars_scanned": self.chars_scanned,
            "docs_touched": self.docs_touched,
            "docs_dropped": self.docs_dropped,
            "chars_removed": self.chars_removed,
            "verdict": self.verdict,
            "eval_sets": {name: s.to_dict() for name, s in self.sets.items()},
        }

    def to_markdown(self) -> str:
        self._require_complete()
        lines = [
            "## Contamination report",
            "",
            f"- verdict: **{self.verdict.upper()}**",
            f"- {self.n}-gram overlap, mode `{self.mode}`, index `{self.index_content_id}`",
            f"- training documents scanned: {self.docs_scanned:,} ({self.chars_scanned:,} characters)",
            f"- training documents touched: {self.docs_touched:,} (dropped whole: {self.docs_dropped:,}); "
            f"characters removed: {self.chars_removed:,}",
            "",
            "| eval set | items | too short to check | contaminated items | training docs touched "
            "| removed chars | verdict |",
            "|---|---:|---:|---:|---:|---:|---|",
        ]
        for s in self.sets.values():
            lines.append(f"| {s.name} | {s.items} | {s.too_short} | {len(s.contaminated_items)} "
                         f"({s.contaminated_fraction:.1%}) | {len(s.docs_touched)} | {s.removed_chars:,} "
                         f"| {s.verdict} |")
        for s in self.sets.values():
            lines += ["", f"### {s.name}", "", s.message]
            if s.min_coverage > 0:
                lines.append(f"- a training document counts as a copy when it holds at least {s.min_coverage:.0%} "
                             f"of an item's {self.n}-grams; {s.partial_overlaps} smaller overlaps were kept")
            if s.contaminated_items:
                ids = sorted(s.contaminated_items)
                more = f" … and {len(ids) - 20} more" if len(ids) > 20 else ""
                lines.append(f"- contaminated items: {', '.join(ids[:20])}{more}")
                docs = sorted(s.docs_touched)
                more = f" … and {len(docs) - 20} more" if len(docs) > 20 else ""
                lines.append(f"- training documents: {', '.join(docs[:20])}{more}")
            for ex in s.examples:
                lines.append(f"- item `{ex['item_id']}` in training doc `{ex['doc_id']}`: \"{ex['excerpt']}\"")
        return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------------------------------------------------
# Corpus scan (parallel)

_worker_index: ContaminationIndex | None = None


def _init_worker(parent_pid: int, index: ContaminationIndex) -> None:
    exit_with_parent(parent_pid)  # a parent killed with SIGKILL must not leave the pool waiting forever
    # Under fork the index arrives by copy-on-write memory, not pickling; under spawn it is pickled once per worker.
    global _worker_index
    _worker_index = index


def _scan_chunk(texts: list[str]) -> list[list[Match]]:
    assert _worker_index is not None
    return scan_texts(_worker_index, texts)


def _chunks(docs: Iterable[dict], max_docs: int, max_chars: int) -> Iterator[list[dict]]:
    chunk: list[dict] = []
    chars = 0
    for doc in docs:
        chunk.append(doc)
        chars += len(doc["text"])
        if len(chunk) >= max_docs or chars >= max_chars:
            yield chunk
            chunk, chars = [], 0
    if chunk:
        yield chunk


def scan_corpus(
    index: ContaminationIndex,
    docs: Iterable[dict],
    mode: str = "document",
    workers: int = 1,
    *,
    span_window: int = 200,
    min_piece_chars: int = 200,
    error_fraction: float = 0.5,
    error_train_share: float = 0.2,
    chunk_docs: int = 256,
    chunk_chars: int = 2_000_000,
    min_coverage: Mapping[str, float] | None = None,
    on_removal: Callable[[dict, list[Match], Decontaminated], None] | None = None,
    exempt: Callable[[dict, Match], bool] | None = None,
) -> tuple[Iterator[dict], ContaminationReport]:
    """Scan training documents ({"id", "source", "domain", "text", ...}) against the index, in order, over a
    process pool of `workers`. Returns the clean documents as a lazy iterator and the report it fills in.

    Untouched documents pass through as they are. In document mode a touched document is dropped; in span mode
    each kept piece becomes a document with id "<id>#<k>" and the other keys copied. At most 2*workers chunks
    are in flight, so the corpus is streamed, never held in memory.

    min_coverage (per eval set name, default 0: any shared n-gram) is the share of an item's n-grams a document
    must hold to count as contaminated; smaller overlaps are counted in the report and left in. on_removal is
    called with (document, its matches, what was removed) for every document that loses text. A match for
    which exempt(document, match) is true is no copy (a held-out piece found in the rest of its own document).
    Verdict error per eval set: more than error_fraction of its items found, or more than error_train_share of
    the training text removed because of it (the set is then training data, not held-out data)."""
    _check_mode(mode)
    report = ContaminationReport.for_index(index, mode, error_fraction, min_coverage, error_train_share)
    thresholds = {name: s.min_coverage for name, s in report.sets.items() if s.min_coverage > 0}

    def clean_docs() -> Iterator[dict]:
        chunks = _chunks(docs, chunk_docs, chunk_chars)
        if workers <= 1:
            scanned: Iterator[tuple[list[dict], list[list[Match]]]] = (
                (chunk, scan_texts(index, [d["text"] for d in chunk])) for chunk in chunks)
        else:
            scanned = _scan_in_pool(index, chunks, workers)
        for chunk, chunk_matches in scanned:
            for doc, matches in zip(chunk, chunk_matches):
                if exempt is not None and matches:
                    matches = [m for m in matches if not exempt(doc, m)]
                if thresholds and matches:
                    matches = _drop_partial(index, matches, thresholds, report)
                result = decontaminate(doc["text"], matches, mode, span_window, min_piece_chars)
                report.record(str(doc["id"]), doc["text"], matches, result, span_window)
                if not matches:
                    yield doc
                    continue
                if on_removal is not None:
                    on_removal(doc, matches, result)
                for k, piece in enumerate(result.kept):
                    yield {**doc, "id": f"{doc['id']}#{k}", "text": piece}
        for s in report.sets.values():
            s.train_chars = report.chars_scanned
        report.complete = True

    return clean_docs(), report


def _drop_partial(index: ContaminationIndex, matches: list[Match], thresholds: Mapping[str, float],
                  report: ContaminationReport) -> list[Match]:
    """Keep the matches that cover enough of their item; count the others. Coverage is summed over all spans of
    one item in the document, so a copy interrupted by a changed word still counts whole."""
    covered: dict[tuple[str, str], float] = {}
    for m in matches:
        covered[m.eval_set, m.item_id] = covered.get((m.eval_set, m.item_id), 0.0) + index.coverage(m)
    kept = []
    for m in matches:
        if covered[m.eval_set, m.item_id] >= thresholds.get(m.eval_set, 0.0):
            kept.append(m)
    for (name, item), share in covered.items():
        if share < thresholds.get(name, 0.0):
            report.sets[name].partial_overlaps += 1
    return kept


def _scan_in_pool(
    index: ContaminationIndex, chunks: Iterator[list[dict]], workers: int
) -> Iterator[tuple[list[dict], list[list[Match]]]]:
    import multiprocessing

    method = "fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn"
    pool = multiprocessing.get_context(method).Pool(workers, initializer=_init_worker,
                                                initargs=(os.getpid(), index))
    try:
        pending: deque = deque()
        for chunk in chunks:
            pending.append((chunk, pool.apply_async(_scan_chunk, ([d["text"] for d in chunk],))))
            if len(pending) >= 2 * workers:
                done, result = pending.popleft()
                yield done, result.get()
        while pending:
            done, result = pending.popleft()
            yield done, result.get()
    finally:
        pool.terminate()
        pool.join()


# ---------------------------------------------------------------------------------------------------------------
# Reading eval sets and training files

COMMON_TEXT_FIELDS = ("text", "prompt", "question", "answer", "canonical_solution", "solution", "completion")
ID_FIELDS = ("id", "task_id", "question_id", "idx")


def _open_text(path: Path) -> io.TextIOBase:
    if path.name.endswith(".gz"):
        return gzip.open(path, "rt", encoding="utf-8")
    if path.name.endswith(".zst"):
        # read_across_frames: files written by parallel compressors are several frames back to back.
        reader = zstandard.ZstdDecompressor().stream_reader(open(path, "rb"), read_across_frames=True, closefd=True)
        return io.TextIOWrapper(reader, encoding="utf-8")
    return open(path, encoding="utf-8")


def _is_jsonl(path: Path) -> bool:
    name = path.name.removesuffix(".gz").removesuffix(".zst")
    return name.endswith(".jsonl")


def _iter_jsonl(path: Path) -> Iterator[tuple[int, dict]]:
    try:
        with _open_text(path) as f:
            for line_no, line in enumerate(f, 1):
                if not line.strip():
                    continue
                try:
                    record = json.loads(line)
                except json.JSONDecodeError as err:
                    raise UserError(f"{path}:{line_no}: malformed JSON ({err.msg})") from None
                if not isinstance(record, dict):
                    raise UserError(f"{path}:{line_no}: expected a JSON object, got {type(record).__name__}")
                yield line_no, record
    except (UnicodeDecodeError, EOFError, zstandard.ZstdError) as err:
        raise UserError(f"{path}: cannot read ({err})") from None
    except OSError as err:
        raise UserError(f"{path}: cannot read ({err.strerror or err})") from None


def _field_text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, list):
        return "\n".join(_field_text(v) for v in value)
    return value if isinstance(value, str) else str(value)


def _check_file(path: Path, what: str) -> None:
    if not path.is_file():
        raise UserError(f"{path}: {what} not found")
    if path.stat().st_size == 0:
        raise UserError(f"{path}: {what} is empty")


def load_eval_set(
    name: str, path: str | os.PathLike[str], fields: list[str] | None = None
) -> list[tuple[str, str, str]]:
    """Eval items as (name, item_id, text). JSONL (.jsonl, .jsonl.gz, .jsonl.zst): one item per record, the text
    being `fields` joined with newlines; without `fields`, "text" if present, else all of the common fields the
    record has (prompt, question, answer, canonical_solution, ...). Any other file: plain text, one item per
    paragraph (blank-line separated). Item ids come from an id/task_id field, else the line or paragraph number."""
    path = Path(path)
    _check_file(path, f"eval set '{name}'")
    items: list[tuple[str, str, str]] = []
    if _is_jsonl(path):
        for line_no, record in _iter_jsonl(path):
            if fields:
                present = [f for f in fields if f in record]
                if not present:
                    raise UserError(f"{path}:{line_no}: record has none of the fields {', '.join(fields)}")
            elif "text" in record:
                present = ["text"]
            else:
                present = [f for f in COMMON_TEXT_FIELDS if f in record]
                if not present:
                    raise UserError(f"{path}:{line_no}: record has no text field (tried "
                                    f"{', '.join(COMMON_TEXT_FIELDS)}); name the fields to use")
            text = "\n".join(t for t in (_field_text(record[f]) for f in present) if t.strip())
            if text:
                item_id = next((str(record[k]) for k in ID_FIELDS if k in record), f"line{line_no}")
                items.append((name, item_id, text))
        if not items:
            raise UserError(f"{path}: no text in fields {', '.join(fields or COMMON_TEXT_FIELDS)}")
    else:
        try:
            with _open_text(path) as f:
                content = f.read()
        except (UnicodeDecodeError, OSError, EOFError, zstandard.ZstdError) as err:
            raise UserError(f"{path}: cannot read ({err})") from None
        paragraphs = [p.strip() for p in re.split(r"\n[ \t]*\n", content)]
        items = [(name, f"para{k}", p) for k, p in enumerate(p for p in paragraphs if p)]
        if not items:
            raise UserError(f"{path}: eval set '{name}' has no text")
    return items


def iter_train_documents(
    path: str | os.PathLike[str], text_chunk_chars: int = 1_000_000, overlap_chars: int = 4096
) -> Iterator[dict]:
    """Stream training documents from one file. JSONL (.jsonl, .jsonl.gz, .jsonl.zst): one document per record
    with a "text" field. Any other file: plain text read in chunks of about text_chunk_chars at line boundaries;
    each chunk repeats the last overlap_chars of the previous one so n-grams across a boundary are still seen."""
    path = Path(path)
    _check_file(path, "training file")
    if _is_jsonl(path):
        for line_no, record in _iter_jsonl(path):
            if not isinstance(record.get("text"), str):
                raise UserError(f"{path}:{line_no}: training record has no \"text\" string")
            yield {"id": str(record.get("id", f"{path.name}:{line_no}")), "source": str(path), "domain": "",
                   **record}
        return
    try:
        with _open_text(path) as f:
            carry, parts, size, k = "", [], 0, 0
            for line in f:
                parts.append(line)
                size += len(line)
                if size >= text_chunk_chars:
                    text = carry + "".join(parts)
                    yield {"id": f"{path.name}#chunk{k}", "source": str(path), "domain": "", "text": text}
                    carry, parts, size, k = _tail(text, overlap_chars), [], 0, k + 1
            if parts:
                yield {"id": f"{path.name}#chunk{k}", "source": str(path), "domain": "", "text": carry + "".join(parts)}
    except (UnicodeDecodeError, OSError, EOFError, zstandard.ZstdError) as err:
        raise UserError(f"{path}: cannot read ({err})") from None


def _tail(text: str, chars: int) -> str:
    """The last `chars` characters of text, starting at a whitespace so no word is cut in half."""
    tail = text[-chars:]
    cut = re.search(r"\s", tail)
    return tail[cut.start():] if cut and len(text) > chars else tail


def _expand(paths: list[str], what: str) -> list[Path]:
    """Files named, with directories replaced by the files under them (sorted, hidden ones skipped)."""
    files: list[Path] = []
    for p in map(Path, paths):
        if p.is_dir():
            found = sorted(f for f in p.rglob("*")
                           if f.is_file() and not any(x.startswith(".") for x in f.relative_to(p).parts))
            if not found:
                raise UserError(f"{p}: {what} directory has no files")
            files.extend(found)
        else:
            _check_file(p, what)
            files.append(p)
    return files


def _eval_set_name(path: Path, taken: set[str]) -> str:
    name = path.name
    for suffix in (".gz", ".zst", ".jsonl", ".json", ".txt", ".md"):
        name = name.removesuffix(suffix)
    base, k = name or path.name, 2
    while name in taken:
        name, k = f"{base}-{k}", k + 1
    taken.add(name)
    return name


def run_contamination_command(
    train_paths: list[str],
    eval_paths: list[str],
    ngram: int = DEFAULT_NGRAM,
    *,
    min_words: int = DEFAULT_MIN_WORDS,
    workers: int | None = None,
    mode: str = "document",
) -> ContaminationReport:
    """`scratchlm data contamination`: check training files against eval files and return the report (the
    training data is only read, in a stream; mode decides how removed characters are counted)."""
    if not eval_paths:
        raise UserError("contamination check needs at least one --eval file")
    if not train_paths:
        raise UserError("contamination check needs at least one --train file")
    taken: set[str] = set()
    items: list[tuple[str, str, str]] = []
    for path in _expand(eval_paths, "eval set"):
        items.extend(load_eval_set(_eval_set_name(path, taken), path))
    index = ContaminationIndex.build(items, n=ngram, min_words=min_words)
    train_files = _expand(train_paths, "training file")
    docs = (doc for path in train_files for doc in iter_train_documents(path))
    workers = workers if workers is not None else min(4, os.cpu_count() or 1)
    clean, report = scan_corpus(index, docs, mode=mode, workers=workers)
    for _ in clean:
        pass
    return report
