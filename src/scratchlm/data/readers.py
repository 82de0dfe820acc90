"""Stream documents out of a source: text files and folders, JSONL (plain, .gz, .zst), Parquet and HTML.

Readers never hold a whole file in memory (except one text/HTML document, which is one document, and only
when it can be within `data.max_chars`) and never crash on bad input: an unreadable, cut or corrupt file, a
binary file, a document in an unknown encoding or a malformed JSON line becomes a `Rejected` record that the
prepare stage counts and writes to the ledger. What a reader repairs in a document it keeps (NUL characters,
lone surrogates) and the encoding of a file that is not UTF-8 travel with the document under READ_NOTES.
"""
from __future__ import annotations

import codecs
import glob
import gzip
import io
import itertools
import json
import os
import re
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Iterator

import zstandard

from ..config import SourceConfig
from ..errors import UserError
from .compressed import open_binary
from .doc_ids import escape_name, file_id
from .html_losses import RULE_PREFIX
from .rejected import Rejected
from .text_encoding import (NUL_OR_SURROGATE_ESCAPE, Recoded, decode_file, decode_line, repaired, strip_nuls,
                            wide_encoding)

MAX_LINE_BYTES = 10 * 1024 * 1024  # a longer JSONL line is almost always a dump, not a document
MAX_BYTES_PER_CHAR = 4  # UTF-8, UTF-16 and UTF-32 never spend more: a file over 4 × max_chars bytes is too long
HTML_MARKUP_FACTOR = 10  # a page's markup, scripts and styles are dropped, so its raw size may be 10× its text
READ_NOTES = "_read_notes"  # on a document: {"encoding": ..., "nul_stripped": chars, "lone_surrogate": chars}
EXTRACTION = "_extraction"  # on a document read from HTML: its Extraction (the page's text, what was dropped)
_EXT_FORMAT = {".txt": "text", ".md": "text", ".rst": "text", ".py": "text", ".jsonl": "jsonl", ".json": "jsonl",
               ".ndjson": "jsonl", ".parquet": "parquet", ".html": "html", ".htm": "html"}


# What a folder of documentation or a saved website also holds: styles, scripts, images, fonts, archives. They
# are not documents of a prose source, so a folder or glob without an explicit `format` skips them (each one is
# counted in the ledger as `not_a_document`). A code source reads every file: there a .js file is the data.
ASSET_EXTENSIONS = frozenset(
    ".css .scss .less .js .mjs .cjs .map .svg .png .jpg .jpeg .gif .bmp .ico .webp .avif .tif .tiff .woff .woff2 "
    ".ttf .otf .eot .pdf .zip .tar .tgz .bz2 .xz .7z .jar .whl .exe .dll .so .dylib .o .a .pyc .class .bin .mp3 "
    ".mp4 .wav .ogg .webm .mov .avi .db .sqlite .lock".split())
SKIP = "skip"  # the format of an asset file: not read, recorded as not_a_document
_GLOB_CHARS = re.compile(r"[*?[]")  # what makes a path component a pattern (as glob.has_magic)


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


@dataclass(frozen=True)
class SourceListing:
    """A source's files, what their IDs are relative to, and the workdir left out of them."""
    files: list[Path]
    root: Path | None  # IDs are paths relative to it (doc_ids.py); None: a single file, whose ID is its name
    workdir: Path | None = None  # the workdir, where it lies inside the source's folder or glob prefix

    def ids(self, source: str) -> Iterator[tuple[Path, str]]:
        """Each file with its document ID."""
        for path in self.files:
            yield path, file_id(source, self.root, path)


def list_source(src: SourceConfig, base: Path, workdir: Path | None = None) -> SourceListing:
    """The files of a folder (dot-files left out), a single file or a glob, never those in `workdir`: a workdir
    inside a source's folder would otherwise have its cache and ledger read back as documents on the next run."""
    pattern = str((base / src.path).expanduser())
    p = Path(pattern)
    if p.is_file():
        listing = SourceListing([p], None)
    elif p.is_dir():
        skip = _workdir_inside(p, workdir)
        listing = SourceListing(_folder_files(p, skip), p, skip)
    else:
        root = glob_root(p)
        skip = _workdir_inside(root, workdir)
        matches = (Path(f) for f in glob.glob(pattern, recursive=True))
        listing = SourceListing(sorted(f for f in matches if f.is_file() and not (skip and f.is_relative_to(skip))),
                                root, skip)
    if not listing.files:
        outside = f" outside the workdir {escape_name(str(listing.workdir))}" if listing.workdir else ""
        raise UserError(f"source `{src.name}`: path `{src.path}` matches no file{outside} (resolved to {pattern})")
    return listing


def source_files(src: SourceConfig, base: Path, workdir: Path | None = None) -> list[Path]:
    return list_source(src, base, workdir).files


def glob_root(pattern: Path) -> Path:
    """The fixed prefix of a glob, what its files' IDs are relative to: its leading parts without `*?[`
    (`data/numpy/**/*.py` -> `data/numpy`), so that two matches of one name in two folders get two IDs."""
    return Path(*itertools.takewhile(lambda part: not _GLOB_CHARS.search(part), pattern.parts))


def _workdir_inside(root: Path, workdir: Path | None) -> Path | None:
    """The workdir spelled under `root` as the listing spells paths, where it lies inside root (both resolved,
    so a relative or symlinked spelling of either still matches); None otherwise."""
    if workdir is None:
        return None
    real_root, real_workdir = root.resolve(), Path(workdir).resolve()
    return root / real_workdir.relative_to(real_root) if real_workdir.is_relative_to(real_root) else None


def _folder_files(folder: Path, skip: Path | None) -> list[Path]:
    """Every file under `folder` but dot-files, sorted; the walk never enters `skip` (a workdir's cache can hold
    far more files than the source). Symlinked folders are not entered, as with Path.rglob."""
    if skip == folder:
        return []
    files: list[Path] = []
    for dirpath, dirnames, filenames in os.walk(folder):
        here = Path(dirpath)
        if skip is not None:
            dirnames[:] = [d for d in dirnames if here / d != skip]
        files += (here / name for name in filenames if not name.startswith("."))
    return sorted(f for f in files if f.is_file())


# What stops the reading of a file part way; the documents read before it are kept.
_READ_ERRORS = (OSError, EOFError, ValueError, zlib.error, zstandard.ZstdError)


def _damage_rule(e: Exception) -> str:
    if isinstance(e, EOFError):
        return "truncated"
    if isinstance(e, UnicodeDecodeError):  # a UTF-16/32 JSONL file with invalid code units
        return "not_utf8"
    if isinstance(e, (zlib.error, zstandard.ZstdError, gzip.BadGzipFile)):
        return "corrupt_file"
    return "unreadable"


def _document(doc_id: str, text: str, notes: dict, fields: dict | None = None) -> dict:
    """A reader's document: `fields` (taken over, not copied) with its id and text, and READ_NOTES if any."""
    doc = fields if fields is not None else {}
    doc.update(id=doc_id, text=text)
    if notes:
        doc[READ_NOTES] = notes
    return doc


def _text_bound(path: Path, doc_id: str, max_bytes: int) -> Rejected | None:
    """A text file that must hold more than max_chars characters is refused before it is read (a 200 MB log
    would otherwise cost a gigabyte of memory on its way to the same verdict)."""
    try:
        size = path.stat().st_size
    except OSError as e:
        return Rejected(doc_id, "unreadable", str(e))
    if max_bytes and size > max_bytes and not path.name.lower().endswith((".gz", ".zst")):
        return Rejected(doc_id, "too_long", f"{size:,} bytes, over {max_bytes:,}: more characters than "
                                            "data.max_chars allows; not read")
    return None


def read_text_file(path: Path, doc_id: str, max_bytes: int = 0) -> Iterator[dict | Rejected]:
    """One document: the whole file. `max_bytes` (0: no bound) refuses a longer file, compressed ones after
    decompressing that much."""
    if refused := _text_bound(path, doc_id, max_bytes):
        yield refused
        return
    try:
        with open_binary(path) as f:
            raw = f.read(max_bytes + 1) if max_bytes else f.read()
    except _READ_ERRORS as e:
        yield Rejected(doc_id, _damage_rule(e), f"{escape_name(path.name)}: {e}; the document is not read")
        return
    if max_bytes and len(raw) > max_bytes:
        yield Rejected(doc_id, "too_long", f"over {max_bytes:,} bytes decompressed: more characters than "
                                           "data.max_chars allows; not read")
        return
    decoded = decode_file(raw, doc_id)
    if isinstance(decoded, Rejected):
        yield decoded
        return
    text, encoding = decoded
    notes = {"encoding": encoding} if encoding != "utf-8" else {}
    yield _document(doc_id, strip_nuls(text, notes), notes)


@dataclass(frozen=True)
class HtmlReading:
    """How a source's HTML pages are read (data/clean/html.py)."""
    mode: str = "auto"  # SourceConfig.html_extract
    keep: frozenset[str] = frozenset()  # the chrome its skip_rules switched off: "html_toc" keeps tables of contents

    @classmethod
    def of(cls, mode: str, skip_rules: Iterable[str]) -> HtmlReading:
        return cls(mode, frozenset(r.removeprefix(RULE_PREFIX) for r in skip_rules if r.startswith(RULE_PREFIX)))


def read_html_file(path: Path, doc_id: str, max_bytes: int = 0,
                   html: HtmlReading = HtmlReading()) -> Iterator[dict | Rejected]:
    """One document: the page's text as the source reads HTML, with the account of what it left out under
    EXTRACTION for the read step (data/html_losses.py)."""
    from resiliparse.parse.html import HTMLParserException

    from .clean.html import extract_html

    for item in read_text_file(path, doc_id, max_bytes * HTML_MARKUP_FACTOR):
        if isinstance(item, dict):
            try:
                extraction = extract_html(item["text"], html.mode, html.keep)
            except (HTMLParserException, RecursionError, ValueError) as e:
                yield Rejected(doc_id, "unreadable", f"{escape_name(path.name)}: not parsable as HTML: {e}")
                continue
            item = {**item, "text": extraction.text, EXTRACTION: extraction}
        yield item


def read_size(item: dict) -> tuple[int, int] | None:
    """The characters and bytes of what a reader turned into the document's text: an HTML page's whole text, so
    that what its extraction dropped counts as a loss of the read step. None where the text is what was read."""
    extraction = item.get(EXTRACTION)
    return None if extraction is None else (extraction.page_chars, extraction.page_bytes)


def _jsonl_reader(path: Path, start: int):
    f = open_binary(path)
    if start:
        f.seek(start)
    if start == 0 and (encoding := wide_encoding(path)) and not path.name.lower().endswith((".gz", ".zst")):
        return Recoded(f, encoding)
    return io.BufferedReader(f) if not hasattr(f, "peek") else f


def _rest_of_line(reader) -> int:
    """Skip what is left of an oversized line; its length in bytes."""
    skipped = 0
    while line := reader.readline(MAX_LINE_BYTES):
        skipped += len(line)
        if line.endswith(b"\n"):
            break
    return skipped


def read_jsonl_file(path: Path, doc_id: str, text_field: str, start: int = 0, end: int = -1,
                    first_line: int = 1) -> Iterator[dict | Rejected]:
    """Lines of a JSONL file; [start, end) bytes of a plain file when a work unit holds only part of it."""
    try:
        reader = _jsonl_reader(path, start)
    except _READ_ERRORS as e:
        yield Rejected(doc_id, _damage_rule(e), str(e))
        return
    notes = {"encoding": reader.encoding} if isinstance(reader, Recoded) else {}
    with reader:
        lineno, pos = first_line - 1, start
        while True:
            if 0 <= end <= pos:
                return
            try:
                line = reader.readline(MAX_LINE_BYTES + 1)
                oversized = len(line) > MAX_LINE_BYTES and not line.endswith(b"\n")
                skipped = _rest_of_line(reader) if oversized else 0
            except _READ_ERRORS as e:  # a cut or corrupt .gz/.zst: what was read before stays
                yield Rejected(f"{doc_id}:{lineno + 1}", _damage_rule(e),
                               f"{escape_name(path.name)}: {e}; at line {lineno + 1} (byte {pos:,} of the "
                               f"decompressed data): the {lineno - first_line + 1} lines before it are kept, the rest "
                               "of the file is lost")
                return
            if not line:
                return
            at_start, pos, lineno = pos == 0, pos + len(line) + skipped, lineno + 1
            line_id = f"{doc_id}:{lineno}"
            if oversized:
                yield Rejected(line_id, "line_too_long", f"line {lineno} is over {MAX_LINE_BYTES} bytes")
                continue
            if at_start and line.startswith(codecs.BOM_UTF8):
                line = line[len(codecs.BOM_UTF8):]  # a UTF-8 byte-order mark is no part of the first object
            if not line.strip():
                continue
            text = decode_line(line, line_id)
            if isinstance(text, Rejected):
                yield text
                continue
            try:
                obj = json.loads(text)
            except json.JSONDecodeError as e:
                cut = "" if line.endswith(b"\n") else " (the file's last line, without a newline: cut short?)"
                yield Rejected(line_id, "malformed_json", f"line {lineno}: {e.msg}{cut}")
                continue
            value = obj.get(text_field) if isinstance(obj, dict) else None
            if not isinstance(value, str):
                yield Rejected(line_id, "missing_text_field", f"line {lineno}: no string field `{text_field}`")
                continue
            escapes = NUL_OR_SURROGATE_ESCAPE.search(line) is not None
            yield _json_document(line_id, obj, text_field, dict(notes), escapes)


def _json_document(line_id: str, obj: dict, text_field: str, notes: dict, escapes: bool) -> dict:
    """The text and the flat metadata of a JSON object; with `escapes`, lone surrogates and NULs repaired in both
    (a "\\ud800" in a title would stop the writer as surely as one in the text)."""
    meta = {k: v for k, v in obj.items()
            if k not in (text_field, READ_NOTES) and isinstance(v, (str, int, float, bool))}
    text = obj[text_field]
    if escapes:
        meta = {repaired(k, notes): repaired(v, notes) if isinstance(v, str) else v for k, v in meta.items()}
        text = repaired(text, notes)
    meta["orig_id"] = meta.pop("id", None)
    return _document(line_id, text, notes, meta)


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
                notes: dict = {}
                yield _document(f"{doc_id}:{row}", strip_nuls(value, notes), notes)
            else:
                yield Rejected(f"{doc_id}:{row}", "missing_text_field", f"row {row}: `{text_field}` is not text")


def read_file(path: Path, doc_id: str, fmt: str, text_field: str, start: int = 0, end: int = -1,
              first_line: int = 1, max_chars: int = 0, html: HtmlReading = HtmlReading()) -> Iterator[dict | Rejected]:
    """The documents of one file (or of a byte range of a plain JSONL file). A whole file that gives nothing at
    all (only blank lines) gives an `empty_file` record: every non-empty input leaves a trace in the ledger.
    `max_chars` (0: no bound) lets a text or HTML file that is certainly too long go unread; `html` is how an HTML
    page is read."""
    try:
        size = path.stat().st_size
    except OSError as e:
        yield Rejected(doc_id, "unreadable", str(e))
        return
    if size == 0:
        yield Rejected(doc_id, "empty_file", "file is empty")
        return
    items = _read_format(path, doc_id, fmt, text_field, start, end, first_line, MAX_BYTES_PER_CHAR * max_chars,
                         html)
    found = False
    for item in items:
        found = True
        yield item
    if not found and start == 0 and end < 0:
        yield Rejected(doc_id, "empty_file", f"{size:,} bytes but no document in them (only blank lines)")


def _read_format(path: Path, doc_id: str, fmt: str, text_field: str, start: int, end: int, first_line: int,
                 max_bytes: int, html: HtmlReading) -> Iterator[dict | Rejected]:
    if fmt == SKIP:
        yield Rejected(doc_id, "not_a_document", f"{escape_name(path.suffix)} files are styles, scripts, images or "
                       "archives, not documents; set the source's `format` to read them anyway")
    elif fmt == "jsonl":
        yield from read_jsonl_file(path, doc_id, text_field, start, end, first_line)
    elif fmt == "parquet":
        yield from read_parquet_file(path, doc_id, text_field)
    elif fmt == "html":
        yield from read_html_file(path, doc_id, max_bytes, html)
    else:
        yield from read_text_file(path, doc_id, max_bytes)


def iter_source(src: SourceConfig, base: Path, max_chars: int = 0,
                workdir: Path | None = None) -> Iterator[dict | Rejected]:
    """Every document of a source, with a stable ID `source/relative/path[:line]` (doc_ids.py); a text file
    certainly longer than `max_chars` (0: no bound) is not read; the files in `workdir` are not listed."""
    html = HtmlReading.of(src.html_extract, src.skip_rules)
    for path, doc_id in list_source(src, base, workdir).ids(src.name):
        for item in read_file(path, doc_id, file_format(src, path), src.text_field, max_chars=max_chars, html=html):
            if isinstance(item, dict):
                item["source"], item["domain"] = src.name, src.domain
            yield item
