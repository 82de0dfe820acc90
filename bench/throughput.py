"""Training throughput of scratchlm's GPT against the plain nanoGPT baseline, side by side in one process.

Both models get the same parameter budget (reported), batch, sequence length, optimizer (AdamW, clipping at 1.0)
and thread count, and run one full training step (forward, backward, clip, AdamW) per iteration on random tokens.
Rounds alternate between the contenders so that load from other processes on a shared machine hits all of them
alike; the median over rounds is reported, and against the baseline the median of the ratios taken within each
round, with their range. "ours" is measured in fp32 and in bf16 autocast; the precision that
`train.precision = "auto"` picks on this machine (a measurement, model/device.py) is marked in the table.

The first line printed names the CPU and what torch may use on it. On a CPU with AVX-512-BF16 or AMX, an AVX2-only
CPU is emulated with `ATEN_CPU_CAPABILITY=avx2 ONEDNN_MAX_CPU_ISA=AVX2 MKL_ENABLE_INSTRUCTIONS=AVX2` (the last for
the fp32 matmuls, which go through MKL; bf16 then runs emulated: pass `--precisions fp32` to skip it), in a fresh
`TORCHINDUCTOR_CACHE_DIR` (kernels compiled for one instruction set crashed a run on the other).

    PYTHONPATH=src python bench/throughput.py --d-model 192 --n-head 6       # the quickstart's shape
    PYTHONPATH=src python bench/throughput.py --seq-len 1024 --batch 4 --compile --threads 2
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).parent))
from baseline_gpt2 import BaselineConfig, BaselineGPT  # noqa: E402

from scratchlm.config import ModelConfig  # noqa: E402
from scratchlm.model import GPT  # noqa: E402
from scratchlm.model.device import autocast, pick_precision  # noqa: E402
from scratchlm.train.optim import build_optimizer  # noqa: E402

CPU = torch.device("cpu")


def add_shape_arguments(ap: argparse.ArgumentParser, d_model: int = 256, n_head: int = 4) -> None:
    """The model and batch shape both contenders get (shared with bench/profile_step.py)."""
    ap.add_argument("--n-layer", type=int, default=4)
    ap.add_argument("--d-model", type=int, default=d_model)
    ap.add_argument("--n-head", type=int, default=n_head)
    ap.add_argument("--seq-len", type=int, default=256)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--vocab", type=int, default=4096)


def model_pair(args) -> tuple[GPT, BaselineGPT]:
    """scratchlm's GPT and the plain baseline at the shape of add_shape_arguments, from seed 0."""
    torch.manual_seed(0)
    ours = GPT(ModelConfig(n_layer=args.n_layer, d_model=args.d_model, n_head=args.n_head, seq_len=args.seq_len),
               args.vocab)
    base = BaselineGPT(BaselineConfig(vocab_size=args.vocab, n_layer=args.n_layer, n_head=args.n_head,
                                      d_model=args.d_model, seq_len=args.seq_len))
    return ours, base


def contenders(args) -> dict[str, tuple[torch.nn.Module, str]]:
    ours, base = model_pair(args)
    models = {"baseline fp32": (base, "fp32")} | {f"ours {p}": (ours, p) for p in args.precisions}
    if args.compile:  # compiled once per contender before the first round; compile time is measured apart
        compiled = torch.compile(ours)
        models |= {f"ours {p} compiled": (compiled, p) for p in args.precisions}
    return models


def machine_line() -> str:
    """The CPU, the instruction sets torch's kernels may use on it, and the bf16/AMX flags it reports."""
    name, flags = "unknown CPU", set()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            key, _, value = line.partition(":")
            if key.strip() == "model name":
                name = value.strip()
            elif key.strip() == "flags":
                flags = set(value.split())
    except OSError:
        pass
    shown = [f for f in ("avx2", "avx512f", "avx512_bf16", "amx_bf16") if f in flags]
    mkl = os.environ.get("MKL_ENABLE_INSTRUCTIONS", "unlimited")
    return (f"CPU: {name}; flags {' '.join(shown) or 'none of avx2/avx512f/avx512_bf16/amx_bf16'}; torch kernels: "
            f"{torch.backends.cpu.get_cpu_capability()}; MKL instructions: {mkl}; {torch.get_num_threads()} thread(s)")


def time_steps(model: torch.nn.Module, precision: str, args, steps: int) -> float:
    """Tokens per second over `steps` full training steps (after one untimed warm-up step)."""
    opt = build_optimizer(model, "adamw", 1e-4, 0.1)
    gen = torch.Generator().manual_seed(1)
    x = torch.randint(0, args.vocab, (args.batch, args.seq_len), generator=gen)
    y = torch.randint(0, args.vocab, (args.batch, args.seq_len), generator=gen)

    def step() -> None:
        with autocast(CPU, precision):
            _, loss = model(x, y)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)

    step()
    t0 = time.perf_counter()
    for _ in range(steps):
        step()
    return steps * args.batch * args.seq_len / (time.perf_counter() - t0)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_shape_arguments(ap)
    ap.add_argument("--steps", type=int, default=5, help="timed steps per contender per round")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--threads", type=int, default=1,
                    help="1 by default: on a shared machine a descheduled second thread stalls every parallel op")
    ap.add_argument("--compile", action="store_true", help="also time torch.compile'd ours")
    ap.add_argument("--precisions", type=lambda s: s.split(","), default=["fp32", "bf16"],
                    help="comma-separated precisions of ours (default fp32,bf16)")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    print(machine_line())
    picked = pick_precision("auto", CPU)
    models = contenders(args)
    for name, (model, precision) in models.items():
        print(f"{name:20s} {sum(p.numel() for p in model.parameters()):,} parameters", file=sys.stderr)
        if "compiled" in name:
            t0 = time.perf_counter()
            time_steps(model, precision, args, 1)
            print(f"{name}: compile and first steps {time.perf_counter() - t0:.1f} s", file=sys.stderr)
    results: dict[str, list[float]] = {name: [] for name in models}
    for r in range(args.rounds):
        for name, (model, precision) in models.items():
            results[name].append(time_steps(model, precision, args, args.steps))
        print(f"round {r + 1}: " + ", ".join(f"{n} {v[-1]:,.0f}" for n, v in results.items()), file=sys.stderr)
    print(f"| model | params | tokens/s (median of {args.rounds}) | vs baseline: median of the rounds' ratios "
          "(lowest-highest) |")
    print("|---|---:|---:|---:|")
    for name, (model, _) in models.items():
        # each round's ratio is taken within the round, so a busy spell on shared cores slows both sides of it
        ratios = [ours / base for ours, base in zip(results[name], results["baseline fp32"])]
        mark = " (auto precision)" if name.startswith(f"ours {picked}") else ""
        print(f"| {name}{mark} | {sum(p.numel() for p in model.parameters()):,} | "
              f"{statistics.median(results[name]):,.0f} | {statistics.median(ratios):.2f}x "
              f"({min(ratios):.2f}-{max(ratios):.2f}) |")


if __name__ == "__main__":
    main()
