"""The verbs of `scratchlm eval` beside the stage: suite (the full evaluation of one checkpoint), human (write a
rating sheet), rate (score it), watch (evaluate a run's checkpoints beside it)."""
from __future__ import annotations

from pathlib import Path

from ..config import Config
from ..errors import UserError
from ..pipeline import Artifact


def run_eval_command(args, cfg: Config | None, art: dict[str, Artifact] | None) -> None:
    """cfg and art: the config given with -c and its artifacts, None without -c."""
    if args.verb == "rate":
        return _rate(Path(args.sheet))
    if cfg is None or art is None:
        raise UserError(f"scratchlm eval{' ' + args.verb if args.verb else ''} needs -c CONFIG")
    if getattr(args, "unsafe_run_code_unsandboxed", False):
        cfg.eval.suite.unsafe_run_code_unsandboxed = True
    {"watch": _watch, "human": _human, "suite": _suite}[args.verb](args, cfg, art)


def _rate(sheet: Path) -> None:
    from .human import rate_sheet
    from .report import write_checkpoint_report

    rate_sheet(sheet)
    if sheet.resolve().parent.parent.name == "evals":  # the sheet sits in a checkpoint's evals folder
        print(f"report: {write_checkpoint_report(sheet.resolve().parent)}")


def _watch(args, cfg: Config, art: dict[str, Artifact]) -> None:
    from .watch import WatchOptions, watch

    if args.every is not None and args.every < 1:
        raise UserError(f"--every must be a positive number of steps, got {args.every}")
    watch(cfg, art, WatchOptions(device=args.device, suite=args.suite, every=args.every,
                                 every_checkpoint=args.every_checkpoint, threads=args.threads))


def _human(args, cfg: Config, art: dict[str, Artifact]) -> None:
    from .human import write_sheet
    from .report import write_checkpoint_report

    if not args.checkpoint:
        raise UserError("scratchlm eval human needs a CHECKPOINT: scratchlm eval human CHECKPOINT -c CONFIG")
    path = write_sheet(cfg, art, Path(args.checkpoint), args.n, Path(args.out) if args.out else None, args.format)
    if path.parent.parent.name == "evals":
        write_checkpoint_report(path.parent)
    print(f"wrote {path}; score it with `scratchlm eval rate {path}`")


def _suite(args, cfg: Config, art: dict[str, Artifact]) -> None:
    from .suite import HumanEvalChoice, evaluate_suite

    if not args.humaneval_cap_minutes >= 0:  # also nan
        raise UserError(f"--humaneval-cap-minutes must be >= 0, got {args.humaneval_cap_minutes:g}")
    choice = HumanEvalChoice(asked=args.humaneval, cap_minutes=args.humaneval_cap_minutes)
    evaluate_suite(cfg, art, Path(args.checkpoint), humaneval=choice)
