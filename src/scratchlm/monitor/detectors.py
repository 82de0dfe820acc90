"""Detectors: each turns a stream of metrics into verdicts (ok / warning / error) with a one-line reason.

A detector's `check` returns the alerts that hold *now*, one per subject (a domain, a layer group, a prompt);
the monitor logs an alert when it starts holding, and counts every check at which it held, so a condition that
lasts a hundred log intervals is one line in the log and one row in the timeline, not a hundred.
"""
from __future__ import annotations

import math
from collections import deque
from dataclasses import asdict, dataclass

from ..config import MonitorConfig, TrainConfig

VERDICTS = ("ok", "warning", "error")


@dataclass
class Alert:
    step: int
    detector: str
    subject: str
    verdict: str  # warning | error
    message: str

    def to_dict(self) -> dict:
        return asdict(self)


def linear_forecast(values: list[float]) -> tuple[float, float]:
    """Least-squares line through `values`: (prediction for the next point, std of the residuals)."""
    n = len(values)
    mx, my = (n - 1) / 2, sum(values) / n
    sxx = sum((i - mx) ** 2 for i in range(n))
    slope = sum((i - mx) * (v - my) for i, v in enumerate(values)) / sxx if sxx else 0.0
    residuals = [v - (my + slope * (i - mx)) for i, v in enumerate(values)]
    return my + slope * (n - mx), (sum(r * r for r in residuals) / n) ** 0.5


class LossSpike:
    """Training loss far above its recent history: z-score against the trend of a running window.

    The window is detrended first (a least-squares line), because early in training the loss falls so fast that
    a plain mean/std over the window would hide a spike in the spread of the decline itself.
    """

    name = "loss_spike"
    kind = "log"

    def __init__(self, cfg: MonitorConfig):
        self.window, self.z, self.min_history = cfg.spike_window, cfg.spike_z, cfg.spike_min_history
        self.history: deque[float] = deque(maxlen=self.window)

    def check(self, row: dict) -> list[Alert]:
        loss = row.get("loss")
        if loss is None or not math.isfinite(loss):
            return []
        alerts = []
        if len(self.history) >= self.min_history:
            expected, spread = linear_forecast(list(self.history))
            z = (loss - expected) / max(spread, 1e-3 * abs(expected), 1e-8)
            if z > self.z:
                alerts.append(Alert(row["step"], self.name, "loss", "warning",
                                    f"loss {loss:.4f} is {z:.1f} standard deviations above the {expected:.4f} "
                                    f"expected from the trend of the last {len(self.history)} log intervals"))
        if not alerts:  # a spike stays out of the window, so it cannot hide the next one
            self.history.append(loss)
        return alerts


class WeightGrowth:
    """A layer's weight norm still rising steadily late in the run: AdamW is shrinking its effective LR.

    Early in a run every norm moves fast while the weights leave their initialization and settle, and under a
    decaying LR the growth slows down by itself; neither is the inflation this detector is for. So it judges only
    windows past the run's early phase (`monitor.weight_growth_after` of `train.max_steps`, and at least the
    warmup), and only growth that keeps its pace: the later half of the window must grow at least SUSTAINED times
    as much (in log terms) as the earlier half. AdamW without weight decay at a long constant LR keeps its pace.
    """

    name = "weight_growth"
    kind = "log"
    STEADY = 0.9  # share of intervals that must increase for growth to count as steady
    SUSTAINED = 0.7  # growth of the window's later half / its earlier half; below it the norm is settling

    def __init__(self, cfg: MonitorConfig, train: TrainConfig | None = None):
        self.window, self.growth = cfg.weight_growth_window, cfg.weight_growth
        self.after = max(train.warmup_steps, cfg.weight_growth_after * train.max_steps) if train else 0
        self.history: dict[str, deque[float]] = {}

    def check(self, row: dict) -> list[Alert]:
        if row["step"] < self.after:
            return []
        alerts = []
        for group, norm in (row.get("weight_norm") or {}).items():
            h = self.history.setdefault(group, deque(maxlen=self.window + 1))
            h.append(norm)
            if len(h) <= self.window:
                continue
            ups = sum(b > a for a, b in zip(h, list(h)[1:]))
            rel = h[-1] / max(h[0], 1e-12) - 1
            mid = h[self.window // 2]
            early, late = math.log(mid / max(h[0], 1e-12)), math.log(h[-1] / max(mid, 1e-12))
            if rel > self.growth and ups >= self.STEADY * self.window and late >= self.SUSTAINED * early:
                alerts.append(Alert(row["step"], self.name, group, "warning",
                                    f"weight norm of {group} grew {rel:.0%} over the last {self.window} log "
                                    f"intervals, rose in {ups} of them and is not slowing down: the effective "
                                    f"learning rate |update|/|weight| is shrinking (raise weight decay or lower "
                                    f"the LR)"))
        return alerts


class LoaderStall:
    """The training thread waited for data for a large share of the step time."""

    name = "loader_stall"
    kind = "log"

    def __init__(self, cfg: MonitorConfig):
        self.share = cfg.stall_share

    def check(self, row: dict) -> list[Alert]:
        share = row.get("data_wait_share")
        if share is None or share <= self.share:
            return []
        return [Alert(row["step"], self.name, "loader", "warning",
                      f"{share:.0%} of step time was spent waiting for data (threshold {self.share:.0%}): the "
                      f"loader is starving the model")]


class _BetweenEvaluations:
    """Compares each evaluation's per-domain results with the previous evaluation's."""

    kind = "eval"

    def __init__(self) -> None:
        self.previous: dict[str, dict] = {}

    def check(self, row: dict) -> list[Alert]:
        now = row.get("eval") or {}
        before, self.previous = self.previous, now
        common = [d for d in now if d in before]
        if not common:
            return []
        return self.compare(row["step"], {d: before[d] for d in common}, {d: now[d] for d in common})

    def compare(self, step: int, before: dict[str, dict], now: dict[str, dict]) -> list[Alert]:
        raise NotImplementedError


class DomainDegradation(_BetweenEvaluations):
    """One domain's validation loss rises between evaluations while the mean over domains falls."""

    name = "domain_degradation"

    def __init__(self, cfg: MonitorConfig):
        super().__init__()
        self.rise = cfg.domain_rise

    def compare(self, step: int, before: dict[str, dict], now: dict[str, dict]) -> list[Alert]:
        mean_delta = sum(now[d]["loss"] - before[d]["loss"] for d in now) / len(now)
        if mean_delta >= 0:
            return []  # every domain getting worse together is not one domain's problem
        return [Alert(step, self.name, d, "warning",
                      f"validation loss of domain `{d}` rose {before[d]['loss']:.4f} -> {now[d]['loss']:.4f} "
                      f"while the mean over domains fell by {-mean_delta:.4f}")
                for d in now if now[d]["loss"] - before[d]["loss"] > self.rise]


class Overconfidence(_BetweenEvaluations):
    """Logit max rising and entropy falling while the validation loss does not improve (per domain)."""

    name = "overconfidence"

    def __init__(self, cfg: MonitorConfig):
        super().__init__()
        self.tolerance = cfg.overconfidence_loss_tolerance

    def compare(self, step: int, before: dict[str, dict], now: dict[str, dict]) -> list[Alert]:
        alerts = []
        for d, r in now.items():
            p = before[d]
            if "entropy" not in r or "entropy" not in p:
                continue
            sharper = r["logit_max_mean"] > p["logit_max_mean"] and r["entropy"] < p["entropy"]
            if sharper and r["loss"] > p["loss"] - self.tolerance:
                alerts.append(Alert(step, self.name, d, "warning",
                                    f"domain `{d}`: mean max logit {p['logit_max_mean']:.2f} -> "
                                    f"{r['logit_max_mean']:.2f} and entropy {p['entropy']:.3f} -> "
                                    f"{r['entropy']:.3f} nats while validation loss went {p['loss']:.4f} -> "
                                    f"{r['loss']:.4f}: more certain, not more right"))
        return alerts


class Repetition:
    """Generated samples that repeat themselves (share of repeated word n-grams)."""

    name = "repetition"
    kind = "eval"

    def __init__(self, cfg: MonitorConfig):
        self.rate, self.n = cfg.repetition_rate, cfg.repetition_ngram

    def check(self, row: dict) -> list[Alert]:
        alerts = []
        for i, rate in enumerate(row.get("repetition") or []):
            if rate is not None and rate > self.rate:
                alerts.append(Alert(row["step"], self.name, f"prompt {i}", "warning",
                                    f"sample for prompt {i}: {rate:.0%} of its word {self.n}-grams are repeats "
                                    f"(threshold {self.rate:.0%})"))
        return alerts


DETECTORS = (LossSpike, WeightGrowth, LoaderStall, DomainDegradation, Overconfidence, Repetition)
NONFINITE = "nonfinite"  # the halt: not a streaming detector, the run stops on its first alert
ALL_NAMES = tuple(d.name for d in DETECTORS) + (NONFINITE,)


def build_detectors(cfg: MonitorConfig, train: TrainConfig | None = None) -> list:
    """One of each detector. WeightGrowth also needs the run's length: it judges growth against the run's phase."""
    return [d(cfg, train) if d is WeightGrowth else d(cfg) for d in DETECTORS]
