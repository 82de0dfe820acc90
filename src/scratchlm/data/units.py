"""Work units: the pieces of input the prepare stage's per-shard steps run on, one process each.

A unit is a group of small files, one big file, or a line range of a big plain JSONL file, of about
`data.unit_mb` megabytes. Its `key` hashes the bytes it reads (file digests) and its reader settings, so a
cached step output keyed by it is valid exactly as long as those bytes and settings are unchanged. Document
IDs do not depend on the cut: a JSONL line keeps its line number whichever unit reads it.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..config import Config, SourceConfig
from ..ids import DigestCache, content_id, file_safe, input_gone
from ..progress import log
from .doc_ids import check_unique_ids, escape_name
from .readers import SourceListing, file_format, list_source
from .text_encoding import wide_encoding

MAX_FILES_PER_UNIT = 2000  # keeps a unit's description (and the task sent to a worker) small
_SCAN_BLOCK = 1 << 22


@dataclass(frozen=True)
class UnitFile:
    path: str
    doc_id: str  # `source/relative/path`; JSONL and Parquet documents append `:line` / `:row`
    format: str
    start: int = 0  # byte range [start, end) for a cut JSONL file; end -1 reads to the end
    end: int = -1
    first_line: int = 1  # line number of the byte at `start`


@dataclass(frozen=True)
class Unit:
    source: str
    domain: str
    text_field: str
    index: int  # position among the source's units: outputs keep input order
    files: tuple[UnitFile, ...]
    key: str  # content ID of the bytes read and the reader settings
    bytes: int
    skip_rules: tuple[str, ...] = ()  # rules the source switched off (SourceConfig.skip_rules)
    html_extract: str = "auto"  # how its HTML pages are read (SourceConfig.html_extract)

    @property
    def name(self) -> str:
        """Also the name of the unit's files in the cache and the output: never a path of its own."""
        return f"{file_safe(self.source)}-{self.index:05d}"


def _line_cuts(path: Path, size: int, unit_bytes: int) -> list[tuple[int, int, int]]:
    """(start, end, first line) ranges of about unit_bytes each, cut just after a newline. One streaming pass."""
    cuts, start, first_line, lines_done, pos = [], 0, 1, 0, 0
    with open(path, "rb") as f:
        while block := f.read(_SCAN_BLOCK):
            counted = 0  # bytes of this block whose newlines are in lines_done
            while (want := start + unit_bytes - 1 - pos) < len(block):
                nl = block.find(b"\n", max(want, counted))
                if nl < 0:
                    break
                lines_done += block.count(b"\n", counted, nl + 1)
                counted = nl + 1
                cuts.append((start, pos + nl + 1, first_line))
                start, first_line = pos + nl + 1, lines_done + 1
            lines_done += block.count(b"\n", counted)
            pos += len(block)
    if start < size:
        cuts.append((start, -1, first_line))
    return cuts


def plan_units(cfg: Config, digests: DigestCache) -> list[Unit]:
    # Every source is listed, and its IDs checked, before any file is hashed: a clash stops the run at once.
    listed = [(src, list_source(src, cfg.base_dir, cfg.workdir)) for src in cfg.data.sources]
    check_unique_ids((src.name, doc_id, path, file_format(src, path))
                     for src, listing in listed for path, doc_id in listing.ids(src.name))
    units: list[Unit] = []
    unit_bytes = cfg.data.unit_mb * 1024 * 1024
    for src, listing in listed:
        units += _source_units(src, listing, digests, unit_bytes)
    digests.save()
    return units


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError as e:  # deleted between listing the source and planning its units
        raise input_gone(path, e) from None


def _source_units(src: SourceConfig, listing: SourceListing, digests: DigestCache, unit_bytes: int) -> list[Unit]:
    if listing.workdir is not None:
        log(f"source `{src.name}`: skipping the workdir {escape_name(str(listing.workdir))} inside it")
    groups: list[list[UnitFile]] = [[]]
    sizes = [0]
    for path, doc_id in listing.ids(src.name):
        fmt = file_format(src, path)
        size = _size(path)
        base = UnitFile(str(path), doc_id, fmt)
        plain_jsonl = fmt == "jsonl" and not path.name.lower().endswith((".gz", ".zst"))
        if plain_jsonl and size > unit_bytes and not wide_encoding(path):  # UTF-16 has no newline byte to cut at
            for start, end, first in _line_cuts(path, size, unit_bytes):
                groups.append([UnitFile(base.path, base.doc_id, fmt, start, end, first)])
                sizes.append((end if end >= 0 else size) - start)
            groups.append([])
            sizes.append(0)
            continue
        if sizes[-1] + size > unit_bytes and groups[-1] or len(groups[-1]) >= MAX_FILES_PER_UNIT:
            groups.append([])
            sizes.append(0)
        groups[-1].append(base)
        sizes[-1] += size
    # the profile decides which files of a folder are read (assets are skipped unless the source is code)
    reader = {"name": src.name, "domain": src.domain, "format": src.format, "text_field": src.text_field,
              "profile": src.filter_profile, "html_extract": src.html_extract}
    units = []
    for files_, size in zip(groups, sizes):
        if not files_:
            continue
        read = [(f.doc_id, digests.digest(Path(f.path)), f.start, f.end) for f in files_]
        units.append(Unit(src.name, src.domain, src.text_field, len(units), tuple(files_),
                          content_id("unit", reader, read), size, tuple(sorted(src.skip_rules)),
                          src.html_extract))
    return units
