"""Stream documents out of a source: text files and folders, JSONL (plain, .gz, .zst), Parquet and HTML.

Readers never hold a whole file in memory (except one text/HTML document, which is one document) and never
crash on bad input: an unreadable file, a binary file, a non-UTF-8 document or a malformed JSON line becomes a
`Rejected` record that the prepare stage counts and writes to the ledger.
"""
from __future__ import annotations

import glob
import gzip
import io
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from ..config import SourceConfig
from ..errors import UserError

MAX_LINE_BYTES = 10 * 1024 * 1024  # a longer JSONL line is almost always a dump, not a document
_EXT_FORMAT = {".txt": "text", ".md": "text", ".rst": "text", ".py": "text", ".jsonl": "jsonl", ".json": "jsonl",
               ".ndjson": "jsonl", ".parquet": "parquet", ".html": "html", ".htm": "html"}


@dataclass
class Rejected:
    id: str
    rule: str
    detail: str = ""


# What a folder of documentation or a saved website also holds: styles, scripts, images, fonts, archives. They
# are not documents of a prose source, so a folder or glob without an explicit `format` skips them (each one is
# counted in the ledger as `not_a_document`). A code source reads every file: there a .js file is the data.
ASSET_EXTENSIONS = frozenset(
    ".css .scss .less .js .mjs .cjs .map .svg .png .jpg .jpeg .gif .bmp .ico .webp .avif .tif .tiff .woff .woff2 "
    ".ttf .otf .eot .pdf .zip .tar .tgz .bz2 .xz .7z .jar .whl .exe .dll .so .dylib .o .a .pyc .class .bin .mp3 "
    ".mp4 .wav .ogg .webm .mov .avi .db .sqlite .lock".split())
SKIP = "skip"  # the format of an asset file: not read, recorded as not_a_document


def infer_format(path: Path, code: bool = False) -> str:
    """The reader for a file from its extension (.gz/.zst looked through); SKIP for an asset of a prose source."""
    suffixes = [s.lower() for s in path.suffixes]
    if suffixes and suffixes[-1] in (".gz", ".zst"):
        suffixes = suffixes[:-1]
    ext = suffixes[-1] if suffixes else ""
    if not code and ext in ASSET_EXTENSIONS:
        return SKIP
    return _EXT_FORMAT.get(ext, "text")


def file_format(src: SourceConfig, path: Path) -> str:
    return src.format or infer_format(path, code=src.filter_profile == "code")


def source_files(src: SourceConfig, base: Path) -> list[Path]:
    pattern = str((base / src.path).expanduser())
    p = Path(pattern)
    if p.is_file():
        files = [p]
    elif p.is_dir():
        files = sorted(f for f in p.rglob("*") if f.is_file() and not f.name.startswith("."))
    else:
        files = sorted(Path(f) for f in glob.glob(pattern, recursive=True) if Path(f).is_file())
    if not files:
        raise UserError(f"source `{src.name}`: path `{src.path}` matches no file (resolved to {pattern})")
    return files


def _open_binary(path: Path):
    name = path.name.lower()
    if name.endswith(".gz"):
        return gzip.open(path, "rb")
    if name.endswith(".zst"):
        import zstandard

        return zstandard.ZstdDecompressor().stream_reader(open(path, "rb"), closefd=True)
    return open(path, "rb")


def _decode(raw: bytes, doc_id: str) -> str | Rejected:
    if b"\x00" in raw[:8192]:
        return Rejected(doc_id, "binary", "NUL bytes in the first 8 KiB")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as e:
        return Rejected(doc_id, "not_utf8", f"invalid UTF-8 at byte {e.start}")


def read_text_file(path: Path, doc_id: str) -> Iterator[dict | Rejected]:
    try:
        with _open_binary(path) as f:
            raw = f.read()
    except OSError as e:
        yield Rejected(doc_id, "unreadable", str(e))
        return
    text = _decode(raw, doc_id)
    yield text if isinstance(text, Rejected) else {"id": doc_id, "text": text}


def read_html_file(path: Path, doc_id: str) -> Iterator[dict | Rejected]:
    from .clean.html import extract_main_text  # main content only: nav, footers, banners dropped

    for item in read_text_file(path, doc_id):
        if isinstance(item, dict):
            item = {"id": doc_id, "text": extract_main_text(item["text"])}
        yield item


def read_jsonl_file(path: Path, doc_id: str, text_field: str, start: int = 0, end: int = -1,
                    first_line: int = 1) -> Iterator[dict | Rejected]:
    """Lines of a JSONL file; [start, end) bytes of a plain file when a work unit holds only part of it."""
    try:
        f = _open_binary(path)
        if start:
            f.seek(start)
    except OSError as e:
        yield Rejected(doc_id, "unreadable", str(e))
        return
    with f:
        reader = io.BufferedReader(f) if not hasattr(f, "peek") else f
        lineno, pos = first_line - 1, start
        while True:
            if 0 <= end <= pos:
                return
            try:
                line = reader.readline(MAX_LINE_BYTES + 1)
            except (OSError, EOFError) as e:  # truncated .gz/.zst
                yield Rejected(f"{doc_id}:{lineno + 1}", "unreadable", f"line {lineno + 1}: {e}")
                return
            if not line:
                return
            pos += len(line)
            lineno += 1
            line_id = f"{doc_id}:{lineno}"
            if len(line) > MAX_LINE_BYTES and not line.endswith(b"\n"):
                while line and not line.endswith(b"\n"):  # skip the rest of the oversized line
                    line = reader.readline(MAX_LINE_BYTES)
                    pos += len(line)
                yield Rejected(line_id, "line_too_long", f"line {lineno} is over {MAX_LINE_BYTES} bytes")
                continue
            if not line.strip():
                continue
            text = _decode(line, line_id)
            if isinstance(text, Rejected):
                yield text
                continue
            try:
                obj = json.loads(text)
            except json.JSONDecodeError as e:
                yield Rejected(line_id, "malformed_json", f"line {lineno}: {e.msg}")
                continue
            value = obj.get(text_field) if isinstance(obj, dict) else None
            if not isinstance(value, str):
                yield Rejected(line_id, "missing_text_field", f"line {lineno}: no string field `{text_field}`")
                continue
            doc = {k: v for k, v in obj.items() if k != text_field and isinstance(v, (str, int, float, bool))}
            doc["orig_id"] = doc.pop("id", None)
            doc.update(id=line_id, text=value)
            yield doc


def read_parquet_file(path: Path, doc_id: str, text_field: str) -> Iterator[dict | Rejected]:
    import pyarrow.parquet as pq

    try:
        pf = pq.ParquetFile(path)
    except Exception as e:  # pyarrow raises several unrelated types for a corrupt file
        yield Rejected(doc_id, "unreadable", f"not a Parquet file: {e}")
        return
    if text_field not in pf.schema_arrow.names:
        yield Rejected(doc_id, "missing_text_field", f"no column `{text_field}` (has {pf.schema_arrow.names})")
        return
    row = 0
    for batch in pf.iter_batches(columns=[text_field], batch_size=1024):
        for value in batch.column(0).to_pylist():
            row += 1
            if isinstance(value, str):
                yield {"id": f"{doc_id}:{row}", "text": value}
            else:
                yield Rejected(f"{doc_id}:{row}", "missing_text_field", f"row {row}: `{text_field}` is not text")


def read_file(path: Path, doc_id: str, fmt: str, text_field: str, start: int = 0, end: int = -1,
              first_line: int = 1) -> Iterator[dict | Rejected]:
    """The documents of one file (or of a byte range of a plain JSONL file)."""
    try:
        if path.stat().st_size == 0:
            yield Rejected(doc_id, "empty_file", "file is empty")
            return
    except OSError as e:
        yield Rejected(doc_id, "unreadable", str(e))
        return
    if fmt == SKIP:
        yield Rejected(doc_id, "not_a_document", f"{path.suffix} files are styles, scripts, images or archives, "
                       "not documents; set the source's `format` to read them anyway")
    elif fmt == "jsonl":
        yield from read_jsonl_file(path, doc_id, text_field, start, end, first_line)
    elif fmt == "parquet":
        yield from read_parquet_file(path, doc_id, text_field)
    elif fmt == "html":
        yield from read_html_file(path, doc_id)
    else:
        yield from read_text_file(path, doc_id)


def iter_source(src: SourceConfig, base: Path) -> Iterator[dict | Rejected]:
    """Every document of a source, with a stable ID `source/relative/path[:line]`."""
    files = source_files(src, base)
    root = Path(str((base / src.path).expanduser()))
    root = root if root.is_dir() else None
    for path in files:
        rel = path.relative_to(root).as_posix() if root else path.name
        for item in read_file(path, f"{src.name}/{rel}", file_format(src, path), src.text_field):
            if isinstance(item, dict):
                item["source"], item["domain"] = src.name, src.domain
            yield item
