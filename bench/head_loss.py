"""The LM head + cross-entropy, forward and backward: the plain path against model/head_loss.py's chunks.

For each vocabulary and width, one batch of tokens through `F.cross_entropy(h @ W.T)` and through `head_loss` at
several chunk sizes, side by side in one process; the best of `--repeats` timings, in milliseconds. This is what
chose CHUNK_TOKENS (docs/benchmarks.md, "The head and the loss in chunks").

    PYTHONPATH=src python bench/head_loss.py [--threads 1] [--tokens 4096]
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).parent))
from throughput import machine_line  # noqa: E402

from scratchlm.model.head_loss import CHUNK_TOKENS, head_loss  # noqa: E402

SHAPES = ((4096, 192), (32768, 512), (50304, 768))  # (vocab, d_model): the quickstart's, then common ones
CHUNKS = (128, 256, 512, 1024, 2048)


def best_ms(fn, repeats: int) -> float:
    fn()  # warm-up
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return 1000 * min(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--tokens", type=int, default=4096)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    print(machine_line())
    print("| vocab x d_model | plain | " + " | ".join(f"chunk {c}" for c in CHUNKS) + " |")
    print("|---|---:|" + "---:|" * len(CHUNKS))
    g = torch.Generator().manual_seed(0)
    for vocab, d in SHAPES:
        h = torch.randn(args.tokens, d, generator=g).requires_grad_()
        w = (0.02 * torch.randn(vocab, d, generator=g)).requires_grad_()
        t = torch.randint(0, vocab, (args.tokens,), generator=g)
        mean = torch.full((args.tokens,), 1 / args.tokens)
        plain = best_ms(lambda: F.cross_entropy((h @ w.t()).float(), t).backward(), args.repeats)
        cells = [best_ms(lambda c=c: head_loss(h, w, t, mean, chunk_tokens=c).backward(), args.repeats)
                 for c in CHUNKS]
        marked = [f"**{ms:.0f}**" if c == CHUNK_TOKENS else f"{ms:.0f}" for c, ms in zip(CHUNKS, cells)]
        print(f"| {vocab} x {d} | {plain:.0f} | " + " | ".join(marked) + " |")


if __name__ == "__main__":
    main()
