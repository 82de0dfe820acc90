"""The report's monitoring section: one verdict per detector, the alerts, and the dashboard beside it."""
from __future__ import annotations

from pathlib import Path

from ..ids import read_json
from ..md import cell
from .dashboard import write_dashboard
from .monitor import ALERTS, SUMMARY, read_rows
from .watch_rows import summary_sentence, watch_summary


def monitoring_section(train_dir: Path, out: Path) -> list[str]:
    dashboard = write_dashboard(train_dir, out)
    md = ["## Monitoring", "", f"Dashboard: [{dashboard.name}]({dashboard.name}) (self-contained HTML: per-domain "
          f"curves, norms, top-1/top-10, logit statistics, alerts, sample diffs); plots in `{out / 'plots'}`.", ""]
    watched = watch_summary(read_rows(Path(train_dir) / "metrics.jsonl"))
    if watched is not None:
        md += [summary_sentence(watched), ""]
    summary_path = Path(train_dir) / SUMMARY
    if not summary_path.exists():
        return md + ["No monitor summary in the training directory (trained before the monitor existed?).", ""]
    detectors = read_json(summary_path)["detectors"]
    md += ["| detector | verdict | checks | fired | first step | last step | last message |", "|---|---|---|---|---|---|---|"]
    for name, s in detectors.items():
        md.append(f"| {name} | {s['verdict']} | {s['checks']} | {s['fired']} | {s['first_step'] or ''} | "
                  f"{s['last_step'] or ''} | {cell(s['message'])} |")
    alerts = read_rows(Path(train_dir) / ALERTS)
    md += ["", f"{len(alerts)} alerts in `{ALERTS}`" + (":" if alerts else "."), ""]
    md += [f"- step {a['step']}: **{a['verdict']}** {a['detector']} ({a['subject']}): {a['message']}"
           for a in alerts[:50]]
    return md + [""]
