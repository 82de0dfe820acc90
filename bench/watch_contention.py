"""What an eval watcher beside a training costs it, on CPU (issue 21).

One micro training (train.eval = "external", evaluations long enough to span many log intervals) run three ways,
each pinned with taskset so that the cores, not the scheduler's mood, decide who competes:

  alone      the trainer on core 0, no watcher
  shared     the trainer and the watcher both on core 0
  separate   the trainer on core 0, the watcher on core 1

Reported: median tokens/s and data-wait share of the log rows; for `shared`, split by the rows' watch_share (the
intervals the watcher was busy for at least half of, against those it was idle), and the loader_stall verdict.

    PYTHONPATH=src python bench/watch_contention.py [--steps 200] [--out result.json]
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from scratchlm.data.builtin import build_builtin_corpus
from scratchlm.ids import read_json
from scratchlm.monitor.monitor import read_rows
from scratchlm.stages import load_config, plan_artifacts, stage_training_inputs

def scratchlm(cores: str, *args: str) -> subprocess.Popen:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "SCRATCHLM_PROGRESS": "0"}
    return subprocess.Popen(["taskset", "-c", cores, sys.executable, "-m", "scratchlm", *args], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def summary(rows: list[dict]) -> dict:
    if not rows:
        return {"rows": 0}
    return {"rows": len(rows), "tokens_per_s": statistics.median(r["tokens_per_s"] for r in rows),
            "data_wait_share": statistics.median(r["data_wait_share"] for r in rows)}


def run(config: Path, watcher_cores: str | None) -> dict:
    train_dir = plan_artifacts(load_config(config))["train"].dir
    shutil.rmtree(train_dir, ignore_errors=True)
    watcher = (scratchlm(watcher_cores, "eval", "watch", "-c", str(config), "--device", "cpu", "--threads", "1")
               if watcher_cores is not None else None)
    trainer = scratchlm("0", "train", "-c", str(config))
    out, _ = trainer.communicate()
    if trainer.returncode:
        raise SystemExit(f"training failed:\n{out[-2000:]}")
    if watcher is not None:
        watch_out, _ = watcher.communicate()
        if watcher.returncode:
            raise SystemExit(f"watcher failed:\n{watch_out[-2000:]}")
    rows = [r for r in read_rows(train_dir / "metrics.jsonl") if "loss" in r]
    result = {"all": summary(rows),
              "evaluations": sum(1 for r in read_rows(train_dir / "metrics.jsonl") if "eval" in r)}
    if any("watch_share" in r for r in rows):
        result["watcher_busy"] = summary([r for r in rows if r.get("watch_share", 0) >= 0.5])
        result["watcher_idle"] = summary([r for r in rows if r.get("watch_share", 0) == 0])
    result["loader_stall"] = read_json(train_dir / "monitor.json")["detectors"]["loader_stall"]
    return result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--eval-every", type=int, default=20)
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    if len(os.sched_getaffinity(0)) < 2:
        raise SystemExit("needs two CPU cores")
    work = Path(tempfile.mkdtemp(prefix="watch_contention_"))
    corpus = build_builtin_corpus(work / "corpus", code_max_chars=300_000)
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
    from conftest import write_micro_config  # the tests' micro model (2 layers, d_model 64) and corpus config
    from train_procs import micro_run_config

    config = micro_run_config(work, corpus, write_micro_config, max_steps=args.steps, checkpoint_every=args.steps,
                              eval_every=args.eval_every, keep_last=1, log_every=2, threads=1, precision="fp32",
                              eval="external")
    # Longer evaluations (more batches, longer samples): each spans many log intervals.
    config.write_text(config.read_text().replace("max_batches = 2", "max_batches = 20")
                      .replace("max_new_tokens = 8", "max_new_tokens = 64"))
    cfg = load_config(config)
    stage_training_inputs(cfg, plan_artifacts(cfg))
    results = {"cpu": re.sub(r"\s+", " ", next((line.split(":", 1)[1] for line in
                                                 Path("/proc/cpuinfo").read_text().splitlines()
                                                 if line.startswith("model name")), "?")).strip(),
               "steps": args.steps, "eval_every": args.eval_every}
    for name, cores in (("alone", None), ("shared", "0"), ("separate", "1")):
        results[name] = run(config, cores)
        print(name, json.dumps(results[name]), flush=True)
    alone = results["alone"]["all"]["tokens_per_s"]
    for name in ("shared", "separate"):
        print(f"{name}: {results[name]['all']['tokens_per_s'] / alone:.2f}x the tokens/s of the training alone")
    if "watcher_busy" in results["shared"]:
        busy, idle = results["shared"]["watcher_busy"], results["shared"]["watcher_idle"]
        print(f"shared, intervals with the watcher busy: {busy['tokens_per_s']:,.0f} tokens/s, data wait "
              f"{busy['data_wait_share']:.1%}; idle: {idle['tokens_per_s']:,.0f} tokens/s, data wait "
              f"{idle['data_wait_share']:.1%}; loader_stall {results['shared']['loader_stall']['verdict']}")
    if args.out:
        Path(args.out).write_text(json.dumps(results, indent=1))
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
