"""How a fine-tuning run is shown: its verdicts in the log, its report.md and loss plot, the section of the run
report and the line of `scratchlm check` about the latest fine-tuning. All read summary.json."""
from __future__ import annotations

from pathlib import Path

from ..forced import forced_line
from ..ids import read_json
from ..levels import LEVELS, NOT_AVAILABLE, worst
from ..md import cell
from ..progress import log

MARKS = {"ok": "ok", "warning": "WARNING", "error": "ERROR", NOT_AVAILABLE: NOT_AVAILABLE}


def verdict_line(v: dict) -> str:
    return f"{v['name']}: {MARKS.get(v['level'], v['level'])}: {v['message']}"


def log_verdicts(verdicts: list[dict]) -> None:
    for v in verdicts:
        log("sft: " + verdict_line(v))


def latest_summary(workdir: Path) -> tuple[Path, dict] | None:
    """The newest fine-tuning run of this workdir (by its summary's creation time), or None."""
    found = [(p, read_json(p)) for p in (Path(workdir) / "sft").glob("*/summary.json")]
    if not found:
        return None
    path, summary = max(found, key=lambda f: (f[1].get("created", ""), f[0].stat().st_mtime))
    return path.parent, summary


def worst_level(verdicts: list[dict]) -> str:
    """The worst judged level; NOT_AVAILABLE when none was judged (never "ok")."""
    levels = [v["level"] for v in verdicts]
    return worst(levels) if any(lv in LEVELS for lv in levels) else NOT_AVAILABLE


def _answers_table(answers: dict) -> list[str]:
    names = {"heldout_greedy": "held-out, greedy", "heldout_chat": "held-out, chat defaults",
             "train_greedy": "training prompts, greedy"}
    lines = ["| prompts | answers | exact match | word-F1 | distinct | references distinct | end with <\\|end\\|> |",
             "|---|---|---|---|---|---|---|"]
    for key, label in names.items():
        if key in answers:
            a = answers[key]
            lines.append(f"| {label} | {a['answers']} | {a['exact_match']:.1%} | {a['word_f1']:.3f} | "
                         f"{a['distinct_share']:.0%} | {a['reference_distinct_share']:.0%} | {a['end_share']:.0%} |")
    return lines


def summary_markdown(summary: dict, heading: str = "#") -> list[str]:
    """The body shared by the run's own report.md and the run report's fine-tuning section."""
    held = summary["heldout"]
    md = [f"**Forced:** {forced_line(summary['forced'])}.", ""] if summary.get("forced") else []
    md += [f"{summary['conversations']} training conversations, held out: {held['how']}; {summary['steps']} steps at "
          f"lr {summary['learning_rate']:g}, {summary['epochs']:.1f} epochs; training loss "
          f"{summary['first_loss']:.3f} -> {summary['last_loss']:.3f}. Checkpoint `{summary['checkpoint']}`.", "",
          f"{heading}# Verdicts", ""]
    md += [f"- {cell(verdict_line(v))}" for v in summary["verdicts"]]
    overlap = summary.get("overlap")
    if overlap:
        md += [f"- overlap with evaluation data: {MARKS.get(overlap['verdict']['level'])}: "
               f"{cell(overlap['verdict']['message'])}"]
    points = summary.get("heldout_loss") or []
    if points:
        md += ["", f"{heading}# Held-out loss", "", "| step | held-out loss | training loss since the last |",
               "|---|---|---|"]
        md += [f"| {p['step']} | {p['heldout_loss']:.4f} | "
               + (f"{p['train_loss']:.4f} |" if p["train_loss"] is not None else "(before fine-tuning) |")
               for p in points]
    answers = summary.get("answers")
    if answers:
        md += ["", f"{heading}# Answers", "", *_answers_table(answers), ""]
        for ex in answers["heldout_greedy"]["examples"]:
            md += [f"- **Prompt:** {cell(ex['prompt'][:300])}", f"  - reference: {cell(ex['reference'][:300])}",
                   f"  - answer: {cell(ex['answer'][:300])}" + ("" if ex["ended"] else " (no <|end|>: cut at the cap)")]
    return md


def plot_losses(out: Path, losses: list[dict], points: list[dict]) -> Path:
    from ..monitor.charts import write_loss_figure  # matplotlib: imported when a report is drawn

    curves = {"held-out loss": ([p["step"] for p in points], [p["heldout_loss"] for p in points])} if points else {}
    return write_loss_figure(out / "loss.png", losses, "training loss", curves, "loss on answers (nats/token)",
                             (7, 4))


def write_sft_report(out: Path, summary: dict, losses: list[dict]) -> Path:
    plot = plot_losses(out, losses, summary.get("heldout_loss") or [])
    md = ["# Fine-tuning report", "", *summary_markdown(summary), "", f"![losses]({plot.name})", ""]
    path = out / "report.md"
    path.write_text("\n".join(md), encoding="utf-8")
    return path


def run_report_section(workdir: Path) -> list[str]:
    """The run report's section on the latest fine-tuning of this workdir; nothing when there is none."""
    found = latest_summary(workdir)
    if found is None:
        return []
    directory, summary = found
    return ["## Fine-tuning", "", f"The latest run, `{directory}` ({summary['created']}):", "",
            *summary_markdown(summary, heading="##"), ""]


def check_item(workdir: Path) -> tuple[str, str, str, dict]:
    """(name, level, summary, evidence) of `scratchlm check`'s line on the latest fine-tuning."""
    name = "fine-tuning learned, not memorised"
    found = latest_summary(workdir)
    if found is None:
        return name, NOT_AVAILABLE, "no fine-tuning run in this workdir (`scratchlm sft`)", {}
    directory, summary = found
    verdicts = summary.get("verdicts") or []
    if not verdicts:
        return name, NOT_AVAILABLE, f"{directory} was fine-tuned before SFT was judged; run `scratchlm sft` again", {}
    shown = [v for v in verdicts if v["level"] in ("warning", "error")] or verdicts
    overlap = summary.get("overlap", {}).get("verdict")
    level = worst_level(verdicts + ([overlap] if overlap else []))
    text = "; ".join(verdict_line(v) for v in shown)
    if summary.get("forced"):
        level, text = "error", f"{forced_line(summary['forced'])}; {text}"
    if overlap and overlap["level"] != "ok":
        text += f"; overlap with evaluation data: {overlap['message']}"
    return name, level, f"{text} ({directory / 'report.md'})", {"verdicts": verdicts, "overlap": overlap}
