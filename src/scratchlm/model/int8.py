"""The int8 weights format of `scratchlm export --quantize int8` (export/int8.py writes it), read back as fp32.

Each 2-D weight is stored as int8 with one fp32 scale per row, w ~ q * scale, the scales under the weight's
name plus SCALE; 1-D weights (norms) are stored as fp32.
"""
from __future__ import annotations

import torch

SCALE = ".scale"  # a matrix's scales sit next to it in the weights file, under its name plus this suffix


def dequantize(stored: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    return {name: t.float() * stored[name + SCALE][:, None] if name + SCALE in stored else t
            for name, t in stored.items() if not name.endswith(SCALE)}
