"""Reading eval sets and training files for decontamination. A file that cannot be used stops with a UserError
naming it (and the line, for JSONL): an eval set read wrong would silently check nothing.

Compressed files (.gz, .zst) are opened through data/compressed.py, which raises on a cut or corrupt file
instead of ending quietly. JSONL records are parsed here rather than by the data readers: those turn a bad line
into a ledger record and keep only a record's flat fields, while an eval item may be built from any fields.
"""
from __future__ import annotations

import io
import json
import os
import re
from pathlib import Path
from typing import Any, Iterator

import zstandard

from ..data.compressed import open_binary
from ..data.paragraph_split import split_paragraphs
from ..errors import UserError

COMMON_TEXT_FIELDS = ("text", "prompt", "question", "answer", "canonical_solution", "solution", "completion")
ID_FIELDS = ("id", "task_id", "question_id", "idx")
_READ_ERRORS = (UnicodeDecodeError, OSError, EOFError, zstandard.ZstdError)


def load_eval_set(
    name: str, path: str | os.PathLike[str], fields: list[str] | None = None
) -> list[tuple[str, str, str]]:
    """Eval items as (name, item_id, text). JSONL (.jsonl, .jsonl.gz, .jsonl.zst): one item per record, the text
    being `fields` joined with newlines; without `fields`, "text" if present, else all of the common fields the
    record has (prompt, question, answer, canonical_solution, ...). Any other file: plain text, one item per
    paragraph (blank-line separated). Item ids come from an id/task_id field, else the line or paragraph number."""
    path = Path(path)
    _check_file(path, f"eval set '{name}'")
    if not _is_jsonl(path):
        try:
            with _open_text(path) as f:
                content = f.read()
        except _READ_ERRORS as err:
            raise UserError(f"{path}: cannot read ({err})") from None
        paragraphs = [p.strip() for p in split_paragraphs(content)]
        items = [(name, f"para{k}", p) for k, p in enumerate(p for p in paragraphs if p)]
        if not items:
            raise UserError(f"{path}: eval set '{name}' has no text")
        return items
    items = []
    for line_no, record in _iter_jsonl(path):
        text = "\n".join(t for t in (_field_text(record[f]) for f in _item_fields(path, line_no, record, fields))
                         if t.strip())
        if text:
            item_id = next((str(record[k]) for k in ID_FIELDS if k in record), f"line{line_no}")
            items.append((name, item_id, text))
    if not items:
        raise UserError(f"{path}: no text in fields {', '.join(fields or COMMON_TEXT_FIELDS)}")
    return items


def _item_fields(path: Path, line_no: int, record: dict, fields: list[str] | None) -> list[str]:
    """The fields of a record an eval item's text is made of."""
    if fields:
        present = [f for f in fields if f in record]
        if not present:
            raise UserError(f"{path}:{line_no}: record has none of the fields {', '.join(fields)}")
        return present
    if "text" in record:
        return ["text"]
    present = [f for f in COMMON_TEXT_FIELDS if f in record]
    if not present:
        raise UserError(f"{path}:{line_no}: record has no text field (tried "
                        f"{', '.join(COMMON_TEXT_FIELDS)}); name the fields to use")
    return present


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
    except _READ_ERRORS as err:
        raise UserError(f"{path}: cannot read ({err})") from None


def expand_paths(paths: list[str], what: str) -> list[Path]:
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


def eval_set_name(path: Path, taken: set[str]) -> str:
    """The file's name less its extensions, made unique among `taken` (which it joins)."""
    name = path.name
    for suffix in (".gz", ".zst", ".jsonl", ".json", ".txt", ".md"):
        name = name.removesuffix(suffix)
    base, k = name or path.name, 2
    while name in taken:
        name, k = f"{base}-{k}", k + 1
    taken.add(name)
    return name


def _open_text(path: Path) -> io.TextIOBase:
    return io.TextIOWrapper(open_binary(path), encoding="utf-8")


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


def _tail(text: str, chars: int) -> str:
    """The last `chars` characters of text, starting at a whitespace so no word is cut in half."""
    tail = text[-chars:]
    cut = re.search(r"\s", tail)
    return tail[cut.start():] if cut and len(text) > chars else tail
