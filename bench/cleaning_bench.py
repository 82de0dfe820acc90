"""Cleaning precision on real multilingual technical text (issue 12).

    python bench/cleaning_bench.py build                      # install Debian doc packages, write the corpus
    python bench/cleaning_bench.py run --system before|after|datatrove
    python bench/cleaning_bench.py sample [--system S ...] [--show]   # items to label that are not labeled yet
    python bench/cleaning_bench.py score --system S [--all]   # per-rule FP rates, FN rate, kept shares

Work files live under --root (default /work/bench-cleaning): corpus/, runs/<system>/, results/<system>.json.
Labels: bench/cleaning_labels.jsonl. See docs/benchmarks.md, "Cleaning precision on real multilingual
technical text (issue 12)".
"""
from __future__ import annotations

import argparse
import signal
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from cleaning import corpus, labels, scoring, systems  # noqa: E402

SYSTEMS = ("before", "after", "datatrove")


def main() -> None:
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)  # `sample | head` ends quietly
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--root", type=Path, default=Path("/work/bench-cleaning"))
    sub = ap.add_subparsers(dest="cmd", required=True)
    sub.add_parser("build")
    r = sub.add_parser("run")
    r.add_argument("--system", choices=SYSTEMS, required=True)
    s = sub.add_parser("sample")
    s.add_argument("--system", choices=SYSTEMS, action="append")
    s.add_argument("--show", action="store_true", help="print each item with its context, for labeling")
    s.add_argument("--json", action="store_true", help="print the unlabeled items as JSON lines")
    c = sub.add_parser("score")
    c.add_argument("--system", choices=SYSTEMS)
    c.add_argument("--all", action="store_true", help="score every system that has been run")
    args = ap.parse_args()
    root = args.root
    if args.cmd == "build":
        corpus.build(root)
    elif args.cmd == "run":
        out = systems.run_system(args.system, root)
        print(f"{args.system}: decisions in {out / 'decisions.jsonl.gz'}")
    elif args.cmd == "sample":
        labels.sample_command(root, args.system or [s for s in SYSTEMS if (root / "runs" / s /
                                                                            "decisions.jsonl.gz").exists()],
                              show=args.show, as_json=args.json)
    elif args.cmd == "score":
        which = [s for s in SYSTEMS if (root / "runs" / s / "decisions.jsonl.gz").exists()] if args.all else \
            [args.system]
        if not which or which == [None]:
            ap.error("score needs --system or --all")
        scoring.score_command(root, which)


if __name__ == "__main__":
    main()
