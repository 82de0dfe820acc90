"""The files a finished stage wrote, recorded in its manifest with their sizes and content hashes, so that "up to
date" means the files are there and whole, not only that the manifest is.

Checking every byte of a 40 GB corpus on each `run` would cost minutes, so the check made before a stage is
skipped or read (whole) compares sizes, which catches a truncated, emptied or deleted file, and hashes the small
JSON files, which an editor or a script may garble in place. `scratchlm check` hashes everything (whole(deep=True)).
"""
from __future__ import annotations

from pathlib import Path
from typing import Iterable

from .ids import file_digest

MANIFEST = "manifest.json"
SMALL_JSON = 16 << 20  # JSON files up to this size are hashed by the quick check too: ~10 ms at most


def every_file(directory: Path) -> list[Path]:
    """Every regular file under `directory` but its manifest and hidden files (locks, scratch space)."""
    return sorted(p for p in directory.rglob("*") if p.is_file() and p.name != MANIFEST
                  and not any(part.startswith(".") for part in p.relative_to(directory).parts))


def record(directory: Path, files: Iterable[Path]) -> dict[str, dict]:
    """{path relative to `directory`: {"bytes", "xxh3"}} of `files`."""
    return {p.relative_to(directory).as_posix(): {"bytes": p.stat().st_size, "xxh3": file_digest(p)}
            for p in sorted(set(files))}


def damage(directory: Path, recorded: dict[str, dict], deep: bool = False) -> str | None:
    """What is wrong with the first damaged file of `recorded`, or None when all are whole. deep: hash every file
    (else sizes, and the hashes of small JSON files)."""
    for name, entry in recorded.items():
        path = directory / name
        try:
            size = path.stat().st_size
        except FileNotFoundError:
            return f"{path} is missing"
        except OSError as e:
            return f"{path} cannot be read ({e.strerror or e})"
        if size != entry["bytes"]:
            return f"{path} has {size:,} bytes where the stage wrote {entry['bytes']:,}"
        if deep or (path.suffix == ".json" and size <= SMALL_JSON):
            try:
                changed = file_digest(path) != entry["xxh3"]
            except OSError as e:
                return f"{path} cannot be read ({e.strerror or e})"
            if changed:
                return f"{path} was changed after the stage wrote it (its content hash differs)"
    return None
