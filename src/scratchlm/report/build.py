"""The run report: one Markdown file to read, one JSON file for tools, and plots of the curves."""
from __future__ import annotations

from pathlib import Path

from ..ids import read_json, write_json
from ..md import cell
from ..monitor.monitor import read_rows
from ..monitor.report import monitoring_section
from ..monitor.watch_rows import in_step_order
from .data_section import data_section
from ..forced import forced_line
from ..tokenizer.report_section import name_the_digest, tokenizer_section


def _metrics(train_dir: Path) -> list[dict]:
    return in_step_order(read_rows(train_dir / "metrics.jsonl"))  # an eval watcher's rows come late


def plot_curves(rows: list[dict], out: Path) -> Path | None:
    from ..monitor.charts import write_loss_figure  # matplotlib: imported when a report is drawn

    train = [r for r in rows if "loss" in r]
    evals = [r for r in rows if "eval" in r]
    if not train:
        return None
    curves = {f"val loss: {domain}": tuple(zip(*[(r["step"], r["eval"][domain]["loss"]) for r in evals
                                                  if domain in r["eval"]]))
              for domain in sorted({d for r in evals for d in r["eval"]})}
    return write_loss_figure(out / "loss_curves.png", train, "train loss", curves, "loss (nats/token)", (8, 4.5))


def _table(header: list[str], rows: list[list]) -> str:
    def fmt(v):
        return f"{v:.4f}" if isinstance(v, float) else ("" if v is None else cell(v))

    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(fmt(v) for v in row) + " |" for row in rows]
    return "\n".join(lines)


def _mfu_text(row: dict) -> str:
    """The last log row's MFU: against the GPU's dense datasheet peak where the GPU is known
    (scratchlm.gpu_peaks), and against the matmul peak measured on this machine beside it."""
    if "mfu" not in row:  # trained before the monitor logged it
        return ""
    measured = f"{row['mfu']:.1%} of the measured matmul peak"
    if row.get("mfu_datasheet") is None:
        return f", MFU {measured}"
    return f", MFU {row['mfu_datasheet']:.1%} of the GPU's dense datasheet peak ({measured})"


def forced_lines(train_summary: dict) -> list[str]:
    """The report's first lines when the training went past error verdicts with --force (stages.forced_past):
    which, their figures, and that it was forced. A run not forced has none."""
    forced = train_summary.get("forced")
    return [f"**Forced:** {forced_line(forced)}.", ""] if forced else []


def build_report(workdir: Path, dirs: dict[str, Path], ids: dict[str, str], out: Path, demo: bool = False) -> dict:
    data = read_json(dirs["data"] / "stats.json")
    shards = read_json(dirs["shards"] / "shards.json")
    train_summary = read_json(dirs["train"] / "summary.json")
    evaluation = read_json(dirs["eval"] / "eval.json")
    rows = _metrics(dirs["train"])
    plot = plot_curves(rows, out)

    md = ["# scratchlm run report", ""]
    md += ["Artifacts (content-derived IDs): " + ", ".join(f"{k} `{v}`" for k, v in ids.items()), ""]
    md += data_section(data, shards, train_summary.get("n_params"), _table, data_dir=dirs["data"])
    tokenizer_md, tokenizer_json, tokenizer_plot = tokenizer_section(dirs["tokenizer"], shards, out, _table,
                                                                      ids.get("tokenizer"))
    md += ["", *tokenizer_md]
    from ..plan.budget import plan_path

    plan_file = plan_path(workdir, ids.get("train"))
    plan = read_json(plan_file) if plan_file.exists() else None
    if plan:
        from ..plan.render import plan_markdown

        md += [""] + plan_markdown(plan)
    from .decontaminate_section import decontaminate_sections  # eval-set scan and domain mix

    decontaminate_md, decontaminate = decontaminate_sections(dirs["decontaminate"], shards, train_summary)
    md += [""] + decontaminate_md
    md += ["", "## Training", ""]
    md.append(f"{train_summary['n_params']:,} parameters ({train_summary['n_params_non_embedding']:,} without "
              f"embeddings), {train_summary['steps']} steps, {train_summary['tokens']:,} tokens, on "
              f"{train_summary['device']} in {train_summary['precision']}"
              + (f" ({train_summary['precision_reason']})." if train_summary.get("precision_reason") else "."))
    last = [r for r in rows if "tokens_per_s" in r]
    if last:
        md.append(f"Throughput at the end: {last[-1]['tokens_per_s']:,.0f} tokens/s{_mfu_text(last[-1])}.")
    md.append("Epochs per source: " + ", ".join(f"{k} {v:.2f}" for k, v in train_summary["epochs_per_source"].items()))
    if plot:
        md += ["", f"![loss curves]({plot.name})"]
    from .timing_section import timing_section  # stage seconds, plan-predicted against measured training time

    timing_md, timings = timing_section(dirs, plan, _table)
    md += [""] + timing_md
    md += ["", "## Evaluation", "", f"Checkpoint `{evaluation['checkpoint']}` (step {evaluation['step']}).", ""]
    md.append(_table(["domain", "val loss", "unigram baseline", "bits/byte", "top-1", "top-10", "tokens"],
                     [[d, r["loss"], r["unigram_loss"], r["bpb"], r["top1"], r["top10"], r["tokens"]]
                      for d, r in evaluation["domains"].items()]))
    from ..eval.base_quality import judge_base  # the verdict `scratchlm sft` applies to this base

    md += ["", f"Base quality (mean over domains): {judge_base(evaluation)['message']}.", ""]
    from ..eval.report import run_report_section  # `scratchlm eval --checkpoint` results and human ratings

    md += run_report_section(Path(evaluation["checkpoint"]))
    md += ["## Samples", ""]
    for s in evaluation["samples"]:
        md += [f"**Prompt:** `{s['prompt']}`", "", "```", s["prompt"] + s["completion"], "```", ""]
    from ..sft.report import run_report_section as sft_section  # the latest `scratchlm sft` of this workdir

    md += sft_section(workdir)
    md += monitoring_section(dirs["train"], out)  # detector verdicts, dashboard.html, plots/
    report = {"ids": ids, "data": data, "shards": name_the_digest(shards), "train": train_summary,
              "eval": evaluation, "plan": plan}
    report.update(decontaminate, timings=timings, tokenizer=tokenizer_json)
    expected, header = [], forced_lines(train_summary)  # after the title: what was forced, first
    if demo:  # one note on what a 10-minute CPU demo cannot avoid
        from ..plan import demo as demo_note

        expected = demo_note.note_lines(report)
        header += demo_note.report_section(report)
    md[2:2] = header
    (out / "report.md").write_text("\n".join(md) + "\n", encoding="utf-8")
    write_json(out / "report.json", report)
    for name in ("report.md", "report.json", "dashboard.html") + tuple(p.name for p in (plot, tokenizer_plot) if p):
        (workdir / name).write_bytes((out / name).read_bytes())  # the latest report sits at the top of the run
    return {"report": str(workdir / "report.md"), "val_loss": evaluation["val_loss"],
            "unigram_loss": evaluation["unigram_loss"], "expected_in_demo": expected}
