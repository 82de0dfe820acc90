"""What the machine's disk says when a write fails: one wording for a full disk, wherever the write was.

The data steps, the checkpoint writer and the CLI's backstop all report a full disk; they word it from here, so
the free space is measured and printed one way everywhere.
"""
from __future__ import annotations

import errno
import os
import shutil
from pathlib import Path


def size_text(n: float) -> str:
    return f"{n / 2 ** 30:,.1f} GiB" if n >= 2 ** 30 else f"{n / 2 ** 20:,.1f} MiB"


def free_bytes(path: Path) -> int:
    """Free space on the filesystem that holds `path`, or would: the file may not exist yet."""
    where = Path(path)
    while not where.exists() and where != where.parent:
        where = where.parent
    return shutil.disk_usage(where).free


def disk_full(path: Path, needed: int | None = None, what: str = "") -> str:
    """`what` says what `needed` is the size of, e.g. "the size of its input"."""
    wanted = f", about {size_text(needed)} needed" + (f" ({what})" if what else "") if needed else ""
    return f"disk full while writing {path}: {size_text(free_bytes(path))} free on that filesystem{wanted}"


def write_failure_reason(error: BaseException) -> str:
    """Why a write failed, in a few words. torch.save's stream writer loses the OS error: a full disk reaches it
    as `[enforce fail at inline_container.cc:603] . unexpected pos 123 vs 456` or `... file write failed`, C++
    internals that tell a user nothing, so those are replaced by what they mean."""
    text = str(error).strip()
    if "No space left" in text:
        return "no space left on device"
    if "enforce fail" in text or "PytorchStreamWriter" in text or "unexpected pos" in text:
        return "the write stopped short, as on a full disk"
    return text.splitlines()[-1] if text else type(error).__name__


def environment_error(e: OSError) -> str | None:
    """One line for an OSError the machine caused (a full disk, permissions); None for the others, which are
    bugs and stay tracebacks."""
    if e.errno == errno.ENOSPC:
        return disk_full(Path(e.filename)) if e.filename is not None else "disk full (no space left on device)"
    denied = ("EACCES", "EPERM", "EROFS", "ENOTDIR", "EDQUOT")  # by name: Windows has no EDQUOT
    if errno.errorcode.get(e.errno) in denied and e.filename is not None:
        return f"{e.filename}: {e.strerror}"
    return None


def link_or_copy(src: Path, dst: Path) -> None:
    """dst holds src's bytes: a hard link (no second copy on disk), or a copy where links are not possible
    (another file system, a file system without them)."""
    try:
        os.link(src, dst)
    except OSError:
        shutil.copyfile(src, dst)
