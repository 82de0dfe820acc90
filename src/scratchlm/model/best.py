"""best.json: which checkpoint of a run has the lowest validation loss so far.

Written by whoever evaluates a run's checkpoints (the trainer inline, or the eval watcher beside it); read by
pruning, which never removes the best, and by what picks a run's best checkpoint.
"""
from __future__ import annotations

import math
from pathlib import Path

from ..ids import read_json, write_json
from ..progress import log
from .checkpoint import PREFIX

BEST = "best.json"


def _read_best(directory: Path) -> dict | None:
    path = Path(directory) / BEST
    if not path.exists():
        return None
    try:
        best = read_json(path)
        return {"checkpoint": str(best["checkpoint"]), "val_loss": float(best["val_loss"])}
    except (ValueError, KeyError, TypeError) as e:
        # Only ever written atomically, so this is damage from outside: drop it and let evaluations rewrite it.
        log(f"checkpoint: {path} is damaged ({type(e).__name__}: {e}); removed, the next evaluation writes it again")
        path.unlink(missing_ok=True)
        return None


def best_checkpoint(directory: Path) -> Path | None:
    best = _read_best(directory)
    if best is None:
        return None
    path = Path(directory) / best["checkpoint"]
    return path if path.is_dir() else None


def mark_best(directory: Path, step: int, val_loss: float) -> bool:
    """Record the checkpoint of `step` as the best if its validation loss beats the recorded one."""
    name = f"{PREFIX}{step:07d}"
    if not (Path(directory) / name).is_dir() or math.isnan(val_loss):  # no checkpoint at this step, or NaN
        return False
    best = _read_best(directory)
    if best is not None and (Path(directory) / best["checkpoint"]).is_dir() and best["val_loss"] <= val_loss:
        return False
    write_json(Path(directory) / BEST, {"checkpoint": name, "step": step, "val_loss": val_loss})
    return True


def rebuild_best(directory: Path, evaluations: list[tuple[int, float]]) -> None:
    """best.json again from (step, validation loss) pairs, e.g. the evaluations a resumed run kept."""
    (Path(directory) / BEST).unlink(missing_ok=True)
    for step, val_loss in evaluations:
        mark_best(directory, step, val_loss)
