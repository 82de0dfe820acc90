"""The device to plan for: the GPU presets of `--gpu` and auto-detection (the measured matmul peak is the monitor's).

The presets and their datasheet peaks are the rows of scratchlm/gpu_peaks.py, the one table MFU uses everywhere.
"""
from __future__ import annotations

import os
from dataclasses import dataclass

import torch

from .. import gpu_peaks
from ..errors import UserError
from ..gpu_peaks import GiB

PRESETS = {**{s.key: s for s in gpu_peaks.SPECS}, "cpu": None}  # --gpu KEY; cpu: this machine's RAM


@dataclass
class Target:
    """The device the plan is for, and whether the probe can run on it (it is this machine's device)."""

    preset: str | None
    name: str
    device_type: str  # cpu | cuda | mps
    memory: int
    memory_note: str
    datasheet_peak: dict  # precision -> dense FLOP/s (gpu_peaks.datasheet_peak); {} where unknown
    local: bool


def ram_bytes() -> tuple[int, int]:
    """(total, available) system RAM from /proc/meminfo; falls back to sysconf where /proc is absent."""
    try:
        info = {line.split(":")[0]: int(line.split()[1]) * 1024 for line in open("/proc/meminfo")}
        return info["MemTotal"], info.get("MemAvailable", info["MemTotal"])
    except (OSError, KeyError, ValueError):
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
        return total, total


def local_target(device: torch.device) -> Target:
    if device.type == "cuda":
        props = torch.cuda.get_device_properties(device)
        spec = gpu_peaks.spec_for(props)
        return Target(spec.key if spec else None, props.name, "cuda", props.total_memory, "reported by the driver",
                      gpu_peaks.datasheet_peaks(props), True)
    total, available = ram_bytes()
    if device.type == "mps":
        return Target(None, "Apple GPU (unified memory)", "mps", total, "system RAM, shared with the GPU",
                      gpu_peaks.datasheet_peaks(device), True)
    return Target("cpu", f"CPU ({os.cpu_count()} cores, {torch.get_num_threads()} torch threads)", "cpu",
                  available, f"available RAM now ({total / GiB:.1f} GiB total)", gpu_peaks.datasheet_peaks(device),
                  True)


def resolve_target(gpu: str | None, device: torch.device) -> Target:
    """`--gpu NAME` picks a preset; without it the local device is detected."""
    if gpu is None:
        return local_target(device)
    key = gpu.strip().lower().replace(" ", "")
    spec = gpu_peaks.spec_by_key(key)
    if spec is None and key != "cpu":
        raise UserError(f"unknown --gpu `{gpu}`; known presets: {', '.join(PRESETS)}")
    local = local_target(device)
    if key == "cpu":
        return local if device.type == "cpu" else Target("cpu", "CPU (system RAM)", "cpu", ram_bytes()[1],
                                                         "available RAM now", {}, False)
    if local.preset == spec.key:
        return local
    return Target(spec.key, spec.name, "cuda", spec.memory, "nominal capacity (datasheet)",
                  gpu_peaks.datasheet_peaks(spec.device_names[0]), False)
