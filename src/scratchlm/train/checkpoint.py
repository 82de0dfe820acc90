"""Checkpoints: written atomically, checksummed, self-describing, and kept to the last K.

Layout of one checkpoint directory `step_0000500/`:
  model.safetensors  weights (tied weights stored once)
  state.pt           optimizer, step, RNG states, data position
  meta.json          exact config, seed, artifact IDs, git commit, a checksum of every file
The directory is written under a temporary name, fsynced and renamed, so a crash mid-write leaves either the
previous checkpoint or the new one, never a half-written one that resume would trust.
"""
from __future__ import annotations

import os
import random
import shutil
import subprocess
from pathlib import Path

import numpy as np
import torch
from safetensors.torch import load_file, save_file

from ..errors import UserError
from ..ids import file_digest, read_json, write_json

PREFIX = "step_"
BEST = "best.json"  # names the checkpoint with the lowest validation loss so far; kept when pruning


def _git_commit() -> str | None:
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, timeout=5,
                             cwd=Path(__file__).parent)
        return out.stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        return None


def rng_state() -> dict:
    state = {"python": random.getstate(), "numpy": np.random.get_state(), "torch": torch.get_rng_state()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict) -> None:
    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def model_tensors(model: torch.nn.Module, state: dict | None = None) -> dict[str, torch.Tensor]:
    """`state`: an already gathered state dict (FSDP); by default the model's own."""
    # safetensors refuses shared storage; a tied lm_head is restored from the embedding on load.
    sd = dict(model.state_dict() if state is None else state)
    if getattr(model.cfg, "tie_embeddings", False):
        sd.pop("lm_head.weight", None)
    return {k: v.detach().contiguous().cpu() for k, v in sd.items()}


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def save_checkpoint(directory: Path, step: int, model, optimizer, extra_state: dict, meta: dict,
                    keep_last: int, files: tuple[Path, ...] = (), model_state: dict | None = None,
                    optimizer_state: dict | None = None) -> Path:
    """`files` (the tokenizer) are copied in, so one checkpoint directory is enough to load the model.

    `model_state` / `optimizer_state` replace the model's and optimizer's own state dicts when given (FSDP
    gathers them across ranks first). The last `keep_last` checkpoints survive, and so does the best one.
    """
    directory.mkdir(parents=True, exist_ok=True)
    final = directory / f"{PREFIX}{step:07d}"
    tmp = directory / f".tmp_{PREFIX}{step:07d}"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    save_file(model_tensors(model, model_state), str(tmp / "model.safetensors"))
    optim = optimizer.state_dict() if optimizer_state is None else optimizer_state
    torch.save({"step": step, "optimizer": optim, "rng": rng_state(), **extra_state},
               tmp / "state.pt")
    for f in files:
        shutil.copy(f, tmp / Path(f).name)
    for name in ("model.safetensors", "state.pt"):
        with open(tmp / name, "rb") as f:
            os.fsync(f.fileno())
    meta = {**meta, "step": step, "git_commit": _git_commit(),
            "checksums": {n: file_digest(tmp / n) for n in ("model.safetensors", "state.pt")}}
    write_json(tmp / "meta.json", meta)
    _fsync_dir(tmp)
    if final.exists():
        shutil.rmtree(final)
    os.replace(tmp, final)
    _fsync_dir(directory)
    best = best_checkpoint(directory)
    for old in list_checkpoints(directory)[:-keep_last]:
        if old != best:
            shutil.rmtree(old, ignore_errors=True)
    return final


def best_checkpoint(directory: Path) -> Path | None:
    path = Path(directory) / BEST
    if not path.exists():
        return None
    best = Path(directory) / read_json(path)["checkpoint"]
    return best if best.is_dir() else None


def mark_best(directory: Path, step: int, val_loss: float) -> bool:
    """Record the checkpoint of `step` as the best if its validation loss beats the recorded one."""
    name = f"{PREFIX}{step:07d}"
    if not (Path(directory) / name).is_dir() or val_loss != val_loss:  # no checkpoint at this step, or NaN
        return False
    path = Path(directory) / BEST
    if path.exists() and best_checkpoint(directory) is not None and read_json(path)["val_loss"] <= val_loss:
        return False
    write_json(path, {"checkpoint": name, "step": step, "val_loss": val_loss})
    return True


def list_checkpoints(directory: Path) -> list[Path]:
    if not directory.is_dir():
        return []
    return sorted(p for p in directory.iterdir() if p.is_dir() and p.name.startswith(PREFIX)
                  and (p / "meta.json").exists())


def verify_checkpoint(path: Path) -> dict:
    meta_path = Path(path) / "meta.json"
    if not meta_path.exists():
        raise UserError(f"{path} is not a scratchlm checkpoint (no meta.json)")
    meta = read_json(meta_path)
    for name, digest in meta["checksums"].items():
        f = Path(path) / name
        if not f.exists() or file_digest(f) != digest:
            older = [p.name for p in list_checkpoints(Path(path).parent) if p.name < Path(path).name]
            offer = f"; the previous checkpoint is {older[-1]}" if older else ""
            raise UserError(f"checkpoint file {f} is corrupt or missing (checksum mismatch){offer}")
    return meta


def load_model_weights(model, path: Path) -> None:
    tensors = load_file(str(Path(path) / "model.safetensors"))
    if model.cfg.tie_embeddings:
        tensors["lm_head.weight"] = tensors["tok_emb.weight"]
    try:
        missing, unexpected = model.load_state_dict(tensors, strict=False)
    except RuntimeError as e:  # shape mismatch
        first = str(e).strip().splitlines()[-1].strip()
        raise UserError(f"checkpoint {path} does not match the model config: {first}") from None
    if missing or unexpected:
        raise UserError(f"checkpoint {path} does not match the model config "
                        f"(missing {missing[:3]}, unexpected {unexpected[:3]})")


def load_training_state(path: Path) -> dict:
    return torch.load(Path(path) / "state.pt", map_location="cpu", weights_only=False)


def load_model(path: Path, device: torch.device | str = "cpu"):
    """Rebuild the model from a checkpoint directory alone; returns (model, tokenizer, meta)."""
    from ..config import ModelConfig
    from ..model import GPT
    from ..tokenizer.bpe import load_tokenizer

    path = Path(path)
    meta = verify_checkpoint(path)
    model = GPT(ModelConfig(**meta["config"]["model"]), meta["vocab_size"])
    load_model_weights(model, path)
    tok_file = path / "tokenizer.json"
    if not tok_file.exists():
        raise UserError(f"checkpoint {path} has no tokenizer.json")
    tokenizer = load_tokenizer(tok_file)
    if tokenizer.get_vocab_size() != meta["vocab_size"]:
        raise UserError(f"{tok_file} has {tokenizer.get_vocab_size()} tokens, the model {meta['vocab_size']}")
    return model.to(device), tokenizer, meta
