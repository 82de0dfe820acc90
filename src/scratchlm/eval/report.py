"""A checkpoint's evaluation report: automatic metrics and human ratings side by side, with dates."""
from __future__ import annotations

from pathlib import Path

from ..errors import UserError
from ..ids import read_json
from ..model.repetition import CHAR_NGRAM
from .diversity import diversity_verdicts
from .store import EVAL_FILE, evals_dir


def _fmt(v) -> str:
    return "-" if v is None else (f"{v:.4f}" if isinstance(v, float) else str(v))


def human_summaries(directory: Path) -> list[dict]:
    from .human import load_sheet, summarize_sheet

    out = []
    for path in sorted(directory.glob("human-*")):
        try:
            out.append({"sheet": path.name, **summarize_sheet(load_sheet(path))})
        except UserError as e:  # a hand-edited sheet with a bad score must not hide the rest of the report
            out.append({"sheet": path.name, "error": str(e)})
    return out


def checkpoint_section(directory: Path) -> list[str]:
    """Markdown lines: suite metrics (if run) and every rating sheet in the checkpoint's evals folder."""
    md: list[str] = []
    if (directory / EVAL_FILE).exists():
        r = read_json(directory / EVAL_FILE)
        md += [f"Automatic metrics of checkpoint `{r['checkpoint_id']}` (step {r['step']}), evaluated {r['date']}:",
               "", "| domain | val loss | bits/byte | top-1 | top-10 | unigram baseline |", "|---|---|---|---|---|---|"]
        md += [f"| {d} | {_fmt(x['loss'])} | {_fmt(x['bpb'])} | {_fmt(x['top1'])} | {_fmt(x['top10'])} | "
               f"{_fmt(x['unigram_loss'])} |" for d, x in r["domains"].items()]
        div = r["diversity"]
        md += ["", f"Diversity over {div['generations']} generations: distinct-1 {_fmt(div['distinct_1'])}, "
                   f"distinct-2 {_fmt(div['distinct_2'])}, distinct-3 {_fmt(div['distinct_3'])}, repeated 4-gram "
                   f"rate {_fmt(div['repeated_4gram_rate'])}, repeated character {CHAR_NGRAM}-gram rate "
                   f"{_fmt(div.get('repeated_char_ngram_rate'))}, zlib compression ratio "
                   f"{_fmt(div.get('compression_ratio'))}."]
        md += [f"- **{v['level']}**: {v['name']}: {v['message']}" for v in diversity_verdicts(div)]
        if r.get("humaneval"):
            h = r["humaneval"]
            md += ["", f"HumanEval ({h['problems']} problems x {h['samples_per_problem']} samples): pass@1 "
                       f"{_fmt(h['pass@1'])}, pass@10 {_fmt(h['pass@10'])}.", "",
                   f"Model-written code ran in: {h.get('isolation_summary') or h.get('network_isolation')}"
                   + (f"; limits per candidate: {h['limits']}." if h.get("limits") else ".")]
        for name, t in r.get("tasks", {}).items():
            score = (f"accuracy {_fmt(t['accuracy'])} (per byte {_fmt(t['accuracy_per_byte'])}, chance "
                     f"{_fmt(t['chance'])})" if t["kind"] == "multiple_choice" else f"exact match {_fmt(t['exact_match'])}")
            md.append(f"- task `{name}` ({t['items']} items): {score}")
    sheets = human_summaries(directory)
    if sheets:
        md += ["", "Human ratings (mean score, number rated):", ""]
        for s in sheets:
            if "error" in s:
                md.append(f"- `{s['sheet']}`: unreadable: {s['error']}")
                continue
            crit = ", ".join(f"{k} {_fmt(v['mean'])} ({v['rated']}/{s['items']})" for k, v in s["criteria"].items())
            md.append(f"- `{s['sheet']}` (checkpoint `{s['checkpoint_id']}`, step {s['step']}, sheet {s['created']}, "
                      f"rated {s['rated'] or 'not yet'}, scale {s['scale'][0]}-{s['scale'][1]}): {crit}")
    return md


def write_checkpoint_report(directory: Path) -> Path:
    path = directory / "report.md"
    path.write_text("\n".join(["# Checkpoint evaluation", "", *checkpoint_section(directory)]) + "\n",
                    encoding="utf-8")
    return path


def run_report_section(checkpoint: Path) -> list[str]:
    """For the run report: the evaluated checkpoint's suite results and ratings, when there are any."""
    try:
        directory = evals_dir(checkpoint)
    except UserError:
        return []
    lines = checkpoint_section(directory) if directory.is_dir() else []
    return ["## Checkpoint evaluation and human ratings", "", *lines, ""] if lines else []
