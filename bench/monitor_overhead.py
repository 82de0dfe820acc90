"""Cost of the monitor's log-step measurements against a training step, side by side in one process.

At a log step the monitor computes per-group gradient norms, copies the weights, then computes weight norms and
update ratios. This times a plain step (forward, backward, clip, AdamW) and the same step with those hooks,
interleaved, on the quickstart model size by default. Usage:
    python bench/monitor_overhead.py [--layers 4 --d-model 192 --seq-len 256 --batch 16 --repeats 20]
"""
from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import torch

from scratchlm.config import Config, ModelConfig
from scratchlm.model import GPT
from scratchlm.monitor import Monitor


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--d-model", type=int, default=192)
    ap.add_argument("--heads", type=int, default=6)
    ap.add_argument("--seq-len", type=int, default=256)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--vocab", type=int, default=4096)
    ap.add_argument("--repeats", type=int, default=20)
    args = ap.parse_args()
    torch.manual_seed(0)
    cfg = Config()
    cfg.model = ModelConfig(n_layer=args.layers, d_model=args.d_model, n_head=args.heads, seq_len=args.seq_len)
    cfg.train.log_every = 1
    cfg.monitor.tensorboard = False
    cfg.monitor.peak_flops = 1e12  # MFU is not what is measured here
    model = GPT(cfg.model, args.vocab)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    monitor = Monitor(cfg, Path(tempfile.mkdtemp()), model, torch.device("cpu"), "fp32")
    x = torch.randint(0, args.vocab, (args.batch, args.seq_len))

    def step(i: int, hooks: bool) -> float:
        t0 = time.perf_counter()
        _, loss = model(x, x)
        loss.backward()
        if hooks:
            monitor.before_update(i)
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        if hooks:
            monitor.on_log(i, {"step": i, "loss": float(loss.detach()), "tokens_per_s": 1.0}, 1.0)
        return time.perf_counter() - t0

    for i in range(3):
        step(i + 1, True)  # warm-up
    plain, hooked = [], []
    for i in range(args.repeats):
        plain.append(step(i + 1, False))
        hooked.append(step(i + 1, True))
    p, h = statistics.median(plain), statistics.median(hooked)
    print(f"{model.num_params():,} parameters, batch {args.batch}x{args.seq_len}, {torch.get_num_threads()} threads")
    print(f"plain step {p * 1e3:.1f} ms, step with log-step monitoring {h * 1e3:.1f} ms (median of "
          f"{args.repeats}): +{(h - p) / p:.1%} at a log step, +{(h - p) / p / 10:.2%} amortized at log_every=10")
    monitor.close()


if __name__ == "__main__":
    main()
