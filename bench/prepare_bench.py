"""Full prepare-stage throughput (MB/s of input) on the built-in corpus, with 1 and with N processes.

    python bench/prepare_bench.py [--code-mb 16] [--workers 1 2] [--unit-mb 1]

Each run starts from an empty cache in its own directory, so every step does its work; the runs are
side by side in one invocation. Prints a Markdown table with the wall time of every step.
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("SCRATCHLM_PROGRESS", "0")
os.environ.setdefault("OMP_NUM_THREADS", "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from scratchlm.config import config_from_dict  # noqa: E402
from scratchlm.data.builtin import build_builtin_corpus  # noqa: E402
from scratchlm.data.prepare import prepare_data  # noqa: E402
from scratchlm.stages import size_estimate  # noqa: E402


def run_once(corpus: dict[str, Path], workers: int, unit_mb: int, work: Path) -> tuple[float, dict]:
    cfg = config_from_dict({"data": {"sources": [{"name": d, "domain": d, "path": str(p)} for d, p in corpus.items()],
                                     "workers": workers, "unit_mb": unit_mb},
                            "tokenizer": {"vocab_size": 4096},
                            "model": {"n_layer": 4, "d_model": 192, "n_head": 6, "seq_len": 256}})
    cfg.path = work / "scratchlm.toml"
    out = work / "out"
    out.mkdir(parents=True)
    t0 = time.perf_counter()
    stats = prepare_data(cfg, out, size_estimate(cfg))
    return time.perf_counter() - t0, stats


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--code-mb", type=float, default=16, help="characters of stdlib code in the corpus, in millions")
    ap.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--unit-mb", type=int, default=1)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        corpus = build_builtin_corpus(tmp / "corpus", code_max_chars=int(args.code_mb * 1e6))
        mb = sum(p.stat().st_size for p in corpus.values()) / 1e6
        results = {w: run_once(corpus, w, args.unit_mb, tmp / f"w{w}") for w in args.workers}
    print(f"built-in corpus: {mb:.1f} MB of JSONL, {os.cpu_count()} cores visible, unit_mb {args.unit_mb}\n")
    steps = list(next(iter(results.values()))[1]["seconds"])
    print("| processes | wall s | MB/s | docs in | docs kept | " + " | ".join(steps) + " |")
    print("|---" * (5 + len(steps)) + "|")
    for w, (seconds, stats) in results.items():
        docs_in = sum(s["docs_in"] for s in stats["sources"].values())
        kept = sum(s["docs_kept"] for s in stats["sources"].values())
        print(f"| {w} | {seconds:.1f} | {mb / seconds:.2f} | {docs_in} | {kept} | "
              + " | ".join(f"{stats['seconds'][s]:.1f}" for s in steps) + " |")


if __name__ == "__main__":
    main()
