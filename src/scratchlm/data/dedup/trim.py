"""Cutting out the passages a document shares with another, for a copy that also says something of its own.

A page that is mostly another page is dropped as a copy; but git-diff-files(1) is 97% the diff options that git
includes in several pages, around a synopsis and a description found nowhere else. Dropping it loses those;
keeping it whole trains on the options once more. So such a page keeps its own text and loses every unit
(a wrapped paragraph, an HTML block, a heading or an option line: clean/structure.py) whose word 5-grams are
mostly in the page it copies (cut_shared says how a passage is decided).
"""
from __future__ import annotations

import numpy as np

from scratchlm.data.clean.structure import BLANK, CODE, HEADING, TABLE, Line, parse, unit_text, units, without
from scratchlm.data.dedup.minhash import shingle_hashes

NGRAM, SEED = 5, 11
SHARED = 0.8  # a unit with this share of its word 5-grams in the other page is that page's text


def _unit_hashes(lines: list[Line]) -> tuple[list[list[int]], np.ndarray, np.ndarray]:
    groups = [g for g in units(lines) if lines[g[0]].kind != BLANK]
    hashes, offsets = shingle_hashes([unit_text(lines, g) for g in groups], NGRAM, SEED)
    return groups, hashes, offsets


def shingle_set(text: str) -> np.ndarray:
    """The sorted, distinct 5-gram hashes of every unit of `text` (a unit under 5 words is one shingle)."""
    return np.unique(_unit_hashes(parse(text))[1])


def cut_shared(text: str, other: np.ndarray) -> tuple[str, list[str]]:
    """(text without its passages found in `other`, a shingle_set, the units cut); (text, []) when none is.

    A passage is decided by its sentences: units of NGRAM words or more, mostly found in `other`. Short units
    (an option name, "Synonym for -p --raw.", a value list) and code blocks and tables belong to the passage
    around them: they go when the sentences on both sides go (a heading or the page's end counts as either),
    and code and tables only when they are shared too. Headings stay: they are the page's skeleton."""
    lines = parse(text)
    groups, hashes, offsets = _unit_hashes(lines)
    found = np.isin(hashes, other)
    kinds = [lines[g[0]].kind for g in groups]
    # A unit without words (a ``` fence, a rule of dashes) has nothing of its own: it goes with its passage.
    shared = [hi == lo or bool(found[lo:hi].mean() >= SHARED) for lo, hi in zip(offsets[:-1], offsets[1:])]
    sentence = [k not in (CODE, TABLE, HEADING) and len(unit_text(lines, g).split()) >= NGRAM
                for k, g in zip(kinds, groups)]

    def side(k: int, step: int) -> bool | None:
        """Whether the nearest sentence that way is cut; None at a heading or the page's end."""
        k += step
        while 0 <= k < len(groups) and kinds[k] != HEADING:
            if sentence[k]:
                return shared[k]
            k += step
        return None

    cut_units = []
    for k, g in enumerate(groups):
        if kinds[k] == HEADING:
            continue
        if sentence[k]:
            if shared[k]:
                cut_units.append(g)
            continue
        if kinds[k] in (CODE, TABLE) and not shared[k]:
            continue
        before, after = side(k, -1), side(k, 1)
        if (before, after) != (None, None) and before is not False and after is not False:
            cut_units.append(g)
    cut = {i for g in cut_units for i in g}
    return (without(lines, cut), [unit_text(lines, g) for g in cut_units]) if cut else (text, [])
