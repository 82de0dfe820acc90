"""Command line: parse arguments and dispatch. The work lives in the stage packages."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from .errors import UserError


def _config_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("-c", "--config", required=True, help="path to scratchlm.toml")


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="scratchlm", description="Raw text to a small language model, from scratch.")
    sub = ap.add_subparsers(dest="command", required=True)

    p = sub.add_parser("quickstart", help="build the built-in corpus and run every stage on it")
    p.add_argument("--workdir", default="scratchlm-quickstart")
    p.add_argument("--steps", type=int, default=None, help="override the preset's training steps")

    p = sub.add_parser("init", help="write DIR/scratchlm.toml with every key commented")
    p.add_argument("dir")

    p = sub.add_parser("run", help="run every stage in order, skipping those already up to date")
    _config_arg(p)
    p.add_argument("--resume", action="store_true", help="continue training from its latest checkpoint")

    corpus = sub.add_parser("corpus", help="built-in corpus").add_subparsers(dest="verb", required=True)
    p = corpus.add_parser("builtin", help="write the built-in corpus as JSONL")
    p.add_argument("--out", required=True)
    p.add_argument("--code-max-chars", type=int, default=None)

    data = sub.add_parser("data", help="data stage").add_subparsers(dest="verb", required=True)
    p = data.add_parser("prepare", help="read, clean, dedup and split the sources")
    _config_arg(p)
    p.add_argument("--force", action="store_true")

    tok = sub.add_parser("tokenizer", help="tokenizer stages").add_subparsers(dest="verb", required=True)
    for verb, text in (("train", "train the BPE tokenizer"), ("encode", "tokenize the corpus into shards")):
        p = tok.add_parser(verb, help=text)
        _config_arg(p)
        p.add_argument("--force", action="store_true")
    p = tok.add_parser("compare", help="fertility metrics of tokenizer files side by side on the same text")
    p.add_argument("tokenizers", nargs="+", metavar="TOKENIZER_JSON")
    p.add_argument("--text", nargs="+", required=True, metavar="PATH", help="JSONL or text files or folders")
    p.add_argument("--code-domain", action="append", default=None,
                   help="domain of source code (repeatable; default: code)")

    p = sub.add_parser("train", help="pretrain the model")
    _config_arg(p)
    p.add_argument("--resume", action="store_true")
    p.add_argument("--force", action="store_true")

    p = sub.add_parser("eval", help="evaluate the final checkpoint per domain")
    _config_arg(p)
    p.add_argument("--force", action="store_true")

    p = sub.add_parser("report", help="write report.md and report.json")
    _config_arg(p)
    p.add_argument("--force", action="store_true")

    p = sub.add_parser("generate", help="generate text from a checkpoint")
    p.add_argument("--checkpoint", required=True)
    p.add_argument("--prompt", default="")
    p.add_argument("--max-new-tokens", type=int, default=100)
    p.add_argument("--temperature", type=float, default=0.8)
    p.add_argument("--top-k", type=int, default=50)
    p.add_argument("--top-p", type=float, default=1.0)
    p.add_argument("--repetition-penalty", type=float, default=1.0)
    p.add_argument("--seed", type=int, default=None)
    p.add_argument("--no-cache", action="store_true", help="recompute the whole prefix each token (slow)")
    return ap


def dispatch(args: argparse.Namespace) -> int:
    from .config import load_config

    if args.command == "quickstart":
        from .quickstart import run_quickstart

        run_quickstart(Path(args.workdir), args.steps)
    elif args.command == "init":
        from .config_template import write_init

        print(f"wrote {write_init(Path(args.dir))}")
    elif args.command == "corpus":
        from .data.builtin import build_builtin_corpus

        for domain, path in build_builtin_corpus(Path(args.out), args.code_max_chars).items():
            print(f"{domain}: {path}")
    elif args.command == "tokenizer" and args.verb == "compare":
        from .tokenizer.compare import compare

        print(compare(args.tokenizers, args.text, tuple(args.code_domain or ["code"]))[1])
    elif args.command == "generate":
        from .model.stream import stream_to_stdout

        stream_to_stdout(args)
    else:
        from . import stages
        from .pipeline import plan_artifacts

        cfg = load_config(args.config)
        if args.command == "run":
            stages.run_all(cfg, resume=args.resume)
            return 0
        art = plan_artifacts(cfg)
        if args.command == "data":
            stages.stage_data(cfg, art, args.force)
        elif args.command == "tokenizer":
            (stages.stage_tokenizer if args.verb == "train" else stages.stage_shards)(cfg, art, args.force)
        elif args.command == "train":
            stages.stage_train(cfg, art, resume=args.resume, force=args.force)
        elif args.command == "eval":
            stages.stage_eval(cfg, art, args.force)
        elif args.command == "report":
            print(stages.stage_report(cfg, art, args.force)["report"])
    return 0


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return dispatch(args)
    except UserError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
