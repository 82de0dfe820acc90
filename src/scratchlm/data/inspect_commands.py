"""`scratchlm data rejected | explain | show`: read what the prepare stage dropped, did and kept."""
from __future__ import annotations

import argparse

from ..pipeline import Artifact, require

VERBS = ("rejected", "explain", "show")


def add_parsers(data: argparse._SubParsersAction) -> None:
    p = data.add_parser("rejected", help="count and sample what the prepare stage dropped, by rule")
    p.add_argument("-c", "--config", required=True, help="path to scratchlm.toml")
    p.add_argument("--rule", default=None, help="e.g. near_duplicate, language, promotional (default: all)")
    p.add_argument("--source", default=None)
    p.add_argument("--sample", type=int, default=5)
    p = data.add_parser("explain", help="follow one document through every prepare step")
    p.add_argument("-c", "--config", required=True, help="path to scratchlm.toml")
    p.add_argument("doc_id", help="e.g. web/web.jsonl:17")
    p = data.add_parser("show", help="print a document's final text as it went to training or validation")
    p.add_argument("-c", "--config", required=True, help="path to scratchlm.toml")
    p.add_argument("doc_id", help="e.g. web/web.jsonl:17")


def run_inspect_command(args: argparse.Namespace, art: dict[str, Artifact]) -> int:
    from . import audit

    data_dir = require(art, "data").dir
    if args.verb == "rejected":
        print(audit.rejected(data_dir, args.rule, args.source, args.sample))
    elif args.verb == "explain":
        print(audit.explain(data_dir, args.doc_id))
    else:
        # What training reads: the decontaminated split once it exists (it may have cut the document), else the split.
        cleaned = art["decontaminate"]
        print(audit.show(data_dir, cleaned.dir if cleaned.done else data_dir, args.doc_id))
    return 0
