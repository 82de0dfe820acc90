"""Each pipeline stage as one call: resolve its inputs, run it (or skip it), return its result."""
from __future__ import annotations

from pathlib import Path

from .config import Config
from .pipeline import Artifact, plan_artifacts, require, run_stage
from .progress import log


def stage_data(cfg: Config, art: dict[str, Artifact], force: bool = False) -> dict:
    from .data.prepare import prepare_data

    return run_stage(cfg, art, "data", lambda out: prepare_data(cfg, out), force)


def stage_tokenizer(cfg: Config, art: dict[str, Artifact], force: bool = False) -> dict:
    from .tokenizer.stage import train_tokenizer

    return run_stage(cfg, art, "tokenizer", lambda out: train_tokenizer(cfg, art["data"].dir, out), force)


def stage_shards(cfg: Config, art: dict[str, Artifact], force: bool = False) -> dict:
    from .tokenizer.stage import tokenize_corpus

    return run_stage(cfg, art, "shards",
                     lambda out: tokenize_corpus(cfg, art["data"].dir, art["tokenizer"].dir, out), force)


def stage_train(cfg: Config, art: dict[str, Artifact], resume: bool = False, force: bool = False) -> dict:
    from .eval.samples import default_prompts
    from .train.loop import train_model

    prompts = cfg.eval.prompts or default_prompts(require(art, "data").dir)
    ids = {s: a.id for s, a in art.items() if s in ("data", "tokenizer", "shards", "train")}
    return run_stage(cfg, art, "train",
                     lambda out: train_model(cfg, art["shards"].dir, art["tokenizer"].dir, out, ids, prompts,
                                             resume=resume), force, keep_partial=resume)


def stage_eval(cfg: Config, art: dict[str, Artifact], force: bool = False) -> dict:
    from .eval.stage import evaluate_checkpoint

    checkpoint = Path(require(art, "train").manifest()["result"]["checkpoint"])
    return run_stage(cfg, art, "eval", lambda out: evaluate_checkpoint(cfg, checkpoint, art["shards"].dir, out),
                     force)


def stage_report(cfg: Config, art: dict[str, Artifact], force: bool = False) -> dict:
    from .report.build import build_report

    dirs = {s: art[s].dir for s in ("data", "tokenizer", "shards", "train", "eval")}
    ids = {s: a.id for s, a in art.items() if s != "report"}
    return run_stage(cfg, art, "report", lambda out: build_report(cfg.workdir, dirs, ids, out), force)


def run_all(cfg: Config, resume: bool = False) -> dict:
    art = plan_artifacts(cfg)
    stage_data(cfg, art)
    stage_tokenizer(cfg, art)
    stage_shards(cfg, art)
    stage_train(cfg, art, resume=resume)
    stage_eval(cfg, art)
    result = stage_report(cfg, art)
    log(f"report: {result['report']} (validation loss {result['val_loss']:.3f} vs unigram baseline "
        f"{result['unigram_loss']:.3f} nats/token)")
    return result
