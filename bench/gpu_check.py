"""GPU check of the pretraining core: eager, torch.compile and activation checkpointing on the 125m and 350m presets.

Each variant trains a fresh model on random tokens with the trainer's own pieces (GPT, the trainer's optimizer
builder, autocast, its gradient clipping, no host sync inside the timed steps) and reports:
  tokens/s        median over timed windows, after warm-up (compilation happens in the warm-up, timed apart)
  MFU             achieved FLOP/s (FLOPs per token from scratchlm.monitor.throughput, as the trainer logs it)
                  over the datasheet peak of the GPU (scratchlm.plan.hardware; --peak-tflops overrides) and
                  over a matmul peak measured on this GPU first, as `scratchlm plan` does
  peak memory     growth of torch.cuda.max_memory_allocated over the variant (model, optimizer and steps), next
                  to the plan's estimate for that shape (scratchlm.plan.memory.estimate_memory: the figure
                  `scratchlm plan` compares with its probe) and their ratio
It first checks that SDPA's flash kernel accepts the model's attention shapes in bf16. A variant that fails
(out of memory, a compile error) is recorded with its error and the next one runs; the JSON is rewritten after
every variant, so a run stopped by a time limit still leaves what it measured. Variants not started within
--budget-s are recorded as skipped.

    python bench/gpu_check.py                    # one H200: about 5 minutes; writes gpu_check.json to $OUT or .
    python bench/gpu_check.py --presets 125m --modes eager compiled --batch 16
    python bench/gpu_check.py --dry-run-cpu      # the same code path on CPU with a tiny shape (seconds): a test
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
import traceback
from pathlib import Path

import torch
import torch.nn.functional as F

from scratchlm.config import config_from_dict
from scratchlm.model import GPT
from scratchlm.model.device import autocast, pick_precision, sync
from scratchlm.monitor.throughput import flops_per_token
from scratchlm.plan.hardware import local_target, measure_matmul_peak
from scratchlm.plan.memory import GiB, estimate_memory
from scratchlm.plan.peakmem import PeakMemory, release_freed_memory
from scratchlm.train.loop import clip_gradients
from scratchlm.train.optim import build_optimizer

MODES = ("eager", "compiled", "checkpointing")  # checkpointing: activation checkpointing, eager
PRESETS = ("125m", "350m")
# --dry-run-cpu: a shape small enough for seconds on CPU, through the same functions.
DRY_RUN = {"model": {"n_layer": 2, "d_model": 64, "n_head": 4, "seq_len": 32}, "vocab": 512, "batch": 2,
           "warmup": 1, "steps": 2, "windows": 1}


def model_config(preset: str, seq_len: int, shape: dict | None = None):
    model = {"preset": preset, "seq_len": seq_len} if shape is None else dict(shape)
    return config_from_dict({"data": {"sources": [{"name": "x", "domain": "x", "path": "x"}]}, "model": model}).model


def check_flash(m, device: torch.device) -> None:
    """Raises if SDPA's flash kernel refuses the model's attention shape in bf16."""
    from torch.nn.attention import SDPBackend, sdpa_kernel

    q = torch.randn(2, m.n_head, m.seq_len, m.attn_head_dim, device=device, dtype=torch.bfloat16)
    with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
        F.scaled_dot_product_attention(q, q, q, is_causal=True)


def timed_training(model: torch.nn.Module, raw: GPT, optimizer, batch: int, vocab: int, args,
                   device: torch.device, precision: str) -> dict:
    """Warm-up steps (compilation happens there), then `windows` windows of `steps` steps, synced at their ends."""
    seq_len = raw.cfg.seq_len
    x = torch.randint(0, vocab, (batch, seq_len), device=device)
    y = torch.randint(0, vocab, (batch, seq_len), device=device)

    def step() -> None:
        with autocast(device, precision):
            _, loss = model(x, y)
        loss.backward()
        clip_gradients(raw, 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    t0 = time.perf_counter()
    for _ in range(args.warmup):
        step()
    sync(device)
    warmup_s = time.perf_counter() - t0
    rates = []
    for _ in range(args.windows):
        t0 = time.perf_counter()
        for _ in range(args.steps):
            step()
        sync(device)
        rates.append(args.steps * batch * seq_len / (time.perf_counter() - t0))
    return {"tokens_per_s": statistics.median(rates), "tokens_per_s_windows": rates, "warmup_s": warmup_s}


def run_variant(preset: str, mode: str, m, vocab: int, batch: int, args, device: torch.device, precision: str,
                peaks: dict) -> dict:
    checkpointing = mode == "checkpointing"
    estimate = estimate_memory(m, vocab, batch, 1, precision, args.optimizer, device.type, checkpointing)
    result = {"preset": preset, "mode": mode, "batch": batch, "seq_len": m.seq_len,
              "shape": {"n_layer": m.n_layer, "d_model": m.d_model, "n_head": m.n_head},
              "activation_checkpointing": checkpointing, "compiled": mode == "compiled",
              "estimate_peak_bytes": estimate.peak, "estimate_peak_phase": estimate.peak_phase}
    torch.manual_seed(0)
    with PeakMemory(device) as memory:
        raw = GPT(m, vocab).to(device)
        raw.activation_checkpointing = checkpointing
        model = torch.compile(raw, backend=args.compile_backend) if mode == "compiled" else raw
        optimizer = build_optimizer(raw, args.optimizer, 6e-4, 0.1, device_type=device.type)
        result.update(timed_training(model, raw, optimizer, batch, vocab, args, device, precision))
    n_flops = flops_per_token(raw)
    result.update({"n_params": raw.num_params(), "flops_per_token": n_flops,
                   "peak_memory_bytes": memory.peak, "memory_method": memory.method,
                   "estimate_over_measured": estimate.peak / max(1, memory.peak)})
    for name, peak in peaks.items():
        result[f"mfu_{name}"] = result["tokens_per_s"] * n_flops / peak if peak else None
    return result


def release(device: torch.device) -> None:
    """Between variants: drop compiled graphs and cached blocks, so each variant's peak is its own."""
    torch._dynamo.reset()
    release_freed_memory()
    if device.type == "cuda":
        torch.cuda.empty_cache()


def summary_line(v: dict) -> str:
    name = f"{v['preset']:5s} {v['mode']:13s}"
    if v["status"] != "ok":
        return f"{name} {v['status']}: {v.get('error') or v.get('reason')}"
    mfu = v.get("mfu_datasheet") if v.get("mfu_datasheet") is not None else v.get("mfu_measured_matmul")
    return (f"{name} {v['tokens_per_s']:>10,.0f} tokens/s  MFU {100 * (mfu or 0):5.1f}%  "
            f"peak {v['peak_memory_bytes'] / GiB:6.2f} GiB (plan estimate {v['estimate_peak_bytes'] / GiB:6.2f})  "
            f"warm-up {v['warmup_s']:.0f}s")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--presets", nargs="+", default=list(PRESETS), choices=["50m", "125m", "350m", "1b"])
    ap.add_argument("--modes", nargs="+", default=list(MODES), choices=list(MODES))
    ap.add_argument("--seq-len", type=int, default=1024)
    ap.add_argument("--vocab", type=int, default=32768)
    ap.add_argument("--batch", type=int, default=32, help="sequences per step (one micro-batch)")
    ap.add_argument("--optimizer", default="adamw", choices=["adamw", "muon", "muonh"])
    ap.add_argument("--warmup", type=int, default=5, help="untimed steps per variant (compilation happens here)")
    ap.add_argument("--steps", type=int, default=10, help="steps per timed window")
    ap.add_argument("--windows", type=int, default=3)
    ap.add_argument("--peak-tflops", type=float, default=None,
                    help="the peak MFU is taken against (default: the GPU's datasheet bf16 figure, when known)")
    ap.add_argument("--budget-s", type=float, default=420.0,
                    help="start no variant after this many seconds (the rest are recorded as skipped)")
    ap.add_argument("--dry-run-cpu", action="store_true",
                    help="run the same code path on CPU with a tiny shape (no GPU needed; numbers mean nothing)")
    ap.add_argument("--out", type=Path, default=None, help="directory for gpu_check.json (default: $OUT, or .)")
    args = ap.parse_args(argv)
    args.compile_backend = "eager" if args.dry_run_cpu else "inductor"  # no C++ toolchain needed on CPU
    if args.dry_run_cpu:
        args.vocab, args.batch = DRY_RUN["vocab"], DRY_RUN["batch"]
        args.warmup, args.steps, args.windows = DRY_RUN["warmup"], DRY_RUN["steps"], DRY_RUN["windows"]
    return args


def main(argv: list[str] | None = None) -> dict:
    args = parse_args(argv)
    if args.dry_run_cpu:
        device = torch.device("cpu")
        precision = pick_precision("auto", device)
    elif not torch.cuda.is_available():
        sys.exit("gpu_check: no CUDA device visible; this script measures a GPU "
                 "(--dry-run-cpu runs its code path on CPU with a tiny shape)")
    else:
        device, precision = torch.device("cuda"), "bf16"
        torch.backends.cuda.matmul.allow_tf32 = True
    started = time.perf_counter()
    target = local_target(device)
    peaks = {"measured_matmul": measure_matmul_peak(device, precision, seconds=0.2 if args.dry_run_cpu else 1.0)}
    datasheet = args.peak_tflops * 1e12 if args.peak_tflops else target.datasheet_peak.get(precision)
    peaks["datasheet"] = datasheet
    out_dir = args.out or Path(os.environ.get("OUT") or ".")
    out_dir.mkdir(parents=True, exist_ok=True)
    out = out_dir / "gpu_check.json"
    result = {"device": target.name, "torch": torch.__version__, "precision": precision,
              "dry_run_cpu": args.dry_run_cpu, "optimizer": args.optimizer, "vocab": args.vocab,
              "peak_flops": peaks, "peak_flops_source": "--peak-tflops" if args.peak_tflops else "datasheet",
              "warmup_steps": args.warmup, "steps_per_window": args.steps, "windows": args.windows,
              "variants": []}
    for preset in args.presets:
        m = model_config(preset, args.seq_len, DRY_RUN["model"] if args.dry_run_cpu else None)
        if device.type == "cuda":
            try:
                check_flash(m, device)
                result.setdefault("flash_sdpa", {})[preset] = True
            except RuntimeError as e:
                result.setdefault("flash_sdpa", {})[preset] = f"refused: {str(e).splitlines()[0]}"
        for mode in args.modes:
            if time.perf_counter() - started > args.budget_s:
                variant = {"preset": preset, "mode": mode, "status": "skipped",
                           "reason": f"--budget-s {args.budget_s:g} s spent before it started"}
            else:
                try:
                    variant = {**run_variant(preset, mode, m, args.vocab, args.batch, args, device, precision,
                                             peaks), "status": "ok"}
                except Exception as e:  # one variant failing (OOM, compile error) must not cost the others
                    variant = {"preset": preset, "mode": mode, "status": "error",
                               "error": f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}",
                               "traceback": traceback.format_exc()[-4000:]}
                release(device)
            result["variants"].append(variant)
            result["elapsed_s"] = time.perf_counter() - started
            print(summary_line(variant), flush=True)
            out.write_text(json.dumps(result, indent=2) + "\n")  # after every variant: a kill keeps the rest
    print(f"wrote {out}")
    return result


if __name__ == "__main__":
    main()
