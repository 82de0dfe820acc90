"""Content-derived identifiers: an artifact's ID is a hash of what it was made from.

Two runs that consume the same bytes with the same settings get the same IDs, so "nothing changed" can be
decided by comparing IDs instead of trusting timestamps.
"""
from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, Iterable

import xxhash

from .atomic import atomic_write_text
from .errors import UserError

ID_LEN = 12  # hex chars; 48 bits is plenty to tell versions of one project apart


def content_id(*parts: Any) -> str:
    """Stable ID of JSON-serializable parts (dict key order does not matter)."""
    blob = json.dumps(parts, sort_keys=True, default=str, separators=(",", ":"))
    return xxhash.xxh3_128_hexdigest(blob.encode())[:ID_LEN]


def file_digest(path: Path, chunk: int = 1 << 22) -> str:
    h = xxhash.xxh3_128()
    with open(path, "rb") as f:
        while block := f.read(chunk):
            h.update(block)
    return h.hexdigest()


def input_gone(path: Path, err: OSError) -> UserError:
    return UserError(f"{path}: listed as an input but no longer exists or is unreadable ({err.strerror or err}); "
                     "run again once the source files are in place")


class DigestCache:
    """Remembers file digests by (path, size, mtime) so re-hashing a large unchanged corpus costs one stat."""

    def __init__(self, path: Path):
        self.path = path
        try:
            self.entries: dict[str, list] = json.loads(path.read_text())
        except (OSError, ValueError):
            self.entries = {}

    def digest(self, file: Path) -> str:
        try:
            st = file.stat()
            key = str(file.resolve())
            hit = self.entries.get(key)
            if hit and hit[0] == st.st_size and hit[1] == st.st_mtime_ns:
                return hit[2]
            d = file_digest(file)
        except OSError as e:  # deleted or made unreadable between listing the source and hashing it
            raise input_gone(file, e) from None
        self.entries[key] = [st.st_size, st.st_mtime_ns, d]
        return d

    def save(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(self.path, json.dumps(self.entries))


def files_id(files: Iterable[Path], cache: DigestCache, root: Path | None = None) -> str:
    items = []
    for f in files:
        name = str(f.relative_to(root)) if root and f.is_relative_to(root) else str(f)
        items.append((name, cache.digest(f)))
    return content_id(sorted(items))


# A name that is safe as one path component: the config holds source, domain and eval-set names to it.
FILE_NAME = re.compile(r"\w[\w.+-]*")


def file_safe(name: str) -> str:
    """`name` as one path component: unchanged when it already is one (FILE_NAME); otherwise its odd characters
    replaced and a hash of the original appended, so that two names never share a file ("a/b", "a_b")."""
    if FILE_NAME.fullmatch(name):
        return name
    readable = re.sub(r"[^\w.+-]", "_", name).lstrip(".-")
    return f"{readable}-{content_id(name)[:8]}"


def write_json(path: Path, obj: Any) -> None:
    atomic_write_text(path, json.dumps(obj, indent=2, sort_keys=False, default=str) + "\n")


def read_json(path: Path) -> Any:
    return json.loads(Path(path).read_text(encoding="utf-8"))
