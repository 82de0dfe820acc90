"""Everything `scratchlm compare` concludes, as one plain dict: the terminal, the Markdown, the JSON and the HTML
page all print from it, so a number or a verdict is computed once.

Final values are each run's last evaluation row (the eval stage scores the same checkpoint with the same
batches, so its numbers are these when it ran on that step); training loss is the last log row. Beside the final
values, each run's value at the largest token count and the largest training time every run reached,
interpolated on its evaluation curve: a run ahead per hour but behind per token shows it there.

Two things make a pair of runs not comparable as is, and every verdict says so (comparability()): runs evaluated
on different domain sets (the means are then over the domains every run has) and runs with different tokenizers
(a loss per token, and "equal tokens", then measure different units; bits per byte do not).
"""
from __future__ import annotations

import math
import shlex

from .compare_match import check_metric, common_point, curve, higher_is_better
from .config_diff import ABSENT, ConfigDiff, diff_runs, show
from .runs import Run
from .variants import Override

METRIC_LABEL = {"val_loss": "val_loss (mean over domains)", "loss": "training loss (last log row)",
                "bpb": "bpb (mean over domains)", "top1": "top1 (mean over domains)",
                "top10": "top10 (mean over domains)"}


def table_metrics(domains: list[str], metric: str) -> list[str]:
    out = ["val_loss", *(f"{d}/loss" for d in domains), "bpb", "top1", "top10", "loss"]
    return out if metric in out else [metric, *out]


def legends(runs: list[Run], diffs: list[ConfigDiff]) -> list[str]:
    """Each run's label with its values of the keys that differ (the short name of each), for plot legends."""
    keys: dict[str, object] = {}  # key -> the reference's value
    for d in diffs:
        for k, a, _ in d.trained + d.measured:
            keys.setdefault(k, a)
    out = []
    for i, run in enumerate(runs):
        values = dict(keys)
        if i:
            values.update({k: b for k, _, b in diffs[i - 1].trained + diffs[i - 1].measured})
        parts = [f"{k.rsplit('.', 1)[-1]}={show(v)}" for k, v in list(values.items())[:3]]
        out.append(run.label + (f" ({', '.join(parts)})" if parts else ""))
    return out


MEAN_METRICS = ("val_loss", "bpb", "top1", "top10")  # means over domains


def finite(value: float | None) -> bool:
    return value is not None and math.isfinite(value)


def fmt(value: float | None) -> str:
    if value is None:
        return "—"
    return f"{value:.4f}" if math.isfinite(value) else str(value)  # nan, inf: a diverged run says so


def json_safe(obj):
    """The summary with every NaN and infinity as None: JSON has no literal for them (json.dumps writes a bare
    NaN that other readers reject)."""
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    if isinstance(obj, dict):
        return {k: json_safe(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [json_safe(v) for v in obj]
    return obj


def fmt_tokens(tokens: float | None) -> str:
    if tokens is None:
        return "—"
    return f"{tokens / 1e6:.3g}M" if tokens >= 1e6 else f"{tokens / 1e3:.3g}K" if tokens >= 1e3 else f"{tokens:.0f}"


def fmt_seconds(seconds: float | None) -> str:
    if seconds is None:
        return "—"
    return f"{seconds:.0f} s" if seconds < 120 else f"{seconds / 60:.1f} min" if seconds < 7200 else \
        f"{seconds / 3600:.2f} h"


def _delta(a: float | None, b: float | None, metric: str, diverged: str = "") -> str:
    if a is None or b is None:
        return "not comparable (a run has no value)"
    if not (math.isfinite(a) and math.isfinite(b)):
        return f"not comparable ({diverged or 'a non-finite value: a run diverged'})"
    d = b - a
    if abs(d) < 5e-5:  # equal to the digits shown
        return f"{d:+.4f} (equal)"
    better = (d > 0) == higher_is_better(metric)
    return f"{d:+.4f} ({'better' if better else 'worse'})"


def _ablate_hint(diff: ConfigDiff) -> str:
    keyed = diff.trained + diff.measured
    # TOML has no null and --set cannot remove a key: such a change gets the generic line.
    if len(keyed) == 1 and not diff.content and keyed[0][2] is not None and keyed[0][2] != ABSENT:
        key, _, value = keyed[0]
        # TOML-formatted and shell-quoted, so the line runs as printed: --set parses its value as TOML.
        return f"`scratchlm ablate -c CONFIG --set {shlex.quote(str(Override(key, value)))} --seeds 3`"
    return "`scratchlm ablate -c CONFIG --set KEY=VALUE --seeds 3`, one key at a time,"


def domain_sets(runs: list[Run]) -> list[set[str]]:
    return [{d for row in r.eval_rows for d in row["eval"]} for r in runs]


def shared_domains(runs: list[Run]) -> set[str] | None:
    """The domains every evaluated run has, when their domain sets differ; None when they agree (the recorded
    means stand as they are)."""
    sets = [s for s in domain_sets(runs) if s]  # a run not evaluated yet has no values, not other domains
    if len({frozenset(s) for s in sets}) <= 1:
        return None
    return set.intersection(*sets)


def comparability(ref: Run, run: Run, metric: str, shared: set[str] | None) -> tuple[list[str], bool]:
    """What makes this pair not comparable as is: (caveats, whether a verdict can be given at all). The one
    source of these caveats: they end the verdict line every output prints."""
    caveats, verdict = [], True
    if shared is not None and metric in MEAN_METRICS:
        sets = dict(zip((ref.label, run.label), domain_sets([ref, run])))
        only = "; ".join(f"{label} alone has {', '.join(sorted(s - shared))}" for label, s in sets.items()
                         if s - shared)
        if shared:
            caveats.append(f"the runs were evaluated on different domains: {metric} is the mean over the domains "
                           f"every run has ({', '.join(sorted(shared))})" + (f"; {only}" if only else ""))
        else:
            caveats.append(f"no verdict: no domain was evaluated in every run ({only}); compare a DOMAIN/METRIC")
            verdict = False
    tok_a, tok_b = ref.ids.get("tokenizer"), run.ids.get("tokenizer")
    if tok_a and tok_b and tok_a != tok_b:
        unit = ("equal tokens is not equal text" if metric.rpartition("/")[2] == "bpb" else
                "a loss per token and equal tokens measure different units; use --metric bpb (bits per byte do "
                "not depend on the tokenizer)")
        caveats.append(f"the tokenizers differ ({tok_a} vs {tok_b}): {unit}")
    return caveats, verdict


def _halted(ref: Run, run: Run) -> list[Run]:
    """The runs of the pair the trainer halted: a non-finite loss or gradient (train/<id>/diagnosis.json)."""
    return [r for r in (ref, run) if r.state == "halted"]


def verdict_line(ref: Run, run: Run, row: dict, matched: dict, diff: ConfigDiff,
                 shared: set[str] | None = None) -> str:
    """The run against the reference on the chosen metric: deltas at the end, at equal tokens and wall-clock,
    then what makes the pair not comparable as is."""
    i, metric = run.number - 1, row["metric"]
    a, b = row["final"][0], row["final"][i]
    steps = row["final_steps"]
    caveats, comparable = comparability(ref, run, metric, shared)
    head = f"{run.label} vs {ref.label} on {METRIC_LABEL.get(metric, metric)}: "
    if not comparable:
        return head + "; ".join(caveats) + "."
    halted = _halted(ref, run)
    diverged = " and ".join(r.label for r in halted) + " diverged" if halted else ""
    line = (head + f"final {fmt(b)} vs {fmt(a)} "
            f"(steps {steps[i]} and {steps[0]}): {_delta(a, b, metric, diverged)}; at equal tokens "
            f"({fmt_tokens(matched['tokens'])}): "
            f"{_delta(row['at_tokens'][0], row['at_tokens'][i], metric, diverged)}; at "
            f"equal wall-clock ({fmt_seconds(matched['seconds'])}): "
            f"{_delta(row['at_seconds'][0], row['at_seconds'][i], metric, diverged)}.")
    for r in halted:
        before = ": its values are from before the divergence" if finite(a) and finite(b) else ""
        line += f" {r.label} diverged (halted; see {r.train_dir / 'diagnosis.json'}){before}."
    if caveats:
        line += " Caveat: " + "; ".join(caveats) + "."
    if len(diff.changes()) > 1:
        line += f" The runs differ in {len(diff.changes())} things: the difference belongs to none of them alone."
    return (line + " A single pair of runs cannot separate noise from effect: " + _ablate_hint(diff)
            + " trains both sides over seeds and tests the difference.")


def _samples(runs: list[Run]) -> dict:
    """The generations of the fixed prompts side by side, at the latest evaluation step every run has."""
    per_run = [r.samples() for r in runs]
    common = set.intersection(*(set(s) for s in per_run))
    if common:
        step = max(common)
        steps = [step] * len(runs)
        note = f"step {step}, the latest evaluation step every run has"
    else:
        step = None
        steps = [max(s) if s else None for s in per_run]
        listed = "; ".join(f"{r.label} at {', '.join(map(str, sorted(s))) or 'none yet'}"
                           for r, s in zip(runs, per_run))
        note = f"no common evaluation step ({listed}): each run's latest generations, at different steps"
    chosen = [s.get(st, []) if st is not None else [] for s, st in zip(per_run, steps)]
    prompts = list(dict.fromkeys(x["prompt"] for c in chosen for x in c))
    rows = [{"prompt": p, "completions": [next((x["completion"] for x in c if x["prompt"] == p), None)
                                           for c in chosen]} for p in prompts]
    return {"step": step, "steps": steps, "note": note, "rows": rows}


def _run_record(run: Run) -> dict:
    c = curve(run.train_rows, run.eval_rows, "loss")
    stage = run.eval_stage()
    return {"number": run.number, "label": run.label, "arg": run.arg, "train_dir": str(run.train_dir),
            "chosen": run.chosen, "state": run.state, "last_step": c.steps[-1] if c.steps else 0,
            "tokens": c.tokens[-1] if c.tokens else 0, "training_seconds": c.seconds[-1] if c.seconds else 0.0,
            "eval_steps": [r["step"] for r in run.eval_rows], "n_params": run.meta.get("n_params"),
            "ids": run.ids, "eval_stage": stage and {"step": stage.get("step"), "val_loss": stage.get("val_loss")}}


def build_summary(runs: list[Run], metric: str = "val_loss") -> dict:
    domains = sorted({d for r in runs for row in r.eval_rows for d in row["eval"]})
    check_metric(metric, set(domains))
    ref = runs[0]
    diffs = [diff_runs(ref.label, ref.config, ref.ids, r.label, r.config, r.ids) for r in runs[1:]]
    shared = shared_domains(runs)
    evals = [curve(r.train_rows, r.eval_rows, "val_loss", shared) for r in runs]
    matched = {"tokens": common_point(evals, "tokens"), "seconds": common_point(evals, "seconds")}
    table = []
    for m in table_metrics(domains, metric):
        curves = [curve(r.train_rows, r.eval_rows, m, shared) for r in runs]
        table.append({"metric": m, "final": [c.final for c in curves],
                      "final_steps": [c.steps[-1] if c.steps else None for c in curves],
                      **{f"at_{axis}": [c.at(x, axis) if x is not None else None for c in curves]
                         for axis, x in matched.items()}})
    row = next(t for t in table if t["metric"] == metric)
    return {"metric": metric, "higher_is_better": higher_is_better(metric), "domains": domains,
            "shared_domains": sorted(shared) if shared is not None else domains,
            "runs": [_run_record(r) for r in runs], "legends": legends(runs, diffs),
            "diff": [d.to_json() for d in diffs], "matched": matched, "table": table,
            "verdicts": [verdict_line(ref, r, row, matched, d, shared) for r, d in zip(runs[1:], diffs)],
            "samples": _samples(runs)}
