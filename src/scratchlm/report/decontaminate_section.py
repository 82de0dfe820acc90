"""Run report sections of the decontaminate stage: what its scan of the eval sets removed, and the domain mix."""
from __future__ import annotations

from pathlib import Path

from ..decontaminate.stage import EVAL_SETS, REPORT_JSON, REPORT_MD
from ..ids import read_json
from ..train.mix import MixPlan, mix_from_shards


def eval_domains(decontaminate_dir: Path) -> list[str]:
    sets = read_json(decontaminate_dir / EVAL_SETS)
    return [r["domain"] for r in sets.values() if r["kind"] == "user" and r.get("domain")]


def run_mix(shards: dict, train_summary: dict, decontaminate_dir: Path) -> MixPlan:
    meta = Path(train_summary["checkpoint"]) / "meta.json"
    seq_len = read_json(meta)["config"]["model"]["seq_len"] if meta.exists() else None
    return mix_from_shards(shards, train_summary["tokens"], seq_len, train_summary.get("epochs_per_source"),
                           eval_domains(decontaminate_dir))


def decontaminate_sections(decontaminate_dir: Path, shards: dict, train_summary: dict) -> tuple[list[str], dict]:
    """Markdown lines for `## Contamination` and `## Domain mix`, and the same as JSON for report.json."""
    contamination = read_json(decontaminate_dir / REPORT_JSON)
    sets = read_json(decontaminate_dir / EVAL_SETS)
    md = ["## Contamination", ""]
    md.append(f"Every eval set was fingerprinted ({contamination['n']}-gram words) before training; training "
              f"documents holding one of its items were removed from training (mode `{contamination['mode']}`), "
              f"never from the eval set. Verdict **{contamination['verdict']}**.")
    md += ["", "| eval set | kind | content id | items | contaminated items | training docs touched | verdict |",
           "|---|---|---|---:|---:|---:|---|"]
    for name, s in contamination["eval_sets"].items():
        r = sets.get(name, {})
        md.append(f"| {name} | {r.get('kind', '')} | `{r.get('id', '')}` | {s['items']} | "
                  f"{len(s['contaminated_items'])} | {len(s['docs_touched'])} | {s['verdict']} |")
    md += ["", f"{contamination['docs_scanned']:,} training documents scanned, {contamination['docs_touched']:,} "
               f"touched ({contamination['docs_dropped']:,} dropped whole), {contamination['chars_removed']:,} "
               f"characters removed; every removal is in `decontaminate/{decontaminate_dir.name}/rejected-*.jsonl.zst` under "
               f"the rule `contamination:<eval set>`. Details: `{decontaminate_dir / REPORT_MD}`.", ""]
    for name, s in contamination["eval_sets"].items():
        if s["verdict"] != "ok":
            md.append(f"- {s['message']}")
            md += [f"  - item `{ex['item_id']}` in `{ex['doc_id']}`: \"{ex['excerpt'][:160]}\""
                   for ex in s["examples"][:2]]
    mix = run_mix(shards, train_summary, decontaminate_dir)
    md += ["", "## Domain mix", "", "A source's weight is its share of the training tokens; achieved = the "
           "tokens the loader actually drew.", ""]
    md += mix.to_markdown() + [""]
    return md, {"contamination": contamination, "eval_sets": sets, "mix": mix.to_dict()}
