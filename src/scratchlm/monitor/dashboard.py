"""`scratchlm report RUN_DIR`: one self-contained HTML file to watch a run, plus the plots as PNG files.

Self-contained means viewable with no network: the plots are embedded as base64 PNG, the styles are inline,
there is no script. It reads only the training directory (metrics.jsonl, alerts.jsonl, monitor.json,
samples/, diagnosis.json), so it works on a run that is still going or that halted.
"""
from __future__ import annotations

import base64
import html
import json
import time
from pathlib import Path

from ..errors import UserError
from .charts import render_charts
from .detectors import ALL_NAMES
from .monitor import ALERTS, SUMMARY, read_rows
from .sample_diff import html_diff, load_samples, sample_files
from .watch_rows import in_step_order, source_of, summary_sentence, watch_summary

DASHBOARD = "dashboard.html"
STYLE = """
body{font-family:system-ui,sans-serif;margin:24px;color:#222;max-width:1600px}
h1{font-size:1.5em}h2{margin-top:1.6em;border-bottom:1px solid #ccc}
table.t{border-collapse:collapse;font-size:.9em}table.t td,table.t th{border:1px solid #ccc;padding:3px 8px}
table.t th{background:#f0f0f0}.ok{background:#d8f5d8}.warning{background:#ffe4b0}.error{background:#ffb8b8}
.charts{display:flex;flex-wrap:wrap;gap:12px}figure.chart{margin:0;border:1px solid #ddd;padding:4px}
figure.chart img{display:block;width:750px;height:360px}
pre{background:#f6f6f6;padding:8px;white-space:pre-wrap}details{margin:6px 0}
table.diff{font-family:monospace;font-size:.85em;border:1px solid #ccc}
.diff_header{background:#e0e0e0}td.diff_header{text-align:right}.diff_next{background:#c0c0c0}
.diff_add{background:#aaffaa}.diff_chg{background:#ffff77}.diff_sub{background:#ffaaaa}
"""


def resolve_train_dir(run_dir: Path) -> Path:
    """A train/<id> directory as given, or the latest training run of a workdir."""
    run_dir = Path(run_dir)
    if (run_dir / "metrics.jsonl").exists():
        return run_dir
    lineage = run_dir / "lineage.json"
    if lineage.exists():
        train = json.loads(lineage.read_text()).get("artifacts", {}).get("train")
        if train and (run_dir / train["dir"] / "metrics.jsonl").exists():
            return run_dir / train["dir"]
    candidates = sorted((run_dir / "train").glob("*/metrics.jsonl"), key=lambda p: p.stat().st_mtime)
    if candidates:
        return candidates[-1].parent  # no finished run in the lineage: the one written to last
    raise UserError(f"{run_dir} is neither a training directory (train/<id>/ with metrics.jsonl) nor a workdir "
                    f"holding one")


def _e(v) -> str:
    return html.escape(str(v))


def _fmt(v) -> str:
    if isinstance(v, float):
        return f"{v:.4g}"
    return "" if v is None else _e(v)


def _table(header: list[str], rows: list[list], row_class: list[str] | None = None) -> str:
    out = ['<table class="t"><tr>' + "".join(f"<th>{_e(h)}</th>" for h in header) + "</tr>"]
    for i, row in enumerate(rows):
        cls = f' class="{row_class[i]}"' if row_class else ""
        out.append(f"<tr{cls}>" + "".join(f"<td>{_fmt(v)}</td>" for v in row) + "</tr>")
    return "\n".join(out + ["</table>"])


def _verdicts(summary: dict | None, alerts: list[dict]) -> str:
    if summary is None:  # a run still going: verdicts so far, from the alerts
        stats = {n: {"verdict": "ok", "checks": None, "fired": 0, "first_step": None, "last_step": None,
                     "message": ""} for n in ALL_NAMES}
        for a in alerts:
            s = stats.setdefault(a["detector"], {"verdict": "ok", "fired": 0, "first_step": None})
            s["verdict"] = "error" if a["verdict"] == "error" else a["verdict"] if s["verdict"] == "ok" else s["verdict"]
            s["fired"] += 1
            s["first_step"] = s["first_step"] if s["first_step"] is not None else a["step"]
            s["last_step"], s["message"] = a["step"], a["message"]
    else:
        stats = summary["detectors"]
    rows = [[n, s["verdict"], s.get("checks"), s["fired"], s["first_step"], s["last_step"], s["message"]]
            for n, s in stats.items()]
    return _table(["detector", "verdict", "checks", "fired", "first step", "last step", "last message"], rows,
                  [s["verdict"] for s in stats.values()])


def _latest_eval(rows: list[dict]) -> str:
    evals = [r for r in rows if "eval" in r]
    if not evals:
        return "<p>No evaluation yet.</p>"
    last = evals[-1]
    keys = ["loss", "bpb", "top1", "top10", "logit_max", "logit_max_mean", "logit_std", "entropy"]
    body = _table(["domain", *keys], [[d, *(r.get(k) for k in keys)] for d, r in last["eval"].items()])
    return (f"<p>Step {last['step']}, mean validation loss {_fmt(last.get('val_loss'))}; {_e(source_of(last))}.</p>"
            f"{body}")


def _watched(rows: list[dict]) -> str:
    """The eval watcher's evaluations: where, how long, how long after their checkpoint."""
    summary = watch_summary(rows)
    if summary is None:
        return ""
    table = _table(["step", "checkpoint", "device", "suite", "shared with training", "evaluation (s)",
                    "checkpoint to result (s)"],
                   [[r["step"], r["watch"]["checkpoint"], r["watch"]["device"], r["watch"]["suite"],
                     "yes" if r["watch"]["shared"] else "no", round(r["watch"]["eval_s"], 1),
                     round(r["watch"]["latency_s"], 1)] for r in rows if "eval" in r and "watch" in r])
    return f"<h2>Evaluations beside the run</h2><p>{_e(summary_sentence(summary))}</p>{table}"


def _sample_diffs(train_dir: Path) -> str:
    files = sample_files(train_dir / "samples")
    if not files:
        return "<p>No generations saved yet.</p>"
    parts, previous, prev_step = [], None, None
    for n, (step, path) in enumerate(files):
        current = load_samples(path)
        blocks = []
        for i, s in enumerate(current):
            before = previous[i]["completion"] if previous and i < len(previous) else ""
            label = f"step {prev_step}" if prev_step is not None else "(no earlier evaluation)"
            blocks.append(f"<p><b>Prompt {i}:</b> <code>{_e(s['prompt'])}</code></p>"
                          + html_diff(before, s["completion"], label, f"step {step}"))
        is_last = n == len(files) - 1
        parts.append(f"<details{' open' if is_last else ''}><summary>Step {step}"
                     f"{f' against step {prev_step}' if prev_step is not None else ''}</summary>"
                     + "\n".join(blocks) + "</details>")
        previous, prev_step = current, step
    return "\n".join(reversed(parts))  # newest first


def write_dashboard(train_dir: Path, out_dir: Path) -> Path:
    train_dir, out_dir = Path(train_dir), Path(out_dir)
    rows = in_step_order(read_rows(train_dir / "metrics.jsonl"))  # a watcher's rows come late
    alerts = read_rows(train_dir / ALERTS)
    summary = json.loads((train_dir / SUMMARY).read_text()) if (train_dir / SUMMARY).exists() else None
    charts = render_charts(rows, alerts)
    plots = out_dir / "plots"
    plots.mkdir(parents=True, exist_ok=True)
    for name, png in charts.items():
        (plots / f"{name}.png").write_bytes(png)

    train_rows = [r for r in rows if "loss" in r]
    last = train_rows[-1] if train_rows else {}
    h = ["<!doctype html><html><head><meta charset=\"utf-8\"><title>scratchlm dashboard</title>",
         f"<style>{STYLE}</style></head><body>",
         f"<h1>scratchlm run dashboard</h1><p>Training directory <code>{_e(train_dir)}</code>; "
         f"{len(train_rows)} log rows, last step {last.get('step', '-')}, last loss {_fmt(last.get('loss'))}; "
         f"written {time.strftime('%Y-%m-%d %H:%M:%S')}.</p>"]
    diagnosis = train_dir / "diagnosis.json"
    if diagnosis.exists():
        d = json.loads(diagnosis.read_text())
        h.append(f'<div class="error"><h2>Run halted</h2><p>{_e(d.get("explanation", ""))}</p>'
                 f"<pre>{_e(json.dumps({k: d.get(k) for k in ('step', 'loss', 'grad_norm', 'lr', 'nonfinite_grads', 'next')}, indent=1))}</pre></div>")
    h += ["<h2>Detectors</h2>", _verdicts(summary, alerts), "<h2>Latest evaluation</h2>", _latest_eval(rows),
          _watched(rows), "<h2>Charts</h2>", '<div class="charts">']
    for name, png in charts.items():
        h.append(f'<figure class="chart" id="chart-{name}"><img alt="{name}" '
                 f'src="data:image/png;base64,{base64.b64encode(png).decode()}"></figure>')
    h.append("</div><h2>Timeline of alerts</h2>")
    h.append(_table(["step", "detector", "subject", "verdict", "message"],
                    [[a["step"], a["detector"], a["subject"], a["verdict"], a["message"]] for a in alerts],
                    [a["verdict"] for a in alerts]) if alerts else "<p>No alerts.</p>")
    h += ["<h2>Generations from the fixed prompts, against the previous evaluation</h2>", _sample_diffs(train_dir),
          "</body></html>"]
    path = out_dir / DASHBOARD
    path.write_text("\n".join(h), encoding="utf-8")
    return path
