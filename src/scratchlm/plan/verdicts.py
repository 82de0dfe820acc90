"""Verdicts: ok / warning / error, each with the numbers it was decided on."""
from __future__ import annotations

from dataclasses import asdict, dataclass, field

from ..levels import LEVELS, NOT_AVAILABLE, worst  # noqa: F401 (imported from here by the plan's modules)
MAX_EPOCHS = 16  # past ~16 passes over the same tokens, more passes stop helping (Muennighoff et al. 2023)
MEMORY_HEADROOM = 0.9  # drivers report a little less than the nominal memory; fragmentation takes some more


@dataclass
class Verdict:
    name: str
    level: str
    summary: str
    evidence: dict = field(default_factory=dict)

    def as_dict(self) -> dict:
        return asdict(self)


def corpus_verdict(corpus: dict, arithmetic: dict) -> Verdict:
    """Corpus size in tokens per parameter: the same verdict the data stage and the report show."""
    from ..data.token_estimate import size_verdict

    have, wanted = corpus["tokens"], arithmetic["tokens_per_param"]
    size = size_verdict(have, arithmetic["params"], "counted in the training shards" if corpus.get("exact")
                        else "estimated", wanted)
    ev = {"corpus_tokens": have, "tokens_needed": arithmetic["tokens_needed"], "tokens_per_param": wanted,
          "tokens_per_param_measured": size["tokens_per_param"], "how": corpus["how"]}
    if have == 0:
        return Verdict("corpus", "error", "the corpus has no training tokens", ev)
    return Verdict("corpus", size["level"], size["message"] + f" ({arithmetic['tokens_needed']:,} needed at "
                   f"{wanted:g} per parameter)", ev)


def epochs_verdict(corpus: dict, arithmetic: dict) -> Verdict:
    """How many times training reads the corpus: a fact of its own, beside the corpus size."""
    have, planned = corpus["tokens"], arithmetic["planned_tokens"]
    epochs = planned / have if have else float("inf")
    ev = {"corpus_tokens": have, "planned_training_tokens": planned, "epochs": epochs, "max_epochs": MAX_EPOCHS}
    if epochs > MAX_EPOCHS:
        return Verdict("epochs", "error", f"training would read the corpus {epochs:.1f} times (> {MAX_EPOCHS}): "
                       f"{have:,} tokens for {planned:,} planned", ev)
    return Verdict("epochs", "ok", f"training reads the corpus {epochs:.1f} times (at most {MAX_EPOCHS})", ev)


def memory_verdict(configured_total: int, memory: int, recommendation: dict, configured: dict) -> Verdict:
    ev = {"estimate": configured_total, "device_memory": memory, "recommendation": recommendation}
    share = configured_total / memory if memory else float("inf")
    if share <= MEMORY_HEADROOM:
        return Verdict("memory", "ok", f"the step needs {share:.0%} of the device memory", ev)
    if recommendation["fits"]:
        r = recommendation
        change = (f"batch_size = {r['micro_batch']}, grad_accum = {r['grad_accum']}"
                  + (", activation_checkpointing = true" if r["activation_checkpointing"]
                     and not configured["activation_checkpointing"] else ""))
        return Verdict("memory", "warning", f"the configured step needs {share:.0%} of the device memory; "
                       f"the same global batch fits with {change}", ev)
    return Verdict("memory", "error", f"does not fit: {share:.0%} of the device memory even at micro-batch 1 "
                   f"with activation checkpointing", ev)


def time_verdict(total_seconds: float | None, budget_hours: float | None, measured: bool,
                 lower_bound_seconds: float | None = None,
                 not_probed: str = "the probe needs the target device") -> Verdict:
    ev = {"total_seconds": total_seconds, "budget_hours": budget_hours, "measured": measured,
          "lower_bound_seconds": lower_bound_seconds}
    if not measured:
        if lower_bound_seconds is None:
            return Verdict("time", "warning", f"not measured ({not_probed}), and no datasheet peak for this "
                           "device to bound it", ev)
        bound = lower_bound_seconds
        if budget_hours is not None and bound > budget_hours * 3600:
            return Verdict("time", "error", f"even at 100% of the datasheet peak the run needs "
                           f"{bound / 3600:.1f} h > budget {budget_hours:g} h", ev)
        return Verdict("time", "warning", f"not measured ({not_probed}); at 100% of the datasheet peak it would "
                       f"need {bound / 3600:.2f} h of compute", ev)
    if budget_hours is None:
        return Verdict("time", "ok", f"{total_seconds / 3600:.2f} h including one restart; no budget given "
                       f"([plan] budget_hours or --budget-hours), so not checked against one", ev)
    if total_seconds > budget_hours * 3600:
        return Verdict("time", "error", f"{total_seconds / 3600:.2f} h including one restart > budget "
                       f"{budget_hours:g} h", ev)
    return Verdict("time", "ok", f"{total_seconds / 3600:.2f} h including one restart, within "
                   f"{budget_hours:g} h", ev)


def context_verdict(lengths: dict | None, seq_len: int) -> Verdict:
    if lengths is None:
        return Verdict("context", "warning", "document lengths unknown until the shards are built "
                       "(`scratchlm tokenizer encode`)", {"seq_len": seq_len})
    p = lengths["percentiles"]
    ev = {"seq_len": seq_len, **lengths}
    text = (f"document tokens p10 {p['10']:,} / p50 {p['50']:,} / p90 {p['90']:,} / p99 {p['99']:,} for "
            f"seq_len {seq_len}; {lengths['share_docs_short']:.0%} of documents are under "
            f"{lengths['short_limit']} tokens")
    if lengths["share_docs_short"] > 0.5:
        return Verdict("context", "warning", text + ": most windows mix several unrelated documents; a shorter "
                       "seq_len trains faster at equal quality on this data", ev)
    return Verdict("context", "ok", text, ev)


def estimate_verdict(estimate: int, measured: int | None, method: str) -> Verdict:
    if measured is None or measured <= 0:
        return Verdict("estimate", "warning", "memory estimate not compared: no probe ran", {})
    ratio = estimate / measured
    ev = {"estimate": estimate, "measured": measured, "ratio": ratio, "method": method}
    level = "ok" if 0.75 <= ratio <= 1.25 else "warning"
    return Verdict("estimate", level, f"estimated peak is {ratio:.2f}x the measured one"
                   + ("" if level == "ok" else "; trust the measured figure"), ev)


# Slowest probe window over the fastest, past which the machine was busy while the plan timed the step (the probe
# then times longer, plan/probe.py). On an idle 2-core machine windows of one step each came 20-28% apart.
BUSY_SPREAD = 0.25
# Other processes' share of all CPUs while the step was timed, past which the plan says so: a process that keeps a
# core busy the whole time slows every window alike (one spinning process on 2 cores: 2-3x slower steps).
BUSY_OTHER_LOAD = 0.2


def busy_reasons(spread: float | None, other_load: float | None, windows: int = 0) -> list[str]:
    """Why the machine looks busy while the step is timed; empty when it does not (the probe's and the verdict's
    one test)."""
    reasons = []
    if other_load is not None and other_load > BUSY_OTHER_LOAD:
        reasons.append(f"other processes used {other_load:.0%} of the CPUs")
    if spread is not None and spread > BUSY_SPREAD:
        reasons.append(f"{spread:.0%} between the fastest and the slowest of {windows} windows")
    return reasons


def busy_verdict(probe: dict) -> Verdict | None:
    """A warning beside the time verdict, never a change of it: the forecast is a fast window's step."""
    spread, load = probe.get("spread"), probe.get("other_load")
    reasons = busy_reasons(spread, load, len(probe.get("window_micro_seconds") or []))
    if not reasons:
        return None
    return Verdict("busy", "warning", f"the machine was busy while the step was timed: {'; '.join(reasons)}. The "
                   "forecast uses a fast window; training on a machine that stays this busy takes longer, and "
                   "`plan --remeasure` on a quiet one gives the machine's own speed",
                   {"spread": spread, "other_load": load, "windows": probe.get("window_micro_seconds")})
