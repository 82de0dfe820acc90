"""User-written JSONL (task files, SFT pairs): every parse error names the file and the line."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Iterator

from .errors import UserError


def numbered_json_lines(path: Path, what: str) -> Iterator[tuple[str, object]]:
    """Yield ("<path> line <n>", parsed object) for every non-blank line."""
    path = Path(path)
    if not path.is_file():
        raise UserError(f"{what} {path} not found")
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            yield f"{path} line {n}", json.loads(line)
        except json.JSONDecodeError as e:
            raise UserError(f"{path} line {n}: invalid JSON ({e.msg})") from None
