"""Fine-tuning on real pairs, judged (issue 41): Spanish man-page questions on a base trained on Spanish Debian
documentation, beside three plants whose outcome is known.

    python bench/sft_runs.py pairs --pages DIR --out DIR      # pairs from rendered man pages (bench/manpage_units.py render)
    python bench/sft_runs.py run -c BASE_CONFIG --pairs DIR     # scratchlm sft on each set; prints the table

The runs (all from the same pages):
  manpages     "¿Para qué sirve el comando X?" -> the page's NOMBRE line and the first paragraph of DESCRIPTION
               (the issue's user's data), at the [sft] defaults: what a user gets
  stopped      the same pairs, stopped at step 50 where `manpages`'s held-out loss verdict says to stop: the
               healthy control
  collapse     the same questions, every training answer the same sentence; held out (given, sft.heldout): every
               tenth question with its real answer. The model can only learn the stock answer
  memorise     50 of the man-page pairs, 20% held out, the rest read ~100 times at 10x the learning rate
Held-out conversations are drawn by the tool (sft.heldout_share, default 10%) in every run but collapse.
"""
from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from pathlib import Path

QUESTIONS = ("¿Para qué sirve el comando {}?", "¿Qué hace {}?", "Explica brevemente qué es {}.")
STOCK = "Consulte la página del manual para obtener más información."


def sections(page: str) -> dict[str, str]:
    """Top-level sections of a rendered page (headings flush left in capitals), their indented bodies."""
    out, name = {}, None
    for line in page.splitlines()[1:]:
        if re.fullmatch(r"[A-ZÁÉÍÓÚÑ][A-ZÁÉÍÓÚÑ ]+", line.strip()) and not line.startswith(" "):
            name = line.strip()
            out[name] = []
        elif name:
            out[name].append(line)
    return {k: "\n".join(v) for k, v in out.items()}


def first_paragraph(body: str, max_words: int = 60) -> str:
    para = re.split(r"\n\s*\n", body.strip(), maxsplit=1)[0]
    words = " ".join(para.split()).split()
    return " ".join(words[:max_words])


def page_pair(path: Path, i: int) -> dict | None:
    s = sections(path.read_text(encoding="utf-8", errors="replace"))
    name, desc = s.get("NOMBRE", "").strip(), s.get("DESCRIPCIÓN", "")
    if " - " not in name or not desc.strip():
        return None
    command = name.split(" - ", 1)[0].split(",")[0].strip()
    answer = " ".join(name.split()) + ". " + first_paragraph(desc)
    return {"prompt": QUESTIONS[i % len(QUESTIONS)].format(command), "response": answer}


def make_pairs(pages: Path, out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    pairs = [p for i, f in enumerate(sorted(pages.glob("*.txt"))) if (p := page_pair(f, i))]
    sets = {"manpages": pairs, "collapse": [{**p, "response": STOCK} for i, p in enumerate(pairs) if i % 10],
            "collapse_heldout": pairs[::10],
            "memorise": pairs[:50]}
    for name, items in sets.items():
        (out / f"{name}.jsonl").write_text("".join(json.dumps(p, ensure_ascii=False) + "\n" for p in items),
                                           encoding="utf-8")
        print(f"{name}: {len(items)} pairs -> {out / name}.jsonl")


# run -> (its pairs, its [sft] keys beyond max_steps)
RUNS = {"manpages": ("manpages", {}), "stopped": ("manpages", {"max_steps": 50, "eval_every": 10}),
        "collapse": ("collapse", {"heldout": "{pairs}/collapse_heldout.jsonl"}),
        "memorise": ("memorise", {"lr_scale": 1.0, "heldout_share": 0.2})}


def run(config: Path, pairs: Path, steps: int, only: list[str]) -> None:
    rows = []
    for name, (data, extra) in RUNS.items():
        if only and name not in only:
            continue
        sft = {"max_steps": steps, **{k: v.format(pairs=pairs.resolve()) if isinstance(v, str) else v
                                      for k, v in extra.items()}}
        text = config.read_text(encoding="utf-8")
        text += "\n[sft]\n" + "".join(f"{k} = {json.dumps(v)}\n" for k, v in sft.items())
        cfg = config.with_name(f"sft_{name}.toml")
        cfg.write_text(text, encoding="utf-8")
        r = subprocess.run([sys.executable, "-m", "scratchlm", "sft", "-c", str(cfg), "--data",
                            str(pairs / f"{data}.jsonl")], capture_output=True, text=True)
        if r.returncode != 0:
            sys.exit(f"{name}: sft failed:\n{r.stderr[-2000:]}")
        summary_path = re.findall(r"report (\S+report\.md)", r.stderr + r.stdout)[-1]
        s = json.loads(Path(summary_path).with_name("summary.json").read_text())
        a = s["answers"] or {}
        points = s["heldout_loss"]
        rows.append([name, s["conversations"], s["heldout"]["conversations"], f"{s['epochs']:.1f}",
                     f"{points[0]['heldout_loss']:.3f} -> {min(p['heldout_loss'] for p in points):.3f} -> "
                     f"{points[-1]['heldout_loss']:.3f}",
                     *(f"{a[k]['word_f1']:.3f}" if k in a else "-" for k in ("heldout_greedy", "heldout_chat",
                                                                            "train_greedy")),
                     f"{a['heldout_greedy']['distinct_share']:.0%}" if a else "-",
                     f"{a['heldout_greedy']['end_share']:.0%}" if a else "-",
                     ", ".join(f"{v['name']} {v['level']}" for v in s["verdicts"] if v["level"] != "ok") or "none",
                     s["overlap"]["verdict"]["level"], summary_path])
    head = ["run", "train", "held out", "epochs", "held-out loss base -> lowest -> end", "F1 held-out greedy",
            "F1 held-out chat", "F1 train greedy", "distinct", "end token", "verdicts not ok", "overlap", "report"]
    print("| " + " | ".join(head) + " |\n|" + "---|" * len(head))
    for r in rows:
        print("| " + " | ".join(str(c) for c in r) + " |")


def main() -> None:
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("pairs")
    p.add_argument("--pages", type=Path, default=Path("/work/bench-manpage-units/pages/es"))
    p.add_argument("--out", type=Path, required=True)
    r = sub.add_parser("run")
    r.add_argument("-c", "--config", type=Path, required=True)
    r.add_argument("--pairs", type=Path, required=True)
    r.add_argument("--steps", type=int, default=200, help="sft.max_steps where the run does not set it")
    r.add_argument("--runs", nargs="*", default=[], help="only these runs (default: all)")
    args = ap.parse_args()
    make_pairs(args.pages, args.out) if args.cmd == "pairs" else run(args.config, args.pairs, args.steps, args.runs)


if __name__ == "__main__":
    main()
