"""The evaluations an eval watcher added to a run's metrics.jsonl (`scratchlm eval watch`), summed up once for
the dashboard and the report alike.

A watcher appends its rows when it finishes them, after training rows of later steps: whoever draws curves from
metrics.jsonl takes the rows in step order (`in_step_order`).
"""
from __future__ import annotations

import statistics

from ..progress import duration


def in_step_order(rows: list[dict]) -> list[dict]:
    return sorted(rows, key=lambda r: r["step"])  # stable: a step's log row stays before its evaluation row


def watch_summary(rows: list[dict]) -> dict | None:
    """How many evaluations came from the watcher, on which devices, and how long after their checkpoints;
    None when none did."""
    watched = [r["watch"] for r in rows if "eval" in r and "watch" in r]
    if not watched:
        return None
    latency = [w["latency_s"] for w in watched]
    return {"evaluations": len(watched), "inline": sum(1 for r in rows if "eval" in r and "watch" not in r),
            "devices": sorted({w["device"] for w in watched}), "shared": sum(1 for w in watched if w["shared"]),
            "median_latency_s": statistics.median(latency), "max_latency_s": max(latency),
            "median_eval_s": statistics.median(w["eval_s"] for w in watched)}


def summary_sentence(summary: dict) -> str:
    return (f"{summary['evaluations']} evaluation(s) came from the eval watcher on {', '.join(summary['devices'])}"
            + (f" ({summary['shared']} of them on a device or CPU cores shared with training)"
               if summary["shared"] else "")
            + f": median {duration(summary['median_eval_s'])} to evaluate, results "
            f"{duration(summary['median_latency_s'])} after their checkpoint (median; at most "
            f"{duration(summary['max_latency_s'])})"
            + (f"; {summary['inline']} evaluation(s) ran inside the trainer" if summary["inline"] else "") + ".")


def source_of(row: dict) -> str:
    """Where an evaluation row came from, in words."""
    if "watch" not in row:
        return "evaluated inside the trainer"
    w = row["watch"]
    return (f"evaluated by the eval watcher on {w['device']}, result {duration(w['latency_s'])} after the "
            f"checkpoint was written")
