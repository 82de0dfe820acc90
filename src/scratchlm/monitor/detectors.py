"""Detectors: each turns a stream of metrics into verdicts (ok / warning / error) with a one-line reason.

A detector's `check` returns the alerts that hold *now*, one per subject (a domain, a layer group, a prompt);
the monitor logs an alert when it starts holding, and counts every check at which it held, so a condition that
lasts a hundred log intervals is one line in the log and one row in the timeline, not a hundred.
"""
from __future__ import annotations

import math
from bisect import bisect_left
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


class StepSpikes:
    """Each step's loss and gradient norm (before clipping) against the same values of the previous `window`
    steps: a spike is a value more than `z` standard deviations above its window's mean.

    OLMo-core's rule, with its defaults (128 steps, 6 standard deviations): its StabilityMonitorCallback judges the
    loss and the gradient norm of every step this way, and its SkipStepOptimizer skips the update of a step that
    spikes. As in that optimizer, a step is judged once half a window is there: the first steps' values fall too
    fast to be anyone's baseline. And as in both, every finite value enters its window, a spike too: a lasting change of
    level (a harder data phase) is taken in within a few steps, where a window that kept spikes out would skip
    every step after it. The price: one spike widens its window's spread for the next `window` steps (a
    20-sigma spike about doubles it at 128). No trend is fitted, unlike LossSpike on log rows: a falling loss
    leaves each step below its window's mean, so the decline cannot fire it, it only hides small spikes.
    """

    def __init__(self, window: int, z: float):
        self.z, self.min_history = z, max(2, window // 2)
        self.loss: deque[float] = deque(maxlen=window)
        self.grad_norm: deque[float] = deque(maxlen=window)

    def judge(self, step: int, loss: float, grad_norm: float) -> dict | None:
        """Step `step`'s spike as a `spikes` entry of the log row (no action yet), or None: no spike, too little
        history, or a value that is not finite (the non-finite halt's business). Call `add` after it."""
        if not (math.isfinite(loss) and math.isfinite(grad_norm)) or len(self.loss) < self.min_history:
            return None
        (loss_z, loss_mean), (norm_z, norm_mean) = _z_score(loss, self.loss), _z_score(grad_norm, self.grad_norm)
        if max(loss_z, norm_z) <= self.z:
            return None
        return {"step": step, "loss": loss, "grad_norm": grad_norm, "loss_z": round(loss_z, 2),
                "grad_norm_z": round(norm_z, 2), "loss_mean": loss_mean, "grad_norm_mean": norm_mean,
                "window": len(self.loss), "action": "none"}

    def add(self, loss: float, grad_norm: float) -> None:
        if math.isfinite(loss) and math.isfinite(grad_norm):
            self.loss.append(loss)
            self.grad_norm.append(grad_norm)

    def state_dict(self) -> dict:
        return {"loss": list(self.loss), "grad_norm": list(self.grad_norm)}

    def load_state_dict(self, state: dict | None) -> None:
        """A checkpoint written before these windows existed has none: they fill again from the resumed step."""
        for values, saved in ((self.loss, (state or {}).get("loss", [])),
                              (self.grad_norm, (state or {}).get("grad_norm", []))):
            values.clear()
            values.extend(saved)


def _z_score(value: float, window: deque[float]) -> tuple[float, float]:
    """(standard deviations of `value` above the window's mean, that mean); the sample standard deviation, as
    torch.std_mean gives OLMo-core. A flat window (spread under 1e-10, as OLMo-core) gives 0: nothing to judge by."""
    n = len(window)
    mean = math.fsum(window) / n
    spread = math.sqrt(math.fsum((v - mean) ** 2 for v in window) / (n - 1))
    return ((value - mean) / spread if spread >= 1e-10 else 0.0), mean


def spike_text(spike: dict, z: float) -> str:
    """What spiked at a step, in numbers: each of its loss and gradient norm that is over `z`."""
    parts = [f"{label} {spike[key]:.4g} is {spike[key + '_z']:.1f} standard deviations above the mean "
             f"{spike[key + '_mean']:.4g} of the last {spike['window']} steps"
             for key, label in (("loss", "loss"), ("grad_norm", "gradient norm"))
             if spike.get(key + "_z") is not None and spike[key + "_z"] > z]
    return ", and its ".join(parts) or (f"loss {spike['loss']:.4g} and gradient norm {spike['grad_norm']:.4g} stayed "
                                        f"within {z:g} standard deviations")


def documents_text(spike: dict) -> str:
    shown = spike.get("documents") or []
    if not shown:
        return "its batch's documents are unknown (the loader cannot replay them)"
    more = spike.get("documents_total", len(shown)) - len(shown)
    listed = " (spikes.json lists all)" if spike.get("action", "none") != "none" else ""  # only actions are recorded
    return f"its batch's documents: {', '.join(shown)}" + (f" and {more} more{listed}" if more else "")


class GradNormSpike:
    """A step's gradient norm far above the steps before it (StepSpikes, OLMo-core's per-step rule). The trainer
    judges every step and reads the values back where it syncs anyway (log steps, checkpoints); this detector turns
    the row's `spikes` entries whose gradient norm crossed into an alert, so a step that is not a log step is
    judged too. The loss of a batch can look ordinary while its gradients are not."""

    name = "grad_norm_spike"
    kind = "log"

    def __init__(self, cfg: MonitorConfig):
        self.z = cfg.grad_spike_z

    def check(self, row: dict) -> list[Alert]:
        over = [s for s in row.get("spikes") or [] if (s.get("grad_norm_z") or 0.0) > self.z]
        if not over:
            return []
        worst = max(over, key=lambda s: s["grad_norm_z"])
        others = f" ({len(over)} steps of this log interval spiked)" if len(over) > 1 else ""
        return [Alert(worst["step"], self.name, "gradient norm", "warning",
                      f"gradient norm {worst['grad_norm']:.4g} at step {worst['step']} is {worst['grad_norm_z']:.1f} "
                      f"standard deviations above the mean {worst['grad_norm_mean']:.4g} of the last "
                      f"{worst['window']} steps{others}; {documents_text(worst)}")]


ACTION_WORDS = {"skipped": "its update was skipped", "rolled back": "training went back to the last checkpoint "
                "to skip its update", "stopped": "training stopped before its update"}
# A step skipped on a later pass because spikes.json remembers what was done the first time.
REMEMBERED_WORDS = {"rolled back": "it spiked when first trained, and training went back to the last checkpoint to "
                    "skip it", "stopped": "training stopped before it when first trained, and was resumed past it"}


class SpikeAction:
    """What train.on_spike did about a spiking step (skip, rollback, stop): one alert per step acted on, from the
    row's `spikes` entries, so a resumed run's replay has them too. The stop itself has no row: the trainer
    records its alert when it halts."""

    name = "on_spike"
    kind = "log"

    def __init__(self, cfg: MonitorConfig):
        self.z = cfg.grad_spike_z

    def check(self, row: dict) -> list[Alert]:
        return [Alert(s["step"], self.name, f"step {s['step']}", "warning", action_text(s, self.z))
                for s in row.get("spikes") or [] if s.get("action", "none") != "none"]


def action_text(spike: dict, z: float) -> str:
    step, action = spike["step"], spike["action"]
    if spike.get("remembered"):
        done = REMEMBERED_WORDS.get(action, "spikes.json lists it")
        return (f"step {step}'s update was skipped: {done} (train.on_spike, spikes.json); this time its "
                f"{spike_text(spike, z)}; {documents_text(spike)}")
    return f"step {step}: {ACTION_WORDS[action]} (train.on_spike): its {spike_text(spike, z)}; {documents_text(spike)}"


class WeightGrowth:
    """A layer's weight norm still inflating late in the run: AdamW is shrinking its effective LR |update|/|weight|.

    Every norm grows while the weights leave their initialization; then weight decay pulls it towards an
    equilibrium and a decaying LR slows it down, so healthy growth decelerates. AdamW without weight decay at a
    long constant LR keeps the squared norm growing at a steady pace (each update adds about lr^2 * size to it),
    so the norm rises like sqrt(t), or faster when updates line up with the weights. The detector judges, past the
    early phase (`monitor.weight_growth_after` of `train.max_steps`, at least the warmup), the later half of the
    run so far: the norm must have grown more than `monitor.weight_growth` across it, and the squared norm's slope
    over that window's later half must be at least SUSTAINED of its slope over the earlier half. The window scales
    with the run, so the criterion reads the same at any log interval or run length. Tuned on real runs
    (bench/detector_runs.py, docs/benchmarks.md): without weight decay the ratio stays 0.93..1.1 and the norm
    grows ~40% per half-run; the quickstart and a weight decay 0.1 control decelerate to a ratio below 0.8.
    Weight decay acts on a time scale of 1/(lr * weight_decay) steps; before that, growth with and without it
    looks alike, and the detector cannot tell them apart.
    """

    name = "weight_growth"
    kind = "log"
    SUSTAINED = 0.9  # slope of |w|^2 in the window's later half / its earlier half; below it the norm is settling
    MAX_POINTS = 256  # points of the span the slopes are fitted to: plenty for two lines

    def __init__(self, cfg: MonitorConfig, train: TrainConfig | None = None):
        from .norms import GAINS_ONLY  # here: norms imports torch, and the dashboard reads this module without it

        self.skip = GAINS_ONLY
        self.min_points, self.growth = cfg.weight_growth_window, cfg.weight_growth
        self.warmup = train.warmup_steps if train else 0
        self.after = max(self.warmup, cfg.weight_growth_after * train.max_steps) if train else 0
        self.history: dict[str, list[tuple[int, float]]] = {}

    def check(self, row: dict) -> list[Alert]:
        step, alerts = row["step"], []
        for group, norm in (row.get("weight_norm") or {}).items():
            if group == self.skip:  # norm gains scale activations, not an effective LR; weight decay spares them
                continue
            history = self.history.setdefault(group, [])
            history.append((step, norm))
            del history[:bisect_left(history, (max(step / 2, self.warmup), -math.inf))]  # the span moves forward
            if step < self.after or len(history) < self.min_points:
                continue
            rel = norm / max(history[0][1], 1e-12) - 1
            stride = -(-len(history) // self.MAX_POINTS)  # a long run: an evenly spaced sample keeps a check cheap
            ratio = pace_ratio(history[::stride] + history[-1:] if stride > 1 else history)
            if rel > self.growth and ratio >= self.SUSTAINED:
                alerts.append(Alert(step, self.name, group, "warning",
                                    f"weight norm of {group} grew {rel:.0%} from step {history[0][0]} to {step} "
                                    f"and is not slowing down (|w|^2 rises {ratio:.2f}x as fast in the later half "
                                    f"of that span): the effective learning rate |update|/|weight| is shrinking "
                                    f"(raise weight decay or lower the LR)"))
        return alerts


def pace_ratio(window: list[tuple[int, float]]) -> float:
    """Slope of the squared norm over the later half of (step, norm) points / over the earlier half; 0 when the
    earlier half does not grow. About 1 for a steady random-walk growth, below 1 for a norm that settles."""
    middle = (window[0][0] + window[-1][0]) / 2
    early = _slope([(s, n * n) for s, n in window if s <= middle])
    late = _slope([(s, n * n) for s, n in window if s >= middle])
    return late / early if early > 0 else 0.0


def _slope(points: list[tuple[float, float]]) -> float:
    n = len(points)
    mx, my = sum(x for x, _ in points) / n, sum(y for _, y in points) / n
    sxx = sum((x - mx) ** 2 for x, _ in points)
    return sum((x - mx) * (y - my) for x, y in points) / sxx if sxx else 0.0


class LoaderStall:
    """The training waited for data for a large share of the step time; or, with an eval watcher competing for its
    device or the loader's cores (train.eval = external), it ran much slower while the watcher evaluated.

    The second is judged from throughput, not only from the data wait: measured on CPU, a watcher on the same cores
    halves the tokens/s while the prefetching loader still keeps up (docs/benchmarks.md), so a wait-only check
    would call that interval healthy."""

    name = "loader_stall"
    kind = "log"
    BASELINE = 20  # log intervals without the watcher that its slowdown is measured against (their median)
    BASELINE_MIN = 3
    BUSY = 0.5  # intervals the watcher was busy for at least this share of are judged

    def __init__(self, cfg: MonitorConfig):
        self.share, self.slowdown = cfg.stall_share, cfg.watch_slowdown
        self.alone: deque[float] = deque(maxlen=self.BASELINE)

    def check(self, row: dict) -> list[Alert]:
        alerts = []
        share = row.get("data_wait_share")
        if share is not None and share > self.share:
            message = (f"{share:.0%} of step time was spent waiting for data (threshold {self.share:.0%}): the "
                       f"loader is starving the model")
            if row.get("watch_share"):
                message += (f", while the eval watcher was evaluating on a shared device for "
                            f"{row['watch_share']:.0%} of the interval")
            alerts.append(Alert(row["step"], self.name, "loader", "warning", message))
        if "tokens_per_s" in row:
            alerts += self._beside_watcher(row)
        return alerts

    def _beside_watcher(self, row: dict) -> list[Alert]:
        """No watch_share: no competing watcher in the interval (none started yet, or one on its own device)."""
        busy, speed = row.get("watch_share", 0.0), row["tokens_per_s"]
        if busy == 0:
            self.alone.append(speed)
            return []
        if busy < self.BUSY or len(self.alone) < self.BASELINE_MIN:
            return []
        base = sorted(self.alone)[len(self.alone) // 2]
        drop = 1 - speed / base
        if drop <= self.slowdown:
            return []
        wait = row.get("data_wait_share")
        return [Alert(row["step"], self.name, "eval watcher", "warning",
                      f"training ran at {speed:,.0f} tokens/s while the eval watcher evaluated beside it ({busy:.0%} "
                      f"of the interval), {drop:.0%} below the {base:,.0f} tokens/s of intervals without it "
                      f"(threshold {self.slowdown:.0%})"
                      + (f"; data wait {wait:.1%} of step time" if wait is not None else "")
                      + ": it shares the training's device or the loader's CPU cores; give it another device "
                        "(`eval watch --device`) or cores of its own (taskset)")]


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


DETECTORS = (LossSpike, GradNormSpike, SpikeAction, WeightGrowth, LoaderStall, DomainDegradation, Overconfidence,
             Repetition)
NONFINITE = "nonfinite"  # the halt: not a streaming detector, the run stops on its first alert
ALL_NAMES = tuple(d.name for d in DETECTORS) + (NONFINITE,)


def build_detectors(cfg: MonitorConfig, train: TrainConfig | None = None) -> list:
    """One of each detector. WeightGrowth also needs the run's length: it judges growth against the run's phase."""
    return [d(cfg, train) if d is WeightGrowth else d(cfg) for d in DETECTORS]
