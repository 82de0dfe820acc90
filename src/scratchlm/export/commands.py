"""`scratchlm export`: pick the exporter from --format / --quantize."""
from __future__ import annotations

from pathlib import Path

from ..errors import UserError


def run_export(args) -> Path:
    out = Path(args.out)
    checkpoint = Path(args.checkpoint)
    if args.quantize == "int8":
        if args.format:
            raise UserError("--quantize int8 writes a PyTorch model; drop --format (GGUF has --quant q8_0)")
        from .int8 import export_int8

        return export_int8(checkpoint, out)
    if args.format == "hf":
        from .hf import export_hf

        return export_hf(checkpoint, out)
    if args.format == "gguf":
        from .gguf_export import export_gguf

        return export_gguf(checkpoint, out, args.quant)
    raise UserError("scratchlm export needs --format hf|gguf or --quantize int8")
