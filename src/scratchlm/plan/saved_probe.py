"""A plan's measurements kept and reused, so that the same config on the same machine gets the same forecast.

A second `plan` on an unchanged config, and the plan `scratchlm run` makes before training, take the step timings
of the saved plan when they were measured under the same conditions (same machine, device, precision, threads,
torch and batch shape); `plan --remeasure` measures again. `plan` and `run` then judge the budget from the same
numbers instead of from two probes a busy machine may have timed apart.

The compile time is kept apart, per model shape and torch version (compile_seconds.json beside the plans): the
first probe on a machine compiles with a cold inductor cache, later ones with a warm one, and a forecast that
counted 1.3 min of compiling in one plan and 5 s in the next flipped the budget verdict. The first measurement
is kept; delete that file to measure it again.
"""
from __future__ import annotations

import platform
import time
from pathlib import Path

import torch

from ..ids import content_id, read_json, write_json
from ..pipeline import saved_plan

COMPILE_CACHE = "compile_seconds.json"
# What the probe measures, versioned: a probe taken before a change of what its memory window holds (2: one
# evaluation batch and the monitor's weight copy) is measured again instead of reused.
PROBE_VERSION = 2


def probe_key(device: torch.device, device_name: str, precision: str, shape: dict, compile_setting) -> dict:
    """What a step timing depends on besides the config's training (the plan file is per train ID)."""
    return {"host": platform.node(), "device": str(device), "device_name": device_name, "precision": precision,
            "threads": torch.get_num_threads(), "torch": torch.__version__, "shape": shape,
            "compile": compile_setting, "probe_version": PROBE_VERSION}


def saved_probe(workdir: Path, train_id: str, key: dict) -> dict | None:
    """The probe of the saved plan of this training when it was measured under `key`'s conditions."""
    saved = saved_plan(workdir, train_id)
    probe = saved.get("probe")
    return probe if probe and saved.get("probe_key") == key else None


def stamp(probe: dict) -> dict:
    """When it was measured: what a reused plan shows."""
    return {**probe, "measured_at": time.strftime("%Y-%m-%d %H:%M:%S")}


def _cache(workdir: Path) -> tuple[Path, dict]:
    path = Path(workdir) / "plan" / COMPILE_CACHE
    try:
        return path, read_json(path) if path.exists() else {}
    except ValueError:
        return path, {}


def settle_compile_seconds(workdir: Path, model_key: dict, measured: dict) -> dict:
    """`measured` (the probe's compile measurement) with the compile time kept for this model shape and torch
    version: the first one measured, which is stored when there is none."""
    if not measured or "error" in measured:
        return measured
    path, cache = _cache(workdir)
    entry_id = content_id(model_key, torch.__version__)
    kept = cache.get(entry_id)
    if kept is None:
        cache[entry_id] = {"compile_seconds": measured["compile_seconds"], "torch": torch.__version__,
                           "measured_at": time.strftime("%Y-%m-%d %H:%M:%S"), "key": model_key}
        path.parent.mkdir(parents=True, exist_ok=True)
        write_json(path, cache)
        return measured
    return {**measured, "compile_seconds": kept["compile_seconds"], "compile_seconds_now": measured["compile_seconds"],
            "compile_seconds_from": f"{path} (measured {kept['measured_at']})"}
