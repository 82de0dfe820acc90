"""User-written JSONL (task files, SFT pairs): every parse error names the file and the line."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Iterator

from .errors import UserError


class Where(str):
    """"<path> line <n>", as messages name a line, with the line number kept for records that cite it."""

    def __new__(cls, path: Path, line: int) -> "Where":
        where = super().__new__(cls, f"{path} line {line}")
        where.line = line
        return where


def numbered_json_lines(path: Path, what: str) -> Iterator[tuple[Where, object]]:
    """Yield ("<path> line <n>", parsed object) for every non-blank line."""
    path = Path(path)
    if not path.is_file():
        raise UserError(f"{what} {path} not found")
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            yield Where(path, n), json.loads(line)
        except json.JSONDecodeError as e:
            raise UserError(f"{path} line {n}: invalid JSON ({e.msg})") from None
