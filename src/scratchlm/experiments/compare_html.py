"""The comparison as one self-contained HTML page, in the dashboard's style: plots embedded as base64 PNG,
inline styles, no script, nothing loaded from the network. It lays out strings made elsewhere (compare.py)."""
from __future__ import annotations

import base64
import html
import time
from pathlib import Path

from ..monitor.dashboard import STYLE

EXTRA_STYLE = """
figure.chart img{width:auto;height:auto;max-width:100%}figure.chart figcaption{font-size:.85em;color:#444}
table.samples td{vertical-align:top;max-width:520px}table.samples pre{margin:0;font-size:.8em}
p.verdict{border-left:4px solid #888;padding:4px 8px;background:#f6f6f6}.confounded{background:#ffe4b0}.one{background:#d8f5d8}
"""


def _e(v) -> str:
    return html.escape(str(v))


def _table(header: list[str], rows: list[list[str]], cls: str = "t") -> str:
    out = [f'<table class="{cls}"><tr>' + "".join(f"<th>{_e(h)}</th>" for h in header) + "</tr>"]
    out += ["<tr>" + "".join(f"<td>{_e(c)}</td>" for c in row) + "</tr>" for row in rows]
    return "\n".join(out + ["</table>"])


def _diff_section(lines: list[str], diffs: list[tuple[list[str], list[list[str]]]], kinds: list[str]) -> list[str]:
    out = []
    for line, (header, rows), kind in zip(lines, diffs, kinds):  # kind: ConfigDiff.kind, a CSS class but "none"
        out.append(f'<p class="verdict {kind}">{_e(line)}</p>')
        out.append(_table(header, rows) if rows else "<p>No key differs.</p>")
    return out


def _samples_section(summary: dict) -> list[str]:
    s = summary["samples"]
    out = [f"<p>Generations of the fixed prompts: {_e(s['note'])}.</p>"]
    if not s["rows"]:
        return out + ["<p>No generations saved yet.</p>"]
    heads = [f"{r['label']} (step {st})" for r, st in zip(summary["runs"], s["steps"])]
    out.append('<table class="t samples"><tr><th>prompt</th>' + "".join(f"<th>{_e(h)}</th>" for h in heads)
               + "</tr>")
    for row in s["rows"]:
        cells = "".join(f"<td><pre>{_e(c) if c is not None else '—'}</pre></td>" for c in row["completions"])
        out.append(f"<tr><td><pre>{_e(row['prompt'])}</pre></td>{cells}</tr>")
    return out + ["</table>"]


def write_page(path: Path, summary: dict, charts: dict[str, tuple[str, bytes]], tables: dict) -> Path:
    h = ['<!doctype html><html><head><meta charset="utf-8"><title>scratchlm compare</title>',
         f"<style>{STYLE}{EXTRA_STYLE}</style></head><body>",
         f"<h1>scratchlm compare: {len(summary['runs'])} runs</h1>",
         f"<p>Reference: run #1. Written {time.strftime('%Y-%m-%d %H:%M:%S')}.</p>",
         _table(*tables["runs"]), "<h2>Verdict</h2>",
         *(f'<p class="verdict">{_e(v)}</p>' for v in summary["verdicts"]),
         "<h2>Config diff</h2>", *_diff_section(tables["diff_lines"], tables["diffs"], [d["kind"] for d in summary["diff"]]),
         "<h2>Final metrics</h2>", f"<p>{_e(tables['note'])}.</p>", _table(*tables["final"]),
         "<h2>Curves</h2>", '<div class="charts">']
    for name, (caption, png) in charts.items():
        h.append(f'<figure class="chart" id="chart-{name}"><img alt="{_e(caption)}" '
                 f'src="data:image/png;base64,{base64.b64encode(png).decode()}">'
                 f"<figcaption>{_e(caption)}</figcaption></figure>")
    h += ["</div>", "<h2>Samples side by side</h2>", *_samples_section(summary), "</body></html>"]
    Path(path).write_text("\n".join(h), encoding="utf-8")
    return Path(path)
