"""The experiment commands' arguments, and their dispatch: compare, ablate, ladder."""
from __future__ import annotations

import argparse

COMMANDS = ("compare", "ablate", "ladder")


def add_parsers(sub) -> None:
    p = sub.add_parser("compare", help="compare training runs: config diff, overlaid per-domain curves at equal "
                                       "tokens and wall-clock, final metrics with deltas, samples side by side")
    p.add_argument("runs", nargs="+", metavar="RUN",
                   help="a train/<id> directory, a workdir (its newest training) or a config (its training)")
    p.add_argument("--metric", default="val_loss",
                   help="the metric the verdict and the summary rank on: val_loss (mean over domains), "
                        "loss (training), or a per-domain one: bpb, top1, top10, <domain>/loss ...")
    p.add_argument("--html", metavar="OUT", default="compare.html",
                   help="the HTML page to write; the Markdown and JSON summaries go beside it, with the suffix "
                        ".md and .json (compare.md, compare.json)")

    p = sub.add_parser("ablate", help="train the base config and variants that each change one key, over seeds; "
                                      "mean +- std, difference from the base, Welch's t-test and a verdict")
    p.add_argument("-c", "--config", required=True, help="the base config (scratchlm.toml)")
    p.add_argument("--set", dest="sets", action="append", required=True, metavar="KEY=VALUE",
                   help="one variant: the base with this key changed (repeatable: one variant each)")
    p.add_argument("--seeds", type=int, default=3, help="training seeds per variant (train.seed, seed+1, ...)")
    p.add_argument("--steps", type=int, default=None, help="train.max_steps of every run (default: the config's)")
    p.add_argument("--jobs", default="auto",
                   help="runs trained at once: a number, or auto (parallel only where the device has room)")

    p = sub.add_parser("ladder", help="train a ladder of smaller models of the config's family at a fixed "
                                      "tokens-per-parameter, fit loss against compute, predict the target run")
    p.add_argument("-c", "--config", required=True, help="the target config (scratchlm.toml)")
    p.add_argument("--sizes", default="auto",
                   help="the rungs: depths (n_layer) of members of the target's family (same head size, depth-to-"
                        "width ratio, heads per width and GQA grouping), 3 to 5 of them, e.g. 1,2,3,4; auto: 1/5, "
                        "2/5, 3/5 and 4/5 of the target's depth (the 4 shallowest members for a shallow model): "
                        "4 rungs leave the power law 2 degrees of freedom, 3 leave a band that says nothing")
    p.add_argument("--tokens-per-param", type=float, default=20.0, help="training tokens per parameter of each rung")
    p.add_argument("--budget-hours", type=float, default=None,
                   help="wall-clock hours of the target run: the compute-optimal size for it (default: [plan])")
    p.add_argument("--probe-seconds", type=float, default=3.0, help="seconds of real training steps to time")


def run_command(args: argparse.Namespace) -> int:
    if args.command == "compare":
        from .compare import compare_command

        return compare_command(args)
    if args.command == "ablate":
        from .ablate import ablate_command

        return ablate_command(args)
    from .ladder import ladder_command

    return ladder_command(args)
