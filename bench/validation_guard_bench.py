"""How many training documents the validation guard removes at each near-copy threshold, on the built-in corpus.

Runs the data stage of the quickstart preset into a temp dir, fingerprints the validation split (13-grams), scans
the training split once and counts, per threshold on the share of a validation document's 13-grams a training
document holds, the training documents that would be removed. Usage: PYTHONPATH=src python bench/validation_guard_bench.py
"""
from __future__ import annotations

import tempfile
import time
from pathlib import Path

from scratchlm.stages import load_config
from scratchlm.data.jsonl import read_jsonl
from scratchlm.data.dedup.ngram_index import ContaminationIndex
from scratchlm.data.dedup.ngram_scan import scan_texts
from scratchlm.decontaminate.stage import load_eval_sets
from scratchlm.ids import read_json
from scratchlm.stages import plan_artifacts
from scratchlm.quickstart import prepare_quickstart
from scratchlm.stages import stage_data

THRESHOLDS = (0.0, 0.05, 0.1, 0.25, 0.5, 0.75, 0.9)


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        cfg = load_config(prepare_quickstart(Path(tmp)))
        data_dir = plan_artifacts(cfg)["data"].dir
        stage_data(cfg, plan_artifacts(cfg))
        items, sets = load_eval_sets(cfg, data_dir)
        stats = read_json(data_dir / "stats.json")
        docs = [d for files in stats["train_files"].values() for f in files for d in read_jsonl(data_dir / "train" / f)]
        t0 = time.perf_counter()
        index = ContaminationIndex.build(items)
        matches = scan_texts(index, [d["text"] for d in docs])
        seconds = time.perf_counter() - t0
        best: dict[str, float] = {}  # training doc -> the largest coverage of any one validation doc
        pairs = []
        for doc, found in zip(docs, matches):
            cover: dict[tuple[str, str], float] = {}
            for m in found:
                cover[m.eval_set, m.item_id] = cover.get((m.eval_set, m.item_id), 0.0) + index.coverage(m)
            for (name, item), share in cover.items():
                best[doc["id"]] = max(best.get(doc["id"], 0.0), share)
                pairs.append((min(share, 1.0), name, item, doc["id"]))
        chars = sum(len(d["text"]) for d in docs)
        per_set = ", ".join(f"{name} {r['items']}" for name, r in sets.items())
        print(f"validation split: {len(items)} documents ({per_set})")
        print(f"training split: {len(docs)} documents, {chars:,} characters; index + scan {seconds:.2f} s")
        print("| min coverage | training docs removed | share of training docs |")
        print("|---:|---:|---:|")
        for t in THRESHOLDS:
            n = sum(1 for share in best.values() if share > 0 and share >= t)
            print(f"| {'any 13-gram' if t == 0 else f'{t:.0%}'} | {n} | {n / len(docs):.1%} |")
        print("largest overlaps (coverage, validation set, validation doc, training doc):")
        for p in sorted(pairs, reverse=True)[:8]:
            print(f"  {p[0]:.3f} {p[1]} {p[2]} {p[3]}")


if __name__ == "__main__":
    main()
