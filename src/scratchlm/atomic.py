"""Replace a file or a directory all at once: write it beside its target under a temp name, then rename it.

A crash, a kill or a full disk leaves the old version or the new one, never half of one; when Python gets to
clean up (an exception), no temp is left behind either.
"""
from __future__ import annotations

import os
import shutil
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator


def temp_name(path: Path, suffix: str = "") -> Path:
    """Where `path` is written before the rename: hidden, in the same directory (a rename across file systems
    is a copy, not atomic), and named for this process, so two writers never share one and a leftover names a
    writer that is gone (the data cache sweeps those: data/step_cache.py). `suffix` ends the name, for writers
    that append their own (numpy adds .npy to a name without it)."""
    path = Path(path)
    return path.with_name(f".{path.name}.tmp{os.getpid()}{suffix}")


def fsync_path(path: Path) -> None:
    """Flush a file's data, or a directory's entries, to the disk: a rename is only as durable as what it names."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


@contextmanager
def replacing_file(path: Path, suffix: str = "") -> Iterator[Path]:
    """Yields the temp path to write `path`'s new content to; once the block ends it is synced and renamed over
    `path`. If the block raises, the temp is removed and `path` is left as it was."""
    tmp = temp_name(path, suffix)
    try:
        yield tmp
        fsync_path(tmp)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


@contextmanager
def replacing_dir(path: Path, tmp: Path | None = None) -> Iterator[Path]:
    """Yields a fresh, empty directory to fill; once the block ends it is renamed over `path`. If the block
    raises, the directory is removed and `path` is left as it was.

    A directory cannot be renamed over a non-empty one, so an existing `path` is removed just before: a crash
    between the two leaves no `path`, which its readers take for "not done yet", never a half-written one.
    `tmp`: a fixed temp name instead of this process's, where a crash's leftover is too large to leave until a
    sweep (a checkpoint): the next write under that name removes it.
    """
    tmp = Path(tmp) if tmp is not None else temp_name(path)
    shutil.rmtree(tmp, ignore_errors=True)
    try:
        tmp.mkdir(parents=True)
        yield tmp
        shutil.rmtree(path, ignore_errors=True)
        os.replace(tmp, path)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)  # after a success it was renamed: nothing left to remove


def atomic_write_text(path: Path, text: str) -> None:
    with replacing_file(Path(path)) as tmp:
        tmp.write_text(text, encoding="utf-8")
