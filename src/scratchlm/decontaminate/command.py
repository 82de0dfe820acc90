"""`scratchlm data contamination` (the standalone check of files) and the parsers of the decontamination
commands. Argparse only at import: the CLI builds its parser from here on every start.

`scratchlm data decontaminate` runs the stage: its parser (-c, --force) comes from the stage registry in cli.py,
which prints its result with print_stage_result. `scratchlm data trace` is parsed here and run by the tokenizer
package, which reads the shards.
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

def add_parsers(data: argparse._SubParsersAction) -> None:
    p = data.add_parser("contamination", help="check training files against eval files; print the report")
    p.add_argument("--train", action="append", required=True, help="training file or folder (repeatable)")
    p.add_argument("--eval", action="append", required=True, help="eval set file or folder (repeatable)")
    p.add_argument("--ngram", type=int, default=13, help="words per fingerprint")
    p.add_argument("--min-words", type=int, default=8, help="shorter items are matched whole down to this length")
    p.add_argument("--mode", choices=("document", "span"), default="document")
    p.add_argument("--workers", type=int, default=None, help="scan processes (default: up to 4 cores)")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p = data.add_parser("trace", help="name the source document of a training token")
    p.add_argument("-c", "--config", required=True, help="path to scratchlm.toml")
    p.add_argument("--shard", required=True, help="e.g. train/code, code, val/docs or a .bin path")
    p.add_argument("--offset", type=int, required=True, help="token offset in the shard")
    p.add_argument("--context", type=int, default=24, help="tokens shown on each side")


def run_command(args: argparse.Namespace) -> int:
    """`scratchlm data contamination`: print the report; exit status 1 when its verdict is error (an eval set
    mostly copied into the training files)."""
    from .check import check_files

    report = check_files(args.train, args.eval, args.ngram, min_words=args.min_words, workers=args.workers,
                         mode=args.mode)
    print(json.dumps(report.to_dict(), indent=2) if args.json else report.to_markdown(), end="")
    return 1 if report.verdict == "error" else 0


def print_stage_result(result: dict) -> int:
    """`scratchlm data decontaminate`, after the stage ran: print its report; exit status 1 when its verdict is
    error (the command runs past it, as with --force, to show it)."""
    print(Path(result["report"]).read_text(encoding="utf-8"), end="")
    return 1 if result["verdict"] == "error" else 0
