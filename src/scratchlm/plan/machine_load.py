"""How much of the machine's CPUs other processes used while the probe timed the step.

A busy spell slows some probe windows (the probe keeps a fast one), but a process that keeps the cores busy the
whole time slows every window alike, and then only this says so: the system's busy CPU time (/proc/stat, steal
included: another virtual machine on the same host) less this process's own (os.times), over the CPUs' time.
"""
from __future__ import annotations

import os
import time


def _system_busy_seconds() -> float | None:
    try:
        with open("/proc/stat") as f:
            fields = [int(v) for v in f.readline().split()[1:]]
    except (OSError, ValueError):  # not Linux
        return None
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)  # idle + iowait
    return (sum(fields[:8]) - idle) / os.sysconf("SC_CLK_TCK")  # user..steal; guest time is already in user


def _own_seconds() -> float:
    t = os.times()
    return t.user + t.system


class OtherLoad:
    """with OtherLoad() as load: ...; load.share: other processes' share of all CPUs meanwhile (0-1), or None."""

    def __enter__(self) -> "OtherLoad":
        self.share = None
        self._start = (time.perf_counter(), _system_busy_seconds(), _own_seconds())
        return self

    def __exit__(self, *exc) -> None:
        self.share = self.so_far()

    def so_far(self) -> float | None:
        """The share since the start, or None where /proc/stat cannot tell (or too little time has passed)."""
        wall0, busy0, own0 = self._start
        busy1 = _system_busy_seconds()
        wall = time.perf_counter() - wall0
        if busy0 is None or busy1 is None or wall <= 0.05:  # /proc/stat counts in 10 ms ticks
            return None
        others = (busy1 - busy0) - (_own_seconds() - own0)
        return min(1.0, max(0.0, others / (wall * (os.cpu_count() or 1))))
