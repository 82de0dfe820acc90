"""One command at a time per workdir: an exclusive flock on <workdir>/.lock, held while the command runs.

Two runs on one workdir destroy each other's work: each takes the other's half-written stage directory for a
crashed attempt and deletes it. So every command that writes to the workdir takes this lock first (cli.py lists
them). flock rather than a PID file because the kernel drops the lock when its process dies, kill -9 included:
a crash never leaves a stale lock to remove by hand. The holder's PID, host, command and start time are written
into the file only to tell the next command who is in its way.
"""
from __future__ import annotations

import contextlib
import functools
import json
import os
import socket
import time
from pathlib import Path
from typing import IO, Iterator

from .errors import UserError
from .progress import log

try:
    import fcntl
except ImportError:  # Windows
    fcntl = None

LOCK_FILE = ".lock"
# Set while a command holds the lock, for the commands it starts itself: `scratchlm check` trains a few steps
# with `scratchlm train` on the same workdir, which must work under its parent's lock instead of waiting for it.
HOLDER_ENV = "SCRATCHLM_WORKDIR_LOCK"


@contextlib.contextmanager
def workdir_lock(workdir: Path, named: str, command: str, wait: bool = False) -> Iterator[None]:
    """Hold the lock on `workdir` (created if missing) for the body of the `with`.

    named: how the user gave the workdir, for messages ("c.toml: [run] workdir"); command: the holder's command
    line, shown to whoever finds the workdir taken; wait: block until the holder finishes instead of failing.
    """
    if int(os.environ.get("RANK", "0")) > 0:  # under torchrun rank 0 holds it for every rank
        yield
        return
    path = Path(workdir).resolve() / LOCK_FILE
    with _open_lock_file(path, named) as f:
        if not _acquire(f, path, named, wait):
            yield
            return
        _write_holder(f, command)
        # A forked worker shares the lock; closed in it, the lock dies with this process alone (kill -9 included).
        os.register_at_fork(after_in_child=f.close)
        with _passed_to_children(path):
            yield


def check_writable(workdir: Path, named: str) -> None:
    """Fail now, in one line, if `workdir` cannot be created or written to (for a command that takes no lock)."""
    _open_lock_file(Path(workdir).resolve() / LOCK_FILE, named).close()


def _open_lock_file(path: Path, named: str) -> IO[str]:
    """The lock file, opened without truncating it: it names the holder until this process holds the lock."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        return open(path, "a+", encoding="utf-8")
    except OSError as e:  # the first write of the command: say so now rather than as a traceback stages later
        raise UserError(f"{named} {path.parent} cannot be written: {e.strerror}") from None


def _acquire(f: IO[str], path: Path, named: str, wait: bool) -> bool:
    """True once this process holds the lock; False where there is no flock, or the parent holds it for us."""
    if fcntl is None:
        _warn_no_locking()
        return False
    try:
        fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return True
    except BlockingIOError:
        pass
    holder = _read_holder(path)
    if os.environ.get(HOLDER_ENV) == _holder_key(path, holder.get("pid")):
        return False
    if not wait:
        raise UserError(f"{named} {path.parent} is in use by {_describe(holder)}; wait for it to finish, or pass "
                        f"--wait to start when it does")
    log(f"waiting for {_describe(holder)} to finish with {path.parent}")
    fcntl.flock(f, fcntl.LOCK_EX)
    return True


def _write_holder(f: IO[str], command: str) -> None:
    f.seek(0)
    f.truncate()
    f.write(json.dumps({"pid": os.getpid(), "host": socket.gethostname(), "command": command,
                        "started": time.strftime("%Y-%m-%d %H:%M:%S")}) + "\n")
    f.flush()


def _read_holder(path: Path) -> dict:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):  # the holder has locked the file but not written itself into it yet
        return {}


def _describe(holder: dict) -> str:
    if "pid" not in holder:
        return "another scratchlm command (it has not written its details yet)"
    return f"PID {holder['pid']} on {holder.get('host')} since {holder.get('started')} (`{holder.get('command')}`)"


def _holder_key(path: Path, pid: int | None) -> str:
    return f"{pid}:{path}"


@contextlib.contextmanager
def _passed_to_children(path: Path) -> Iterator[None]:
    before = os.environ.get(HOLDER_ENV)
    os.environ[HOLDER_ENV] = _holder_key(path, os.getpid())
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(HOLDER_ENV, None)
        else:
            os.environ[HOLDER_ENV] = before


@functools.cache  # once per process
def _warn_no_locking() -> None:
    log("warning: no file locking on this platform (no fcntl): nothing stops two commands on one workdir at once")
