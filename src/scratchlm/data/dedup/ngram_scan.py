"""Find the eval items of an index in training texts: every window of their words is fingerprinted with numpy
and looked up, and the hits of one item are merged into spans of words and of characters.

It lives with the dedup, below the decontaminate stage that scans the training split with it, because the data
stage's validation draw measures near copies with it too (data/val_guard.py)."""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from .words import word_spans
from .fingerprint import text_words, window_fingerprints, word_prefix_sums
from .ngram_index import ContaminationIndex


class Match(NamedTuple):
    """One eval item found in a training document: words [word_start, word_end) of the normalized document,
    which are characters [char_start, char_end) of its original text."""

    eval_set: str
    item_id: str
    word_start: int
    word_end: int
    char_start: int
    char_end: int


def scan_document(index: ContaminationIndex, text: str) -> list[Match]:
    """All eval items found in one training document (overlapping hits of one item merged into one span)."""
    return scan_texts(index, [text])[0]


def scan_texts(index: ContaminationIndex, texts: list[str]) -> list[list[Match]]:
    """scan_document over a batch: the words of all texts are hashed as one array, so small documents do not
    each pay numpy's per-call overhead; windows that straddle two documents are discarded."""
    words: list[str] = []
    starts = np.zeros(len(texts) + 1, dtype=np.int64)
    for k, text in enumerate(texts):
        words.extend(text_words(text))
        starts[k + 1] = len(words)
    prefix = word_prefix_sums(words)

    hits: dict[int, list[tuple[int, int, int]]] = {}  # doc -> (item, word_start, word_end)
    for length, fps in index.fingerprints.items():
        windows = window_fingerprints(prefix, length)
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
        spans = word_spans(texts[d])
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


def item_coverage(index: ContaminationIndex, matches: list[Match]) -> dict[tuple[str, str], float]:
    """(eval set, item id) -> the share of the item's fingerprints one document holds, summed over all its spans
    there, so a copy interrupted by a changed word still counts whole. The one measure of "a copy": the
    decontaminate guard and the data stage's validation draw (data/val_guard.py) both decide by it."""
    covered: dict[tuple[str, str], float] = {}
    for m in matches:
        covered[m.eval_set, m.item_id] = covered.get((m.eval_set, m.item_id), 0.0) + index.coverage(m)
    return covered


def _merge_hits(hits: list[tuple[int, int, int]]) -> list[tuple[int, int, int]]:
    """Overlapping or touching windows of the same item become one span."""
    merged: list[tuple[int, int, int]] = []
    for item, start, end in sorted(hits):
        if merged and merged[-1][0] == item and start <= merged[-1][2]:
            merged[-1] = (item, merged[-1][1], max(end, merged[-1][2]))
        else:
            merged.append((item, start, end))
    return merged
