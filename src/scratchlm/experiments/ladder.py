"""`scratchlm ladder`: train smaller models of the target config's family at a fixed tokens per parameter, fit
their validation loss against training compute, and predict the target's loss from the curve; with a budget, the
compute-optimal size for it. Everything lands in <workdir>/experiments/ladder-<id>/: ladder.json, ladder.md and
ladder.png.

Each rung is an ordinary training of the pipeline (experiments.variants): the target config with its shape and
step counts changed, so data, tokenizer and shards are shared, and a ladder run again skips the rungs it has.
"""
from __future__ import annotations

import argparse
import math
import time
from pathlib import Path

from ..atomic import atomic_write_text
from ..config import Config
from ..errors import UserError
from ..ids import content_id, write_json
from ..plan.arithmetic import flops_per_token, tokens_needed
from ..plan.verdicts import worst
from ..progress import duration, log
from .fit import Fit, fit_loss_curve
from .ladder_report import ladder_verdicts, plot_ladder, render_markdown, render_text
from .ladder_rungs import (
    WARMUP_MAX_SHARE,
    Rung,
    compute_at,
    compute_optimal,
    make_rung,
    parse_sizes,
    shape_name,
    shape_overrides,
)
from .variants import train_and_evaluate, variant_config

SHORT_RUNG_STEPS = 100  # fewer optimizer steps than this: a rung's loss is still mostly the start of training


def ladder_command(args: argparse.Namespace) -> int:
    from ..plan.corpus import corpus_tokens
    from ..plan.make import vocab_size
    from ..stages import plan_artifacts, stage_training_inputs
    from ..train.batch import effective_batch, ranks_launched

    r = args.tokens_per_param
    if not (r > 0 and math.isfinite(r)):
        raise UserError(f"--tokens-per-param must be a number > 0, got {r:g}")
    hours = args.budget_hours  # checked before the rungs train, used after
    if hours is not None and not (hours > 0 and math.isfinite(hours)):
        raise UserError(f"--budget-hours must be a number > 0, got {hours:g}")
    started = time.perf_counter()
    cfg = variant_config(Path(args.config))
    art = plan_artifacts(cfg)
    stage_training_inputs(cfg, art)  # the vocabulary and the corpus size are read from the built shards
    vocab = vocab_size(cfg, art)[0]
    tokens_per_step = effective_batch(cfg, ranks_launched()).tokens
    rungs = [make_rung(m, vocab, r, tokens_per_step, cfg.train) for m in parse_sizes(args.sizes, cfg.model)]
    configs = [variant_config(cfg.path, rung.overrides(cfg.model)) for rung in rungs]
    ladder_id = content_id("ladder", art["train"].id, [plan_artifacts(c)["train"].id for c in configs])
    target = target_point(cfg, vocab, r, tokens_per_step, art["train"].id)
    log(f"ladder {ladder_id}: {len(rungs)} rungs of the {target['shape']} family at {r:g} tokens per parameter, "
        f"{sum(g.compute for g in rungs):.3g} FLOPs in all ({tokens_per_step:,} tokens per step)")

    results = []
    for i, (rung, rung_cfg) in enumerate(zip(rungs, configs), 1):
        log(f"ladder: rung {i}/{len(rungs)} {rung.name}: {rung.params:,} parameters, {rung.steps} steps "
            f"({rung.tokens:,} tokens, warmup {rung.warmup_steps})")
        t0 = time.perf_counter()
        run = train_and_evaluate(rung_cfg)
        loss = run.eval.get("val_loss")
        if loss is None or not math.isfinite(loss):
            raise UserError(f"ladder: rung {rung.name} ({run.train_dir}) has no finite validation loss ({loss}): "
                            "nothing to fit; see its metrics.jsonl")
        results.append(rung_record(rung, run, time.perf_counter() - t0))
        log(f"ladder: rung {rung.name}: validation loss {loss:.4f}")

    fit = fit_loss_curve([g.compute for g in rungs], [x["val_loss"] for x in results])
    for x, fitted in zip(results, fit.predict([g.compute for g in rungs])[0]):
        x["fit_loss"] = float(fitted)
    verdicts = ladder_verdicts(fit, target["compute"], max(g.compute for g in rungs), r, results)
    corpus = corpus_tokens(cfg, art)["tokens"]
    out = Path(cfg.workdir) / "experiments" / f"ladder-{ladder_id}"
    result = {
        "id": ladder_id, "config": str(cfg.path), "dir": str(out), "tokens_per_param": r,
        "tokens_per_step": tokens_per_step, "vocab_size": vocab, "target": target, "rungs": results,
        "warmup_rule": (f"each rung warms up for the target's share of its steps (train.warmup_steps / "
                        f"train.max_steps = {cfg.train.warmup_steps}/{cfg.train.max_steps}), at most "
                        f"{WARMUP_MAX_SHARE:.0%}"),
        "fit": fit.as_dict(), "prediction": predict(fit, target["compute"]),
        "verdicts": [v.as_dict() for v in verdicts], "level": worst(v.level for v in verdicts),
        "budget": budget_section(cfg, art, args.budget_hours, args.probe_seconds, r, vocab, fit),
        "notes": caveats(cfg, rungs, target, corpus),
    }
    result["seconds"] = time.perf_counter() - started
    out.mkdir(parents=True, exist_ok=True)
    plot_ladder(result, fit, out / "ladder.png")
    atomic_write_text(out / "ladder.md", render_markdown(result, "ladder.png"))
    write_json(out / "ladder.json", result)
    print(render_text(result))
    log(f"ladder: done in {duration(result['seconds'])}")
    return 1 if result["level"] == "error" else 0


def target_point(cfg: Config, vocab: int, r: float, tokens_per_step: int, train_id: str) -> dict:
    """The config's own model at r tokens per parameter: the ratio every rung trained at, so the one the curve
    describes. Its planned tokens are reported beside it."""
    m = cfg.model
    params, compute = compute_at(m, vocab, r)
    fpt = flops_per_token(m, vocab)["total"]
    tokens = tokens_needed(params, r)  # the tokens compute_at's C was counted on
    planned = tokens_per_step * cfg.train.max_steps
    if abs(planned / tokens - 1) <= 0.1:
        note = "the config's own plan (train.max_steps x tokens per step) is the same within 10%"
    else:
        note = (f"the config plans {planned:,} tokens ({planned / params:.3g} per parameter): the prediction is "
                f"for {r:g} per parameter, the ratio the rungs trained at; a run at another ratio is off this curve")
    return {"shape": shape_name(m), "n_layer": m.n_layer, "d_model": m.d_model, "n_head": m.n_head,
            "n_kv_head": m.n_kv_head, "params": params, "flops_per_token": fpt, "tokens": tokens,
            "compute": compute, "planned_tokens": planned, "planned_tokens_per_param": planned / params,
            "tokens_note": note, "train_id": train_id}


def rung_record(rung: Rung, run, seconds: float) -> dict:
    m = rung.model
    return {"shape": rung.name, "n_layer": m.n_layer, "d_model": m.d_model, "n_head": m.n_head,
            "n_kv_head": m.n_kv_head, "params": rung.params, "flops_per_token": rung.flops_per_token,
            "steps": rung.steps, "warmup_steps": rung.warmup_steps, "tokens": rung.tokens, "tokens_per_param": rung.tokens_per_param,
            "compute": rung.compute, "val_loss": run.eval["val_loss"], "train_id": run.ids["train"], "train_dir": str(run.train_dir),
            "seconds": seconds}


def predict(fit: Fit, compute: float) -> dict | None:
    """The fit's loss and band at this compute; None when the loss does not fall with compute (no prediction)."""
    if not fit.predicts:
        return None
    loss, low, high = (float(v[0]) for v in fit.predict([compute]))
    return {"loss": loss, "low": low, "high": high, "compute": compute}


def _probe(cfg: Config, seconds: float) -> dict | None:
    """The plan's probe of this config's training step on this machine (None where it could not run)."""
    from ..plan.make import make_plan
    from ..stages import plan_artifacts

    return make_plan(cfg, plan_artifacts(cfg), probe_seconds=seconds, save=False)["probe"]


def budget_section(cfg: Config, art: dict, hours_flag: float | None, probe_seconds: float, r: float, vocab: int,
                   fit: Fit) -> dict:
    """The compute-optimal size for the budget: hours x the FLOP/s measured on the target's training step, spent
    at r tokens per parameter. The size comes from r alone; only its predicted loss comes from the fit."""
    from ..plan.budget import resolve_budget

    if hours_flag is not None:  # not resolve_budget's flag path: a ladder keeps no plan to store it in
        hours, source = hours_flag, "--budget-hours"
    else:
        budget = resolve_budget(cfg, art["train"].id)
        hours, source = budget.hours, budget.source
    if hours is None:
        return {"skipped": "no budget (pass --budget-hours, or set budget_hours under [plan])"}
    if probe_seconds <= 0:
        return {"skipped": "--probe-seconds 0: the training step was not timed, so the budget has no FLOPs"}
    log(f"ladder: timing the target's training step for the {hours:g} h budget")
    probe = _probe(cfg, probe_seconds)
    if probe is None:
        return {"skipped": "the target's training step could not be timed on this machine (no room for it, or "
                           "the device is not this one)"}
    flops_per_s = probe["achieved_flops"]
    opt = compute_optimal(cfg.model, vocab, r, flops_per_s * hours * 3600)
    member = opt.pop("model")
    is_target = shape_overrides(member, cfg.model) == shape_overrides(cfg.model, cfg.model)
    if is_target:
        member_probe = probe
    else:
        log(f"ladder: timing the training step of {shape_name(member)}, the budget's compute-optimal size")
        member_probe = _probe(variant_config(cfg.path, shape_overrides(member, cfg.model)), probe_seconds)
    tokens_per_s = member_probe["tokens_per_s"] if member_probe else None
    return {**opt, "hours": hours, "hours_from": source, "flops_per_s": flops_per_s,
            "target_tokens_per_s": probe["tokens_per_s"], "is_target": is_target, "shape": shape_name(member),
            "n_layer": member.n_layer,
            "d_model": member.d_model, "n_head": member.n_head, "n_kv_head": member.n_kv_head,
            "tokens_per_s": tokens_per_s,
            "member_flops_per_s": tokens_per_s * flops_per_token(member, vocab)["total"] if tokens_per_s else None,
            "hours_needed": opt["tokens"] / tokens_per_s / 3600 if tokens_per_s else None,
            "prediction": predict(fit, opt["compute"])}


def caveats(cfg: Config, rungs: list[Rung], target: dict, corpus_tokens: int) -> list[str]:
    """What the prediction assumes, said with this ladder's numbers."""
    notes = [(f"every rung trains with the target's learning rate ({cfg.train.learning_rate:g}) and batch: "
              "smaller models usually want a higher rate, so the small rungs may sit above the loss they could reach")]
    short = [g.name for g in rungs if g.steps < SHORT_RUNG_STEPS]
    if short:
        notes.append(f"rung(s) {', '.join(short)} train fewer than {SHORT_RUNG_STEPS} steps: their loss is still "
                     "mostly the start of training, so the slope mixes model size with training length")
    epochs = [g.tokens / corpus_tokens for g in rungs] if corpus_tokens else []
    if epochs and max(epochs + [target["tokens"] / corpus_tokens]) > 1:
        notes.append(f"the corpus has {corpus_tokens:,} training tokens: the rungs read it "
                     f"{min(epochs):.2g}-{max(epochs):.2g} times and the target would read it "
                     f"{target['tokens'] / corpus_tokens:.2g} times; repeated data lowers what more compute buys")
    return notes
