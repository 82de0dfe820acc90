"""The data cache's directories: each result appears whole, by a rename, or not at all; what a killed run left
half-written is swept away by the next one."""
from __future__ import annotations

import errno
import os
import re
import shutil
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from .. import disk
from ..atomic import replacing_dir, temp_name
from ..errors import UserError

_TEMP_NAME = re.compile(r"^\..+\.tmp(\d+)(\.npy)?$")  # atomic.temp_name's; `.npy`: numpy temps of older versions


def disk_full(path: Path, needed: int | None = None) -> UserError:
    return UserError(f"{disk.disk_full(path, needed, 'the size of its input')}; free some space or point "
                     "run.workdir at a larger disk, then run again (finished steps are kept)")


@contextmanager
def filling(out: Path, needed: int | None = None) -> Iterator[Path]:
    """A fresh directory that replaces `out` when the block ends, removed if anything fails (a full disk then
    says so in one line, with `needed`: about how much the result takes)."""
    try:
        with replacing_dir(out) as tmp:
            yield tmp
    except OSError as e:
        if e.errno == errno.ENOSPC:
            raise disk_full(Path(e.filename or temp_name(out)), needed) from None
        raise


def _alive(pid: int) -> bool:
    if pid == os.getpid():
        return False  # an earlier process that had our number
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        pass
    return True


def remove_stale_temps(cache: Path) -> list[Path]:
    """Remove the temp directories and files a killed or crashed run left in the cache. A finished entry is never
    named like one, and one whose process still runs is left alone."""
    removed = []
    for entry in cache.glob("*/.*"):
        match = _TEMP_NAME.match(entry.name)
        if match and not _alive(int(match.group(1))):
            shutil.rmtree(entry) if entry.is_dir() else entry.unlink(missing_ok=True)
            removed.append(entry)
    return removed
