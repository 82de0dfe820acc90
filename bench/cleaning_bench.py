"""Cleaning precision on real multilingual technical text (issue 12).

    python bench/cleaning_bench.py build                      # install Debian doc packages, write the corpus
    python bench/cleaning_bench.py run --system before|after|datatrove
    python bench/cleaning_bench.py sample [--system S ...] [--show]   # items to label that are not labeled yet
    python bench/cleaning_bench.py score --system S [--all]   # per-rule FP rates, FN rate, kept shares
    python bench/cleaning_bench.py --corpus holdout build      # the same commands on the holdout corpus

Corpora: bench (bench/cleaning/corpus.py, every source profile = "technical", before = 5ab84ff) and holdout
(bench/cleaning/holdout_corpus.py: other Debian packages, no profile set, before = 80d4d67).
Work files live under --root (default /work/bench-cleaning, /work/bench-holdout for the holdout): corpus/,
runs/<system>/, results/<system>.json. Labels: bench/cleaning_labels.jsonl, bench/cleaning_holdout_labels.jsonl.
See docs/benchmarks.md, "Cleaning precision on real multilingual technical text (issue 12)".
"""
from __future__ import annotations

import argparse
import signal
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from cleaning import corpus, holdout_corpus, labels, scoring, systems  # noqa: E402

SYSTEMS = ("before", "after", "datatrove")
CORPORA = {"bench": corpus, "holdout": holdout_corpus}  # each: ROOT, LABELS, BEFORE_COMMIT, build, config_toml


def main() -> None:
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)  # `sample | head` ends quietly
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--corpus", choices=CORPORA, default="bench")
    ap.add_argument("--root", type=Path, help="work folder (default: the corpus's, /work/bench-cleaning or "
                    "/work/bench-holdout)")
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
    bench = CORPORA[args.corpus]
    root = args.root or bench.ROOT
    if args.cmd == "build":
        bench.build(root)
    elif args.cmd == "run":
        out = systems.run_system(args.system, root, bench)
        print(f"{args.system}: decisions in {out / 'decisions.jsonl.gz'}")
    elif args.cmd == "sample":
        labels.sample_command(root, args.system or [s for s in SYSTEMS if (root / "runs" / s /
                                                                            "decisions.jsonl.gz").exists()],
                              show=args.show, as_json=args.json, labels_path=bench.LABELS)
    elif args.cmd == "score":
        which = [s for s in SYSTEMS if (root / "runs" / s / "decisions.jsonl.gz").exists()] if args.all else \
            [args.system]
        if not which or which == [None]:
            ap.error("score needs --system or --all")
        scoring.score_command(root, which, bench.LABELS)


if __name__ == "__main__":
    main()
