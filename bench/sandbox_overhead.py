"""HumanEval's sandbox against running the same candidates unsandboxed, side by side in one process.

    PYTHONPATH=src python bench/sandbox_overhead.py [--rounds 3] [--deadline-trials 5]

- pass rate of every bundled problem's canonical solution, sandboxed (bubblewrap) and unsandboxed (the unsafe
  path: a plain interpreter with the audit hook): the view must hide nothing the standard library needs;
- wall time per candidate, the two paths interleaved problem by problem (so background load hits both), median
  and 90th percentile over all rounds, and the ratio of the medians;
- how far past its deadline run_program returns for a candidate that ignores signals, spins, and leaves a
  detached child holding its output (deadline 2 s).
"""
from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import time

from scratchlm.eval.humaneval import check_program, load_problems
from scratchlm.eval.sandbox import require_isolation, run_program, unsandboxed

HOSTILE = """import os, signal
for s in (signal.SIGTERM, signal.SIGXCPU, signal.SIGINT, signal.SIGHUP):
    signal.signal(s, signal.SIG_IGN)
if os.fork() == 0:
    os.setsid()
    os.execv("/bin/sleep", ["sleep", "60"])
while True:
    pass
"""


def percentile(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--deadline-trials", type=int, default=5)
    args = ap.parse_args()
    sandboxed, plain = require_isolation(), unsandboxed()
    problems = load_problems()
    print(f"{platform.node()}: {os.cpu_count()} cores, Python {platform.python_version()}, {sandboxed.summary}")
    times = {"sandboxed": [], "unsandboxed": []}
    passed = {"sandboxed": 0, "unsandboxed": 0}
    for r in range(args.rounds):
        for i, p in enumerate(problems):
            order = [("sandboxed", sandboxed), ("unsandboxed", plain)]
            for name, iso in order if (i + r) % 2 == 0 else order[::-1]:
                start = time.perf_counter()
                ok = run_program(check_program(p, p["canonical_solution"]), 10, 512, iso).passed
                times[name].append(time.perf_counter() - start)
                passed[name] += ok and r == 0
    print(f"canonical solutions passed: sandboxed {passed['sandboxed']}/{len(problems)}, "
          f"unsandboxed {passed['unsandboxed']}/{len(problems)}")
    for name, xs in times.items():
        print(f"{name:>12}: median {statistics.median(xs) * 1000:.1f} ms, p90 {percentile(xs, 0.9) * 1000:.1f} ms "
              f"per candidate ({len(xs)} runs)")
    ratio = statistics.median(times["sandboxed"]) / statistics.median(times["unsandboxed"])
    extra = (statistics.median(times["sandboxed"]) - statistics.median(times["unsandboxed"])) * 1000
    print(f"sandbox overhead: {ratio:.2f}x the unsandboxed median, +{extra:.1f} ms per candidate")
    over = []
    for _ in range(args.deadline_trials):
        start = time.perf_counter()
        result = run_program(HOSTILE, 2.0, 512, sandboxed)
        over.append(time.perf_counter() - start - 2.0)
        assert result.status == "timeout", result
    print(f"deadline 2 s, hostile candidate: returned {min(over) * 1000:.0f}-{max(over) * 1000:.0f} ms after it "
          f"({args.deadline_trials} trials)")


if __name__ == "__main__":
    sys.exit(main())
