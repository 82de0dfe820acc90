"""The dashboard's plots, drawn with matplotlib from metrics.jsonl rows and alerts.

Each chart is one figure saved as PNG; the dashboard embeds the same bytes, so the HTML needs nothing else.
"""
from __future__ import annotations

import io
from pathlib import Path
from typing import Callable

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

ALERT_COLOR = {"warning": "#d08000", "error": "#c00000"}


def _series(rows: list[dict], get: Callable[[dict], float | None]) -> tuple[list[int], list[float]]:
    pts = [(r["step"], v) for r in rows if (v := get(r)) is not None]
    return [p[0] for p in pts], [p[1] for p in pts]


def _keys(rows: list[dict], field: str) -> list[str]:
    return sorted({k for r in rows for k in (r.get(field) or {})})


def _finish(ax, ylabel: str, log: bool = False) -> None:
    ax.set_xlabel("step")
    ax.set_ylabel(ylabel)
    if log:
        ax.set_yscale("log")
    ax.grid(alpha=0.3)
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=7)


def _mark_alerts(ax, alerts: list[dict]) -> None:
    for a in alerts:
        ax.axvline(a["step"], color=ALERT_COLOR.get(a["verdict"], "0.5"), lw=0.8, alpha=0.5, ls=":")


def _per_domain(ax, evals: list[dict], key: str, style: str = "-o", label: str = "{d}") -> None:
    for i, d in enumerate(_keys(evals, "eval")):
        xs, ys = _series(evals, lambda r: r["eval"].get(d, {}).get(key))
        if xs:
            ax.plot(xs, ys, style, ms=3, color=f"C{i}", label=label.format(d=d))


def _grouped(ax, train: list[dict], field: str) -> None:
    for i, g in enumerate(_keys(train, field)):
        xs, ys = _series(train, lambda r: (r.get(field) or {}).get(g))
        ax.plot(xs, ys, lw=1, color=plt.cm.viridis(i / max(1, len(_keys(train, field)) - 1)), label=g)


def loss_chart(train, evals, alerts, ax) -> None:
    ax.plot(*_series(train, lambda r: r.get("loss")), color="0.6", lw=1, label="train loss")
    _per_domain(ax, evals, "loss", label="val {d}")
    _mark_alerts(ax, alerts)
    ax.set_title("Loss: train and validation per domain (dotted: alerts)")
    _finish(ax, "nats/token")


def _per_domain_chart(title: str, ylabel: str, *curves: tuple[str, str, str]):
    """A chart of evaluation metrics per domain; each curve is (metric key, line style, label)."""
    def draw(train, evals, alerts, ax) -> None:
        for key, style, label in curves:
            _per_domain(ax, evals, key, style, label)
        ax.set_title(title)
        _finish(ax, ylabel)
    return draw


def _grouped_chart(field: str, title: str, ylabel: str, log: bool = False, total: str | None = None):
    """A chart of one training metric per layer group, optionally with the total as a black line."""
    def draw(train, evals, alerts, ax) -> None:
        if total:
            ax.plot(*_series(train, lambda r: r.get(total)), color="k", lw=1.5, label="total")
        _grouped(ax, train, field)
        ax.set_title(title)
        _finish(ax, ylabel, log=log)
    return draw


bpb_chart = _per_domain_chart("Validation bits per byte per domain", "bits/byte", ("bpb", "-o", "{d}"))
topk_chart = _per_domain_chart("Next-token accuracy per domain: top-1 (solid), top-10 (dashed)", "accuracy",
                               ("top1", "-o", "top-1 {d}"), ("top10", "--s", "top-10 {d}"))
logits_chart = _per_domain_chart("Logit statistics per domain", "logit", ("logit_max_mean", "-o", "mean max logit {d}"),
                                 ("logit_max", ":^", "max logit {d}"), ("logit_std", "--s", "logit std {d}"))
entropy_chart = _per_domain_chart("Mean prediction entropy (solid) against validation loss (dotted)", "nats",
                                  ("entropy", "-o", "entropy {d}"), ("loss", ":", "val loss {d}"))
grad_chart = _grouped_chart("grad_norm_groups", "Gradient norm before clipping, total and per layer group",
                            "L2 norm", log=True, total="grad_norm")
weight_chart = _grouped_chart("weight_norm", "Weight norm per layer group", "L2 norm")
update_chart = _grouped_chart("update_ratio", "Update / weight ratio per layer group (effective learning rate)",
                              "|dW| / |W|", log=True)


def throughput_chart(train, evals, alerts, ax) -> None:
    ax.plot(*_series(train, lambda r: r.get("tokens_per_s")), color="C0", lw=1, label="tokens/s")
    ax.set_title("Throughput (left) and MFU (right)")
    _finish(ax, "tokens/s")
    right = ax.twinx()
    right.plot(*_series(train, lambda r: r.get("mfu")), color="C3", lw=1, label="MFU")
    right.set_ylabel("MFU (share of measured peak)")
    right.legend(fontsize=7, loc="lower right")


def wait_chart(train, evals, alerts, ax) -> None:
    ax.plot(*_series(train, lambda r: r.get("data_wait_share")), color="C1", lw=1, label="waiting for data")
    watched = any("watch_share" in r for r in train)  # an eval watcher competed: a stall beside it shows as such
    if watched:
        ax.plot(*_series(train, lambda r: r.get("watch_share")), color="C7", lw=1, alpha=0.7,
                label="eval watcher evaluating on a shared device")
    ax.set_ylim(0, 1)
    ax.set_title("Share of step time waiting for data" + (", and of the eval watcher evaluating" if watched else ""))
    _finish(ax, "share")


def memory_chart(train, evals, alerts, ax) -> None:
    kind = next((r["memory_kind"] for r in train if "memory_kind" in r), "memory")
    ax.plot(*_series(train, lambda r: r["memory_bytes"] / 2 ** 20 if "memory_bytes" in r else None), color="C2")
    ax.set_title(f"Memory ({kind})")
    _finish(ax, "MiB")


def lr_chart(train, evals, alerts, ax) -> None:
    ax.plot(*_series(train, lambda r: r.get("lr")), color="C4")
    ax.set_title("Learning rate")
    _finish(ax, "lr")


def timeline_chart(train, evals, alerts, ax) -> None:
    names = sorted({a["detector"] for a in alerts})
    for a in alerts:
        y = names.index(a["detector"])
        ax.vlines(a["step"], y - 0.35, y + 0.35, color=ALERT_COLOR.get(a["verdict"], "0.5"), lw=3)
    ax.set_yticks(range(len(names)), names)
    ax.set_ylim(-0.5, max(0.5, len(names) - 0.5))
    last = max([r["step"] for r in train] or [1])
    ax.set_xlim(0, last * 1.02)
    ax.set_title("Alerts over the run (orange: warning, red: error)" if alerts else "No alerts during the run")
    ax.set_xlabel("step")
    ax.grid(alpha=0.3)


CHARTS = [("loss", loss_chart), ("bpb", bpb_chart), ("topk", topk_chart), ("grad_norm", grad_chart),
          ("weight_norm", weight_chart), ("update_ratio", update_chart), ("logits", logits_chart),
          ("entropy", entropy_chart), ("throughput", throughput_chart), ("data_wait", wait_chart),
          ("memory", memory_chart), ("lr", lr_chart), ("timeline", timeline_chart)]


def write_loss_figure(path: Path, train: list[dict], train_label: str, curves: dict[str, tuple[list, list]],
                      ylabel: str, size: tuple[float, float]) -> Path:
    """A report's loss figure as a PNG at `path`: the training loss of each row of `train` (grey), and each curve
    (label -> steps, values) with a marker at each measurement."""
    fig, ax = plt.subplots(figsize=size, dpi=110)
    ax.plot(*_series(train, lambda r: r["loss"]), color="0.6", lw=1, label=train_label)
    for label, (steps, values) in curves.items():
        ax.plot(steps, values, marker="o", label=label)
    ax.set_xlabel("step")
    ax.set_ylabel(ylabel)
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path


def render_charts(rows: list[dict], alerts: list[dict]) -> dict[str, bytes]:
    """PNG bytes per chart name; charts with nothing to show are left out."""
    train = [r for r in rows if "loss" in r]
    evals = [r for r in rows if "eval" in r]
    out = {}
    for name, draw in CHARTS:
        fig, ax = plt.subplots(figsize=(7.5, 3.6), dpi=100)
        draw(train, evals, alerts, ax)
        drawn = any(ax.lines) or any(ax.collections) or name == "timeline"
        if drawn:
            fig.tight_layout()
            buf = io.BytesIO()
            fig.savefig(buf, format="png")
            out[name] = buf.getvalue()
        plt.close(fig)
    return out
