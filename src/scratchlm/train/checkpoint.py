"""Writing checkpoints: atomically, checksummed, self-describing, and kept to the last K (and the best).

model/checkpoint.py reads them back and describes the layout. The directory is written under a temporary name,
fsynced and renamed, so a crash mid-write leaves either the previous checkpoint or the new one, never a
half-written one that resume would trust.
"""
from __future__ import annotations

import os
import random
import shutil
import subprocess
from pathlib import Path

import numpy as np
import torch
from safetensors import SafetensorError
from safetensors.torch import save_file

from ..atomic import fsync_path, replacing_dir
from ..disk import free_bytes, size_text, write_failure_reason
from ..errors import UserError
from ..ids import file_digest, write_json
from ..model.best import best_checkpoint
from ..model.checkpoint import PREFIX, WEIGHTS, list_checkpoints, model_tensors


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


def _umask() -> int:
    try:  # Linux has it in /proc; os.umask can only read it by setting it, racing other threads that create files
        with open("/proc/self/status") as f:
            return next(int(line.split()[1], 8) for line in f if line.startswith("Umask:"))
    except (OSError, StopIteration, ValueError):
        mask = os.umask(0o022)
        os.umask(mask)
        return mask


def save_tensors(tensors: dict[str, torch.Tensor], path: Path, metadata: dict[str, str] | None = None) -> None:
    """safetensors' save_file, leaving the file the mode open() gives any other file.

    safetensors >= 0.8 writes to a temporary file (created 0600) and renames it into place, so the weights of a
    checkpoint or an export were readable by their owner only (safetensors issue #782)."""
    save_file(tensors, str(path), metadata)
    os.chmod(path, 0o666 & ~_umask())


def save_checkpoint(directory: Path, step: int, model, optimizer, extra_state: dict, meta: dict,
                    keep_last: int, files: tuple[Path, ...] = (), model_state: dict | None = None,
                    optimizer_state: dict | None = None, keep: tuple[Path, ...] = ()) -> Path:
    """`files` (the tokenizer) are copied in, so one checkpoint directory is enough to load the model.

    `model_state` / `optimizer_state` replace the model's and optimizer's own state dicts when given (FSDP
    gathers them across ranks first). The last `keep_last` checkpoints survive, and so does the best one, and
    so do those in `keep` (checkpoints the eval watcher has not read yet).
    """
    directory.mkdir(parents=True, exist_ok=True)
    final = directory / f"{PREFIX}{step:07d}"
    tensors = model_tensors(model, model_state)
    optim = optimizer.state_dict() if optimizer_state is None else optimizer_state
    state = {"step": step, "optimizer": optim, "rng": rng_state(), **extra_state}
    try:  # a fixed temp name: a crash's leftover (GBs) is removed by the next save of this step
        with replacing_dir(final, tmp=directory / f".tmp_{PREFIX}{step:07d}") as tmp:
            _write_checkpoint(tmp, tensors, state, files, {**meta, "step": step, "git_commit": _git_commit()})
    except (OSError, RuntimeError, SafetensorError) as e:  # ENOSPC reaches torch.save as "unexpected pos"
        raise UserError(_write_failure(final, e, _tensor_bytes((tensors, state)))) from None
    fsync_path(directory)
    best = best_checkpoint(directory)
    for old in list_checkpoints(directory)[:-keep_last]:
        if old != best and old not in keep:
            shutil.rmtree(old, ignore_errors=True)
    return final


def _write_checkpoint(tmp: Path, tensors: dict, state: dict, files: tuple[Path, ...], meta: dict) -> None:
    save_tensors(tensors, tmp / WEIGHTS)
    torch.save(state, tmp / "state.pt")
    for f in files:
        shutil.copyfile(f, tmp / Path(f).name)  # not copy(): the new file takes the umask, not the source's mode
    for name in (WEIGHTS, "state.pt"):
        fsync_path(tmp / name)
    meta = {**meta, "checksums": {n: file_digest(tmp / n) for n in (WEIGHTS, "state.pt")}}
    write_json(tmp / "meta.json", meta)
    fsync_path(tmp)


def _tensor_bytes(obj) -> int:
    if isinstance(obj, torch.Tensor):
        return obj.nbytes
    if isinstance(obj, dict):
        return sum(_tensor_bytes(v) for v in obj.values())
    if isinstance(obj, (list, tuple)):
        return sum(_tensor_bytes(v) for v in obj)
    return 0


def _write_failure(final: Path, error: BaseException, needed: int) -> str:
    """A failed save is most often a full disk: say how full, against what the checkpoint needs."""
    reason = write_failure_reason(error)
    previous = list_checkpoints(final.parent)
    kept = f"; {previous[-1].name} is untouched" if previous else ""
    return (f"could not write checkpoint {final} ({reason}): {size_text(free_bytes(final.parent))} free on its "
            f"disk, about {size_text(needed)} needed{kept}; free some space, then resume with --resume")


def load_training_state(path: Path) -> dict:
    file = Path(path) / "state.pt"
    try:
        return torch.load(file, map_location="cpu", weights_only=False)
    except Exception as e:  # unpickling garbage raises whatever the bytes happen to trigger
        raise UserError(f"checkpoint file {file} cannot be read ({type(e).__name__}: {e})") from None
