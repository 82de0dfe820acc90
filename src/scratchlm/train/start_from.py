"""`--resume-from` a checkpoint of ANOTHER run: a new run that starts from that run's weights.

The usual case is a run halted by a non-finite loss: the fixed config (a lower learning rate) has a new train ID,
so plain `--resume` finds nothing, yet the steps already trained are worth keeping. What the new run takes:

- the weights, when the model is the same (every [model] key that decides the weights or the forward pass, the
  vocabulary size and the tokenizer file): anything else is refused, naming what differs;
- the optimizer state (moments, momentum buffers) when `train.optimizer` is the same, with this config's
  hyperparameters (learning rate, betas, weight decay), never the checkpoint's; otherwise a fresh optimizer;
- the step counter, so this config's schedule continues at that step (its warmup is already behind it);
- not the data position, RNG or loss scaler: the batches are those this config's seed draws from that step on.

The new run keeps its own artifact ID (its config's); `started_from` (checkpoint path, source train ID, step) in
every checkpoint's meta.json and in summary.json records where its weights came from.
"""
from __future__ import annotations

from dataclasses import asdict
from pathlib import Path

import torch

from ..config import Config
from ..errors import UserError
from ..ids import file_digest
from ..model.checkpoint import check_checkpoint, load_model_weights
from ..progress import log
from .checkpoint import load_training_state

# Keys that neither shape the weights nor change what they compute: `preset` only fills the other keys, init_std
# only draws the weights that are about to be replaced, dropout only acts while training.
NOT_THE_MODEL = ("preset", "init_std", "dropout")


def is_own_checkpoint(path: Path, ckpt_dir: Path) -> bool:
    if not path.is_dir():
        raise UserError(f"--resume-from {path}: no such checkpoint directory")
    return path.resolve().parent == ckpt_dir.resolve()


def model_differences(meta: dict, cfg: Config, vocab_size: int, tokenizer_file: Path, path: Path) -> list[str]:
    """Each way the checkpoint's model differs from this config's: "key checkpoint-value vs config-value"."""
    theirs, ours = meta.get("config", {}).get("model", {}), asdict(cfg.model)
    out = [f"{k} {theirs.get(k)!r} vs {v!r}" for k, v in ours.items()
           if k not in NOT_THE_MODEL and theirs.get(k) != v]
    if meta.get("vocab_size") != vocab_size:
        out.append(f"vocab_size {meta.get('vocab_size')!r} vs {vocab_size!r}")
    elif not (path / "tokenizer.json").exists() or file_digest(path / "tokenizer.json") != file_digest(tokenizer_file):
        out.append("tokenizer.json (another tokenizer with the same vocabulary size)")
    return out


def load_start(raw: torch.nn.Module, path: Path, cfg: Config, vocab_size: int, tokenizer_file: Path,
               main: bool) -> tuple[dict, dict]:
    """Weights into `raw`; returns (state for the loop: step, optimizer or None; the started_from record)."""
    meta = check_checkpoint(path)
    differences = model_differences(meta, cfg, vocab_size, tokenizer_file, path)
    if differences:
        raise UserError(f"--resume-from {path}: another run's checkpoint can start this run only with the same "
                        f"model; it differs (checkpoint vs {cfg.path or 'this config'}): {'; '.join(differences)}")
    state = load_training_state(path)
    step = int(state["step"])
    if step >= cfg.train.max_steps:
        raise UserError(f"--resume-from {path} is at step {step}, not before this config's train.max_steps "
                        f"({cfg.train.max_steps}): nothing left to train; raise train.max_steps")
    load_model_weights(raw, path)
    source_optimizer = meta.get("config", {}).get("train", {}).get("optimizer")
    same = source_optimizer == cfg.train.optimizer
    lineage = {"path": str(path.resolve()), "train_id": meta.get("ids", {}).get("train"), "step": step}
    if main:
        log(f"train: a new run started from {path} (run {lineage['train_id']}, step {step}): its weights"
            + (", its optimizer state with this config's hyperparameters" if same else
               f"; a fresh {cfg.train.optimizer} optimizer (the checkpoint's is {source_optimizer})")
            + f", and this config's schedule from step {step}")
    return {"step": step, "optimizer": state["optimizer"] if same else None}, lineage


def keep_hyperparameters(optimizer: torch.optim.Optimizer) -> list[dict]:
    """This config's group settings (lr, betas, ...), to put back after loading another run's optimizer state:
    load_state_dict restores the saved ones, which would bring back the learning rate being fixed."""
    return [{k: v for k, v in g.items() if k != "params"} for g in optimizer.param_groups]


def restore_hyperparameters(optimizer: torch.optim.Optimizer, kept: list[dict]) -> None:
    if len(kept) != len(optimizer.param_groups):
        raise UserError(f"the checkpoint's optimizer has {len(optimizer.param_groups)} parameter groups, this "
                        f"config's {len(kept)}; start without --resume-from")
    for group, settings in zip(optimizer.param_groups, kept):
        group.update(settings)
