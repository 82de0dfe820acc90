"""Command line: parse arguments and dispatch. The work lives in the stage packages."""
from __future__ import annotations

import argparse
import contextlib
import os
import shlex
import sys
from pathlib import Path

from .data.inspect_commands import (
    VERBS as INSPECT_VERBS,  # argparse only: cheap to import
)
from .errors import UserError
from .experiments.commands import (
    COMMANDS as EXPERIMENTS,  # argparse only: cheap to import
)
from .sampling import CHAT, GENERATE, Sampling
from .stages import ARTIFACT_STAGES, STAGE, plan_artifacts

# The commands that write to the workdir: each stage's command (ARTIFACT_STAGES) and these. Each holds the
# workdir's lock while it runs (workdir_lock.py) and takes --wait. Not here: those that only read it (data
# show/explain/rejected/trace), `plan` (one plan file, written atomically), and those that write beside a checkpoint
# or a finished stage (eval suite / human / rate / watch, report RUN_DIR, data audit), so that they can be used
# while a training runs.
LOCKING = (("quickstart", None), ("run", None), ("check", None), ("sft", None), ("ablate", None), ("ladder", None),
           *((s.command[0], s.command[1] if len(s.command) > 1 else None) for s in ARTIFACT_STAGES))


RESUME_FROM_HELP = ("continue from this checkpoint: one of this run's; or another run's with the same model "
                    "(model keys, vocabulary, tokenizer), which starts a new run from its weights, its optimizer "
                    "state (same train.optimizer) and its step, under this config's hyperparameters and schedule")


def _train_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--resume", action="store_true", help="continue from the newest checkpoint that verifies")
    p.add_argument("--resume-from", metavar="STEP_DIR", help=RESUME_FROM_HELP)
    p.add_argument("--stop-at", metavar="STEP", type=int, default=None,
                   help="stop after this step with a checkpoint, as on SIGTERM (exit 0); the schedule still runs to "
                        "train.max_steps, and --resume continues it")


# `eval suite` runs HumanEval (hours on a CPU) only when asked, or when its estimate is at most this many minutes.
HUMANEVAL_CAP_MINUTES = 10.0


def _eval_options(p: argparse.ArgumentParser) -> None:
    """`scratchlm eval -c F` is the pipeline's eval stage; each other job is a verb with only its own flags."""
    # The form before the verbs, for one release: `eval --checkpoint PATH` runs `eval suite PATH` (_old_eval_forms).
    p.add_argument("--checkpoint", dest="old_checkpoint", help=argparse.SUPPRESS)
    p.add_argument("--unsafe-run-code-unsandboxed", action="store_true", help=argparse.SUPPRESS)
    verbs = p.add_subparsers(dest="verb", metavar="[VERB]", title="verbs (without one: the pipeline's eval stage)")
    for add_verb in (_suite_verb, _human_verb, _rate_verb, _watch_verb):
        add_verb(verbs)


def _suite_verb(verbs) -> None:
    v = verbs.add_parser("suite", help="the full evaluation of one checkpoint, stored next to it: loss per domain, "
                                       "diversity, your tasks, HumanEval for code models")
    v.add_argument("checkpoint", metavar="CHECKPOINT")
    _verb_config(v)
    v.add_argument("--humaneval", action="store_true",
                   help="run HumanEval whatever its estimated time (and whatever eval.suite.humaneval says)")
    v.add_argument("--humaneval-cap-minutes", type=float, default=HUMANEVAL_CAP_MINUTES, metavar="MINUTES",
                   help="with eval.suite.humaneval = \"auto\" and a code source, run HumanEval only if its estimate "
                        "(the first problem's time x the problems, printed before the rest run) is at most this; "
                        "0: only with --humaneval (default: %(default)g)")
    _unsafe_option(v)


def _human_verb(verbs) -> None:
    v = verbs.add_parser("human", help="write a rating sheet of prompts and the checkpoint's outputs")
    v.add_argument("checkpoint", metavar="CHECKPOINT", nargs="?")
    v.add_argument("--checkpoint", dest="old_checkpoint", default=argparse.SUPPRESS, help=argparse.SUPPRESS)
    _verb_config(v)
    v.add_argument("--n", type=int, default=20, help="outputs on the sheet (default: %(default)s)")
    v.add_argument("--format", choices=("json", "csv"), default="json", help="sheet format (default: %(default)s)")
    v.add_argument("--out", help="sheet path (default: the checkpoint's evals folder)")


def _rate_verb(verbs) -> None:
    v = verbs.add_parser("rate", help="score a rating sheet in the terminal")
    v.add_argument("sheet", metavar="SHEET", help="a sheet written by `scratchlm eval human`")
    v.add_argument("-c", "--config", default=argparse.SUPPRESS, help=argparse.SUPPRESS)  # taken before; unused


def _watch_verb(verbs) -> None:
    v = verbs.add_parser("watch", help="evaluate a training run's checkpoints beside it, as they are written")
    _verb_config(v)
    v.add_argument("--device", default="auto",
                   help="where to evaluate (cpu, cuda:1, ...; auto: a second GPU if any, else the CPU)")
    v.add_argument("--suite", choices=("fast", "full"), default="fast",
                   help="fast = the trainer's evaluation (per-domain loss, samples); full = also `eval suite` on "
                        "each (tasks, diversity; HumanEval only with eval.suite.humaneval = \"on\") "
                        "(default: %(default)s)")
    which = v.add_mutually_exclusive_group()
    which.add_argument("--every-checkpoint", action="store_true", help="evaluate every checkpoint")
    which.add_argument("--every", type=int, default=None, metavar="N",
                       help="evaluate the checkpoints of steps that are multiples of N (and the last); "
                            "default: those of train.eval_every")
    v.add_argument("--threads", type=int, default=0, help="torch CPU threads (0: torch's default)")
    _unsafe_option(v)


def _verb_config(p: argparse.ArgumentParser) -> None:
    # SUPPRESS: `eval -c F VERB` (before the verb) keeps its value; the verb's default would overwrite it.
    p.add_argument("-c", "--config", default=argparse.SUPPRESS, help="path to scratchlm.toml")


def _unsafe_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--unsafe-run-code-unsandboxed", action="store_true", default=argparse.SUPPRESS,
                   help="UNSAFE: where no OS sandbox (bubblewrap) can be made, run HumanEval's model-written code "
                        "as you, with only an audit hook (default: refuse; docs/eval.md)")


def _old_eval_forms(args: argparse.Namespace) -> None:
    """`eval --checkpoint PATH` and `eval human --checkpoint PATH`, the forms before the verbs: run as the verb
    they mean, with a note, for one release."""
    old = getattr(args, "old_checkpoint", None) if args.command == "eval" else None
    if old is None:
        return
    if args.verb is None:
        args.verb, args.checkpoint = "suite", old
        args.humaneval, args.humaneval_cap_minutes = False, HUMANEVAL_CAP_MINUTES
        print("note: `scratchlm eval --checkpoint PATH` is now `scratchlm eval suite PATH`; the old form goes in "
              "the next release", file=sys.stderr)
    elif args.verb == "human":
        if args.checkpoint is not None:
            raise UserError("scratchlm eval human takes the checkpoint once: scratchlm eval human CHECKPOINT")
        args.checkpoint = old
        print("note: `scratchlm eval human --checkpoint PATH` is now `scratchlm eval human PATH`; the old form goes "
              "in the next release", file=sys.stderr)


def _report_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("run_dir", nargs="?", help="a train/<id> directory or a workdir (instead of -c)")


# What a stage's command takes beyond -c and --force. `eval` and `report` also do more than run their stage.
STAGE_OPTIONS = {"train": _train_options, "eval": _eval_options, "report": _report_options}
OPTIONAL_CONFIG = ("eval", "report")  # `eval rate SHEET`, `eval VERB -c F` (after the verb), `report RUN_DIR`


def _budget_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--budget-hours", type=float, default=None,
                   help="wall-clock hours the run must fit in (overrides [plan] budget_hours; without either, the "
                        "budget of the saved plan of this training); over it, the plan is an error that stops `run`")
    p.add_argument("--price-per-hour", type=float, default=None,
                   help="device price per hour, for the cost line (overrides [plan] price_per_hour)")
    p.add_argument("--remeasure", action="store_true",
                   help="time the training step again, where the saved plan of this training measured it on this "
                        "machine under the same conditions (by default those timings are reused)")


def _sampling_options(p: argparse.ArgumentParser, defaults: Sampling) -> None:
    """The flags that change what is sampled, their defaults shown: the same as an export of such a checkpoint
    carries (sampling.py)."""
    d = defaults
    p.add_argument("--max-new-tokens", type=int, default=d.max_new_tokens, help="tokens to sample at most "
                                                                                "(default: %(default)s)")
    p.add_argument("--temperature", type=float, default=d.temperature, help="0: greedy (default: %(default)s)")
    p.add_argument("--top-k", type=int, default=d.top_k, help="sample from the k likeliest tokens; 0: all "
                                                              "(default: %(default)s)")
    p.add_argument("--top-p", type=float, default=d.top_p, help="sample from the smallest set of tokens holding "
                                                                "this probability (default: %(default)s)")
    p.add_argument("--repetition-penalty", type=float, default=d.repetition_penalty,
                   help="shrink the logits of tokens already in the context; 1.0: none (default: %(default)s)")
    p.add_argument("--seed", type=int, default=None, help="seed the sampling, for a repeatable output")


def _config_arg(p: argparse.ArgumentParser, required: bool = True) -> None:
    p.add_argument("-c", "--config", required=required, help="path to scratchlm.toml")


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="scratchlm", description="Raw text to a small language model, from scratch.")
    sub = ap.add_subparsers(dest="command", required=True)

    p = sub.add_parser("quickstart", help="build the built-in corpus and run every stage on it")
    p.add_argument("--workdir", default="scratchlm-quickstart")
    p.add_argument("--steps", type=int, default=None, help="override the preset's training steps")

    p = sub.add_parser("init", help="write DIR/scratchlm.toml: the keys most runs change, with their meaning")
    p.add_argument("dir")
    p.add_argument("--full", action="store_true", help="write every key with its default and meaning")

    p = sub.add_parser("run", help="run every stage in order, skipping those already up to date")
    _config_arg(p)
    p.add_argument("--resume", action="store_true", help="continue training from its latest checkpoint")
    p.add_argument("--resume-from", metavar="STEP_DIR", help=RESUME_FROM_HELP)
    p.add_argument("--force", action="store_true",
                   help="continue past a plan in error or a contamination error (an eval set mostly copied in training)")
    p.add_argument("--eval-device", default=None, metavar="DEVICE",
                   help="evaluate beside the training on this device (cuda:1, cpu): starts `scratchlm eval watch` "
                        "for the length of the training, which then evaluates nothing itself (train.eval = external)")
    _budget_options(p)

    p = sub.add_parser("plan", help=STAGE["plan"].help)
    _config_arg(p)
    p.add_argument("--gpu", default=None, help="plan for a preset device instead of this one (e.g. h100, a100-80gb)")
    _budget_options(p)
    p.add_argument("--tokens-per-param", type=float, default=20.0,
                   help="tokens per parameter wanted, 20-100 (default: %(default)g)")
    p.add_argument("--probe-seconds", type=float, default=3.0,
                   help="seconds of real training steps to time (default: %(default)g)")
    p.add_argument("--json", action="store_true", help="print the plan as JSON")

    p = sub.add_parser("check", help="preflight checklist: each classic mistake, with its verdict and evidence")
    _config_arg(p)
    _budget_options(p)
    p.add_argument("--skip-resume", action="store_true", help="do not run the (real) resume verification")
    p.add_argument("--probe-seconds", type=float, default=3.0,
                   help="seconds of real training steps to time (default: %(default)g)")
    p.add_argument("--json", action="store_true")

    corpus = sub.add_parser("corpus", help="built-in corpus").add_subparsers(dest="verb", required=True)
    p = corpus.add_parser("builtin", help="write the built-in corpus as JSONL")
    p.add_argument("--out", required=True)
    p.add_argument("--code-max-chars", type=int, default=None)

    groups = {"data": "data stage: prepare, decontaminate, inspect, audit", "tokenizer": "tokenizer stages"}
    verbs = {group: sub.add_parser(group, help=text).add_subparsers(dest="verb", required=True)
             for group, text in groups.items()}
    for stage in ARTIFACT_STAGES:  # one command per stage of the registry
        group, *verb = stage.command
        p = (verbs[group].add_parser(verb[0], help=stage.help) if verb else
             sub.add_parser(group, help=stage.help))
        _config_arg(p, required=stage.name not in OPTIONAL_CONFIG)
        p.add_argument("--force", action="store_true", help="rerun even if up to date")
        STAGE_OPTIONS.get(stage.name, lambda p: None)(p)
    from .decontaminate.command import add_parsers as add_decontaminate_parsers

    add_decontaminate_parsers(verbs["data"])
    from .data.inspect_commands import add_parsers as add_inspect_parsers

    add_inspect_parsers(verbs["data"])
    from .data.audit_commands import add_parser as add_audit_parser

    add_audit_parser(verbs["data"])
    p = verbs["tokenizer"].add_parser("compare",
                                      help="fertility metrics of tokenizer files side by side on the same text")
    p.add_argument("tokenizers", nargs="+", metavar="TOKENIZER_JSON")
    p.add_argument("--text", nargs="+", required=True, metavar="PATH", help="JSONL or text files or folders")
    p.add_argument("--code-domain", action="append", default=None,
                   help="domain of source code (repeatable; default: code)")

    p = sub.add_parser("sft", help="supervised fine-tuning on conversations, loss on the answers only")
    _config_arg(p)
    p.add_argument("--data", required=True, help="JSONL: prompt/response or messages per line")
    p.add_argument("--checkpoint", help="base checkpoint (default: the config's trained checkpoint)")
    p.add_argument("--force", action="store_true",
                   help="fine-tune even a base checkpoint with no evaluation, or one barely better than unigram")

    p = sub.add_parser("chat", help="talk to a (fine-tuned) checkpoint in the terminal")
    p.add_argument("--checkpoint", required=True)
    p.add_argument("--system", default="", help="system message")
    _sampling_options(p, CHAT)

    p = sub.add_parser("export", help="export a checkpoint: transformers (hf), llama.cpp (gguf), int8 checkpoint")
    p.add_argument("--checkpoint", required=True)
    p.add_argument("--format", choices=("hf", "gguf"), default=None)
    # No argparse choices for the two below: a K-quant name gets the way to make one, not "invalid choice".
    p.add_argument("--quant", default="f16", help="GGUF tensor type: f16, q8_0 or q4_0 (default: %(default)s)")
    p.add_argument("--quantize", default=None,
                   help="int8: a checkpoint with int8 weights, a quarter of the size, for generate/chat/eval")
    p.add_argument("--out", required=True, help="output directory (or .gguf file)")

    p = sub.add_parser("generate", help="generate text from a checkpoint")
    p.add_argument("--checkpoint", required=True)
    p.add_argument("--prompt", default=None, help="text to continue (default: none, a new document)")
    _sampling_options(p, GENERATE)
    p.add_argument("--no-cache", action="store_true", help="recompute the whole prefix each token (slow)")

    from .experiments.commands import add_parsers as add_experiment_parsers

    add_experiment_parsers(sub)
    for command, verb in LOCKING:
        (verbs[command].choices[verb] if verb else sub.choices[command]).add_argument(
            "--wait", action="store_true", help="if another command is using the workdir, wait for it to finish "
                                                "instead of failing")
    return ap

def dispatch(args: argparse.Namespace) -> int:
    if args.command == "quickstart":
        from .quickstart import run_quickstart

        run_quickstart(Path(args.workdir), args.steps)
    elif args.command == "init":
        from .config_template import write_init

        print(f"wrote {write_init(Path(args.dir), args.full)}")
    elif args.command == "corpus":
        from .data.builtin import build_builtin_corpus

        for domain, path in build_builtin_corpus(Path(args.out), args.code_max_chars).items():
            print(f"{domain}: {path}")
    elif args.command == "tokenizer" and args.verb == "compare":
        from .tokenizer.compare import compare

        print(compare(args.tokenizers, args.text, tuple(args.code_domain or ["code"]))[1])
    elif args.command == "generate":
        from .model.stream import stream_to_stdout

        if args.prompt is not None and not args.prompt.strip():  # e.g. `--prompt "$P"` with P unset
            raise UserError("--prompt is empty; leave it out to generate from the start of a document")
        args.prompt = args.prompt or ""
        stream_to_stdout(args)
    elif args.command == "chat":
        from .sft.chat import chat_loop

        chat_loop(args)
    elif args.command == "export":
        from .export.commands import run_export

        print(run_export(args))
    elif args.command in EXPERIMENTS:
        from .experiments.commands import run_command

        return run_command(args)
    elif args.command == "report" and args.run_dir:
        from .monitor.dashboard import resolve_train_dir, write_dashboard

        if args.config:
            raise UserError("scratchlm report takes either -c CONFIG or a RUN_DIR, not both")
        run_dir = Path(args.run_dir)
        print(write_dashboard(resolve_train_dir(run_dir), run_dir))
    elif args.command == "data" and args.verb == "contamination":
        from .decontaminate.command import run_command

        return run_command(args)
    elif args.command == "eval" and (args.verb == "rate" or not args.config):  # `eval rate SHEET`: the sheet alone
        from .eval.commands import run_eval_command

        run_eval_command(args, None, None)
    elif args.command == "data" and args.verb == "audit" and (args.action == "rate" or not args.config):
        from .data.audit_commands import run_audit_command

        return run_audit_command(args, None)
    elif args.command == "report" and not args.config:
        raise UserError("scratchlm report needs -c CONFIG or a RUN_DIR (a train/<id> directory or a workdir)")
    else:
        return _dispatch_with_config(args)
    return 0


def _dispatch_with_config(args: argparse.Namespace) -> int:
    """The commands that read the config and its artifacts (-c), stage commands first."""
    cfg = _config(args)
    if args.command == "run":
        from .stages import run_all

        run_all(cfg, resume=args.resume, force=args.force, resume_from=args.resume_from,
                budget_hours=args.budget_hours, price_per_hour=args.price_per_hour, eval_device=args.eval_device,
                remeasure=args.remeasure)
        return 0
    if args.command == "plan":
        from .plan.commands import plan_command

        return plan_command(cfg, plan_artifacts(cfg), args)
    if args.command == "check":
        from .plan.commands import check_command

        return check_command(cfg, plan_artifacts, args)
    art = plan_artifacts(cfg)
    stage = _stage_command(args)
    if stage is not None:
        options = {"train": {"resume": args.resume, "resume_from": args.resume_from, "stop_at": args.stop_at}
                   if stage.name == "train" else {},
                   "decontaminate": {"allow_contaminated": True}}  # the command reports the verdict, exit 1
        result = stage.run(cfg, art, force=args.force, **options.get(stage.name, {}))
        if stage.name == "report":
            print(result["report"])
        if stage.name == "decontaminate":
            from .decontaminate.command import print_stage_result

            return print_stage_result(result)
    elif args.command == "eval":
        from .eval.commands import run_eval_command

        run_eval_command(args, cfg, art)
    elif args.command == "sft":
        from .sft.train import run_sft

        run_sft(cfg, art, Path(args.data), Path(args.checkpoint) if args.checkpoint else None, args.force)
    elif args.verb == "audit":
        from .data.audit_commands import run_audit_command

        return run_audit_command(args, art)
    elif args.verb == "trace":
        from .tokenizer.provenance import run_trace_command

        return run_trace_command(args, art)
    elif args.verb in INSPECT_VERBS:
        from .data.inspect_commands import run_inspect_command

        return run_inspect_command(args, art)
    return 0


def _stage_command(args: argparse.Namespace):
    """The registry's stage this command runs, None for another command (`eval human`, `data audit`, ...)."""
    if args.command == "eval" and args.verb:  # `eval suite|human|rate|watch`
        return None
    words = (args.command, getattr(args, "verb", None))
    return next((stage for stage in ARTIFACT_STAGES if stage.command == words[:len(stage.command)]), None)


def _workdir(args: argparse.Namespace) -> tuple[Path, str] | None:
    """The workdir this command uses and how the user named it; None for a command that uses none."""
    if args.command == "quickstart":
        return Path(args.workdir), "quickstart --workdir"
    if not getattr(args, "config", None) or (args.command == "eval" and args.verb):
        return None  # `eval suite|human|rate` write beside the checkpoint or the sheet; `eval watch` into the run
    return _config(args).workdir, f"{args.config}: [run] workdir"


def _config(args: argparse.Namespace):
    """The config of -c, loaded once per command (the lock needs its workdir before the command runs)."""
    if getattr(args, "loaded_config", None) is None:
        from .stages import load_config

        args.loaded_config = load_config(args.config)
    return args.loaded_config

def _workdir_lock(args: argparse.Namespace, argv: list[str] | None) -> contextlib.AbstractContextManager:
    """The workdir's lock for a command that writes there; one that only reads it is only checked to be able to
    write there (planning the stages caches file digests in it), so that an unusable workdir fails at once."""
    target = _workdir(args)
    if target is None:
        return contextlib.nullcontext()
    from .workdir_lock import check_writable, workdir_lock

    if (args.command, getattr(args, "verb", None)) not in LOCKING:
        check_writable(*target)
        return contextlib.nullcontext()
    command = shlex.join(["scratchlm", *(sys.argv[1:] if argv is None else argv)])
    return workdir_lock(*target, command, wait=args.wait)

def _main(argv: list[str] | None) -> int:
    args = build_parser().parse_args(argv)
    try:
        _old_eval_forms(args)
        with _workdir_lock(args, argv):
            return dispatch(args)
    except OSError as e:
        from .disk import environment_error

        if (line := environment_error(e)) is None:
            raise
        print(f"error: {line}", file=sys.stderr)
        return 1
    except UserError as e:
        print(f"{getattr(e, 'label', 'error')}: {e}", file=sys.stderr)
        return getattr(e, "exit_code", 2)  # a run stopped by a signal exits as the shell expects of it
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130

def main(argv: list[str] | None = None) -> int:
    try:
        try:
            return _main(argv)
        finally:
            sys.stdout.flush()  # a reader that left early (`| head`) shows here, not as a traceback at exit
    except BrokenPipeError:
        # Python's recipe: point stdout at devnull so the interpreter's last flush has nowhere to fail.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141  # 128 + SIGPIPE, what a shell reports for a writer cut off by its reader

if __name__ == "__main__":
    sys.exit(main())
