"""`scratchlm export --quantize int8`: the checkpoint's weights in int8, a quarter of the fp32 file.

Weight-only and symmetric, one fp32 scale per row: w ~ q * scale with scale = max|row| / 127. A row is an output
channel of a linear layer, or one token of the embedding (which a tied model also uses as its output layer), so
an outlier coarsens only its own row. Norm weights stay fp32: a few KB.

The directory is a checkpoint of its own kind: model.int8.safetensors, tokenizer.json, and a meta.json with the
checksums of those two files and a `quantization` field naming the weights file. `scratchlm generate / chat / eval
--checkpoint DIR` load it through model/checkpoint.py's load_model, which dequantizes it to fp32 (model/int8.py):
the file is smaller, the model in memory and its speed are fp32's (docs/benchmarks.md, Quantized exports, has the
figures and why int8 weights are not multiplied as they are).
"""
from __future__ import annotations

import shutil
from pathlib import Path

import torch

from ..ids import file_digest, write_json
from ..model.checkpoint import load_model, model_tensors
from ..model.int8 import SCALE
from ..train.checkpoint import save_tensors

WEIGHTS = "model.int8.safetensors"
SCHEME = "int8 weight-only, symmetric, one fp32 scale per output channel; norms fp32"


def quantize_rows(w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    w = w.float()
    amax = w.abs().amax(dim=1)
    scale = torch.where(amax > 0, amax, 1.0) / 127  # an all-zero row stays zero instead of dividing by zero
    return torch.round(w / scale[:, None]).to(torch.int8), scale


def int8_tensors(tensors: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    out = {}
    for name, t in tensors.items():
        if t.dim() == 2:
            out[name], out[name + SCALE] = quantize_rows(t)
        else:
            out[name] = t.float()
    return out


def export_int8(checkpoint: Path, out: Path) -> Path:
    model, _, meta = load_model(checkpoint)
    out.mkdir(parents=True, exist_ok=True)
    save_tensors(int8_tensors(model_tensors(model)), out / WEIGHTS, metadata={"format": "pt", "quantization": "int8"})
    shutil.copyfile(Path(checkpoint) / "tokenizer.json", out / "tokenizer.json")
    checksums = {name: file_digest(out / name) for name in (WEIGHTS, "tokenizer.json")}
    quantization = {"scheme": SCHEME, "weights": WEIGHTS, "source": str(Path(checkpoint).resolve())}
    write_json(out / "meta.json", {**meta, "checksums": checksums, "quantization": quantization})
    return out
