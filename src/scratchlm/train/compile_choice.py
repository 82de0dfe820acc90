"""Whether the training model is torch.compiled: decided from this machine's measurements, not assumed.

The plan's probe times an eager step, a compiled step and the compile itself (plan/probe.py); `decide_compile`
weighs them over the planned steps. The plan saves and prints that decision, its time extrapolation follows it,
and the trainer reads it back from the plan of the same train ID (`compile_as_decided`). The decision is kept
out of the train stage's ID: it belongs to the machine, not to the training.
"""
from __future__ import annotations

from pathlib import Path

import torch

from ..config import Config
from ..pipeline import saved_plan
from ..progress import log


def decide_compile(requested: bool | str, measured: dict | None, planned_steps: int) -> dict:
    """requested: train.compile (True, False or "auto"). measured: the probe's eager_step_seconds,
    compiled_step_seconds and compile_seconds, or {"error": why} when torch.compile failed; None when nothing
    was measured. "auto" compiles iff the time saved over the planned steps exceeds the compile time. No margin
    is added: both sides are measured, and near the break-even point either choice costs about the same."""
    out = {"requested": requested, "planned_steps": planned_steps}
    if measured and "error" not in measured:
        saving = measured["eager_step_seconds"] - measured["compiled_step_seconds"]
        out.update({k: measured[k] for k in ("eager_step_seconds", "compiled_step_seconds", "compile_seconds")})
        out.update({"saving_per_step": saving, "total_saving": saving * planned_steps})
    if requested is True or requested is False:
        why = f"train.compile = {'true' if requested else 'false'}"
        if measured and "error" in measured:
            why += f"; torch.compile failed in the probe: {measured['error']}"
        return {**out, "compile": requested, "reason": why}
    if not measured:
        return {**out, "compile": False, "reason": "not measured on this machine"}
    if "error" in measured:
        return {**out, "compile": False, "error": measured["error"],
                "reason": f"torch.compile failed in the probe: {measured['error']}"}
    pays = out["total_saving"] > out["compile_seconds"]
    return {**out, "compile": pays,
            "reason": f"saves {out['saving_per_step'] * 1e3:.1f} ms/step x {planned_steps:,} steps = "
                      f"{out['total_saving']:.1f} s {'>' if pays else '<='} compile {out['compile_seconds']:.1f} s"}


def chosen_step(decision: dict | None, eager_step_seconds: float) -> tuple[float, float]:
    """(seconds per step, one-off compile seconds) of the mode the decision picked, for the time plan.
    eager_step_seconds: the probe's typical step; a compiled run saves on it what the decision measured."""
    if decision and decision["compile"] and "saving_per_step" in decision:
        return eager_step_seconds - decision["saving_per_step"], decision["compile_seconds"]
    return eager_step_seconds, 0.0


def plan_decision(workdir: Path, train_id: str | None, device: torch.device, precision: str) -> dict | None:
    """The compile decision of this training's saved plan, when it was measured on this kind of device at this
    precision (a plan made under other conditions, e.g. a bf16 plan for an fp32 run, decides nothing)."""
    if train_id is None:
        return None
    plan = saved_plan(workdir, train_id)  # none, or damaged: the run goes on eager
    decision = plan.get("compile")
    probe = plan.get("probe")
    if not decision or probe is None or torch.device(probe["device"]).type != device.type \
            or probe["precision"] != precision:
        return None
    return decision


def resolve_compile(requested: bool | str, decision: dict | None) -> tuple[bool, str]:
    """The trainer's choice. Without a plan "auto" stays eager rather than measuring: the measurement is a
    compile, the very cost in question, and the runs that skip the plan (ablations, ladders) are short ones."""
    if requested is True or requested is False:
        return requested, f"train.compile = {'true' if requested else 'false'}"
    if decision is None:
        return False, "auto without a plan measured on this device and precision; `scratchlm plan` measures it"
    return decision["compile"], f"auto, from the plan: {decision['reason']}"


def compile_as_decided(model: torch.nn.Module, cfg: Config, train_id: str | None, device: torch.device,
                       precision: str, main: bool = True) -> torch.nn.Module:
    use, why = resolve_compile(cfg.train.compile, plan_decision(cfg.workdir, train_id, device, precision)
                               if cfg.train.compile == "auto" else None)
    if main:
        log(f"train: compile: {'yes' if use else 'no'} ({why})")
    return torch.compile(model) if use else model
