"""The report's Timings section: each stage's time, read from its manifest (the one record of it), and the
plan's predicted training time against the train stage's measured one."""
from __future__ import annotations

from pathlib import Path

from ..ids import read_json
from ..pipeline import MANIFEST
from ..progress import duration


def stage_seconds(dirs: dict[str, Path]) -> dict[str, float]:
    """Seconds per finished stage, in the order of dirs (the pipeline's). The report stage is still running, so
    it has none yet."""
    return {stage: read_json(d / MANIFEST)["seconds"] for stage, d in dirs.items() if (d / MANIFEST).exists()}


def predicted_training(plan: dict | None) -> float | None:
    """The plan's time for the run as it happens when nothing crashes: its total less the one restart it
    budgets for. None when the plan could not measure a step (another device, or no probe)."""
    t = (plan or {}).get("time")
    return t["total_seconds"] - t["restart_seconds"] if t else None


def timing_section(dirs: dict[str, Path], plan: dict | None, table) -> tuple[list[str], dict]:
    seconds = stage_seconds(dirs)
    rows = [[stage, f"{v:.1f}", duration(v)] for stage, v in seconds.items()]
    md = ["## Timings", "", table(["stage", "seconds", "time"], rows), "",
          f"Total {duration(sum(seconds.values()))} (each stage's manifest.json; a stage skipped as up to date shows "
          "the time of the run that made it).", ""]
    predicted, measured = predicted_training(plan), seconds.get("train")
    training = {"predicted_seconds": predicted, "measured_seconds": measured,
                "ratio": measured / predicted if predicted and measured is not None else None}
    if training["ratio"] is not None:
        t = plan["time"]
        md.append(f"Training took {duration(measured)}; the plan predicted {duration(predicted)} (training "
                  f"{duration(t['train_seconds'])}, {t['checkpoints']} checkpoints, {t['evaluations']} evaluations"
                  f"{' by the eval watcher, not counted' if t.get('eval_external') else ''}; "
                  f"without the restart it budgets for): **{training['ratio']:.2f}x** the prediction.")
    elif plan is None:
        md.append("No plan was saved for this training, so there is no prediction to compare "
                  "(`scratchlm run` plans first; so does `scratchlm plan -c CONFIG`).")
    else:
        md.append("The plan did not time a training step on this device, so there is no predicted time to compare.")
    return md, {"stages": seconds, "training": training}
