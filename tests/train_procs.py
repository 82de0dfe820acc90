"""Helpers for the tests that run the trainer as users do, in subprocesses (`scratchlm train`, torchrun)."""
import json
import os
import re
import subprocess
import sys
from pathlib import Path

from scratchlm.stages import load_config, plan_artifacts, stage_training_inputs

SRC = str(Path(__file__).resolve().parents[1] / "src")
STEPS = 60


def env() -> dict:
    return {**os.environ, "PYTHONPATH": SRC + os.pathsep + os.environ.get("PYTHONPATH", ""),
            "OMP_NUM_THREADS": "1", "SCRATCHLM_PROGRESS": "0"}


def micro_run_config(directory: Path, corpus: dict, micro_config, **train) -> Path:
    path = micro_config(directory, corpus, steps=STEPS, ckpt=10)
    text = path.read_text()
    for key, value in {"log_every": 1, "threads": 1, **train}.items():
        line = f"{key} = {json.dumps(value)}"
        text, n = re.subn(rf"^{key} = .*$", line, text, count=1, flags=re.M)
        if not n:
            text = text.replace("[train]\n", f"[train]\n{line}\n", 1)
    path.write_text(text)
    return path


def prepare(path: Path):
    cfg = load_config(path)
    art = plan_artifacts(cfg)
    stage_training_inputs(cfg, art)
    return cfg, art["train"].dir


def train(path: Path, *flags: str, prefix: tuple[str, ...] = ("-m", "scratchlm")) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, *prefix, "train", "-c", str(path), *flags], env=env(),
                          capture_output=True, text=True, timeout=300)


def losses(train_dir: Path) -> list[tuple[int, float, float]]:
    rows = [json.loads(line) for line in (train_dir / "metrics.jsonl").read_text().splitlines()]
    return [(r["step"], r["loss"], r["grad_norm"]) for r in rows if "loss" in r]


def prepare_run(builtin_corpus, micro_config, tmp_path_factory) -> tuple[Path, Path]:
    """Data, tokenizer and shards for a 60-step micro run that logs every step; returns (config, train dir)."""
    d = tmp_path_factory.mktemp("procs")
    # A global batch independent of the world size: 1 rank runs 2 micro-batches of 8, 2 ranks run 1 each.
    path = micro_run_config(d, builtin_corpus, micro_config, eval_every=1000, precision="fp32", batch_size=8,
                   batch_tokens=1024)
    _, train_dir = prepare(path)
    return path, train_dir
