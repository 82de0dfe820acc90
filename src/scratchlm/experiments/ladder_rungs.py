"""The rungs of a scale ladder: smaller members of the target model's family, each trained for a fixed number of
tokens per parameter, and the family grown past the target to find the compute-optimal size of a budget.

"The family" is plan.shrink.family: same head size, same depth-to-width ratio, same heads per width (so the same
attention width per d_model, also with an explicit head_dim), same GQA grouping, one member per depth. A rung is named by its depth (n_layer). Parameters and FLOPs per token are the plan's own
(plan.arithmetic), so a rung's N is the N of the plan's tokens-per-parameter verdict.
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import numpy as np

from ..config import ModelConfig, TrainConfig
from ..errors import UserError
from ..plan.arithmetic import count_params, flops_per_token, tokens_needed
from ..plan.shrink import family
from .fit import MIN_POINTS
from .variants import Override

# --sizes auto: rungs at these shares of the target's depth. 4 rungs, not 3: the power law's 2 parameters leave
# 2 degrees of freedom for the band (with 1, t(0.975, 1) = 12.7 and the band says nothing)
AUTO_DEPTH_SHARES = (0.2, 0.4, 0.6, 0.8)
MAX_RUNGS = 5  # beyond this, a ladder spends more compute on rungs than the fit needs
WARMUP_MAX_SHARE = 0.1  # a rung warms up for the target's share of its steps, at most this share
GROWTH_LIMIT = 64  # the family is grown at most this many times the target's depth to cover a budget


@dataclass(frozen=True)
class Rung:
    model: ModelConfig
    params: int  # plan.arithmetic count_params(...).total
    flops_per_token: float  # plan.arithmetic flops_per_token(...)["total"]
    steps: int  # train.max_steps of this rung
    warmup_steps: int
    tokens_per_step: int

    @property
    def name(self) -> str:
        return shape_name(self.model)

    @property
    def tokens(self) -> int:
        return self.steps * self.tokens_per_step

    @property
    def tokens_per_param(self) -> float:
        """What the rung really trains at: the steps round the tokens up, by up to one step's tokens."""
        return self.tokens / self.params

    @property
    def compute(self) -> float:
        """Training FLOPs of the tokens it really trains on (the steps round the tokens-per-parameter up)."""
        return self.flops_per_token * self.tokens

    def overrides(self, target: ModelConfig) -> tuple[Override, ...]:
        """The [model] shape keys and the step counts this rung changes in the target config."""
        return (*shape_overrides(self.model, target), Override("train.max_steps", self.steps),
                Override("train.warmup_steps", self.warmup_steps))


def shape_overrides(m: ModelConfig, target: ModelConfig) -> tuple[Override, ...]:
    """The keys that make the target config build m: depth, width and heads (KV heads where the target sets them;
    an explicit head_dim stays the target's: the family keeps the head size)."""
    keys = ["n_layer", "d_model", "n_head"] + (["n_kv_head"] if target.n_kv_head is not None else [])
    return tuple(Override(f"model.{k}", getattr(m, k)) for k in keys)


def shape_name(m: ModelConfig) -> str:
    return f"{m.n_layer}x{m.d_model}"


def default_depths(target: ModelConfig) -> list[int]:
    """--sizes auto: 1/5, 2/5, 3/5 and 4/5 of the target's depth; where those round to fewer than 4 distinct
    depths (a shallow target), the 4 shallowest members, or as many as the family has."""
    available = sorted(m.n_layer for m in family(target))
    depths = sorted({max(1, round(target.n_layer * s)) for s in AUTO_DEPTH_SHARES} & set(available))
    return depths if len(depths) == len(AUTO_DEPTH_SHARES) else available[:len(AUTO_DEPTH_SHARES)]


def parse_sizes(text: str, target: ModelConfig) -> list[ModelConfig]:
    """The rungs' shapes, smallest first: `auto`, or depths of the family such as `1,2,3`."""
    members = {m.n_layer: m for m in family(target)}
    available = ", ".join(map(str, sorted(members)))
    if text.strip() == "auto":
        depths = default_depths(target)
    else:
        try:
            depths = sorted({int(d) for d in text.split(",") if d.strip()})
        except ValueError:
            raise UserError(f"--sizes {text!r}: expected depths (n_layer) of the family, e.g. --sizes 1,2,3, "
                            "or auto") from None
        missing = [d for d in depths if d not in members]
        if missing:
            raise UserError(f"--sizes {text!r}: the family of the {shape_name(target)} target has no member of "
                            f"depth {', '.join(map(str, missing))}; its members have depth {available}")
    if len(depths) < MIN_POINTS:
        raise UserError(f"--sizes {text!r}: a ladder needs at least {MIN_POINTS} rungs; the family of the "
                        f"{shape_name(target)} target has members of depth {available}"
                        + ("" if len(members) >= MIN_POINTS else " (a deeper target has more)"))
    if len(depths) > MAX_RUNGS:
        raise UserError(f"--sizes {text!r}: at most {MAX_RUNGS} rungs, got {len(depths)}")
    return [members[d] for d in depths]


def warmup_for(steps: int, train: TrainConfig) -> int:
    """The target's warmup as a share of its steps, capped at WARMUP_MAX_SHARE, applied to every rung alike: the
    same schedule shape at every size, and a short rung does not spend its few steps warming up."""
    if train.warmup_steps == 0 or steps <= 1:
        return 0
    share = min(train.warmup_steps / train.max_steps, WARMUP_MAX_SHARE)
    return min(steps - 1, max(1, round(share * steps)))


def make_rung(m: ModelConfig, vocab: int, tokens_per_param: float, tokens_per_step: int, train: TrainConfig) -> Rung:
    params = count_params(m, vocab).total
    steps = max(1, math.ceil(tokens_needed(params, tokens_per_param) / tokens_per_step))
    return Rung(m, params, flops_per_token(m, vocab)["total"], steps, warmup_for(steps, train), tokens_per_step)


def compute_at(m: ModelConfig, vocab: int, tokens_per_param: float) -> tuple[int, float]:
    """(N, C): parameters, and training FLOPs at tokens_per_param tokens per parameter."""
    params = count_params(m, vocab).total
    return params, flops_per_token(m, vocab)["total"] * tokens_needed(params, tokens_per_param)


def grown_family(target: ModelConfig, factor: int) -> list[ModelConfig]:
    """The family of a model `factor` times deeper and wider than the target (same head size, ratio and
    grouping): every member up to that size, the target's own shape among them. Largest first."""
    big = dataclasses.replace(target, n_layer=target.n_layer * factor, d_model=target.d_model * factor,
                              n_head=target.n_head * factor,
                              n_kv_head=None if target.n_kv_head is None else target.n_kv_head * factor)
    return family(big)


def compute_optimal(target: ModelConfig, vocab: int, tokens_per_param: float, budget_flops: float) -> dict:
    """The N whose training at tokens_per_param costs budget_flops (C = flops_per_token(N) * r * N, solved along
    the family by log-log interpolation), and the family member nearest it in log N."""
    factor = 2
    while True:
        members = grown_family(target, factor)
        if compute_at(members[0], vocab, tokens_per_param)[1] >= budget_flops or factor >= GROWTH_LIMIT:
            break
        factor *= 2
    rows = sorted((compute_at(m, vocab, tokens_per_param) + (m,) for m in members), key=lambda r: r[1])
    params = np.array([r[0] for r in rows], dtype=float)
    computes = np.array([r[1] for r in rows])
    where = "inside the family"
    if budget_flops < computes[0]:
        where = "below the family's smallest member"
    elif budget_flops > computes[-1]:
        where = f"above the largest member of the family tried ({GROWTH_LIMIT}x the target's depth)"
    n_opt = float(np.exp(np.interp(np.log(budget_flops), np.log(computes), np.log(params))))
    best = rows[int(np.argmin(np.abs(np.log(params) - math.log(n_opt))))]
    return {"params_optimal": n_opt, "budget_flops": budget_flops, "where": where, "model": best[2],
            "params": best[0], "compute": best[1], "tokens": tokens_needed(best[0], tokens_per_param)}
