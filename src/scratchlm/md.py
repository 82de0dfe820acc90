"""Markdown table cells. A `|` inside a cell would end it: GFM reads `\\|` as a literal pipe, even in code spans."""
from __future__ import annotations


def cell(value) -> str:
    return str(value).replace("|", "\\|").replace("\n", " ")
