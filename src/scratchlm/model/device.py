"""Pick the device and the precision automatically, and say which was picked."""
from __future__ import annotations

import contextlib
import os
from functools import lru_cache

import torch

from ..progress import log

# CUDA's caching allocator, told to grow segments in place instead of cutting fixed blocks: less memory lost to
# fragmentation when tensor sizes vary (the last partial chunk of the head loss, evaluation batches), as nanochat and
# torchtitan run it. Read once, when CUDA first allocates, so it is set at import, before any device exists; a value
# the user exported wins. Never run on a GPU by this project so far; no effect on a CPU or MPS.
os.environ.setdefault("PYTORCH_CUDA_ALLOC_CONF", "expandable_segments:True")


def pick_device(requested: str = "auto") -> torch.device:
    if requested != "auto":
        return torch.device(requested)
    if torch.cuda.is_available():
        return torch.device("cuda")
    if getattr(torch.backends, "mps", None) and torch.backends.mps.is_available():
        return torch.device("mps")
    return torch.device("cpu")


# bf16 autocast on a CPU pays only where the matmuls have native bf16 dot products (AVX512-BF16 or AMX) and
# both of torch's CPU back ends may use them: ATen's kernels (ATEN_CPU_CAPABILITY) and oneDNN's
# (ONEDNN_MAX_CPU_ISA). Measured on an AVX512-BF16 CPU, one linear forward + backward: bf16 ~1.9x faster than
# fp32 (8.7 ms vs 4.6 ms); with oneDNN limited to AVX2 it is emulated, 0.08x. The choice is read from these
# facts, never from a stopwatch: a timing taken while the machine is busy would let two processes of one run
# (a resume, another rank) train in different precisions.
ATEN_BF16_CAPABILITIES = ("AVX512", "AMX")  # torch.backends.cpu.get_cpu_capability(); "AVX2", "DEFAULT" lack it
# ONEDNN_MAX_CPU_ISA values that cap oneDNN below native bf16 (oneDNN's ISA names, oldest first).
ONEDNN_WITHOUT_BF16 = ("SSE41", "AVX", "AVX2", "AVX2_VNNI", "AVX2_VNNI_2", "AVX512_CORE", "AVX512_CORE_VNNI")


@lru_cache(maxsize=1)
def cpu_has_bf16() -> bool:
    """The CPU itself: AVX512-BF16 or AMX-BF16 in /proc/cpuinfo."""
    try:
        flags = open("/proc/cpuinfo").read()
    except OSError:
        return False
    return "avx512_bf16" in flags or "amx_bf16" in flags


def cpu_precision_facts() -> tuple[str, str]:
    """The CPU's precision and why, from the CPU's flags and the limits set on torch's back ends."""
    if not cpu_has_bf16():
        return "fp32", "no avx512_bf16/amx_bf16 in /proc/cpuinfo: bf16 would be emulated"
    aten = torch.backends.cpu.get_cpu_capability()
    if aten not in ATEN_BF16_CAPABILITIES:
        return "fp32", f"ATen's kernels are limited to {aten} (ATEN_CPU_CAPABILITY): bf16 would be emulated"
    onednn = os.environ.get("ONEDNN_MAX_CPU_ISA", os.environ.get("DNNL_MAX_CPU_ISA", "")).upper()
    if onednn in ONEDNN_WITHOUT_BF16:
        return "fp32", f"oneDNN is limited to {onednn} (ONEDNN_MAX_CPU_ISA): bf16 would be emulated"
    return "bf16", f"native bf16 on this CPU (avx512_bf16/amx_bf16, ATen {aten}, oneDNN unlimited)"


@lru_cache(maxsize=1)
def cpu_precision() -> tuple[str, str]:
    """cpu_precision_facts, said once per process."""
    choice, why = cpu_precision_facts()
    log(f"precision auto on this CPU: {choice}: {why}")
    return choice, why


def cuda_precision(device: torch.device) -> tuple[str, str]:
    """bf16 from compute capability 8.0 (Ampere) on, on the device used: torch.cuda.is_bf16_supported() also
    counts the emulated bf16 of a V100 or T4, which is slow and falls back to the math attention kernel."""
    major, minor = torch.cuda.get_device_capability(device)
    if (major, minor) >= (8, 0):
        return "bf16", f"compute capability {major}.{minor} has native bf16"
    return "fp16", f"compute capability {major}.{minor} < 8.0: no native bf16, fp16 with loss scaling"


def decide_precision(requested: str, device: torch.device) -> tuple[str, str]:
    """The precision a new run takes on `device`, and why. A run decides it once; its later processes take the
    recorded one (recorded_precision)."""
    if requested != "auto":
        return requested, "set in the config (train.precision)"
    if device.type == "cuda":
        return cuda_precision(device)
    if device.type == "cpu":
        return cpu_precision()
    return "fp32", f"auto on {device.type}: fp32"


def pick_precision(requested: str, device: torch.device) -> str:
    return decide_precision(requested, device)[0]


def recorded_precision(requested: str, meta: dict, device: torch.device) -> tuple[str, str]:
    """The precision of a process that continues or reads a run (a resume, an evaluation of its checkpoint):
    the one the run recorded in its checkpoint's meta when `requested` is auto and the device is of the kind
    the run trained on, so that no later process decides differently; else decided here."""
    recorded = meta.get("precision")
    if requested == "auto" and recorded and meta.get("device", "").split(":")[0] == device.type:
        return recorded, f"recorded by the run ({meta.get('precision_reason') or 'its first process'})"
    return decide_precision(requested, device)


def autocast(device: torch.device, precision: str):
    if precision == "fp32":
        return contextlib.nullcontext()
    dtype = torch.bfloat16 if precision == "bf16" else torch.float16
    return torch.autocast(device_type=device.type, dtype=dtype)


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize()
