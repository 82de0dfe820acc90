"""Each pipeline stage as one call: resolve its inputs, run it (or skip it), return its result."""
from __future__ import annotations

import os
from pathlib import Path

from .config import Config
from .pipeline import Artifact, plan_artifacts, require, run_stage
from .progress import log


def stage_data(cfg: Config, art: dict[str, Artifact], force: bool = False) -> dict:
    from .data.prepare import prepare_data

    return run_stage(cfg, art, "data", lambda out: prepare_data(cfg, out), force)


def stage_decontaminate(cfg: Config, art: dict[str, Artifact], force: bool = False,
                         allow_contaminated: bool = False) -> dict:
    from .data.decontaminate import check_verdict, decontaminate_corpus

    result = run_stage(cfg, art, "decontaminate", lambda out: decontaminate_corpus(cfg, art["data"].dir, out), force)
    check_verdict(result, allow_contaminated)
    return result


def train_data_dir(art: dict[str, Artifact]) -> Path:
    """Where the stages after the guard read documents: the decontaminated split, laid out like data/<id>."""
    return art["decontaminate"].dir


def stage_tokenizer(cfg: Config, art: dict[str, Artifact], force: bool = False) -> dict:
    from .tokenizer.stage import train_tokenizer

    return run_stage(cfg, art, "tokenizer", lambda out: train_tokenizer(cfg, train_data_dir(art), out), force)


def stage_shards(cfg: Config, art: dict[str, Artifact], force: bool = False) -> dict:
    from .tokenizer.stage import tokenize_corpus

    return run_stage(cfg, art, "shards",
                     lambda out: tokenize_corpus(cfg, train_data_dir(art), art["tokenizer"].dir, out), force)


def stage_train(cfg: Config, art: dict[str, Artifact], resume: bool = False, force: bool = False,
                resume_from: Path | None = None) -> dict:
    """resume_from: one checkpoint directory of this run to resume from (implies resume)."""
    from .eval.samples import default_prompts
    from .train.loop import train_model

    prompts = cfg.eval.prompts or default_prompts(require(art, "data").dir)
    if not art["train"].done:
        from .data.mix import planned_mix
        from .ids import read_json

        for warning in planned_mix(cfg, read_json(require(art, "shards").dir / "shards.json")).warnings:
            log(f"train: mix warning: {warning}")
    ids = {s: a.id for s, a in art.items() if s in ("data", "tokenizer", "shards", "train")}

    def work(out: Path) -> dict:
        return train_model(cfg, art["shards"].dir, art["tokenizer"].dir, out, ids, prompts, resume=resume,
                           resume_from=resume_from)

    if int(os.environ.get("RANK", "0")) > 0:  # under torchrun rank 0 owns the artifact directory; others only train
        a = art["train"]
        return a.manifest()["result"] if a.done and not force else work(a.dir)
    return run_stage(cfg, art, "train", work, force, keep_partial=resume or resume_from is not None)


def stage_eval(cfg: Config, art: dict[str, Artifact], force: bool = False) -> dict:
    from .eval.stage import evaluate_checkpoint

    checkpoint = Path(require(art, "train").manifest()["result"]["checkpoint"])
    return run_stage(cfg, art, "eval", lambda out: evaluate_checkpoint(cfg, checkpoint, art["shards"].dir, out),
                     force)


def stage_report(cfg: Config, art: dict[str, Artifact], force: bool = False) -> dict:
    from .report.build import build_report

    dirs = {s: art[s].dir for s in ("data", "tokenizer", "shards", "train", "eval")}
    dirs["decontaminate"] = art["decontaminate"].dir
    ids = {s: a.id for s, a in art.items() if s != "report"}
    return run_stage(cfg, art, "report", lambda out: build_report(cfg.workdir, dirs, ids, out, cfg.run.demo), force)


def stage_plan(cfg: Config, art: dict[str, Artifact], force: bool = False, probe_seconds: float = 3.0) -> dict | None:
    """Plan the training about to start (not when it is already done); refuse a plan in error unless forced."""
    from .demo import accepted_notes, blocking_errors
    from .errors import UserError
    from .plan.make import make_plan
    from .plan.render import render_plan

    if art["train"].done:
        return None
    plan = make_plan(cfg, art=art, probe_seconds=probe_seconds)
    log(render_plan(plan))
    for note in accepted_notes(plan["verdicts"], cfg.run.demo):
        log(f"plan: {note}")
    errors = blocking_errors(plan["verdicts"], cfg.run.demo)
    if errors and not force:
        listed = "; ".join(f"{v['name']}: {v['summary']}" for v in errors)
        raise UserError(f"the plan ends in error ({listed}); fix the config or pass --force to train anyway")
    return plan


def stage_training_inputs(cfg: Config, art: dict[str, Artifact], allow_contaminated: bool = False) -> None:
    """Every stage training reads from: data, decontaminate, tokenizer, shards."""
    stage_data(cfg, art)
    stage_decontaminate(cfg, art, allow_contaminated=allow_contaminated)
    stage_tokenizer(cfg, art)
    stage_shards(cfg, art)


def run_all(cfg: Config, resume: bool = False, force: bool = False, resume_from: Path | None = None) -> dict:
    """force: continue past a plan in error, or a contamination error (an eval set mostly copied in training)."""
    art = plan_artifacts(cfg)
    stage_training_inputs(cfg, art, allow_contaminated=force)
    stage_plan(cfg, art, force)
    stage_train(cfg, art, resume=resume, resume_from=resume_from)
    stage_eval(cfg, art)
    result = stage_report(cfg, art)
    log(f"report: {result['report']} (validation loss {result['val_loss']:.3f} vs unigram baseline "
        f"{result['unigram_loss']:.3f} nats/token)")
    for line in result.get("expected_in_demo", []):
        log(f"expected in this demo: {line}")
    return result
