"""Resume verified on this exact config: train its first steps, checkpoint, resume in a fresh process, compare.

Only the CLI contract is used (`scratchlm train -c FILE [--resume] --stop-at STEP`, metrics.jsonl rows with step
and loss, the documented checkpoints/step_*/ layout), so the check holds whatever the trainer looks like inside.
The copy of the config changes only what cannot change the losses of the steps compared: the checkpoint, log
and evaluation intervals and how much an evaluation does. train.max_steps stays, so the learning-rate schedule
(warmup, decay) is the config's own; `--stop-at` ends each process early without shortening it. The copy is
written next to the original (source paths and the run directory stay relative to it, so the data, tokenizer
and shards keep their IDs and are reused) and removed afterwards, with its own training directory.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

from typing import Callable

from ..config import Config, parse_config
from ..pipeline import Artifact
from ..toml_text import toml_value
from .verdicts import NOT_AVAILABLE, Verdict

STEPS, CHECKPOINT_AT = 4, 2
TOLERANCE = 1e-3  # relative; GPU kernels with atomic adds are not bit-reproducible


def _write_toml(raw: dict, path: Path) -> None:
    lines = []
    for section, values in raw.items():
        if section == "data":
            sources = values.get("sources", [])
            values = {k: v for k, v in values.items() if k != "sources"}
        if isinstance(values, dict):
            lines.append(f"[{section}]")
            lines += [f"{k} = {toml_value(v)}" for k, v in values.items()]
        if section == "data":
            for s in sources:
                lines.append("[[data.sources]]")
                lines += [f"{k} = {toml_value(v)}" for k, v in s.items()]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def _losses(metrics: Path) -> dict[int, float]:
    rows = [json.loads(line) for line in metrics.read_text(encoding="utf-8").splitlines() if line.strip()]
    return {r["step"]: r["loss"] for r in rows if "loss" in r}


def _train(config: Path, resume: bool, stop_at: int | None, timeout: float) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(Path(__file__).parents[2]),
                                                        os.environ.get("PYTHONPATH", "")])}
    cmd = [sys.executable, "-m", "scratchlm", "train", "-c", str(config)] + (["--resume"] if resume else []) + (
        ["--stop-at", str(stop_at)] if stop_at is not None else [])
    return subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout)


def verify_resume(cfg: Config, art: dict[str, Artifact], plan_artifacts: Callable[[Config], dict[str, Artifact]],
                  timeout: float = 900) -> Verdict:
    """art: the config's artifacts. plan_artifacts: the stage registry's; it names the training folder of the
    config's copy."""
    name = "resume verified on this exact config"
    if not art["shards"].done:
        return Verdict(name, NOT_AVAILABLE, "needs the token shards: run `scratchlm tokenizer encode -c CONFIG` "
                       "first", {})
    if cfg.train.max_steps <= CHECKPOINT_AT:
        return Verdict(name, NOT_AVAILABLE, f"train.max_steps ({cfg.train.max_steps}) leaves no step after a "
                       f"checkpoint at step {CHECKPOINT_AT} to compare", {})
    steps = min(STEPS, cfg.train.max_steps)
    stop_at = steps if steps < cfg.train.max_steps else None  # a run of max_steps ends there by itself
    raw = tomllib.loads(cfg.path.read_text(encoding="utf-8"))
    train = raw.setdefault("train", {})
    # Not max_steps: the schedule of the steps compared is the config's. No evaluation before the last step.
    train.update(checkpoint_every=CHECKPOINT_AT, eval_every=cfg.train.max_steps, log_every=1, keep_last=STEPS)
    raw.setdefault("eval", {}).update(max_batches=1, max_new_tokens=1)
    config = cfg.path.parent / f".scratchlm-resume-check-{os.getpid()}.toml"
    _write_toml(raw, config)
    train_dir = plan_artifacts(parse_config(config))["train"].dir
    if train_dir.exists():  # e.g. the config itself trains 4 steps: never delete a real run
        config.unlink()
        return Verdict(name, NOT_AVAILABLE, f"{train_dir} already exists; not touching it", {})
    lineage = cfg.workdir / "lineage.json"
    lineage_before = lineage.read_bytes() if lineage.exists() else None  # the check's runs rewrite it
    try:
        first = _train(config, False, stop_at, timeout)
        if first.returncode != 0:
            return Verdict(name, "error", "training the config for a few steps failed: "
                           + (first.stderr.strip().splitlines() or ["?"])[-1], {})
        uninterrupted = _losses(train_dir / "metrics.jsonl")
        # Interrupt after the first checkpoint: the later ones and the finished marker are lost.
        (train_dir / "manifest.json").unlink(missing_ok=True)
        for ckpt in sorted((train_dir / "checkpoints").glob("step_*")):
            if int(ckpt.name.split("_")[1]) > CHECKPOINT_AT:
                shutil.rmtree(ckpt)
        second = _train(config, True, stop_at, timeout)
        if second.returncode != 0:
            return Verdict(name, "error", "resuming in a fresh process failed: "
                           + (second.stderr.strip().splitlines() or ["?"])[-1], {})
        resumed = _losses(train_dir / "metrics.jsonl")
    finally:
        shutil.rmtree(train_dir, ignore_errors=True)
        config.unlink(missing_ok=True)
        if lineage_before is not None:
            lineage.write_bytes(lineage_before)
    compared = [s for s in range(CHECKPOINT_AT + 1, steps + 1)]
    pairs = {s: (uninterrupted.get(s), resumed.get(s)) for s in compared}
    ev = {"steps": steps, "max_steps": cfg.train.max_steps, "resumed_from": CHECKPOINT_AT,
          "uninterrupted": {s: a for s, (a, _) in pairs.items()}, "resumed": {s: b for s, (_, b) in pairs.items()}}
    if any(a is None or b is None for a, b in pairs.values()):
        return Verdict(name, "error", f"the resumed run did not log steps {compared}", ev)
    diff = max(abs(a - b) / max(abs(a), 1e-12) for a, b in pairs.values())
    ev["max_relative_difference"] = diff
    text = (f"trained the first {steps} of {cfg.train.max_steps} steps (the config's schedule), checkpointed at "
            f"{CHECKPOINT_AT}, resumed in a fresh process: losses at steps "
            + ", ".join(f"{s}: {a:.6f} vs {b:.6f}" for s, (a, b) in pairs.items()))
    if diff == 0:
        return Verdict(name, "ok", text + " (bit-identical)", ev)
    if diff <= TOLERANCE:
        return Verdict(name, "ok", text + f" (within {diff:.1e} relative)", ev)
    return Verdict(name, "error", text + f": differ by {diff:.1e} relative; resume does not reproduce the run", ev)
