"""`scratchlm data decontaminate | contamination | trace`: the eval-set guard's commands."""
from __future__ import annotations

import argparse
import json
from pathlib import Path

VERBS = ("decontaminate", "contamination", "trace")


def add_parsers(data: argparse._SubParsersAction) -> None:
    p = data.add_parser("decontaminate", help="remove eval-set text ([[eval.sets]] and validation) from training")
    p.add_argument("-c", "--config", required=True, help="path to scratchlm.toml")
    p.add_argument("--force", action="store_true", help="rerun even if up to date")
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


def run_guard_command(args: argparse.Namespace) -> int:
    """Exit status 1 when the contamination verdict is error (an eval set mostly copied into training)."""
    if args.verb == "contamination":
        from .contamination import run_contamination_command

        report = run_contamination_command(args.train, args.eval, args.ngram, min_words=args.min_words,
                                           workers=args.workers, mode=args.mode)
        print(json.dumps(report.to_dict(), indent=2) if args.json else report.to_markdown(), end="")
        return 1 if report.verdict == "error" else 0

    from .. import stages
    from ..config import load_config
    from ..pipeline import plan_artifacts, require

    cfg = load_config(args.config)
    art = plan_artifacts(cfg)
    if args.verb == "decontaminate":
        result = stages.stage_decontaminate(cfg, art, args.force, allow_contaminated=True)
        print(Path(result["report"]).read_text(encoding="utf-8"), end="")
        return 1 if result["verdict"] == "error" else 0

    from ..tokenizer.bpe import load_tokenizer
    from .provenance import format_trace, resolve_shard, trace

    shards_dir = require(art, "shards").dir
    tokenizer = load_tokenizer(require(art, "tokenizer").dir / "tokenizer.json")
    print(format_trace(trace(resolve_shard(shards_dir, args.shard), args.offset, tokenizer, args.context)))
    return 0
