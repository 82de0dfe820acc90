"""What `scratchlm ladder` concludes, and how it shows it: the verdicts (one function for terminal, Markdown and
JSON), the summary lines both texts are made of, and the log-log plot of the ladder and its extrapolation."""
from __future__ import annotations

from pathlib import Path

import numpy as np

from ..md import cell
from ..plan.verdicts import Verdict
from .fit import BAND_LEVEL, Fit
from .stats import t_quantile

# A rung this far off the curve is more than half of what doubling compute buys at Kaplan et al.'s (2020)
# alpha_C ~ 0.05 (2^-0.05 = 3.4% lower loss), and several times the seed-to-seed spread of a validation loss:
# the curve does not describe the ladder well enough to be carried past it.
FIT_MAX_REL_RESIDUAL = 0.02
# Below this, noise is comparable to the trend in ln L over the ladder that the prediction extends.
FIT_MIN_R2 = 0.9
FAR_FACTOR = 100.0  # a target beyond this many times the largest rung's compute is far outside the ladder
BAND_MIN_DOF = 2  # with 1 degree of freedom the band's t quantile is 12.7: the band says nothing
# A rung's steps round its tokens up by up to one step's tokens; past this share above --tokens-per-param it trains
# at another ratio than the one the curve is said to describe.
RATIO_MAX_EXCESS = 0.1


def ladder_verdicts(fit: Fit, target_compute: float, largest_rung_compute: float, tokens_per_param: float,
                    rungs: list[dict]) -> list[Verdict]:
    """rungs: the rung records (shape, tokens_per_param: the ratio each really trained at)."""
    return [falling_verdict(fit), fit_verdict(fit), band_verdict(fit),
            reach_verdict(target_compute, largest_rung_compute), ratio_verdict(tokens_per_param, rungs)]


def falling_verdict(fit: Fit) -> Verdict:
    ev = {"alpha": fit.alpha}
    if not fit.predicts:
        falling = Verdict("falling", "error", f"the loss does not fall with compute across the ladder "
                          f"(alpha = {fit.alpha:.3g} <= 0): no prediction; check the rungs' training curves", ev)
    else:
        falling = Verdict("falling", "ok", f"the loss falls with compute (alpha = {fit.alpha:.3g})", ev)
    return falling


def fit_verdict(fit: Fit) -> Verdict:
    ev = {"r2_log": fit.r2_log, "max_rel_residual": fit.max_rel_residual, "min_r2": FIT_MIN_R2,
          "max_residual": FIT_MAX_REL_RESIDUAL}
    quality = f"R^2 (log) = {fit.r2_log:.3f}, largest rung off the curve by {fit.max_rel_residual:.1%}"
    if fit.r2_log < FIT_MIN_R2 or fit.max_rel_residual > FIT_MAX_REL_RESIDUAL:
        fit_v = Verdict("fit", "warning", f"the fit is too poor to extrapolate: {quality} (wanted R^2 >= "
                        f"{FIT_MIN_R2:g} and every rung within {FIT_MAX_REL_RESIDUAL:.0%}); more or longer rungs, "
                        "or several seeds per rung, would tell noise from trend", ev)
    else:
        fit_v = Verdict("fit", "ok", f"the fit describes the ladder: {quality}", ev)
    return fit_v


def band_verdict(fit: Fit) -> Verdict:
    t = t_quantile(0.5 + BAND_LEVEL / 2, fit.dof)
    ev = {"dof": fit.dof, "t": t, "min_dof": BAND_MIN_DOF}
    if fit.dof < BAND_MIN_DOF:
        return Verdict("band", "warning", f"{fit.points} rungs leave {fit.dof} degree of freedom: the band is "
                       f"±t={t:.1f} residual sds; add a rung", ev)
    return Verdict("band", "ok", f"{fit.points} rungs leave {fit.dof} degrees of freedom for the band "
                   f"(t = {t:.2f})", ev)


def reach_verdict(target_compute: float, largest_rung_compute: float) -> Verdict:
    ratio = target_compute / largest_rung_compute
    ev = {"target_compute": target_compute, "largest_rung_compute": largest_rung_compute, "ratio": ratio,
          "max_ratio": FAR_FACTOR}
    if ratio > FAR_FACTOR:
        reach = Verdict("reach", "warning", f"the target needs {ratio:,.0f}x the compute of the largest rung "
                        f"(more than {FAR_FACTOR:g}x): far outside the ladder, the band only covers the noise "
                        "of the rungs, not a change of the curve's shape; add a larger rung", ev)
    else:
        reach = Verdict("reach", "ok", f"the target needs {ratio:,.1f}x the compute of the largest rung", ev)
    return reach


def ratio_verdict(tokens_per_param: float, rungs: list[dict]) -> Verdict:
    over = {r["shape"]: r["tokens_per_param"] for r in rungs
            if r["tokens_per_param"] > tokens_per_param * (1 + RATIO_MAX_EXCESS)}
    ev = {"tokens_per_param": tokens_per_param, "max_excess": RATIO_MAX_EXCESS, "over": over}
    if over:
        said = ", ".join(f"{shape} at {ratio:.3g}" for shape, ratio in over.items())
        return Verdict("ratio", "warning", f"whole steps make rung(s) {said} tokens per parameter, more than "
                       f"{RATIO_MAX_EXCESS:.0%} above --tokens-per-param {tokens_per_param:g}: the curve mixes "
                       "ratios; lower train.batch_size (or train.batch_tokens) or raise --tokens-per-param", ev)
    return Verdict("ratio", "ok", f"every rung trains within {RATIO_MAX_EXCESS:.0%} of {tokens_per_param:g} "
                   "tokens per parameter", ev)


def _loss_band(p: dict) -> str:
    return f"{p['loss']:.3f} (band {p['low']:.3f} - {p['high']:.3f})"


def summary_lines(result: dict) -> list[str]:
    """The conclusions, one per line: the terminal prints them, the Markdown lists them."""
    fit, target, r = result["fit"], result["target"], result["tokens_per_param"]
    lines = [f"fit: {fit['formula']}; {fit['why']}",
             (f"target {target['shape']} ({target['params']:,} parameters) at {r:g} tokens per parameter "
              f"({target['tokens']:,} tokens, {target['compute']:.3g} FLOPs): {target['tokens_note']}")]
    pred = result["prediction"]
    if pred is not None:
        lines.append(f"predicted validation loss of the target: {_loss_band(pred)}; the band is the "
                     f"{BAND_LEVEL:.0%} prediction interval of the fit (the rungs' scatter about the curve "
                     f"and the fit's uncertainty, carried to the target's compute)")
    lines += [f"{v['level']}: {v['summary']}" for v in result["verdicts"]]
    b = result["budget"]
    if "skipped" in b:
        lines.append(f"compute-optimal size: skipped: {b['skipped']}")
    else:
        lines.append(f"budget {b['hours']:g} h ({b['hours_from']}) x {b['flops_per_s']:.3g} FLOP/s measured on "
                     f"the target's training step = {b['budget_flops']:.3g} FLOPs")
        lines.append(f"compute-optimal size at {r:g} tokens per parameter (the ratio is fixed, not fitted): "
                     f"N = {b['params_optimal']:,.0f} ({b['where']}); nearest member "
                     f"{b['shape']}{' (the target itself)' if b['is_target'] else ''}, {b['params']:,} "
                     f"parameters, {b['tokens']:,} tokens")
        if b.get("tokens_per_s"):
            lines.append(f"{b['shape']} measured {b['tokens_per_s']:,.0f} tokens/s here ({b['member_flops_per_s']:.3g} "
                         f"FLOP/s; the budget assumed the target's {b['flops_per_s']:.3g}): its {b['tokens']:,} "
                         f"tokens take {b['hours_needed']:.3g} h (budget {b['hours']:g} h)")
        if b.get("prediction") and not b["is_target"]:
            lines.append(f"predicted validation loss of {b['shape']} (from the fit): {_loss_band(b['prediction'])}")
    lines += [f"note: {n}" for n in result["notes"]]
    return lines


def rung_rows(result: dict) -> tuple[list[str], list[list[str]]]:
    head = ["rung", "params", "steps", "warmup", "tokens", "tokens/param", "FLOPs", "val loss", "fit"]
    rows = [[r["shape"], f"{r['params']:,}", str(r["steps"]), str(r["warmup_steps"]), f"{r['tokens']:,}",
             f"{r['tokens_per_param']:.2f}", f"{r['compute']:.3g}", f"{r['val_loss']:.4f}",
             f"{r['fit_loss']:.4f}"] for r in result["rungs"]]
    return head, rows


def render_text(result: dict) -> str:
    head, rows = rung_rows(result)
    widths = [max(len(x) for x in col) for col in zip(head, *rows)]
    table = ["  ".join(x.rjust(w) for x, w in zip(row, widths)) for row in [head, *rows]]
    return "\n".join([f"ladder {result['id']}: {len(rows)} rungs of the {result['target']['shape']} family", *table,
                      *summary_lines(result), f"written: {result['dir']}"])


def render_markdown(result: dict, plot_name: str) -> str:
    head, rows = rung_rows(result)
    out = [f"# Scale ladder {result['id']}", "",
           (f"Config `{result['config']}`; rungs of the {result['target']['shape']} family at "
            f"{result['tokens_per_param']:g} tokens per parameter; {result['warmup_rule']}."), "",
           "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    out += ["| " + " | ".join(cell(x) for x in row) + " |" for row in rows]
    out += ["", *[f"- {line}" for line in summary_lines(result)], "", f"![ladder]({plot_name})", ""]
    return "\n".join(out)


def plot_ladder(result: dict, fit: Fit, path: Path) -> None:
    from matplotlib.ticker import ScalarFormatter

    from ..monitor.charts import plt

    rungs = result["rungs"]
    xs = np.array([r["compute"] for r in rungs])
    marks = [("target " + result["target"]["shape"], result["target"]["compute"], result["prediction"], "C3")]
    b = result["budget"]
    if "skipped" not in b and b.get("prediction") and not b["is_target"]:
        marks.append((f"budget-optimal {b['shape']}", b["compute"], b["prediction"], "C2"))
    hi = max([xs.max()] + [m[1] for m in marks])
    grid = np.geomspace(xs.min() / 2, hi * 2, 200)
    fig, ax = plt.subplots(figsize=(8, 5))
    ax.scatter(xs, [r["val_loss"] for r in rungs], color="C0", zorder=3, label="rungs (validation loss)")
    for r in rungs:
        ax.annotate(r["shape"], (r["compute"], r["val_loss"]), textcoords="offset points", xytext=(5, 5),
                    fontsize=7)
    if fit.predicts:
        mid, low, high = fit.predict(grid)
        ax.plot(grid, mid, color="C1", lw=1.5, label=result["fit"]["formula"])
        ax.fill_between(grid, low, high, color="C1", alpha=0.15, label=f"{BAND_LEVEL:.0%} prediction band")
    for label, compute, pred, color in marks:
        if pred is not None:
            ax.errorbar([compute], [pred["loss"]], yerr=[[pred["loss"] - pred["low"]], [pred["high"] - pred["loss"]]],
                        fmt="*", ms=12, color=color, capsize=4, label=f"{label}: {pred['loss']:.3f}")
        else:
            ax.axvline(compute, color=color, ls=":", label=f"{label} (no prediction)")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.yaxis.set_major_formatter(ScalarFormatter())
    ax.yaxis.set_minor_formatter(ScalarFormatter())
    ax.tick_params(axis="y", which="minor", labelsize=7)
    ax.set_xlabel("training compute C (FLOPs)")
    ax.set_ylabel("validation loss (nats/token)")
    ax.set_title(f"Scale ladder at {result['tokens_per_param']:g} tokens/parameter: fit and extrapolation")
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
