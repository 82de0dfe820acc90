"""Reading a checkpoint back into a model: verified against its checksums, for eval, generation, SFT and export.

Layout of one checkpoint directory `step_0000500/` (train/checkpoint.py writes it):
  model.safetensors  weights (tied weights stored once)
  state.pt           optimizer, step, RNG states, data position (read by resume only)
  meta.json          exact config, seed, artifact IDs, git commit, a checksum of every file
An int8 export (export/int8.py) is a directory of the same kind: its meta.json names its own weights file.
"""
from __future__ import annotations

import shlex
import sys
from pathlib import Path

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file

from ..config import ModelConfig
from ..errors import UserError
from ..ids import file_digest, read_json
from ..tokenizer.bpe import load_tokenizer
from .gpt import GPT
from .int8 import dequantize

PREFIX = "step_"
WEIGHTS = "model.safetensors"


def model_tensors(model: torch.nn.Module, state: dict | None = None) -> dict[str, torch.Tensor]:
    """`state`: an already gathered state dict (FSDP); by default the model's own."""
    # safetensors refuses shared storage; a tied lm_head is restored from the embedding on load.
    sd = dict(model.state_dict() if state is None else state)
    if model.cfg.tie_embeddings:
        sd.pop("lm_head.weight", None)
    return {k: v.detach().contiguous().cpu() for k, v in sd.items()}


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


def verify_checkpoint(path: Path, config: Path | str | None = None) -> dict:
    """check_checkpoint, with the way out in the error: the previous good checkpoint and a complete command that
    uses it. config: training resumes (`scratchlm train -c CONFIG --resume-from`; "CONFIG" when the config has
    no file); None: the command line of this process with the checkpoint swapped (eval, export, generate, sft)."""
    try:
        return check_checkpoint(path)
    except UserError as e:
        good = previous_good(path)
        if good is None:
            raise
        how = f"scratchlm train -c {config} --resume-from {good}" if config else _swapped_command(Path(path), good)
        raise UserError(f"{e}; the previous checkpoint is {good.name}, which verifies: "
                        + (f"`{how}`" if how else f"load {good} instead")) from None


def _swapped_command(path: Path, good: Path) -> str | None:
    """This process's `scratchlm ...` command line with `path` replaced by `good`; None when `path` is not on it
    (a checkpoint found from the config, or a caller that is not the CLI)."""
    args = sys.argv[1:]
    hits = [i for i, a in enumerate(args) if a and Path(a).expanduser().resolve() == path.resolve()]
    if not hits or Path(sys.argv[0]).name not in ("scratchlm", "__main__.py"):
        return None
    return shlex.join(["scratchlm", *(str(good) if i in hits else a for i, a in enumerate(args))])


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


def load_int8_weights(model, path: Path, meta: dict) -> None:
    """An int8 export's weights into `model`, dequantized to fp32."""
    set_model_tensors(model, path, dequantize(read_tensors(Path(path) / weights_file(meta))))


def load_model(path: Path, device: torch.device | str = "cpu"):
    """Rebuild the model from a checkpoint directory alone; returns (model, tokenizer, meta)."""
    path = Path(path)
    meta = verify_checkpoint(path)
    model = GPT(ModelConfig(**meta["config"]["model"]), meta["vocab_size"])
    if "quantization" in meta:
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
