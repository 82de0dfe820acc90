"""After each step the prepare stage hands freed heap pages back to the system (step_runner.release_free_memory)."""
import sys
from pathlib import Path

import numpy as np
import pytest

from scratchlm.data.step_runner import release_free_memory


def _rss_mib() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc; glibc's malloc_trim")
def test_freed_small_arrays_leave_the_process():
    # 160 MB of 8 KB arrays come from the heap, not from mmap; the last one, kept, pins the heap's top, so
    # freeing the others returns nothing to the system until the heap is trimmed
    arrays = [np.ones(1000) for _ in range(20_000)]
    del arrays[:-1]
    before = _rss_mib()
    release_free_memory()
    assert before - _rss_mib() > 100
