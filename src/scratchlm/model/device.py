"""Pick the device and the precision automatically, and say which was picked."""
from __future__ import annotations

import contextlib
import time
from functools import lru_cache

import torch

from ..progress import log


def pick_device(requested: str = "auto") -> torch.device:
    if requested != "auto":
        return torch.device(requested)
    if torch.cuda.is_available():
        return torch.device("cuda")
    if getattr(torch.backends, "mps", None) and torch.backends.mps.is_available():
        return torch.device("mps")
    return torch.device("cpu")


# bf16 is picked on a CPU only when a bf16 linear layer (forward + backward) is at least this much faster than
# fp32: the rest of the step (norms, softmax, the optimizer, the casts autocast adds) does not speed up, so a
# smaller win on the matmuls alone can vanish in the whole step, and one worker's timings on shared cores vary
# by ~10%. Measured on an AVX512-BF16 CPU: ~1.9x (fp32 8.7 ms, bf16 4.6 ms); with oneDNN limited to AVX2: 0.08x.
BF16_MIN_SPEEDUP = 1.25
BF16_PROBE_SECONDS = 0.3  # the measuring window, warm-up included; one round past it at most


@lru_cache(maxsize=1)
def cpu_has_bf16() -> bool:
    """The cheap pre-filter: without AVX512-BF16 or AMX, bf16 on CPU is emulated and slower than fp32. With the
    flag, oneDNN may still be limited (ONEDNN_MAX_CPU_ISA, ATEN_CPU_CAPABILITY), so the flag alone decides nothing."""
    try:
        flags = open("/proc/cpuinfo").read()
    except OSError:
        return False
    return "avx512_bf16" in flags or "amx_bf16" in flags


def _linear_step(bf16: bool):
    """One forward + backward of a transformer-sized linear layer (256 x 512 -> 1024), as autocast runs it."""
    gen = torch.Generator().manual_seed(0)
    layer = torch.nn.Linear(512, 1024)
    x = torch.randn(256, 512, generator=gen, requires_grad=True)

    def step() -> None:
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            y = layer(x)
        y.float().sum().backward()

    return step


def time_cpu_linear(seconds: float = BF16_PROBE_SECONDS) -> dict:
    """Best time of the fp32 and the bf16 step, interleaved so that a busy spell on shared cores hits both;
    the minimum is the time of an undisturbed call.

    On one thread: whether bf16 has native kernels is a property of each core (its ISA as oneDNN sees it), and
    with several threads on cores another process keeps busy every call waits out a scheduler slice for its
    slowest thread (2 threads under load: ~95 ms fp32 and ~110 ms bf16 for a ~9 ms / ~5 ms step), which hides it."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        deadline = time.perf_counter() + seconds  # the warm-up counts: emulated bf16 takes ~0.2 s per call
        steps = {"fp32": _linear_step(False), "bf16": _linear_step(True)}
        for step in steps.values():  # first calls pick and build kernels
            step()
        best = dict.fromkeys(steps, float("inf"))
        rounds = 0
        while time.perf_counter() < deadline or rounds < 1:
            for name, step in steps.items():
                t0 = time.perf_counter()
                step()
                best[name] = min(best[name], time.perf_counter() - t0)
            rounds += 1
    finally:
        torch.set_num_threads(threads)
    return {"fp32_seconds": best["fp32"], "bf16_seconds": best["bf16"], "rounds": rounds}


def bf16_choice(timings: dict) -> tuple[bool, str]:
    """bf16 iff its measured speed-up clears BF16_MIN_SPEEDUP; the reason names the numbers."""
    speedup = timings["fp32_seconds"] / timings["bf16_seconds"]
    numbers = (f"bf16 {timings['bf16_seconds'] * 1e3:.2f} ms vs fp32 {timings['fp32_seconds'] * 1e3:.2f} ms "
               f"per linear fwd+bwd, {speedup:.2f}x")
    if speedup >= BF16_MIN_SPEEDUP:
        return True, f"{numbers} >= {BF16_MIN_SPEEDUP}x"
    return False, f"{numbers} < {BF16_MIN_SPEEDUP}x"


@lru_cache(maxsize=1)
def cpu_precision() -> tuple[str, str]:
    """The CPU's precision and why, measured once per process."""
    if not cpu_has_bf16():
        return "fp32", "no avx512_bf16/amx_bf16 in /proc/cpuinfo: bf16 would be emulated"
    use_bf16, why = bf16_choice(time_cpu_linear())
    choice = "bf16" if use_bf16 else "fp32"
    log(f"precision auto on this CPU: {choice} (measured {why})")
    return choice, f"measured: {why}"


def pick_precision(requested: str, device: torch.device) -> str:
    if requested != "auto":
        return requested
    if device.type == "cuda":
        return "bf16" if torch.cuda.is_bf16_supported() else "fp16"
    if device.type == "cpu":
        return cpu_precision()[0]
    return "fp32"


def autocast(device: torch.device, precision: str):
    if precision == "fp32":
        return contextlib.nullcontext()
    dtype = torch.bfloat16 if precision == "bf16" else torch.float16
    return torch.autocast(device_type=device.type, dtype=dtype)


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize()
