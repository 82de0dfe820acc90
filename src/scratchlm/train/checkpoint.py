"""Checkpoints: written atomically, checksummed, self-describing, and kept to the last K.

Layout of one checkpoint directory `step_0000500/`:
  model.safetensors  weights (tied weights stored once)
  state.pt           optimizer, step, RNG states, data position
  meta.json          exact config, seed, artifact IDs, git commit, a checksum of every file
An int8 export (export/int8.py) is a directory of the same kind: its meta.json names its own weights file.
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
from safetensors import SafetensorError
from safetensors.torch import load_file, save_file

from ..disk import free_bytes, size_text
from ..errors import UserError
from ..ids import file_digest, read_json, write_json
from ..progress import log

PREFIX = "step_"
WEIGHTS = "model.safetensors"
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
    tensors = model_tensors(model, model_state)
    optim = optimizer.state_dict() if optimizer_state is None else optimizer_state
    state = {"step": step, "optimizer": optim, "rng": rng_state(), **extra_state}
    try:
        _write_checkpoint(tmp, tensors, state, files, {**meta, "step": step, "git_commit": _git_commit()})
    except (OSError, RuntimeError, SafetensorError) as e:  # ENOSPC reaches torch.save as "unexpected pos"
        shutil.rmtree(tmp, ignore_errors=True)  # the previous checkpoints were never touched
        raise UserError(_write_failure(final, e, _tensor_bytes((tensors, state)))) from None
    if final.exists():
        shutil.rmtree(final)
    os.replace(tmp, final)
    _fsync_dir(directory)
    best = best_checkpoint(directory)
    for old in list_checkpoints(directory)[:-keep_last]:
        if old != best:
            shutil.rmtree(old, ignore_errors=True)
    return final


def _write_checkpoint(tmp: Path, tensors: dict, state: dict, files: tuple[Path, ...], meta: dict) -> None:
    tmp.mkdir()
    save_tensors(tensors, tmp / WEIGHTS)
    torch.save(state, tmp / "state.pt")
    for f in files:
        shutil.copyfile(f, tmp / Path(f).name)  # not copy(): the new file takes the umask, not the source's mode
    for name in (WEIGHTS, "state.pt"):
        with open(tmp / name, "rb") as f:
            os.fsync(f.fileno())
    meta = {**meta, "checksums": {n: file_digest(tmp / n) for n in (WEIGHTS, "state.pt")}}
    write_json(tmp / "meta.json", meta)
    _fsync_dir(tmp)


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
    reason = str(error).strip().splitlines()[-1] if str(error).strip() else type(error).__name__
    previous = list_checkpoints(final.parent)
    kept = f"; {previous[-1].name} is untouched" if previous else ""
    return (f"could not write checkpoint {final} ({reason}): {size_text(free_bytes(final.parent))} free on its "
            f"disk, about {size_text(needed)} needed{kept}; free some space, then resume with --resume")


def _read_best(directory: Path) -> dict | None:
    path = Path(directory) / BEST
    if not path.exists():
        return None
    try:
        best = read_json(path)
        return {"checkpoint": str(best["checkpoint"]), "val_loss": float(best["val_loss"])}
    except (ValueError, KeyError, TypeError) as e:
        # Only ever written atomically, so this is damage from outside: drop it and let evaluations rewrite it.
        log(f"checkpoint: {path} is damaged ({type(e).__name__}: {e}); removed, the next evaluation writes it again")
        path.unlink(missing_ok=True)
        return None


def best_checkpoint(directory: Path) -> Path | None:
    best = _read_best(directory)
    if best is None:
        return None
    path = Path(directory) / best["checkpoint"]
    return path if path.is_dir() else None


def mark_best(directory: Path, step: int, val_loss: float) -> bool:
    """Record the checkpoint of `step` as the best if its validation loss beats the recorded one."""
    name = f"{PREFIX}{step:07d}"
    if not (Path(directory) / name).is_dir() or val_loss != val_loss:  # no checkpoint at this step, or NaN
        return False
    best = _read_best(directory)
    if best is not None and (Path(directory) / best["checkpoint"]).is_dir() and best["val_loss"] <= val_loss:
        return False
    write_json(Path(directory) / BEST, {"checkpoint": name, "step": step, "val_loss": val_loss})
    return True


def rebuild_best(directory: Path, evaluations: list[tuple[int, float]]) -> None:
    """best.json again from (step, validation loss) pairs, e.g. the evaluations a resumed run kept."""
    (Path(directory) / BEST).unlink(missing_ok=True)
    for step, val_loss in evaluations:
        mark_best(directory, step, val_loss)


def step_dirs(directory: Path) -> list[Path]:
    """Every step_* directory, oldest first, whole or not: what resume looks at (and explains skipping)."""
    if not directory.is_dir():
        return []
    return sorted(p for p in directory.iterdir() if p.is_dir() and p.name.startswith(PREFIX))


def list_checkpoints(directory: Path) -> list[Path]:
    return [p for p in step_dirs(directory) if (p / "meta.json").exists()]


def check_checkpoint(path: Path) -> dict:
    """The checkpoint's meta once every file matches its checksum; else a UserError naming the file."""
    meta_path = Path(path) / "meta.json"
    if not meta_path.exists():
        raise UserError(f"{path} is not a scratchlm checkpoint (no meta.json)")
    try:
        meta = read_json(meta_path)
        checksums = dict(meta["checksums"])
    except (ValueError, KeyError, TypeError) as e:
        raise UserError(f"checkpoint file {meta_path} is damaged ({type(e).__name__}: {e})") from None
    for name, digest in checksums.items():
        f = Path(path) / name
        if not f.exists():
            raise UserError(f"checkpoint file {f} is missing ({meta_path} lists it)")
        if file_digest(f) != digest:
            raise UserError(f"checkpoint file {f} is corrupt (checksum mismatch)")
    return meta


def weights_file(meta: dict) -> str:
    """The weights file of a checkpoint, or of an int8 export, whose meta names its own."""
    return meta.get("quantization", {}).get("weights", WEIGHTS)


def previous_good(path: Path) -> Path | None:
    """The newest checkpoint before `path` in its directory that passes its checksums."""
    for older in reversed([p for p in list_checkpoints(Path(path).parent) if p.name < Path(path).name]):
        try:
            check_checkpoint(older)
            return older
        except UserError:
            continue
    return None


def verify_checkpoint(path: Path, config: Path | None = None) -> dict:
    """check_checkpoint, with the way out in the error: the previous good checkpoint, and with `config` the
    command that resumes training from it."""
    try:
        return check_checkpoint(path)
    except UserError as e:
        good = previous_good(path)
        if good is None:
            raise
        how = f": `scratchlm train -c {config} --resume-from {good}`" if config else f" ({good})"
        raise UserError(f"{e}; the previous checkpoint is {good.name}, which verifies{how}") from None


def read_tensors(file: Path) -> dict[str, torch.Tensor]:
    try:
        return load_file(str(file))
    except (SafetensorError, OSError) as e:  # its checksum was rewritten to match: the bytes are no checkpoint
        raise UserError(f"checkpoint file {file} is not a readable safetensors file ({e})") from None


def load_model_weights(model, path: Path) -> None:
    set_model_tensors(model, path, read_tensors(Path(path) / WEIGHTS))


def set_model_tensors(model, path: Path, tensors: dict[str, torch.Tensor]) -> None:
    """Load `tensors` (as model_tensors wrote them) into the model, or a UserError saying how they differ."""
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
    file = Path(path) / "state.pt"
    try:
        return torch.load(file, map_location="cpu", weights_only=False)
    except Exception as e:  # unpickling garbage raises whatever the bytes happen to trigger
        raise UserError(f"checkpoint file {file} cannot be read ({type(e).__name__}: {e})") from None


def load_model(path: Path, device: torch.device | str = "cpu"):
    """Rebuild the model from a checkpoint directory alone; returns (model, tokenizer, meta)."""
    from ..config import ModelConfig
    from ..model import GPT
    from ..tokenizer.bpe import load_tokenizer

    path = Path(path)
    meta = verify_checkpoint(path)
    model = GPT(ModelConfig(**meta["config"]["model"]), meta["vocab_size"])
    if "quantization" in meta:
        from ..export.int8 import load_int8_weights

        load_int8_weights(model, path, meta)
    else:
        load_model_weights(model, path)
    tok_file = path / "tokenizer.json"
    if not tok_file.exists():
        raise UserError(f"checkpoint {path} has no tokenizer.json")
    tokenizer = load_tokenizer(tok_file)
    if tokenizer.get_vocab_size() != meta["vocab_size"]:
        raise UserError(f"{tok_file} has {tokenizer.get_vocab_size()} tokens, the model {meta['vocab_size']}")
    return model.to(device), tokenizer, meta
