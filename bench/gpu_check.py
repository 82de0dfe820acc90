"""GPU check of the pretraining core: bf16, torch.compile, SDPA flash attention, tokens/s, MFU, peak memory.

Trains the `125m` preset at seq_len 1024 on random tokens with the trainer's own pieces (GPT, build_optimizer,
autocast, gradient clipping) and reports, per variant (eager / compiled):
  tokens/s        median over timed windows, after warm-up (compile time excluded, reported separately)
  MFU             achieved FLOP/s over the peak (default 790e12, the bf16 dense figure this project plans with;
                  pass --peak-tflops for another chip). FLOPs per token = 6 N + 12 L T d (PaLM appendix B), N
                  counting the (tied) embedding once because the LM head multiplies by it.
  peak memory     torch.cuda.max_memory_allocated for the variant
It first checks that SDPA's flash kernel accepts the model's attention shapes in bf16 (it raises if not).

    python bench/gpu_check.py                       # writes gpu_check.json to $OUT (or the working directory)
    python bench/gpu_check.py --batch 16 --steps 30 --optimizer muon
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

from scratchlm.config import config_from_dict
from scratchlm.model import GPT
from scratchlm.model.device import autocast
from scratchlm.train.optim import build_optimizer


def flops_per_token(model: GPT) -> float:
    c = model.cfg
    return 6 * model.num_params() + 12 * c.n_layer * c.seq_len * c.n_head * c.attn_head_dim


def check_flash(model: GPT, device: torch.device) -> None:
    c = model.cfg
    q = torch.randn(2, c.n_head, c.seq_len, c.attn_head_dim, device=device, dtype=torch.bfloat16)
    with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
        F.scaled_dot_product_attention(q, q, q, is_causal=True)


def run_variant(model: torch.nn.Module, raw: GPT, args, device: torch.device) -> dict:
    torch.cuda.reset_peak_memory_stats()
    opt = build_optimizer(raw, args.optimizer, 6e-4, 0.1, device_type="cuda")
    x = torch.randint(0, raw.vocab_size, (args.batch, raw.cfg.seq_len), device=device)
    y = torch.randint(0, raw.vocab_size, (args.batch, raw.cfg.seq_len), device=device)

    def step() -> None:
        with autocast(device, "bf16"):
            _, loss = model(x, y)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(raw.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)

    t0 = time.perf_counter()
    for _ in range(args.warmup):
        step()
    torch.cuda.synchronize()
    warmup_s = time.perf_counter() - t0
    rates = []
    for _ in range(args.windows):
        t0 = time.perf_counter()
        for _ in range(args.steps):
            step()
        torch.cuda.synchronize()
        rates.append(args.steps * args.batch * raw.cfg.seq_len / (time.perf_counter() - t0))
    tok_s = statistics.median(rates)
    return {"tokens_per_s": tok_s, "tokens_per_s_windows": rates, "warmup_s": warmup_s,
            "mfu": tok_s * flops_per_token(raw) / (args.peak_tflops * 1e12),
            "peak_memory_gib": torch.cuda.max_memory_allocated() / 2**30}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--preset", default="125m")
    ap.add_argument("--seq-len", type=int, default=1024)
    ap.add_argument("--vocab", type=int, default=32768)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--optimizer", default="adamw", choices=["adamw", "muon", "muonh"])
    ap.add_argument("--warmup", type=int, default=5, help="untimed steps (compilation happens here)")
    ap.add_argument("--steps", type=int, default=20, help="steps per timed window")
    ap.add_argument("--windows", type=int, default=3)
    ap.add_argument("--peak-tflops", type=float, default=790.0)
    ap.add_argument("--no-compile", action="store_true")
    args = ap.parse_args()
    if not torch.cuda.is_available():
        sys.exit("gpu_check: no CUDA device visible; this script measures a GPU")
    device = torch.device("cuda")
    torch.backends.cuda.matmul.allow_tf32 = True
    cfg = config_from_dict({"data": {"sources": [{"name": "x", "domain": "x", "path": "x"}]},
                            "model": {"preset": args.preset, "seq_len": args.seq_len}})
    torch.manual_seed(0)
    raw = GPT(cfg.model, args.vocab).to(device)
    check_flash(raw, device)
    result = {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__, "preset": args.preset,
              "seq_len": args.seq_len, "batch": args.batch, "optimizer": args.optimizer,
              "n_params": raw.num_params(), "flops_per_token": flops_per_token(raw),
              "peak_tflops": args.peak_tflops, "flash_sdpa": True, "variants": {}}
    result["variants"]["eager"] = run_variant(raw, raw, args, device)
    if not args.no_compile:
        result["variants"]["compiled"] = run_variant(torch.compile(raw), raw, args, device)
    for name, v in result["variants"].items():
        print(f"{name:9s} {v['tokens_per_s']:,.0f} tokens/s  MFU {100 * v['mfu']:.1f}%  "
              f"peak {v['peak_memory_gib']:.1f} GiB  warm-up {v['warmup_s']:.0f}s")
    out = Path(os.environ.get("OUT", "."))
    out.mkdir(parents=True, exist_ok=True)
    (out / "gpu_check.json").write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {out / 'gpu_check.json'}")


if __name__ == "__main__":
    main()
