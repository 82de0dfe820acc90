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
import json
import re
import unicodedata
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import zstandard

from ..config import SourceConfig
from ..errors import UserError

MAX_LINE_BYTES = 10 * 1024 * 1024  # a longer JSONL line is almost always a dump, not a document
SNIFF_BYTES = 8192  # what the binary and encoding checks look at
MAX_BYTES_PER_CHAR = 4  # UTF-8, UTF-16 and UTF-32 never spend more: a file over 4 × max_chars bytes is too long
HTML_MARKUP_FACTOR = 10  # a page's markup, scripts and styles are dropped, so its raw size may be 10× its text
READ_NOTES = "_read_notes"  # on a document: {"encoding": ..., "nul_stripped": chars, "lone_surrogate": chars}
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


class _ZstdFrames(io.RawIOBase):
    """The decompressed bytes of every frame of a .zst file. zstandard's stream_reader ends quietly where a cut
    file ends (its last, partial block dropped), so the rest of the file vanished unrecorded; this raises
    EOFError for a file that ends inside a frame, and ZstdError with the offset for corrupt data."""

    def __init__(self, path: Path):
        self._file = open(path, "rb")
        self._frame = None  # the current frame's decompressor; None between frames
        self._out, self._at = b"", 0

    def readable(self) -> bool:
        return True

    def readinto(self, buf) -> int:
        while self._at >= len(self._out):
            if not self._fill():
                return 0
        n = min(len(buf), len(self._out) - self._at)
        buf[:n] = self._out[self._at:self._at + n]
        self._at += n
        return n

    def _fill(self) -> bool:
        block = self._file.read(1 << 16)
        if not block:
            if self._frame is not None:
                raise EOFError(f"the file ends inside a zstd frame at byte {self._file.tell()}: it was cut short")
            return False
        out = []
        while block:
            self._frame = self._frame or zstandard.ZstdDecompressor().decompressobj()
            try:
                out.append(self._frame.decompress(block))
            except zstandard.ZstdError as e:
                raise zstandard.ZstdError(f"{e} (compressed bytes up to {self._file.tell()})") from None
            if not self._frame.eof:
                break
            block, self._frame = self._frame.unused_data, None  # a next frame (concatenated files) follows
        self._out, self._at = b"".join(out), 0
        return True

    def close(self) -> None:
        self._file.close()
        super().close()


def _open_binary(path: Path):
    name = path.name.lower()
    if name.endswith(".gz"):
        return gzip.open(path, "rb")
    if name.endswith(".zst"):
        return io.BufferedReader(_ZstdFrames(path), buffer_size=1 << 16)
    return open(path, "rb")


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


# UTF-32 first: the UTF-32-LE mark starts with the UTF-16-LE one.
_BOMS = ((codecs.BOM_UTF32_LE, "utf-32-le"), (codecs.BOM_UTF32_BE, "utf-32-be"), (codecs.BOM_UTF8, "utf-8"),
         (codecs.BOM_UTF16_LE, "utf-16-le"), (codecs.BOM_UTF16_BE, "utf-16-be"))


def _bom(head: bytes) -> tuple[str, int] | None:
    """(encoding, length of the byte-order mark) of bytes that start with one."""
    for mark, encoding in _BOMS:
        if head.startswith(mark):
            return encoding, len(mark)
    return None


def wide_encoding(path: Path) -> str | None:
    """UTF-16 or UTF-32 when a file starts with its byte-order mark: a JSONL file that cannot be cut at a byte
    offset into work units, nor split on newline bytes."""
    try:
        with open(path, "rb") as f:
            found = _bom(f.read(4))
    except OSError:
        return None
    return found[0] if found and found[0] != "utf-8" else None


def _utf16_without_bom(head: bytes) -> str | None:
    """utf-16-le / -be when the NULs of the head sit at odd / even offsets: text mostly in the first 256 code
    points (Latin script, digits, markup) stored as UTF-16 without a byte-order mark."""
    head = head[:len(head) // 2 * 2]
    half = len(head) // 2
    even, odd = head[0::2].count(0), head[1::2].count(0)
    if odd >= 0.25 * half and even <= 0.02 * half:
        return "utf-16-le"
    if even >= 0.25 * half and odd <= 0.02 * half:
        return "utf-16-be"
    return None


def _looks_like_text(text: str) -> bool:
    controls = sum(unicodedata.category(c) == "Cc" and c not in "\t\n\r\f\v" for c in text)
    return controls <= 0.01 * len(text)


_HIGH_BYTES = bytes(range(0x80, 0x100))
_UTF8_SEQUENCE = re.compile(rb"[\xc2-\xdf][\x80-\xbf]|[\xe0-\xef][\x80-\xbf]{2}|[\xf0-\xf4][\x80-\xbf]{3}")


def _likely_encoding(raw: bytes) -> str:
    """A hint for the ledger. Only a hint: nothing is decoded on a guess, because telling latin-1 from cp1250 or
    koi8-r takes the language (charset-normalizer reads French latin-1 as cp1250, and 'caf\\xe9' as UTF-16)."""
    sample = raw[:1 << 20]
    high = len(sample) - len(sample.translate(None, _HIGH_BYTES))
    utf8 = sum(len(m) for m in _UTF8_SEQUENCE.findall(sample))
    if utf8 >= high / 2:
        return "mostly UTF-8 with some bytes of another encoding: mixed encodings"
    if any(b in sample for b in (b"\x81", b"\x8d", b"\x8f", b"\x90", b"\x9d")):  # undefined in cp1252
        return "looks like a legacy encoding such as Shift-JIS, GBK or a Windows code page"
    if sample.translate(None, bytes(range(0x80, 0xa0))) != sample:
        return "looks like cp1252 (Windows Western) or another Windows code page"
    return "looks like latin-1/cp1252 or another 8-bit encoding"


def _not_utf8(raw: bytes, e: UnicodeDecodeError, doc_id: str) -> Rejected:
    return Rejected(doc_id, "not_utf8", f"not UTF-8 ({_likely_encoding(raw)}): invalid byte at {e.start}; "
                                        "convert the file to UTF-8 (iconv -f ENCODING -t UTF-8)")


def _decode_line(raw: bytes, doc_id: str) -> str | Rejected:
    if b"\x00" in raw[:SNIFF_BYTES]:
        return Rejected(doc_id, "binary", "NUL bytes in the first 8 KiB")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as e:
        return _not_utf8(raw, e, doc_id)


def _decode_file(raw: bytes, doc_id: str) -> tuple[str, str] | Rejected:
    """(text, encoding) of a whole text file: UTF-8, or UTF-16/32 told by a byte-order mark or by where the NULs
    of mostly-Latin UTF-16 sit; anything else is binary or a legacy encoding the ledger names."""
    found = _bom(raw[:4])
    if found:
        encoding, start = found
    elif b"\x00" in raw[:SNIFF_BYTES]:
        encoding, start = _utf16_without_bom(raw[:SNIFF_BYTES]), 0
        if encoding is None:
            return Rejected(doc_id, "binary", "NUL bytes in the first 8 KiB")
    else:
        encoding, start = "utf-8", 0
    try:
        text = raw[start:].decode(encoding)
    except UnicodeDecodeError as e:
        if encoding == "utf-8":
            return _not_utf8(raw, e, doc_id)
        if found:
            return Rejected(doc_id, "not_utf8", f"starts with a {encoding} byte-order mark but is not valid "
                                                f"{encoding} at byte {e.start}")
        return Rejected(doc_id, "binary", "NUL bytes in the first 8 KiB (not UTF-16 text either)")
    if not found and encoding != "utf-8" and not _looks_like_text(text[:SNIFF_BYTES]):
        return Rejected(doc_id, "binary", "NUL bytes in the first 8 KiB (not UTF-16 text either)")
    return text, encoding


def _strip_nuls(text: str, notes: dict) -> str:
    """The text without NUL characters, counted in `notes`. They are stripped rather than the document dropped:
    inside otherwise good text a NUL is debris of a converter or a C string, and the text around it is real. It
    must not reach the shards (a token no one types, and it ends the text early for every C tool). A document
    that was mostly NULs ends up short and the length rule drops it, counted."""
    if nuls := text.count("\x00"):
        notes["nul_stripped"] = notes.get("nul_stripped", 0) + nuls
        return text.replace("\x00", "")
    return text


_SURROGATE = re.compile("[\ud800-\udfff]")
# All a JSON line can hold of NULs or lone surrogates are escapes (a raw NUL byte is refused as binary, and
# strict UTF-8 decoding refuses encoded surrogates): a line without one needs no repair, and most lines have none.
_NUL_OR_SURROGATE_ESCAPE = re.compile(rb"\\u(?:0000|[dD][89a-fA-F])")


def _repaired(text: str, notes: dict) -> str:
    """NULs stripped and lone surrogates replaced by U+FFFD, counted in `notes`. A lone surrogate (a JSON
    "\\ud800" without its pair) has no UTF-8 form at all; U+FFFD marks the spot, as every decoder does with bytes
    it cannot read."""
    text, surrogates = _SURROGATE.subn("\ufffd", _strip_nuls(text, notes))
    if surrogates:
        notes["lone_surrogate"] = notes.get("lone_surrogate", 0) + surrogates
    return text


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
        with _open_binary(path) as f:
            raw = f.read(max_bytes + 1) if max_bytes else f.read()
    except _READ_ERRORS as e:
        yield Rejected(doc_id, _damage_rule(e), f"{path.name}: {e}; the document is not read")
        return
    if max_bytes and len(raw) > max_bytes:
        yield Rejected(doc_id, "too_long", f"over {max_bytes:,} bytes decompressed: more characters than "
                                           "data.max_chars allows; not read")
        return
    decoded = _decode_file(raw, doc_id)
    if isinstance(decoded, Rejected):
        yield decoded
        return
    text, encoding = decoded
    notes = {"encoding": encoding} if encoding != "utf-8" else {}
    yield _document(doc_id, _strip_nuls(text, notes), notes)


def read_html_file(path: Path, doc_id: str, max_bytes: int = 0) -> Iterator[dict | Rejected]:
    from .clean.html import extract_main_text  # main content only: nav, footers, banners dropped

    for item in read_text_file(path, doc_id, max_bytes * HTML_MARKUP_FACTOR):
        if isinstance(item, dict):
            item = {**item, "text": extract_main_text(item["text"])}
        yield item


class _Recoded:
    """The lines of a UTF-16 or UTF-32 file as UTF-8 bytes, which is what the JSONL reader splits and parses."""

    def __init__(self, f, encoding: str):
        self.encoding = encoding
        # "utf-16", not "utf-16-le": the generic codec reads the byte-order mark instead of returning it as text
        self.text = io.TextIOWrapper(f, encoding=encoding.rsplit("-", 1)[0], newline="")

    def readline(self, limit: int) -> bytes:
        return self.text.readline(limit).encode("utf-8", "surrogatepass")

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.text.close()


def _jsonl_reader(path: Path, start: int):
    f = _open_binary(path)
    if start:
        f.seek(start)
    if start == 0 and (encoding := wide_encoding(path)) and not path.name.lower().endswith((".gz", ".zst")):
        return _Recoded(f, encoding)
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
    notes = {"encoding": reader.encoding} if isinstance(reader, _Recoded) else {}
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
                               f"{path.name}: {e}; at line {lineno + 1} (byte {pos:,} of the decompressed data): "
                               f"the {lineno - first_line + 1} lines before it are kept, the rest of the file is lost")
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
            text = _decode_line(line, line_id)
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
            escapes = _NUL_OR_SURROGATE_ESCAPE.search(line) is not None
            yield _json_document(line_id, obj, text_field, dict(notes), escapes)


def _json_document(line_id: str, obj: dict, text_field: str, notes: dict, escapes: bool) -> dict:
    """The text and the flat metadata of a JSON object; with `escapes`, lone surrogates and NULs repaired in both
    (a "\\ud800" in a title would stop the writer as surely as one in the text)."""
    meta = {k: v for k, v in obj.items()
            if k not in (text_field, READ_NOTES) and isinstance(v, (str, int, float, bool))}
    text = obj[text_field]
    if escapes:
        meta = {_repaired(k, notes): _repaired(v, notes) if isinstance(v, str) else v for k, v in meta.items()}
        text = _repaired(text, notes)
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
                yield _document(f"{doc_id}:{row}", _strip_nuls(value, notes), notes)
            else:
                yield Rejected(f"{doc_id}:{row}", "missing_text_field", f"row {row}: `{text_field}` is not text")


def read_file(path: Path, doc_id: str, fmt: str, text_field: str, start: int = 0, end: int = -1,
              first_line: int = 1, max_chars: int = 0) -> Iterator[dict | Rejected]:
    """The documents of one file (or of a byte range of a plain JSONL file). A whole file that gives nothing at
    all (only blank lines) gives an `empty_file` record: every non-empty input leaves a trace in the ledger.
    `max_chars` (0: no bound) lets a text or HTML file that is certainly too long go unread."""
    try:
        size = path.stat().st_size
    except OSError as e:
        yield Rejected(doc_id, "unreadable", str(e))
        return
    if size == 0:
        yield Rejected(doc_id, "empty_file", "file is empty")
        return
    items = _read_format(path, doc_id, fmt, text_field, start, end, first_line, MAX_BYTES_PER_CHAR * max_chars)
    found = False
    for item in items:
        found = True
        yield item
    if not found and start == 0 and end < 0:
        yield Rejected(doc_id, "empty_file", f"{size:,} bytes but no document in them (only blank lines)")


def _read_format(path: Path, doc_id: str, fmt: str, text_field: str, start: int, end: int, first_line: int,
                 max_bytes: int) -> Iterator[dict | Rejected]:
    if fmt == SKIP:
        yield Rejected(doc_id, "not_a_document", f"{path.suffix} files are styles, scripts, images or archives, "
                       "not documents; set the source's `format` to read them anyway")
    elif fmt == "jsonl":
        yield from read_jsonl_file(path, doc_id, text_field, start, end, first_line)
    elif fmt == "parquet":
        yield from read_parquet_file(path, doc_id, text_field)
    elif fmt == "html":
        yield from read_html_file(path, doc_id, max_bytes)
    else:
        yield from read_text_file(path, doc_id, max_bytes)


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
