"""Writing a run's metrics.jsonl when two processes write it: the trainer (log rows) and the eval watcher
(evaluation rows, `scratchlm eval watch`).

Every writer takes an exclusive flock on a lock file beside it, then appends one whole line with a single
write. The lock is a separate file because the trainer, resuming, rewrites metrics.jsonl under a new inode
(atomically, to drop rows after the checkpoint it resumes from): a lock on the old inode would protect nothing,
and a watcher's row appended to the old inode during that rewrite would be lost.
"""
from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterator
from pathlib import Path

try:
    import fcntl
except ImportError:  # Windows: no second writer is supported there
    fcntl = None

LOCK = ".metrics.lock"


@contextlib.contextmanager
def metrics_lock(path: Path) -> Iterator[None]:
    """Hold the lock of metrics file `path` for the body of the `with`."""
    lock = Path(path).parent / LOCK
    fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o666)
    try:
        if fcntl is not None:
            fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing drops the flock


def append_row(path: Path, row: dict) -> None:
    """One JSON line at the end of `path`, whole: a reader never sees two writers' lines interleaved."""
    line = (json.dumps(row) + "\n").encode("utf-8")
    with metrics_lock(path):
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o666)
        try:
            written = 0
            while written < len(line):  # a regular file takes it in one write; a short write is only continued
                written += os.write(fd, line[written:])
        finally:
            os.close(fd)
