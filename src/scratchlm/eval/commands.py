"""`scratchlm eval` with a checkpoint or a verb: the suite, the rating sheet, the rating session."""
from __future__ import annotations

from pathlib import Path

from ..errors import UserError


def run_eval_command(args) -> None:
    from ..config import load_config

    if args.verb == "rate":
        from .human import rate_sheet
        from .report import write_checkpoint_report

        if not args.sheet:
            raise UserError("usage: scratchlm eval rate SHEET (a sheet written by `scratchlm eval human`)")
        sheet = Path(args.sheet)
        rate_sheet(sheet)
        if sheet.resolve().parent.parent.name == "evals":  # the sheet sits in a checkpoint's evals folder
            print(f"report: {write_checkpoint_report(sheet.resolve().parent)}")
        return
    if not args.config:
        raise UserError("scratchlm eval needs -c CONFIG")
    cfg = load_config(args.config)
    if args.verb == "human":
        from .human import write_sheet
        from .report import write_checkpoint_report

        if not args.checkpoint:
            raise UserError("scratchlm eval human needs --checkpoint PATH")
        path = write_sheet(cfg, Path(args.checkpoint), args.n, Path(args.out) if args.out else None, args.format)
        if path.parent.parent.name == "evals":
            write_checkpoint_report(path.parent)
        print(f"wrote {path}; score it with `scratchlm eval rate {path}`")
        return
    from .suite import evaluate_suite

    evaluate_suite(cfg, Path(args.checkpoint))
