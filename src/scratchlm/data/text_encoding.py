"""Bytes to text: UTF-8, or UTF-16/32 told by a byte-order mark or by where the NULs sit; anything else is
binary or a legacy encoding that the ledger names. What a reader repairs in a document (NUL characters, lone
surrogates) is counted in the document's read notes."""
from __future__ import annotations

import codecs
import io
import re
import unicodedata
from pathlib import Path

from .rejected import Rejected

SNIFF_BYTES = 8192  # what the binary and encoding checks look at


# UTF-32 first: the UTF-32-LE mark starts with the UTF-16-LE one.
_BOMS = ((codecs.BOM_UTF32_LE, "utf-32-le"), (codecs.BOM_UTF32_BE, "utf-32-be"), (codecs.BOM_UTF8, "utf-8"),
         (codecs.BOM_UTF16_LE, "utf-16-le"), (codecs.BOM_UTF16_BE, "utf-16-be"))


def bom(head: bytes) -> tuple[str, int] | None:
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
            found = bom(f.read(4))
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


def decode_line(raw: bytes, doc_id: str) -> str | Rejected:
    if b"\x00" in raw[:SNIFF_BYTES]:
        return Rejected(doc_id, "binary", "NUL bytes in the first 8 KiB")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as e:
        return _not_utf8(raw, e, doc_id)


def decode_file(raw: bytes, doc_id: str) -> tuple[str, str] | Rejected:
    """(text, encoding) of a whole text file: UTF-8, or UTF-16/32 told by a byte-order mark or by where the NULs
    of mostly-Latin UTF-16 sit; anything else is binary or a legacy encoding the ledger names."""
    found = bom(raw[:4])
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


def strip_nuls(text: str, notes: dict) -> str:
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
NUL_OR_SURROGATE_ESCAPE = re.compile(rb"\\u(?:0000|[dD][89a-fA-F])")


def repaired(text: str, notes: dict) -> str:
    """NULs stripped and lone surrogates replaced by U+FFFD, counted in `notes`. A lone surrogate (a JSON
    "\\ud800" without its pair) has no UTF-8 form at all; U+FFFD marks the spot, as every decoder does with bytes
    it cannot read."""
    text, surrogates = _SURROGATE.subn("\ufffd", strip_nuls(text, notes))
    if surrogates:
        notes["lone_surrogate"] = notes.get("lone_surrogate", 0) + surrogates
    return text



class Recoded:
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

