"""`scratchlm export --quantize int8`: a PyTorch dynamic-quantized model for CPU inference.

torch.ao.quantization.quantize_dynamic replaces every nn.Linear by an int8-weight version (activations are
quantized on the fly); embeddings and norms stay fp32. The directory holds the quantized state dict, the
checkpoint's meta.json and tokenizer.json; `load_int8(dir)` rebuilds the same modules and loads it.
"""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import torch

from ..config import ModelConfig
from ..errors import UserError
from ..tokenizer.bpe import load_tokenizer
from ..train.checkpoint import load_model

WEIGHTS = "model_int8.pt"


def quantize_int8(model: torch.nn.Module) -> torch.nn.Module:
    from torch.ao.quantization import quantize_dynamic

    return quantize_dynamic(model.cpu().eval(), {torch.nn.Linear}, dtype=torch.qint8)


def export_int8(checkpoint: Path, out: Path) -> Path:
    model, _, _ = load_model(checkpoint)
    qmodel = quantize_int8(model)
    out.mkdir(parents=True, exist_ok=True)
    torch.save(qmodel.state_dict(), out / WEIGHTS)
    for name in ("meta.json", "tokenizer.json"):
        shutil.copy(Path(checkpoint) / name, out / name)
    return out


def load_int8(directory: Path):
    """(model, tokenizer, meta) of an int8 export; CPU only, like dynamic quantization itself."""
    from ..model import GPT

    directory = Path(directory)
    if not (directory / WEIGHTS).exists():
        raise UserError(f"{directory} is not an int8 export (no {WEIGHTS})")
    meta = json.loads((directory / "meta.json").read_text())
    model = quantize_int8(GPT(ModelConfig(**meta["config"]["model"]), meta["vocab_size"]))
    model.load_state_dict(torch.load(directory / WEIGHTS, map_location="cpu", weights_only=False))
    return model.eval(), load_tokenizer(directory / "tokenizer.json"), meta
