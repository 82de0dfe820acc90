"""Verdict levels, and the worst of several: one order for the plan, `check`, the ladder and fine-tuning."""
from __future__ import annotations

LEVELS = ("ok", "warning", "error")
NOT_AVAILABLE = "not available"  # for checks whose stage is not built: never reported as ok


def worst(levels) -> str:
    """The worst of `levels` (those not in LEVELS, such as NOT_AVAILABLE, are left out); "ok" when none is left."""
    levels = [lv for lv in levels if lv in LEVELS]
    return max(levels, key=LEVELS.index) if levels else "ok"
