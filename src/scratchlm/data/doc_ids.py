"""Document IDs: how a source's file is named in every ID, ledger record and message, and the check that no two
documents of a run share an ID (the validation guard, the dedup decisions and the ledger are all keyed by it).

A file's ID is `source/relative/path`: relative to the source's folder, or to a glob's fixed prefix; a source that
is one file uses the file's name. JSONL and Parquet documents append `:line` / `:row` to it (readers.py).
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import Iterable

from ..errors import UserError

# Python carries a file name's bytes that are not UTF-8 as lone surrogates (os.fsdecode's surrogateescape:
# byte 0xE9 is U+DCE9); no JSON writer or UTF-8 terminal takes them.
_SURROGATE = re.compile("[\ud800-\udfff]")
_ESCAPED_BYTES = range(0xDC80, 0xDD00)
LINE_NUMBERED = frozenset({"jsonl", "parquet"})  # formats whose documents append `:line` / `:row` to the file's ID
_LINE_SUFFIX = re.compile(r"(.*):(\d+)", re.DOTALL)


def escape_name(name: str) -> str:
    """`name` (a file name or path) writable anywhere: each byte that is not UTF-8 becomes `%XX`, the byte in
    uppercase hex as in a URL (`caf\\xe9.txt` -> `caf%E9.txt`); any other lone surrogate, which only a Windows
    name can hold, becomes `%uXXXX`. A valid UTF-8 name is unchanged, so existing IDs stay as they are. It reads
    back by decoding each `%XX` the name did not hold literally; a literal `caf%E9.txt` beside `caf\\xe9.txt` would
    get the same ID, which check_unique_ids stops on rather than merge the two."""
    return _SURROGATE.sub(_escape_one, name)


def _escape_one(m: re.Match) -> str:
    code = ord(m.group())
    return f"%{code - 0xDC00:02X}" if code in _ESCAPED_BYTES else f"%u{code:04X}"


def file_id(source: str, root: Path | None, path: Path) -> str:
    """The ID of a file of `source`: its path relative to `root`, or its name when root is None."""
    rel = path.relative_to(root).as_posix() if root is not None else path.name
    return f"{source}/{escape_name(rel)}"


def check_unique_ids(files: Iterable[tuple[str, str, str | Path, str]]) -> None:
    """Stop on two files of a run whose documents would share an ID; `files` are (source, file ID, path, format).

    Checked on file IDs, before anything is read, since every document ID derives from its file's: two distinct
    files clash when they have the same ID, or when one's ID is another's line-numbered document ID (a text file
    `a.jsonl:3` beside `a.jsonl`). That holds one entry per file, as the planned work units already do, never one
    per document. A file cut into several line ranges is listed once per range: the same path is no clash."""
    seen: dict[str, tuple[str, str, str]] = {}  # file ID -> (source, path, format)
    for source, doc_id, path, fmt in files:
        first = seen.setdefault(doc_id, (source, str(path), fmt))
        if first[1] != str(path):
            raise _clash(doc_id, first[:2], (source, str(path)))
    for doc_id, (source, path, _) in seen.items():
        if (m := _LINE_SUFFIX.fullmatch(doc_id)) and (numbered := seen.get(m[1])) and numbered[2] in LINE_NUMBERED:
            raise _clash(doc_id, (numbered[0], f"{numbered[1]} (line or row {m[2]})"), (source, path))


def _clash(doc_id: str, first: tuple[str, str], second: tuple[str, str]) -> UserError:
    (source1, path1), (source2, path2) = first, second
    who = f"source `{source1}`" if source1 == source2 else f"sources `{source1}` and `{source2}`"
    return UserError(f"{who}: two files would give documents the same ID `{doc_id}`: {escape_name(path1)} and "
                     f"{escape_name(path2)}; rename one of them (IDs must be unique: validation and the ledger are "
                     "keyed by them)")
