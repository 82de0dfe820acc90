"""Wall time of `scratchlm generate --max-new-tokens 20` against `python -c "import torch"`, its floor.

    PYTHONPATH=src python bench/startup_bench.py [--checkpoint STEP_DIR] [--rounds 7] [--before SRC] [--busy 2]

Each round runs every command once, in turn, as a fresh process; the figure is the median over rounds. Rows:
the floor, `scratchlm --help`, and generate with torch's default threads and with OMP_NUM_THREADS=1.
--before SRC adds generate run from another source tree (e.g. `git archive HEAD | tar -x -C /tmp/head`, then
--before /tmp/head/src) for a before/after in one run. --busy N keeps N busy-looping processes running for
the whole run, like another job on the machine: torch's intra-op threads then wait for a core at every small
op, which is what makes a short generate slow on a loaded machine (at nice 19 the loops barely show).
Without --checkpoint: a random-weight model of the quickstart's shape (generate_bench.py).
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path

from generate_bench import random_checkpoint

SRC = str(Path(__file__).resolve().parent.parent / "src")


def wall(cmd: list[str], env: dict) -> float:
    t0 = time.perf_counter()
    subprocess.run(cmd, env=env, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - t0


@contextmanager
def busy(n: int):
    procs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(n)]
    try:
        yield
    finally:
        for p in procs:
            p.kill()
            p.wait()


def rows(ckpt: Path, before: str | None) -> list[tuple[str, list[str], dict]]:
    env = {**os.environ, "PYTHONPATH": SRC}
    one_thread = {**env, "OMP_NUM_THREADS": "1"}
    generate = [sys.executable, "-m", "scratchlm", "generate", "--checkpoint", str(ckpt), "--max-new-tokens", "20",
                "--seed", "0"]
    out = [("python -c 'import torch' (floor)", [sys.executable, "-c", "import torch"], env),
           ("scratchlm --help", [sys.executable, "-m", "scratchlm", "--help"], env),
           ("scratchlm generate, 20 tokens", generate, env),
           ("scratchlm generate, 20 tokens, OMP_NUM_THREADS=1", generate, one_thread)]
    if before:
        out.append((f"scratchlm generate, 20 tokens, from {before}", generate, {**env, "PYTHONPATH": before}))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--checkpoint")
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--before", help="another source tree's src/ to run generate from")
    ap.add_argument("--busy", type=int, default=0, help="busy-looping processes during the run")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        ckpt = Path(args.checkpoint) if args.checkpoint else random_checkpoint(Path(tmp))
        table = rows(ckpt, args.before)
        with busy(args.busy):
            for _, cmd, env in table:  # warm-up: the page cache, not the first round, pays for reading torch
                wall(cmd, env)
            times = [[wall(cmd, env) for _, cmd, env in table] for _ in range(args.rounds)]
    floor = statistics.median(t[0] for t in times)
    print(f"median of {args.rounds} rounds, {args.busy} busy process(es), {os.cpu_count()} CPUs")
    for i, (name, _, _) in enumerate(table):
        m = statistics.median(t[i] for t in times)
        print(f"  {name:60s} {m:6.2f} s  ({m - floor:+.2f} s over the floor)")


if __name__ == "__main__":
    main()
