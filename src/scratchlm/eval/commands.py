"""`scratchlm eval` with a checkpoint or a verb: the suite, the rating sheet, the rating session, the watcher."""
from __future__ import annotations

from pathlib import Path

from ..config import Config
from ..errors import UserError
from ..pipeline import Artifact


def run_eval_command(args, cfg: Config | None, art: dict[str, Artifact] | None) -> None:
    """cfg and art: the config given with -c and its artifacts, None without -c."""
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
    if cfg is None or art is None:
        raise UserError("scratchlm eval needs -c CONFIG")
    if args.unsafe_run_code_unsandboxed:
        cfg.eval.suite.unsafe_run_code_unsandboxed = True
    if args.verb == "watch":
        from .watch import WatchOptions, watch

        if args.every is not None and args.every < 1:
            raise UserError(f"--every must be a positive number of steps, got {args.every}")
        watch(cfg, art, WatchOptions(device=args.device, suite=args.suite, every=args.every,
                                     every_checkpoint=args.every_checkpoint, threads=args.threads))
        return
    if args.verb == "human":
        from .human import write_sheet
        from .report import write_checkpoint_report

        if not args.checkpoint:
            raise UserError("scratchlm eval human needs --checkpoint PATH")
        path = write_sheet(cfg, art, Path(args.checkpoint), args.n, Path(args.out) if args.out else None, args.format)
        if path.parent.parent.name == "evals":
            write_checkpoint_report(path.parent)
        print(f"wrote {path}; score it with `scratchlm eval rate {path}`")
        return
    from .suite import evaluate_suite

    evaluate_suite(cfg, art, Path(args.checkpoint))
