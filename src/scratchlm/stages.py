"""The stage registry: every stage of the pipeline, declared once, in the order `scratchlm run` runs them.

A declaration (STAGES, at the end of this file) names the stage, the package holding its code, the stages whose
artifacts it reads, the config sections its ID hashes, the command that runs it alone, and the function that runs
it. Everything else is derived from it: the artifact IDs (plan_artifacts), the run order (run_all), the CLI's stage
commands, the "run X first" messages and the config checks of each stage (load_config). The README's stage table
is checked against it by tests/test_stage_registry.py. Adding a stage means one declaration and its package.

Each stage function below resolves the stage's inputs and calls into its package; the package imports are lazy so
that the CLI starts fast.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from .ids import DigestCache, content_id, files_id
from .pipeline import Artifact, require, run_stage
from .progress import log

if TYPE_CHECKING:
    from .config import Config


def stage_data(cfg: Config, art: dict[str, Artifact], force: bool = False) -> dict:
    from .data.prepare import prepare_data

    return run_stage(cfg, art, "data", lambda out: prepare_data(cfg, out, size_estimate(cfg)), force)


def size_estimate(cfg: Config):
    """The tokenizer and model pieces of the data stage's corpus-size verdict."""
    from .data.token_estimate import SizeEstimate
    from .plan.arithmetic import count_params
    from .tokenizer.token_estimate import measure_ratio

    return SizeEstimate(measure_ratio, count_params(cfg.model, cfg.tokenizer.vocab_size).total)


def stage_decontaminate(cfg: Config, art: dict[str, Artifact], force: bool = False,
                         allow_contaminated: bool = False) -> dict:
    from .decontaminate.stage import check_verdict, decontaminate_corpus

    result = run_stage(cfg, art, "decontaminate", lambda out: decontaminate_corpus(cfg, art["data"].dir, out), force)
    check_verdict(result, allow_contaminated)
    return result


def train_data_dir(art: dict[str, Artifact]) -> Path:
    """Where the stages after decontamination read documents: the decontaminated split, laid out like data/<id>."""
    return art["decontaminate"].dir


def stage_tokenizer(cfg: Config, art: dict[str, Artifact], force: bool = False) -> dict:
    from .tokenizer.stage import train_tokenizer

    return run_stage(cfg, art, "tokenizer", lambda out: train_tokenizer(cfg, train_data_dir(art), out), force)


def stage_shards(cfg: Config, art: dict[str, Artifact], force: bool = False) -> dict:
    from .tokenizer.stage import tokenize_corpus

    return run_stage(cfg, art, "shards",
                     lambda out: tokenize_corpus(cfg, train_data_dir(art), art["tokenizer"].dir, out), force)


def stage_train(cfg: Config, art: dict[str, Artifact], resume: bool = False, force: bool = False,
                resume_from: Path | None = None, stop_at: int | None = None,
                forced: list[dict] | None = None) -> dict:
    """resume_from: one checkpoint directory to resume from (implies resume): this run's, or another run's with the
    same model, which this run then starts from. stop_at: pause after that step (train/loop.py TrainingPaused).
    forced: the error verdicts --force let this training past (forced_past), recorded with it."""
    from .eval.samples import default_prompts
    from .train.loop import train_model

    prompts = cfg.eval.prompts or default_prompts(require(art, "data").dir)
    if not (resume or resume_from is not None or force):
        _refuse_to_discard(art["train"])
    if not art["train"].done:
        from .train.mix import planned_mix
        from .ids import read_json

        for warning in planned_mix(cfg, read_json(require(art, "shards").dir / "shards.json")).warnings:
            log(f"train: mix warning: {warning}")
    ids = {s: a.id for s, a in art.items() if s in ("data", "tokenizer", "shards", "train")}

    def work(out: Path) -> dict:
        return train_model(cfg, art["shards"].dir, art["tokenizer"].dir, out, ids, prompts, resume=resume,
                           resume_from=resume_from, stop_at=stop_at)

    if int(os.environ.get("RANK", "0")) > 0:  # under torchrun rank 0 owns the artifact directory; others only train
        a = art["train"]
        return a.manifest()["result"] if a.done and not force else work(a.dir)
    return run_stage(cfg, art, "train", lambda out: _record_forced(out, work(out), forced or []), force,
                     keep_partial=resume or resume_from is not None)


def _record_forced(out: Path, summary: dict, forced: list[dict]) -> dict:
    """The training's summary with the error verdicts --force let it past, in summary.json and, returned, in the
    stage's manifest: they travel with the run, so the report and `check` read them whenever they come. A run not
    forced gets no key at all."""
    if not forced:
        return summary
    from .ids import write_json

    summary = {**summary, "forced": forced}
    write_json(out / "summary.json", summary)
    return summary


def _refuse_to_discard(a: Artifact) -> None:
    """A training directory with checkpoints and no manifest is a run that was stopped, or a finished one whose
    manifest was lost: starting over would delete hours of training without a word."""
    from .errors import UserError
    from .model.checkpoint import list_checkpoints

    checkpoints = [] if a.done else list_checkpoints(a.dir / "checkpoints")
    if not checkpoints:
        return
    what = ("a finished training whose manifest.json is missing" if (a.dir / "summary.json").exists() else
            "an unfinished training")
    raise UserError(f"train: {a.dir} holds {what}, with checkpoints up to {checkpoints[-1].name}: continue it with "
                    f"--resume (a finished one is recorded again, no step trained), or discard it and train from "
                    f"step 0 with `scratchlm train -c CONFIG --force`")


def stage_eval(cfg: Config, art: dict[str, Artifact], force: bool = False) -> dict:
    from .eval.stage import evaluate_checkpoint

    checkpoint = Path(require(art, "train").manifest()["result"]["checkpoint"])
    return run_stage(cfg, art, "eval", lambda out: evaluate_checkpoint(cfg, checkpoint, art["shards"].dir, out),
                     force)


def stage_report(cfg: Config, art: dict[str, Artifact], force: bool = False) -> dict:
    from .report.build import build_report

    dirs = {s: a.dir for s, a in art.items() if s != "report"}  # in pipeline order
    ids = {s: a.id for s, a in art.items() if s != "report"}
    return run_stage(cfg, art, "report", lambda out: build_report(cfg.workdir, dirs, ids, out, cfg.run.demo), force)


def stage_plan(cfg: Config, art: dict[str, Artifact], force: bool = False, probe_seconds: float = 3.0,
               budget_hours: float | None = None, price_per_hour: float | None = None,
               remeasure: bool = False) -> dict | None:
    """Plan the training about to start (not when it is already done); refuse a plan in error unless forced.
    budget_hours / price_per_hour: the flags; without them the [plan] keys, else the saved plan's budget."""
    from .plan.demo import accepted_notes, blocking_errors
    from .errors import UserError
    from .plan.make import make_plan
    from .plan.render import render_plan

    if art["train"].done:
        return None
    plan = make_plan(cfg, art, budget_hours=budget_hours, price_per_hour=price_per_hour, probe_seconds=probe_seconds,
                     remeasure=remeasure)
    log(render_plan(plan))
    for note in accepted_notes(plan["verdicts"], cfg.run.demo):
        log(f"plan: {note}")
    errors = blocking_errors(plan["verdicts"], cfg.run.demo)
    listed = "; ".join(f"{v['name']}: {v['summary']}" for v in errors)
    if errors and not force:
        raise UserError(f"the plan ends in error ({listed}); fix the config or pass --force to train anyway")
    if errors:
        log(f"plan: continuing despite --force: {listed}")
    return plan


def _data_identity(cfg: Config, cache: DigestCache) -> list:
    """The sources' settings and file digests, the [data] keys (less the sources, hashed apart), and the
    [decontaminate] guard's settings the validation draw applies (val_split.guard_settings)."""
    from .data.readers import source_files
    from .data.val_split import guard_settings

    sources = [{"source": vars(src),
                "files": files_id(source_files(src, cfg.base_dir, cfg.workdir), cache, cfg.base_dir)}
               for src in cfg.data.sources]
    return [sources, {k: v for k, v in cfg.identity("data").items() if k != "sources"},
            {"validation_guard": list(guard_settings(cfg.decontaminate))}]


def _decontaminate_identity(cfg: Config, cache: DigestCache) -> list:
    from .decontaminate.stage import eval_set_inputs

    return [cfg.identity("decontaminate"), eval_set_inputs(cfg, cache)]


def _tokenizer_identity(cfg: Config, cache: DigestCache) -> list:
    # How the sample's languages are told is part of what the tokenizer is: since it reads the data stage's label
    # (the language filter's) instead of detecting again, the sample can differ, so a workdir's older tokenizer
    # is retrained rather than reused under an ID a fresh run would fill differently.
    return [cfg.identity("tokenizer"), {"sample_language": "data stage label"}]


def _shards_identity(cfg: Config, cache: DigestCache) -> list:
    # How a document is wrapped is part of what the shards are: hashing it makes a workdir tokenized under an
    # older convention (BOS-only documents) re-encode, instead of training on shards that never show an EOS;
    # and so does one encoded when a marker written in a text could still become a special ID.
    from .tokenizer.bpe import DOCUMENT_WRAP, SPECIALS_IN_TEXT

    return [cfg.identity("shards"), {"document": DOCUMENT_WRAP, "specials_in_text": SPECIALS_IN_TEXT}]


def _train_identity(cfg: Config, cache: DigestCache) -> list:
    # The sample prompts are fixed for the whole run (its sample diffs compare them step to step).
    return [cfg.identity("model"), cfg.identity("train"), cfg.eval.prompts]


def _train_outputs(directory: Path, result: dict) -> list[Path]:
    """What later stages read of a training: its final and best checkpoints, summary and tokenizer. Its logs and
    earlier checkpoints are not: the eval watcher appends to the logs after the manifest, and a user may delete
    earlier checkpoints to free space."""
    # by name, under this directory: the result's absolute paths are stale once a workdir is moved
    checkpoints = {directory / "checkpoints" / Path(result[k]).name for k in ("checkpoint", "best_checkpoint")
                   if result.get(k)}
    return [directory / "summary.json", directory / "tokenizer.json",
            *(f for c in checkpoints if c.is_dir() for f in c.iterdir() if f.is_file())]


def _check_data_config(cfg: Config, where: str) -> None:
    from .data.config_checks import check_data_config

    check_data_config(cfg, where)


@dataclass(frozen=True)
class Stage:
    name: str
    package: str  # where its code lives
    inputs: tuple[str, ...]  # stages whose artifacts it reads; their IDs are part of its ID
    sections: tuple[str, ...]  # config sections it reads; its ID hashes them, less their operational() keys
    command: tuple[str, ...]  # the words of the command that runs it alone: ("data", "prepare")
    help: str
    run: Callable[..., Any]  # run(cfg, art, force=False, **options)
    identity: Callable[[Config, DigestCache], list] | None = None  # what its ID hashes, when more than its sections
    check: Callable[[Config, str], None] | None = None  # config checks that need the stage's own tables
    artifact: bool = True  # False: a gate before the next stage, which writes no artifact and is never skipped
    lineage: tuple[str, ...] = ()  # JSON files of its artifact copied into the workdir's lineage.json
    outputs: Callable[[Path, dict], Any] | None = None  # the files later stages read (pipeline.Artifact.outputs)

    @property
    def cli(self) -> str:
        return "scratchlm " + " ".join(self.command)


STAGES = (
    Stage("data", "data", (), ("data", "decontaminate"), ("data", "prepare"),
          "read, clean, dedup and split the sources", stage_data, _data_identity, _check_data_config),
    Stage("decontaminate", "decontaminate", ("data",), ("decontaminate",), ("data", "decontaminate"),
          "remove eval-set text ([[eval.sets]] and validation) from training", stage_decontaminate,
          _decontaminate_identity, lineage=("eval_sets.json",)),
    Stage("tokenizer", "tokenizer", ("decontaminate",), ("tokenizer",), ("tokenizer", "train"),
          "train the BPE tokenizer", stage_tokenizer, _tokenizer_identity),
    Stage("shards", "tokenizer", ("decontaminate", "tokenizer"), ("shards",), ("tokenizer", "encode"),
          "tokenize the corpus into shards", stage_shards, _shards_identity),
    Stage("plan", "plan", ("shards", "tokenizer"), ("model", "train", "plan"), ("plan",),
          "measure compute, memory and time on this hardware; verdicts before training", stage_plan,
          artifact=False),
    Stage("train", "train", ("shards", "tokenizer"), ("model", "train"), ("train",), "pretrain the model",
          stage_train, _train_identity, outputs=_train_outputs),
    Stage("eval", "eval", ("train", "shards"), ("eval",), ("eval",),
          "evaluate the final checkpoint per domain; or a checkpoint with the full suite (--checkpoint), write a "
          "human rating sheet (human), score one (rate)", stage_eval),
    Stage("report", "report", ("eval", "train", "shards", "tokenizer", "data"), (), ("report",),
          "write report.md, report.json and dashboard.html; or, given RUN_DIR, only the dashboard of that training "
          "directory or workdir", stage_report),
)
STAGE = {s.name: s for s in STAGES}
ARTIFACT_STAGES = tuple(s for s in STAGES if s.artifact)


def load_config(path: str | Path) -> Config:
    """The config file, parsed and checked."""
    from .config import parse_config

    cfg = parse_config(path)
    check_config(cfg, str(path))
    return cfg


def check_config(cfg: Config, where: str) -> None:
    """Ranges and keys that contradict each other (config.validate), then each stage's own checks."""
    from .config import validate
    from .plan.arithmetic import check_model_size

    validate(cfg, where)
    check_model_size(cfg.model, cfg.tokenizer.vocab_size, where)  # before anything builds a model of absurd size
    for stage in STAGES:
        if stage.check is not None:
            stage.check(cfg, where)


def plan_artifacts(cfg: Config) -> dict[str, Artifact]:
    """Every artifact of this config, in pipeline order: its ID (inputs' IDs and own config hashed) and folder."""
    cache = DigestCache(cfg.workdir / ".digests.json")
    ids: dict[str, str] = {}
    art: dict[str, Artifact] = {}
    for stage in ARTIFACT_STAGES:
        inputs = {d: ids[d] for d in stage.inputs}
        parts = stage.identity(cfg, cache) if stage.identity else [cfg.identity(s) for s in stage.sections]
        ids[stage.name] = content_id(stage.name, inputs, *parts)
        art[stage.name] = Artifact(stage.name, ids[stage.name], cfg.workdir / stage.name / ids[stage.name], inputs,
                                   stage.cli, stage.lineage, stage.outputs)
    cache.save()
    return art


def run_all(cfg: Config, resume: bool = False, force: bool = False, resume_from: Path | None = None,
            budget_hours: float | None = None, price_per_hour: float | None = None,
            eval_device: str | None = None, remeasure: bool = False) -> dict:
    """Every stage in order, each skipped when up to date. force: continue past a plan in error, or a
    contamination error (an eval set mostly copied in training); the training records which (forced_past), and
    the end of the run says so. budget_hours / price_per_hour: see stage_plan.
    eval_device: evaluate during training with the eval watcher on that device (train.eval becomes external, an
    operational key: the training's ID stays)."""
    if eval_device is not None:
        cfg.train.eval = "external"
    art = plan_artifacts(cfg)
    options = {"decontaminate": {"allow_contaminated": force},
               "plan": {"force": force, "budget_hours": budget_hours, "price_per_hour": price_per_hour,
                        "remeasure": remeasure},
               "train": {"resume": resume, "resume_from": resume_from}}
    results: dict[str, Any] = {}
    for stage in STAGES:
        if stage.name == "train":
            options["train"]["forced"] = forced_past(cfg, results) if force else []
        if stage.name == "train" and eval_device is not None and not art["train"].done:
            _train_beside_watcher(cfg, art, eval_device, options["train"])
            continue
        results[stage.name] = stage.run(cfg, art, **options.get(stage.name, {}))
    from .eval.base_quality import judge_base  # the verdict `scratchlm sft` will apply to this base
    from .forced import forced_line

    result = results["report"]
    log(f"report: {result['report']} ({judge_base(result)['message']})")
    forced = art["train"].manifest()["result"].get("forced")  # also when this run skipped the forced training
    if forced:
        log(f"train: {forced_line(forced)}")
    for line in result.get("expected_in_demo", []):
        log(f"expected in this demo: {line}")
    return result


def forced_past(cfg: Config, results: dict[str, Any]) -> list[dict]:
    """The error verdicts of the gates before training that --force let this run past: eval sets copied in the
    training data (decontaminate), and the plan's errors (corpus size, epochs, batch, memory, time; less the
    corpus-size error a demo trains through anyway, which is no forcing)."""
    from .decontaminate.stage import contamination_errors
    from .plan.demo import blocking_errors
    from .forced import forced_record

    plan = results.get("plan")
    if plan is None:  # the training is already done (stage_plan plans none): nothing goes into it
        return []
    return forced_record({"decontaminate": contamination_errors(results["decontaminate"]),
                          "plan": blocking_errors(plan["verdicts"], cfg.run.demo)})


def _train_beside_watcher(cfg: Config, art: dict[str, Artifact], eval_device: str, options: dict) -> None:
    """`run --eval-device`: the watcher evaluates the training's checkpoints for the length of the training."""
    from .eval.watch import start_watcher, stop_watcher

    watcher = start_watcher(cfg, eval_device)
    finished = False
    try:
        STAGE["train"].run(cfg, art, **options)
        finished = True
    finally:
        stop_watcher(watcher, finished)


def stage_training_inputs(cfg: Config, art: dict[str, Artifact], allow_contaminated: bool = False) -> None:
    """Every stage training reads from: data, decontaminate, tokenizer, shards."""
    for stage in STAGES[:STAGES.index(STAGE["shards"]) + 1]:
        stage.run(cfg, art, **({"allow_contaminated": allow_contaminated} if stage.name == "decontaminate" else {}))
