"""Where each evaluation of a run sits in tokens and in training seconds, and a metric's value there.

Runs are compared at equal tokens and at equal wall-clock, never at equal steps: a run with a bigger batch or a
faster optimizer step is not behind because its step count is lower.

Training seconds come from the metrics rows alone. Each training row's tokens_per_s covers the window since the
previous row, evaluation excluded, so that window took (tokens - previous tokens) / tokens_per_s seconds; their
cumulative sum is the training clock. An evaluation at step s sits at the clock of the training row at s
(interpolated between rows otherwise).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import UserError

# Per-domain metrics of an evaluation row; "mean over domains" when named without a domain.
DOMAIN_METRICS = ("loss", "bpb", "top1", "top10")
HIGHER_IS_BETTER = ("top1", "top10")


def training_seconds(train_rows: list[dict]) -> list[float]:
    """Cumulative training seconds at each training row (rows in step order)."""
    out, clock, previous = [], 0.0, 0
    for r in train_rows:
        window = r["tokens"] - previous
        clock += window / r["tokens_per_s"] if r.get("tokens_per_s") else 0.0
        out.append(clock)
        previous = r["tokens"]
    return out


@dataclass(frozen=True)
class Clock:
    """Step -> tokens and step -> training seconds of one run, from its training rows."""
    steps: np.ndarray
    tokens: np.ndarray
    seconds: np.ndarray

    @classmethod
    def of(cls, train_rows: list[dict]) -> Clock:
        # Step 0 is at 0 tokens and 0 seconds, so an evaluation before the first log row still has a place.
        return cls(np.array([0] + [r["step"] for r in train_rows], dtype=float),
                   np.array([0] + [r["tokens"] for r in train_rows], dtype=float),
                   np.array([0.0] + training_seconds(train_rows)))

    def at(self, step: float) -> tuple[float, float]:
        """(tokens, training seconds) at a step; past the last training row, at its tokens/step and speed."""
        if step <= self.steps[-1] or len(self.steps) < 2:
            return float(np.interp(step, self.steps, self.tokens)), float(np.interp(step, self.steps, self.seconds))
        per_step = self.tokens[-1] / self.steps[-1]
        speed = (self.tokens[-1] - self.tokens[-2]) / max(self.seconds[-1] - self.seconds[-2], 1e-9)
        extra = (step - self.steps[-1]) * per_step
        return float(self.tokens[-1] + extra), float(self.seconds[-1] + extra / speed)


def check_metric(metric: str, domains: set[str]) -> None:
    """A UserError naming the valid metrics when `metric` is none of them."""
    name, _, sub = metric.rpartition("/")
    ok = (metric in ("val_loss", "loss", *DOMAIN_METRICS) or (name in domains and sub in DOMAIN_METRICS))
    if not ok:
        raise UserError(f"--metric {metric}: unknown; use val_loss, loss (training), {', '.join(DOMAIN_METRICS)} "
                        f"(mean over domains) or DOMAIN/METRIC with a domain of these runs: "
                        f"{', '.join(sorted(domains)) or 'none evaluated yet'}")


def higher_is_better(metric: str) -> bool:
    return metric.rpartition("/")[2] in HIGHER_IS_BETTER


def eval_value(row: dict, metric: str, domains: set[str] | None = None) -> float | None:
    """An evaluation metric of one evaluation row: val_loss, a mean over domains, or DOMAIN/METRIC. With
    `domains`, a mean (val_loss too) is over those domains only: runs evaluated on different domain sets are
    compared on the ones they share."""
    if metric == "val_loss" and domains is None:
        return row.get("val_loss")
    domain, _, name = metric.rpartition("/")
    if domain:
        return row["eval"].get(domain, {}).get(name)
    name = "loss" if metric == "val_loss" else name
    values = [d[name] for k, d in row["eval"].items()
              if d.get(name) is not None and (domains is None or k in domains)]
    return sum(values) / len(values) if values else None


@dataclass(frozen=True)
class Curve:
    """A metric of one run against tokens and training seconds (x values increasing)."""
    steps: list[int]
    tokens: list[float]
    seconds: list[float]
    values: list[float]

    def at(self, x: float, axis: str) -> float | None:
        """The value at x tokens or seconds, interpolated between points; None outside the curve."""
        xs = self.tokens if axis == "tokens" else self.seconds
        if not xs or x < xs[0] - 1e-9 or x > xs[-1] + 1e-9:
            return None
        return float(np.interp(x, xs, self.values))

    @property
    def final(self) -> float | None:
        return self.values[-1] if self.values else None


def curve(train_rows: list[dict], eval_rows: list[dict], metric: str, domains: set[str] | None = None) -> Curve:
    """The metric's curve: training loss at each log row for `loss`, else the evaluation rows (means over
    `domains` when given)."""
    clock = Clock.of(train_rows)
    if metric == "loss":
        points = [(r["step"], r["loss"]) for r in train_rows]
    else:
        points = [(r["step"], v) for r in eval_rows if (v := eval_value(r, metric, domains)) is not None]
    where = [clock.at(step) for step, _ in points]
    return Curve([s for s, _ in points], [w[0] for w in where], [w[1] for w in where], [v for _, v in points])


def common_point(curves: list[Curve], axis: str) -> float | None:
    """The largest x every curve reaches: the smallest of their last points (None if a curve is empty)."""
    ends = [(c.tokens if axis == "tokens" else c.seconds) for c in curves]
    return min(e[-1] for e in ends) if all(ends) else None
