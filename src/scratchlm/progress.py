"""Progress of long stages: a redrawing bar in a terminal; in a log (nohup, CI, a pipe), a plain line now and then.

A redrawing bar in a log file is noise, and no bar at all is a run that looks dead for an hour, so when stderr
is not a terminal `bar()` returns `Lines`, which has the bar's interface and prints a line at most every
PLAIN_EVERY_S seconds. SCRATCHLM_PROGRESS=1 forces bars on, =0 forces plain lines.
"""
from __future__ import annotations

import os
import sys
import time


PLAIN_EVERY_S = 30.0  # often enough to show a stage is alive, rare enough to keep a log readable


def bars_on() -> bool:
    forced = os.environ.get("SCRATCHLM_PROGRESS")
    return forced == "1" if forced is not None else sys.stderr.isatty()


def bar(iterable=None, *, total=None, desc: str = "", unit: str = "it", lines: bool = True, **kw):
    """lines=False: the caller logs its own plain lines (the train loop, every `train.log_every` steps)."""
    from tqdm.auto import tqdm  # here, not at the top: the CLI imports this module to parse, tqdm takes 40 ms

    if bars_on():
        return tqdm(iterable, total=total, desc=desc, unit=unit, unit_scale=True, dynamic_ncols=True,
                    mininterval=0.5, **kw)
    if not lines:
        return tqdm(iterable, total=total, desc=desc, unit=unit, disable=True, **kw)
    return Lines(iterable, total=total, desc=desc, unit=unit, initial=kw.get("initial", 0))


class Lines:
    """The part of tqdm's interface the stages use (iterate, update, set_postfix, close), as plain log lines."""

    def __init__(self, iterable=None, *, total=None, desc: str = "", unit: str = "it", initial: int = 0,
                 every: float = PLAIN_EVERY_S, clock=time.monotonic):
        self.iterable, self.desc, self.unit, self.every, self.clock = iterable, desc, unit, every, clock
        self.total = total if total is not None else (len(iterable) if hasattr(iterable, "__len__") else None)
        self.n = self.start_n = initial
        self.start = self.last = clock()
        self.printed = self.closed = False
        self.postfix: dict = {}

    def __iter__(self):
        for item in self.iterable:
            yield item
            self.update(1)
        self.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def update(self, n: int = 1) -> None:
        self.n += n
        now = self.clock()
        if now - self.last >= self.every:
            self.last, self.printed = now, True
            log(self.line(now))

    def set_postfix(self, **kw) -> None:
        self.postfix = kw

    def close(self) -> None:
        if self.printed and not self.closed:  # a stage that printed progress also says when it finished
            log(self.line(self.clock(), final=True))
        self.closed = True

    def line(self, now: float, final: bool = False) -> str:
        elapsed = now - self.start
        rate = (self.n - self.start_n) / elapsed if elapsed > 0 else 0.0
        done = f"{self.n:,}" + (f"/{self.total:,} {self.unit} ({self.n / self.total:.0%})" if self.total
                                else f" {self.unit}")
        text = f"{self.desc}: {done}, {rate:,.1f} {self.unit}/s"
        if final:
            text += f", done in {duration(elapsed)}"
        elif self.total and rate > 0:
            text += f", ETA {duration((self.total - self.n) / rate)}"
        return text + "".join(f", {k} {v}" for k, v in self.postfix.items())


def duration(seconds: float) -> str:
    if seconds < 60:
        return f"{seconds:.1f} s"
    if seconds < 2 * 3600:
        return f"{seconds / 60:.1f} min"
    return f"{seconds / 3600:.1f} h"


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)
