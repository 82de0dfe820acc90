"""`scratchlm export`: pick the exporter from --format / --quantize."""
from __future__ import annotations

from pathlib import Path

from ..errors import UserError


def run_export(args) -> Path:
    out = Path(args.out)
    checkpoint = Path(args.checkpoint)
    if args.quantize not in (None, "int8"):
        from .gguf_export import refuse_k_quant

        refuse_k_quant(args.quantize, "--quantize")
        raise UserError(f"--quantize takes int8, got {args.quantize} (GGUF: --format gguf --quant f16|q8_0|q4_0)")
    if args.quantize == "int8":
        if args.format:
            raise UserError("--quantize int8 writes a scratchlm checkpoint; drop --format (GGUF has --quant q8_0)")
        from .int8 import export_int8

        return export_int8(checkpoint, out)
    if args.format == "hf":
        from .hf import export_hf

        return export_hf(checkpoint, out)
    if args.format == "gguf":
        from .gguf_export import export_gguf

        return export_gguf(checkpoint, out, args.quant)
    raise UserError("scratchlm export needs --format hf|gguf or --quantize int8")
