"""Remove what a scan found from a training document: the whole document, or the matched spans."""
from __future__ import annotations

from typing import NamedTuple

from ..data.dedup.ngram_scan import Match
from ..errors import UserError

MODES = ("document", "span")


class Decontaminated(NamedTuple):
    kept: list[str]  # the pieces of the document to keep ([] when it is dropped)
    removed_spans: list[tuple[int, int]]  # character ranges of the original text that were removed
    removed_chars: int


def remove_matches(
    doc_text: str,
    matches: list[Match],
    mode: str = "document",
    span_window: int = 200,
    min_piece_chars: int = 200,
    max_pieces: int = 10,
) -> Decontaminated:
    """Remove eval-item text. "document" drops the whole document. "span" (GPT-3 style) cuts every matched
    span plus span_window characters on each side, and keeps the remaining pieces of at least min_piece_chars;
    a document cut into more than max_pieces pieces is dropped whole, as it is mostly eval text."""
    check_mode(mode)
    if not matches:
        return Decontaminated([doc_text], [], 0)
    if mode == "document":
        return Decontaminated([], [(0, len(doc_text))], len(doc_text))

    pieces = gaps(span_cuts(doc_text, matches, span_window), len(doc_text))
    kept = [(s, e) for s, e in pieces if len(doc_text[s:e].strip()) >= min_piece_chars]
    if len(kept) > max_pieces:
        kept = []
    removed = gaps(kept, len(doc_text))
    return Decontaminated([doc_text[s:e] for s, e in kept], removed, sum(e - s for s, e in removed))


def gaps(ranges: list[tuple[int, int]], length: int) -> list[tuple[int, int]]:
    """The parts of [0, length) that no range covers; the ranges may overlap and come in any order."""
    out, begin = [], 0
    for start, end in sorted(ranges) + [(length, length)]:
        if start > begin:
            out.append((begin, start))
        begin = max(begin, end)
    return out


def span_cuts(doc_text: str, matches: list[Match], span_window: int) -> list[tuple[int, int]]:
    """The character ranges span mode cuts: each match widened by span_window on both sides, overlaps merged."""
    ranges = [(max(0, m.char_start - span_window), min(len(doc_text), m.char_end + span_window)) for m in matches]
    merged: list[tuple[int, int]] = []
    for start, end in sorted(ranges):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(end, merged[-1][1]))
        else:
            merged.append((start, end))
    return merged


def check_mode(mode: str) -> None:
    if mode not in MODES:
        raise UserError(f"decontamination mode must be one of {', '.join(MODES)}; got {mode!r}")
