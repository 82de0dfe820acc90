"""The plots of `scratchlm compare`: every run on the same axes, one color per run, one panel per domain.

Each figure states its x: training tokens (equal data seen) or training seconds (equal wall-clock, evaluation
excluded). Steps are never the x: runs with different batch sizes would not line up.
"""
from __future__ import annotations

import io

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
from matplotlib.ticker import EngFormatter

from .compare_match import curve

X_LABEL = {"tokens": "training tokens", "seconds": "training seconds (evaluation excluded)"}


def _png(fig, n_runs: int) -> bytes:
    # One legend for the whole figure, above the panels, so that it never hides a curve.
    by_label = {}
    for ax in fig.axes:  # a run may be missing from a panel (a domain it has not evaluated yet)
        for handle, label in zip(*ax.get_legend_handles_labels()):
            by_label.setdefault(label, handle)
    fig.legend(list(by_label.values()), list(by_label), loc="upper center", ncol=min(n_runs, 3), fontsize=8,
               frameon=False)
    rows = -(-n_runs // 3)
    fig.tight_layout(rect=(0, 0, 1, 1 - 0.08 * rows))
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    plt.close(fig)
    return buf.getvalue()


def _panels(runs, legends: list[str], panels: list[tuple[str, list[tuple[str, str]], str]], ylabel: str,
            shared: set[str] | None = None) -> bytes | None:
    """One figure, one panel per (title, [(metric, line style)], x axis), each run in its own color; None when
    nothing has been logged yet."""
    fig, axes = plt.subplots(1, len(panels), figsize=(max(4 * len(panels), 8), 3.6 + 0.25 * (len(runs) // 3)),
                             dpi=100, squeeze=False)
    drawn = False
    for ax, (title, metrics, axis) in zip(axes[0], panels):
        for i, (run, legend) in enumerate(zip(runs, legends)):
            for metric, style in metrics:
                c = curve(run.train_rows, run.eval_rows, metric, shared)  # means as the table has them
                if not c.values:
                    continue
                training = metric == "loss"  # a point every log row: a plain line; evaluations get markers
                ax.plot(c.tokens if axis == "tokens" else c.seconds, c.values, style, marker="" if training else "o",
                        ms=3, lw=1 if training else 1.5, color=f"C{i}",
                        label=legend if metric == metrics[0][0] else None)
                drawn = True
        ax.set_title(title, fontsize=10)
        ax.set_xlabel(X_LABEL[axis], fontsize=8)
        if axis == "tokens":
            ax.xaxis.set_major_formatter(EngFormatter(sep=""))  # 200k, 1.5M: raw counts run into each other
        ax.set_ylabel(ylabel, fontsize=8)
        ax.grid(alpha=0.3)
    if not drawn:
        plt.close(fig)
        return None
    return _png(fig, len(runs))


def render_charts(runs, legends: list[str], domains: list[str],
                  shared: set[str] | None = None) -> dict[str, tuple[str, bytes]]:
    """name -> (caption, PNG bytes); charts with nothing to draw are left out. `shared`: the domains every run
    has, when their sets differ (compare_summary.shared_domains): the mean is over those."""
    mean = "mean over domains" if shared is None else f"mean over shared domains ({', '.join(sorted(shared))})"

    def val(axis: str) -> list:
        return ([(f"{mean} (val_loss)", [("val_loss", "-")], axis)]
                + [(f"{d} loss", [(f"{d}/loss", "-")], axis) for d in domains])

    charts = [
        ("val_loss_tokens", "Validation loss per domain; x = training tokens (equal data)", val("tokens"),
         "nats/token"),
        ("val_loss_seconds", "Validation loss per domain; x = training seconds (equal wall-clock)", val("seconds"),
         "nats/token"),
        ("train_loss", "Training loss at each log row; x = training tokens (left), training seconds (right)",
         [("training loss, x = tokens", [("loss", "-")], "tokens"),
          ("training loss, x = seconds", [("loss", "-")], "seconds")], "nats/token"),
        ("bpb", "Validation bits per byte per domain; x = training tokens",
         [(f"{d} bits/byte", [(f"{d}/bpb", "-")], "tokens") for d in domains], "bits/byte"),
        ("topk", "Next-token accuracy per domain, top-1 (solid) and top-10 (dashed); x = training tokens",
         [(f"{d} top-1 / top-10", [(f"{d}/top1", "-"), (f"{d}/top10", "--")], "tokens") for d in domains],
         "accuracy"),
    ]
    out = {}
    for name, caption, panels, ylabel in charts:
        if panels and (png := _panels(runs, legends, panels, ylabel, shared)) is not None:
            out[name] = (caption, png)
    return out
