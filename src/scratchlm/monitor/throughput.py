"""Model FLOPs utilization and memory: how much of the machine the run actually uses.

FLOPs per token follow the PaLM appendix: 6N for the matrix multiplies of forward and backward (N excludes an
untied input embedding, which is a lookup), plus 12 * n_layer * n_head * head_dim * seq_len for attention
scores and values. Two peaks, both logged: the log row's `mfu` is against a measured peak, a large matmul in the
training precision, timed once per device and cached (peak_flops), so it says what share of *this* machine's
matmul speed the run reaches; `mfu_datasheet` is against the GPU's dense datasheet peak
(scratchlm.gpu_peaks.datasheet_peak, the figure papers quote MFU against), where the GPU is known: not on a CPU.
"""
from __future__ import annotations

import json
import os
import resource
import time
from pathlib import Path

import torch

from .. import progress

CACHE_ENV = "SCRATCHLM_CACHE"


def flops_per_token(model) -> float:
    c = model.cfg
    n = model.num_params()
    if not c.tie_embeddings:
        n -= model.tok_emb.weight.numel()
    return 6.0 * n + 12.0 * c.n_layer * c.n_head * c.attn_head_dim * c.seq_len


def _cache_file() -> Path:
    root = os.environ.get(CACHE_ENV) or os.path.join(os.environ.get("XDG_CACHE_HOME", "~/.cache"), "scratchlm")
    return Path(root).expanduser() / "peak_flops.json"


def _device_key(device: torch.device, precision: str) -> str:
    if device.type == "cuda":
        name = torch.cuda.get_device_name(device)
    else:
        name = f"{device.type}-{os.cpu_count()}cpu-{torch.get_num_threads()}threads"
    return f"{name}|{precision}|torch{torch.__version__}"


def measure_matmul_peak(device: torch.device, precision: str, size: int | None = None, repeats: int = 5) -> float:
    """Best FLOP/s of a square matmul in the training precision on `device`."""
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(precision, torch.float32)
    size = size or (8192 if device.type == "cuda" else 1024)
    a = torch.randn(size, size, device=device, dtype=dtype)
    b = torch.randn(size, size, device=device, dtype=dtype)
    best = float("inf")
    for _ in range(repeats + 1):  # the first run warms up kernels and caches
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        t0 = time.perf_counter()
        a @ b
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        best = min(best, time.perf_counter() - t0)
    return 2.0 * size ** 3 / best


def peak_flops(device: torch.device, precision: str, configured: float = 0.0) -> float:
    if configured > 0:
        return configured
    path, key = _cache_file(), _device_key(device, precision)
    try:
        cache = json.loads(path.read_text())
    except (OSError, ValueError):
        cache = {}
    if key not in cache:
        cache[key] = measure_matmul_peak(device, precision)
        progress.log(f"monitor: measured matmul peak {cache[key] / 1e9:,.0f} GFLOP/s on {key} (cached in {path})")
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(cache, indent=1))
        except OSError:
            pass  # a read-only home only costs a re-measurement next run
    return cache[key]


def memory_bytes(device: torch.device) -> tuple[str, int]:
    """(kind, bytes): the CUDA high-water mark since the last call, or the process's resident set size."""
    if device.type == "cuda":
        used = torch.cuda.max_memory_allocated(device)
        torch.cuda.reset_peak_memory_stats(device)
        return "cuda_max_allocated", int(used)
    try:
        with open("/proc/self/statm") as f:
            return "rss", int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return "max_rss", resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
