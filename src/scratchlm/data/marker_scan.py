"""The scan of a corpus for chat-template markers (the list is markers.py): counts per marker and per source,
and the first places with file, line and context."""
from __future__ import annotations

import json
import re
from collections import Counter, defaultdict
from collections.abc import Iterable
from pathlib import Path

from .jsonl import read_lines
from .markers import MARKER_RE, MARKERS, has_marker

_ID_LINE = re.compile(r"^(.*):(\d+)$")  # reader IDs: `source/path:line` for JSONL (and `:row` for Parquet)
CONTEXT_CHARS = 40
MAX_LOCATIONS = 50  # enough to see the pattern; the counts cover the rest
class MarkerScan:
    """Markers found in documents: counts per marker and per source, and the first MAX_LOCATIONS places."""

    def __init__(self):
        self.docs = self.docs_with = 0
        self.counts: Counter = Counter()
        self.per_source: dict[str, Counter] = defaultdict(Counter)
        self.locations: list[dict] = []

    def add(self, doc: dict, file: str, line: int) -> None:
        """`file`/`line`: where the document sits when its ID does not say (a document without an ID)."""
        text = doc["text"]
        found = list(MARKER_RE.finditer(text))
        if not found:
            return
        self.docs_with += 1
        source = doc.get("source") or "?"
        for m in found:
            self.counts[m.group()] += 1
            self.per_source[source][m.group()] += 1
        for m in found[:MAX_LOCATIONS - len(self.locations)]:
            self.locations.append({**_where(doc, file, line, text, m.start()), "marker": m.group(),
                                   "source": doc.get("source"), "offset": m.start(),
                                   "context": text[max(0, m.start() - CONTEXT_CHARS): m.end() + CONTEXT_CHARS]})

    def result(self) -> dict:
        found = {m: self.counts[m] for m in MARKERS if self.counts[m]}
        return {"docs_scanned": self.docs, "docs_with_markers": self.docs_with, "found": found,
                "per_source": {s: dict(c) for s, c in sorted(self.per_source.items())},
                "locations": self.locations, "verdict": "warning" if found else "ok"}


def _where(doc: dict, file: str, line: int, text: str, at: int) -> dict:
    """The input file and line: a JSONL document's line is in its ID; a text file's is the marker's own line."""
    doc_id = doc.get("id")
    if not doc_id:
        return {"file": file, "line": line}
    if hit := _ID_LINE.match(doc_id):
        return {"file": hit.group(1), "line": int(hit.group(2)), "id": doc_id}
    return {"file": doc_id, "line": text.count("\n", 0, at) + 1, "id": doc_id}


def scan_files(paths: Iterable[Path]) -> dict:
    """MarkerScan.result() over JSONL documents. A line is parsed only when a marker occurs in it: JSON never
    escapes a marker's characters, so the raw line shows every one the text holds."""
    scan = MarkerScan()
    files = 0
    for path in paths:
        files += 1
        for line_no, line in enumerate(read_lines(path), 1):
            if not line.strip():
                continue
            scan.docs += 1
            if has_marker(line):
                scan.add(json.loads(line), Path(path).name, line_no)
    return {**scan.result(), "files": files}


def scan_data_dir(data_dir: Path) -> dict:
    """Every document the data stage hands the tokenizer: train/ and val/ (both become shards)."""
    data_dir = Path(data_dir)
    return scan_files([*sorted((data_dir / "train").glob("*.jsonl*")), *sorted((data_dir / "val").glob("*.jsonl*"))])


def describe(scan: dict, where: str = "the pretraining corpus") -> str:
    """One log line: ok, or a warning with the counts and the first places."""
    if not scan["found"]:
        return f"template markers: none in {scan['docs_scanned']:,} documents of {where}"
    places = "; ".join(f"`{l['marker']}` in {l['file']} line {l['line']}" for l in scan["locations"][:5])
    return (f"template markers in {where}: {', '.join(f'`{m}` x{n}' for m, n in scan['found'].items())} in "
            f"{scan['docs_with_markers']:,} documents (kept; encoded as plain text), e.g. {places}")
