"""The device to plan for: datasheet presets, auto-detection, and a measured matmul peak.

Datasheet peaks are dense (no 2:4 sparsity) tensor-core figures from the vendors' spec sheets; fp32 is the
non-tensor-core rate, which is what torch uses for fp32 matmuls unless TF32 is enabled. Memory is the nominal
capacity; the driver reports a little less, which is why the memory verdict keeps 10% headroom.
"""
from __future__ import annotations

import os
import time
from dataclasses import dataclass

import torch

from ..errors import UserError

GiB = 1024 ** 3


@dataclass(frozen=True)
class DevicePreset:
    key: str
    name: str
    memory: int  # bytes
    peak_flops: dict  # precision -> dense FLOP/s from the datasheet
    match: tuple[str, ...] = ()  # substrings of torch.cuda.get_device_name() that identify it


def _peaks(bf16: float, fp32: float) -> dict:
    return {"bf16": bf16 * 1e12, "fp16": bf16 * 1e12, "fp32": fp32 * 1e12}


PRESETS = {p.key: p for p in [
    DevicePreset("rtx4090", "NVIDIA GeForce RTX 4090 (24 GB)", 24 * GiB, _peaks(165.2, 82.6), ("RTX 4090",)),
    DevicePreset("l4", "NVIDIA L4 (24 GB)", 24 * GiB, _peaks(121.0, 30.3), (" L4",)),
    DevicePreset("a100-40gb", "NVIDIA A100 40 GB", 40 * GiB, _peaks(312.0, 19.5), ("A100-SXM4-40GB", "A100-PCIE-40GB")),
    DevicePreset("a100-80gb", "NVIDIA A100 80 GB", 80 * GiB, _peaks(312.0, 19.5), ("A100-SXM4-80GB", "A100 80GB")),
    DevicePreset("h100", "NVIDIA H100 SXM (80 GB)", 80 * GiB, _peaks(989.4, 66.9), ("H100",)),
    DevicePreset("h200", "NVIDIA H200 (141 GB)", 141 * 10 ** 9, _peaks(989.4, 66.9), ("H200",)),
    DevicePreset("cpu", "CPU (system RAM)", 0, {}),
]}


@dataclass
class Target:
    """The device the plan is for, and whether the probe can run on it (it is this machine's device)."""

    preset: str | None
    name: str
    device_type: str  # cpu | cuda | mps
    memory: int
    memory_note: str
    datasheet_peak: dict
    local: bool


def ram_bytes() -> tuple[int, int]:
    """(total, available) system RAM from /proc/meminfo; falls back to sysconf where /proc is absent."""
    try:
        info = {line.split(":")[0]: int(line.split()[1]) * 1024 for line in open("/proc/meminfo")}
        return info["MemTotal"], info.get("MemAvailable", info["MemTotal"])
    except (OSError, KeyError, ValueError):
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
        return total, total


def _preset_for_gpu_name(name: str) -> DevicePreset | None:
    for p in PRESETS.values():
        if any(s in name for s in p.match):
            return p
    return None


def local_target(device: torch.device) -> Target:
    if device.type == "cuda":
        props = torch.cuda.get_device_properties(device)
        preset = _preset_for_gpu_name(props.name)
        return Target(preset.key if preset else None, props.name, "cuda", props.total_memory,
                      "reported by the driver", preset.peak_flops if preset else {}, True)
    total, available = ram_bytes()
    if device.type == "mps":
        return Target(None, "Apple GPU (unified memory)", "mps", total, "system RAM, shared with the GPU", {}, True)
    return Target("cpu", f"CPU ({os.cpu_count()} cores, {torch.get_num_threads()} torch threads)", "cpu",
                  available, f"available RAM now ({total / GiB:.1f} GiB total)", {}, True)


def resolve_target(gpu: str | None, device: torch.device) -> Target:
    """`--gpu NAME` picks a preset; without it the local device is detected."""
    if gpu is None:
        return local_target(device)
    key = gpu.strip().lower().replace(" ", "")
    if key not in PRESETS:
        raise UserError(f"unknown --gpu `{gpu}`; known presets: {', '.join(PRESETS)}")
    preset = PRESETS[key]
    local = local_target(device)
    if key == "cpu":
        return local if device.type == "cpu" else Target("cpu", "CPU (system RAM)", "cpu", ram_bytes()[1],
                                                         "available RAM now", {}, False)
    if local.preset == key:
        return local
    return Target(key, preset.name, "cuda", preset.memory, "nominal capacity (datasheet)", preset.peak_flops, False)


def matmul_dtype(precision: str) -> torch.dtype:
    return {"bf16": torch.bfloat16, "fp16": torch.float16}.get(precision, torch.float32)


def measure_matmul_peak(device: torch.device, precision: str, seconds: float = 1.0) -> float:
    """FLOP/s of the best of repeated square matmuls in the training precision: what this device really
    delivers on the kernel that dominates training, as opposed to what the datasheet promises."""
    n = 4096 if device.type == "cuda" else 1024
    a = torch.randn(n, n, device=device, dtype=matmul_dtype(precision))
    b = torch.randn(n, n, device=device, dtype=matmul_dtype(precision))
    best = 0.0
    for _ in range(2):  # warm-up: kernel selection, page faults
        a @ b
    _sync(device)
    deadline = time.perf_counter() + seconds
    while time.perf_counter() < deadline:
        t0 = time.perf_counter()
        a @ b
        _sync(device)
        best = max(best, 2 * n ** 3 / (time.perf_counter() - t0))
    return best


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)
