"""Process pools whose workers die with their parent.

A worker of a plain pool outlives a parent killed with SIGKILL (or by the OOM killer): it waits on its task
queue forever, and with it the multiprocessing resource tracker, which lives until the last process holding
its pipe is gone. Every pool of the data and tokenizer stages comes from here.

Workers are spawned, not forked: the parent may hold threads (tokenizers, torch) that a fork would copy
mid-lock. (As with any spawned pool, a script that uses one keeps its top level under
`if __name__ == "__main__":`.)
"""
from __future__ import annotations

import ctypes
import multiprocessing
import os
import signal
import sys
import threading
import time
from concurrent.futures import ProcessPoolExecutor
from typing import Callable

PR_SET_PDEATHSIG = 1  # from <linux/prctl.h>
WATCH_SECONDS = 1.0


def spawn_pool(workers: int, initializer: Callable | None = None, initargs: tuple = ()) -> ProcessPoolExecutor:
    return ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn"),
                               initializer=_start_worker, initargs=(os.getpid(), initializer, initargs))


def _start_worker(parent_pid: int, initializer: Callable | None, initargs: tuple) -> None:
    exit_with_parent(parent_pid)
    if initializer is not None:
        initializer(*initargs)


def exit_with_parent(parent_pid: int) -> None:
    """Make this process end when `parent_pid` does. On Linux the kernel sends SIGKILL at once (prctl
    PR_SET_PDEATHSIG); elsewhere a thread notices within a second that the process was orphaned."""
    if _kill_on_parent_death():
        # The parent may have died before the request: then no signal will ever come.
        if os.getppid() != parent_pid:
            os._exit(1)
        return
    threading.Thread(target=_watch_parent, args=(parent_pid,), daemon=True, name="exit-with-parent").start()


def _kill_on_parent_death() -> bool:
    # The kernel ties the signal to the thread that started this process, not to the whole parent: the pools
    # here are started by their owner's thread, which outlives them.
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0) == 0
    except (OSError, AttributeError):  # no libc to load, or no prctl in it
        return False


def _watch_parent(parent_pid: int) -> None:
    while os.getppid() == parent_pid:
        time.sleep(WATCH_SECONDS)
    os._exit(1)
