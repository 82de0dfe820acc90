"""An ablation's outputs: ablation.json, ablation.md, ablation.png, and the table printed at the end.

The table's cells come from `row_cells`, once, for the terminal and the Markdown alike; the verdicts and the
seeds-needed notes in it were decided by stats.compare_arms and are only formatted here.
"""
from __future__ import annotations

from pathlib import Path

from ..atomic import atomic_write_text
from ..ids import write_json
from ..md import cell

HEADER = ("variant", "val loss mean ± std", "Δ vs base [95% CI]", "p (Welch, n seeds)", "verdict",
          "seeds needed (80% power)")
VERDICTS_EXPLAINED = (
    "**better** / **worse**: Welch's t-test finds the difference from the base unlikely under seed noise alone "
    "(p < 0.05; lower loss is better). It says the difference is real at these steps and on this data, not that "
    "it holds at other scales or longer training. **no difference detectable with N seeds**: the difference is "
    "within what seed-to-seed noise produces; it is not evidence that the variants are equal: the seeds-needed "
    "column estimates, from the observed difference and noise, how many seeds per arm a test would need to detect "
    "that difference 80% of the time. **diverged (k of n seeds)**: k runs stopped on a non-finite loss "
    "(their train directory's diagnosis.json says why); the statistics use the other runs only.")


def row_cells(label: str, arm: dict, comparison: dict | None = None) -> list[str]:
    """One table row: the base's (comparison None) or a variant's against the base."""
    spread = (f"{arm['mean']:.4f} ± {arm['std']:.4f}" if arm["n"] > 1 else f"{arm['mean']:.4f} (1 seed)"
              if arm["n"] == 1 else "— (all diverged)")
    if comparison is None:
        return [label, spread, "", "", "(base)", ""]
    test, n = comparison["test"], min(comparison["base"]["n"], comparison["variant"]["n"])
    if comparison["diff"] is None:  # an arm without a finite loss
        delta, p = "—", "—"
    elif test is None:
        delta, p = f"{comparison['diff']:+.4f} (no interval)", f"— (Welch, {n} seed{'s' * (n != 1)})"
    else:
        delta = f"{test['diff']:+.4f} [{test['ci_low']:+.4f}, {test['ci_high']:+.4f}]"
        p = f"{test['p']:.3g} (Welch, {n} seeds)"
    return [label, spread, delta, p, comparison["verdict"], comparison["seeds_needed_note"]]


def table_rows(result: dict, domain: str | None = None) -> list[list[str]]:
    """The base's row and each variant's, on the mean validation loss (domain None) or one domain's loss."""
    base = result["base"]["val_loss"] if domain is None else result["base"]["domains"][domain]
    rows = [row_cells("base", base)]
    for v in result["variants"]:
        comparison = v["val_loss"] if domain is None else v["domains"][domain]
        rows.append(row_cells(v["variant"], comparison["variant"], comparison))
    return rows


def terminal_table(rows: list[list[str]], header=HEADER) -> str:
    widths = [max(len(r[i]) for r in [list(header), *rows]) for i in range(len(header))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in [list(header), *rows]]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def markdown_table(rows: list[list[str]], header=HEADER) -> str:
    lines = ["| " + " | ".join(cell(c) for c in header) + " |", "|" + "---|" * len(header)]
    return "\n".join(lines + ["| " + " | ".join(cell(c) for c in r) + " |" for r in rows])


def upstream_lines(result: dict) -> list[str]:
    lines = []
    for v in result["variants"]:
        if not v["upstream_differs"]:
            lines.append(f"- `{v['variant']}`: same data, decontamination, tokenizer and shards as the base; "
                         "only the training differs.")
            continue
        listed = ", ".join(f"{d['stage']} ({d['base']} → {d['variant']})" for d in v["upstream_differs"])
        lines.append(f"- `{v['variant']}`: its own {listed}.")
        stages = {d["stage"] for d in v["upstream_differs"]}
        if stages & {"data", "decontaminate"}:
            lines.append("  The validation text may differ from the base's: losses are measured on different text.")
        if "tokenizer" in stages:
            lines.append("  The tokenizer differs: a loss per token is not comparable across tokenizers "
                         "(compare bits per byte, `scratchlm compare`).")
    return lines


def loss_cell(loss: float | None) -> str:
    return "diverged" if loss is None else f"{loss:.4f}"


def render_markdown(result: dict) -> str:
    runs = [["variant", "seed", "status", "final val loss", "train dir"]]
    runs += [[r["variant"], str(r["seed"]), r["status"], loss_cell(r["val_loss"]), r["train_dir"]]
             for r in result["runs"]]
    parts = [
        f"# Ablation {result['id']}", "",
        f"`{result['command']}`", "",
        (f"Base config {result['config']}; seeds {', '.join(map(str, result['seeds']))}; {result['steps']} steps "
         f"per run, evaluated at the last step; {len(result['runs'])} runs, {result['reused']} reused from earlier "
         f"trainings, {result['resumed']} resumed from a checkpoint."), "",
        "## Final validation loss (mean over domains)", "", markdown_table(table_rows(result)), "",
        VERDICTS_EXPLAINED, "", "![final validation loss per variant](ablation.png)", "",
        "## Per domain", ""]
    for d in result["domains"]:
        parts += [f"### {d}", "", markdown_table(table_rows(result, d)), ""]
    parts += ["## Upstream artifacts", "", *upstream_lines(result), "",
              "## Runs", "", markdown_table(runs[1:], runs[0]), "",
              "## Compare two runs", "", "Curves, samples and config diff of the base and a variant (first seed each):",
              "", "```", *[v["compare"] for v in result["variants"]], "```", ""]
    return "\n".join(parts)


def plot(result: dict, path: Path) -> None:
    """Final validation loss per arm: one point per seed, and the mean with a ±1 std error bar."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    labels = ["base"] + [v["variant"] for v in result["variants"]]
    fig, ax = plt.subplots(figsize=(max(5.5, 2.2 * len(labels)), 3.6), dpi=100)
    for i, label in enumerate(labels):
        losses = [r["val_loss"] for r in result["runs"] if r["variant"] == label and r["val_loss"] is not None]
        offsets = [(j - (len(losses) - 1) / 2) * 0.08 for j in range(len(losses))]  # seeds side by side
        ax.plot([i + o for o in offsets], losses, "o", ms=4, color=f"C{i}", alpha=0.6)
        arm = result["base"]["val_loss"] if i == 0 else result["variants"][i - 1]["val_loss"]["variant"]
        if arm["n"]:  # no bar for an arm whose every seed diverged
            ax.errorbar(i + 0.25, arm["mean"], yerr=arm["std"], fmt="s", ms=6, color=f"C{i}", capsize=4)
    ax.set_xticks(range(len(labels)), labels, fontsize=8)
    ax.set_xlim(-0.5, len(labels) - 0.5)
    ax.set_ylabel("final val loss (nats/token)")
    ax.set_title(f"Final validation loss after {result['steps']} steps: seeds (dots), mean ± std", fontsize=9)
    ax.grid(alpha=0.3, axis="y")
    fig.tight_layout()
    fig.savefig(path, format="png")
    plt.close(fig)


def write_outputs(result: dict, out: Path) -> dict[str, Path | str]:
    out.mkdir(parents=True, exist_ok=True)
    paths = {"json": out / "ablation.json", "md": out / "ablation.md", "png": out / "ablation.png"}
    write_json(paths["json"], result)
    atomic_write_text(paths["md"], render_markdown(result))
    plot(result, paths["png"])
    upstream = upstream_lines(result)
    paths["terminal"] = "\n".join([terminal_table(table_rows(result)), ""] +
                                  [line for line in upstream if "same data" not in line])
    return paths
