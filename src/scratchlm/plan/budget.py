"""Which budget a plan is judged against: a flag, else the config's [plan] keys, else the saved plan's.

The saved plan is the fallback so that a budget given once (`scratchlm plan --budget-hours 0.5`) keeps deciding:
`scratchlm run` re-plans the same training without flags, and must not then call a run that overshoots it "ok"
and overwrite the plan with no budget at all.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from ..config import Config
from ..errors import UserError
from ..pipeline import plan_path, saved_plan
from ..progress import log


@dataclass(frozen=True)
class Budget:
    hours: float | None
    price_per_hour: float | None
    source: str | None  # where the hours came from: "--budget-hours", "[plan] budget_hours", the saved plan's path


def resolve_budget(cfg: Config, train_id: str, hours: float | None = None,
                   price_per_hour: float | None = None) -> Budget:
    """hours / price_per_hour: the command-line flags, None when not given."""
    if hours is not None and not (hours > 0 and math.isfinite(hours)):
        raise UserError(f"--budget-hours must be a number > 0, got {hours:g}")
    if price_per_hour is not None and not (price_per_hour >= 0 and math.isfinite(price_per_hour)):
        raise UserError(f"--price-per-hour must be >= 0, got {price_per_hour:g}")
    where = cfg.path or "config"
    if hours is not None:
        source = "--budget-hours"
        if cfg.plan.budget_hours is None:  # the saved plan keeps it, but only under this train ID
            log(f"plan: --budget-hours {hours:g} is kept with this training's plan; put `budget_hours = {hours:g}` "
                f"under [plan] in {where} so that a changed config (a new train ID) is judged against it too")
    elif cfg.plan.budget_hours is not None:
        hours, source = cfg.plan.budget_hours, f"[plan] budget_hours in {where}"
    else:
        source = None
    if price_per_hour is None:
        price_per_hour = cfg.plan.price_per_hour
    if hours is None or price_per_hour is None:
        path = plan_path(cfg.workdir, train_id)
        saved = saved_plan(cfg.workdir, train_id)
        if hours is None and saved.get("budget_hours") is not None:
            hours, source = saved["budget_hours"], str(path)
            log(f"plan: judged against the budget of {hours:g} h kept in the saved plan {path}; set [plan] "
                f"budget_hours or pass --budget-hours to change it, or delete that file to plan without one")
        if price_per_hour is None:
            price_per_hour = saved.get("price_per_hour")
    return Budget(hours, price_per_hour, source)
