"""`scratchlm compare RUN...`: what differs between training runs, and what it did to their metrics.

Writes one self-contained HTML page (plots as base64 PNG, no network), a Markdown summary and a JSON summary
beside it, and prints the Markdown's key lines. Every figure, table row and verdict comes from one summary dict
(compare_summary.build_summary); this file only lays it out as text.
"""
from __future__ import annotations

import argparse
from pathlib import Path

from ..errors import UserError
from ..ids import write_json
from ..md import cell
from .compare_summary import (
    METRIC_LABEL,
    build_summary,
    finite,
    fmt,
    fmt_seconds,
    fmt_tokens,
    json_safe,
)
from .config_diff import show
from .runs import load_runs

MATCHED_NOTE = ("final: each run's last evaluation (training loss: its last log row); Δ against run #1. "
                "@ tokens / @ wall-clock: each run's value at the largest token count / training time every run "
                "reached, interpolated on its evaluation curve (— where a run has no evaluation that early)")


def final_table(summary: dict) -> tuple[list[str], list[list[str]]]:
    """Header and rows of the final-metrics table, deltas inline: the same strings in every output."""
    n = len(summary["runs"])
    short = [r["label"].split()[0] for r in summary["runs"]]
    m = summary["matched"]
    groups = (("final", "final"), ("at_tokens", f"@ {fmt_tokens(m['tokens'])} tokens"),
              ("at_seconds", f"@ {fmt_seconds(m['seconds'])}"))
    header = ["metric"] + [f"{title} {s}" for _, title in groups for s in short]
    rows = []
    for row in summary["table"]:
        cells = [METRIC_LABEL.get(row["metric"], row["metric"])]
        for key, _ in groups:
            ref = row[key][0]
            for i in range(n):
                v = row[key][i]
                delta = f" ({v - ref:+.4f})" if i and finite(v) and finite(ref) else ""
                cells.append(fmt(v) + delta)
        rows.append(cells)
    return header, rows


def runs_table(summary: dict) -> tuple[list[str], list[list[str]]]:
    header = ["run", "training directory", "how chosen", "state", "last step", "tokens", "training time",
              "evaluations at", "eval stage"]
    rows = []
    for r in summary["runs"]:
        stage = r["eval_stage"]
        rows.append([r["label"], r["train_dir"], r["chosen"], r["state"], str(r["last_step"]),
                     fmt_tokens(r["tokens"]), fmt_seconds(r["training_seconds"]),
                     ", ".join(map(str, r["eval_steps"])) or "none yet",
                     f"step {stage['step']}, val_loss {fmt(stage['val_loss'])}" if stage else "not run"])
    return header, rows


def diff_rows(diff: dict) -> tuple[list[str], list[list[str]]]:
    rows = [[k["key"], show(k["reference"]), show(k["run"]), effect]
            for group, effect in (("trained", "changes what is trained"), ("measured", "changes the evaluation"),
                                  ("bookkeeping", "no effect on the weights (not counted)"),
                                  ("no_effect", "no effect on the run"))
            for k in diff[group]]
    rows += [[f"{c['stage']} (upstream ID)", c["reference"], c["run"], "same keys, different content"]
             for c in diff["content"]]
    return ["key", diff["reference"], diff["run"], "effect"], rows


def md_table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(cell(h) for h in header) + " |", "|" + "---|" * len(header)]
    return "\n".join(lines + ["| " + " | ".join(cell(c) for c in row) + " |" for row in rows])


def diff_lines(summary: dict) -> list[str]:
    return [f"{d['run']} vs {d['reference']}: {d['verdict']}" for d in summary["diff"]]


def markdown(summary: dict, charts: dict[str, tuple[str, bytes]], html_name: str) -> str:
    better = "higher" if summary["higher_is_better"] else "lower"
    metric = METRIC_LABEL.get(summary["metric"], summary["metric"])
    out = ["# scratchlm compare", "", f"Reference: run #1. Metric of the verdict: {metric}; {better} is better.", "",
           md_table(*runs_table(summary)), "", "## Config diff", ""]
    for line, d in zip(diff_lines(summary), summary["diff"]):
        out += [f"**{line}**", "", md_table(*diff_rows(d)) if diff_rows(d)[1] else "No key differs.", ""]
    out += ["## Final metrics", "", MATCHED_NOTE + ".", "", md_table(*final_table(summary)), "",
            "## Verdict", "", *(f"- {v}" for v in summary["verdicts"]), "", "## Samples", "",
            f"Generations of the fixed prompts: {summary['samples']['note']}.", ""]
    rows = summary["samples"]["rows"]
    if rows:
        out += [md_table(["prompt", *(r["label"] for r in summary["runs"])],
                         [[s["prompt"], *(c if c is not None else "—" for c in s["completions"])] for s in rows]), ""]
    out += ["## Charts", "", f"In {html_name}: " + "; ".join(caption for caption, _ in charts.values()) + ".", ""]
    return "\n".join(out)


def output_paths(html: str) -> tuple[Path, Path, Path]:
    out = Path(html)
    if out.suffix in (".md", ".json"):
        raise UserError(f"--html {html}: the HTML page needs its own name (the .md and .json go beside it)")
    return out, out.with_suffix(".md"), out.with_suffix(".json")


def compare_command(args: argparse.Namespace) -> int:
    from .compare_charts import render_charts
    from .compare_html import write_page

    html_path, md_path, json_path = output_paths(args.html)
    runs = load_runs(args.runs)
    summary = build_summary(runs, args.metric)
    shared = summary["shared_domains"]
    charts = render_charts(runs, summary["legends"], summary["domains"],
                           set(shared) if shared != summary["domains"] else None)
    html_path.parent.mkdir(parents=True, exist_ok=True)
    write_page(html_path, summary, charts, {"runs": runs_table(summary), "final": final_table(summary),
                                            "diffs": [diff_rows(d) for d in summary["diff"]],
                                            "diff_lines": diff_lines(summary), "note": MATCHED_NOTE})
    md_path.write_text(markdown(summary, charts, html_path.name), encoding="utf-8")
    write_json(json_path, json_safe(summary))
    for r in runs:
        print(f"{r.label}: {r.train_dir} ({r.chosen}; {r.state})")
    print("\n".join(diff_lines(summary)))
    print(md_table(*final_table(summary)))
    print("\n".join(summary["verdicts"]))
    print(f"wrote {html_path}, {md_path}, {json_path}")
    return 0
