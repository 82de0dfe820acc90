"""Precision and recall of the promotional-text scorer on soft (B2B) marketing against ordinary documentation.

Reads bench/promo_soft_labels.jsonl (built by bench/promo_soft_labels.py); a document counts as removed when its
score reaches PROMO_THRESHOLD. Prints, per split (tune, heldout), precision and recall of "marketing", the
documentation it removes and the marketing it misses. `--before FILE` scores with another copy of promo.py too
(e.g. `git show <commit>:src/scratchlm/data/clean/promo.py > /tmp/promo_before.py`), for a before/after table.
`--sweep ROOT` also scores every document of the cleaning benchmark corpus (bench/cleaning/corpus.py, all real
documentation), counts those at or over the threshold, and prints an evenly spaced sample of them to read.

    python bench/promo_bench.py [--before /tmp/promo_before.py] [--sweep /work/bench-cleaning]
"""
from __future__ import annotations

import argparse
import importlib.util
import json
from pathlib import Path
from collections.abc import Callable

from scratchlm.data.clean.promo import PROMO_THRESHOLD, promo_score

LABELS = Path(__file__).resolve().parent / "promo_soft_labels.jsonl"


def load_scorer(path: Path) -> Callable[[str], float]:
    spec = importlib.util.spec_from_file_location("promo_other", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return lambda text: mod.promo_score(text).total


def evaluate(items: list[dict], score: Callable[[str], float], threshold: float) -> dict:
    out = {}
    for part in ("tune", "heldout"):
        rows = [(it, score(it["text"])) for it in items if it["split"] == part]
        tp = [it for it, s in rows if s >= threshold and it["label"] == "marketing"]
        fp = [(it, s) for it, s in rows if s >= threshold and it["label"] != "marketing"]
        fn = [(it, s) for it, s in rows if s < threshold and it["label"] == "marketing"]
        n_pos = sum(it["label"] == "marketing" for it, _ in rows)
        out[part] = {"marketing": n_pos, "documentation": len(rows) - n_pos, "tp": len(tp), "fp": fp, "fn": fn,
                     "precision": len(tp) / (len(tp) + len(fp)) if tp or fp else None,
                     "recall": len(tp) / n_pos if n_pos else None}
    return out


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{x:.0%}"


def report(name: str, res: dict, verbose: bool) -> None:
    for part, r in res.items():
        print(f"{name:7} {part:8} marketing {r['tp']}/{r['marketing']} removed (recall {_pct(r['recall'])}), "
              f"documentation {len(r['fp'])}/{r['documentation']} removed (precision {_pct(r['precision'])})")
        if verbose:
            for it, s in r["fp"]:
                print(f"    wrongly removed {s:.2f} {it['origin']}")
            for it, s in sorted(r["fn"], key=lambda x: -x[1]):
                print(f"    missed          {s:.2f} {it['origin']}")


def sweep(root: Path, scorers: dict[str, Callable[[str], float]], threshold: float, sample: int) -> None:
    from scratchlm.data.clean.html import extract_main_text

    paths = sorted(p for p in (root / "corpus").glob("*/*") if p.suffix in (".txt", ".html"))
    texts = {p: (extract_main_text(p.read_bytes()) if p.suffix == ".html" else p.read_text(encoding="utf-8"))
             for p in paths}
    for name, score in scorers.items():
        removed = [(p, s) for p in paths if (s := score(texts[p])) >= threshold]
        print(f"{name:7} sweep: {len(removed)}/{len(paths)} documentation files of {root / 'corpus'} score >= "
              f"{threshold}")
        step = max(1, len(removed) // sample) if removed else 1
        for p, s in removed[::step][:sample]:
            print(f"    {s:.2f} {p.relative_to(root / 'corpus')}: {' '.join(texts[p].split())[:160]}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--labels", type=Path, default=LABELS)
    ap.add_argument("--before", type=Path, default=None, help="another promo.py to compare with")
    ap.add_argument("--sweep", type=Path, default=None, help="root of the cleaning benchmark corpus")
    ap.add_argument("--sample", type=int, default=20, help="removed sweep documents to print")
    ap.add_argument("-v", "--verbose", action="store_true", help="list wrong removals and misses")
    args = ap.parse_args()
    items = [json.loads(line) for line in args.labels.read_text(encoding="utf-8").splitlines() if line.strip()]
    scorers = {"before": load_scorer(args.before)} if args.before else {}
    scorers["after"] = lambda text: promo_score(text).total
    for name, score in scorers.items():
        report(name, evaluate(items, score, PROMO_THRESHOLD), args.verbose)
    if args.sweep:
        sweep(args.sweep, scorers, PROMO_THRESHOLD, args.sample)


if __name__ == "__main__":
    main()
