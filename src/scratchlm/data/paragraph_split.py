"""Paragraphs: the runs of text between blank lines. Every data step that splits a document into paragraphs
splits it here.

Three boundaries, each kept where it is used, because moving a step to another would change which text that step
keeps, cuts or holds out:
  strict      a newline, then lines holding only spaces or tabs; "\\r\\n" counts as a newline. The paragraph
              deduper and the structure check (its protected paragraphs): their paragraph indices must agree.
  any space   any whitespace between the two newlines, so a line holding a form feed or a no-break space is
              blank too. The quality and language filters.
  start       where the validation split may start a held-out tail: after a blank line ("\\n" newlines, spaces
              or tabs), past all the whitespace that follows.
"""
from __future__ import annotations

import re
from typing import Iterator

_STRICT = re.compile(r"(\r?\n(?:[ \t]*\r?\n)+)")
_ANY_SPACE = re.compile(r"\n\s*\n")
_START = re.compile(r"\n[ \t]*\n\s*")


def paragraphs_and_breaks(text: str) -> tuple[list[str], list[str]]:
    """(paragraphs, the blank lines between them) under the strict boundary: joining them back in turn gives
    `text` again, so a paragraph's index and its lines can be told from these."""
    parts = _STRICT.split(text)
    return parts[0::2], parts[1::2]


def split_paragraphs(text: str, any_space: bool = False) -> list[str]:
    """The paragraphs of `text`, unstripped, blank ones included, so indices match paragraphs_and_breaks.
    any_space: the quality and language filters' boundary (module docstring)."""
    return _ANY_SPACE.split(text) if any_space else paragraphs_and_breaks(text)[0]


def paragraph_starts(text: str) -> Iterator[int]:
    """Offsets where a paragraph after a blank line starts (its first non-space character), in order."""
    return (m.end() for m in _START.finditer(text))
