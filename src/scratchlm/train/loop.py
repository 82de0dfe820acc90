"""The pretraining loop: batches -> forward/backward (grad accumulation) -> clip -> step -> log/eval/checkpoint.

Order of events at a step boundary is deliberate: the checkpoint is written *before* evaluation, so a crash
while evaluating or sampling never costs training progress.
"""
from __future__ import annotations

import contextlib
import json
import math
import os
import shutil
import time
from pathlib import Path

import torch

from ..config import Config
from ..errors import UserError
from ..eval.loss import evaluate_domains, mean_over_domains
from ..eval.samples import generate_samples
from ..ids import read_json, write_json
from ..model import GPT
from ..model.presets import describe_preset
from ..monitor import Monitor, NullMonitor  # MONITOR
from ..progress import bar, bars_on, duration, log
from ..tokenizer.bpe import load_tokenizer
from ..tokenizer.shards import check_tokenizer_matches
from .checkpoint import (best_checkpoint, list_checkpoints, load_model_weights, load_training_state, mark_best,
                         save_checkpoint, set_rng_state, verify_checkpoint)
from .device import autocast, pick_device, pick_precision, sync
from .distributed import (World, any_rank, barrier, close_world, full_state, init_world, load_optimizer_state,
                          mean_over_ranks, wrap_model)
from .loader import MixtureLoader, Prefetcher
from . import optim
from .schedule import lr_factor


class TrainingHalted(UserError):
    """The run stopped on purpose (non-finite loss); a diagnosis file says why."""


def build_optimizer(model: torch.nn.Module, cfg: Config, device: torch.device) -> torch.optim.Optimizer:
    """The optimizer named by `train.optimizer` (adamw | muon | muonh); switching is that one key."""
    t = cfg.train
    return optim.build_optimizer(model, t.optimizer, t.learning_rate, t.weight_decay, betas=(t.beta1, t.beta2),
                                 muon_lr=t.muon_lr, muon_momentum=t.muon_momentum, device_type=device.type)


def _set_lr(optimizer, factor: float) -> float:
    for g in optimizer.param_groups:
        g["lr"] = g["initial_lr"] * factor
    return optimizer.param_groups[0]["lr"]


def grad_accum_for(t, seq_len: int, world_size: int) -> int:
    """Micro-batches per optimizer step: `train.batch_tokens` when given, else `train.grad_accum`."""
    if not t.batch_tokens:
        return t.grad_accum
    per_micro = t.batch_size * seq_len * world_size
    if t.batch_tokens % per_micro:
        raise UserError(f"`train.batch_tokens` = {t.batch_tokens} is not a multiple of batch_size x seq_len x "
                        f"world size = {t.batch_size} x {seq_len} x {world_size} = {per_micro}; use a multiple "
                        f"of {per_micro} or change `train.batch_size`")
    return t.batch_tokens // per_micro


def train_model(cfg: Config, shards_dir: Path, tokenizer_dir: Path, out: Path, ids: dict,
                prompts: list[str], resume: bool = False) -> dict:
    t = cfg.train
    if t.threads:
        torch.set_num_threads(t.threads)
    world, device = init_world(pick_device(t.device))
    try:
        return _train(cfg, shards_dir, tokenizer_dir, out, ids, prompts, resume, world, device)
    finally:
        close_world(world)


def _train(cfg: Config, shards_dir: Path, tokenizer_dir: Path, out: Path, ids: dict, prompts: list[str],
           resume: bool, world: World, device: torch.device) -> dict:
    t, m = cfg.train, cfg.model
    precision = pick_precision(t.precision, device)
    grad_accum = grad_accum_for(t, m.seq_len, world.size)
    torch.manual_seed(t.seed)
    shards = read_json(shards_dir / "shards.json")
    tokenizer = load_tokenizer(tokenizer_dir / "tokenizer.json")
    if tokenizer.get_vocab_size() != shards["vocab_size"]:
        raise UserError(f"tokenizer {tokenizer_dir} has {tokenizer.get_vocab_size()} tokens but the shards in "
                        f"{shards_dir} were made with {shards['vocab_size']}; retokenize")
    check_tokenizer_matches(shards, tokenizer_dir / "tokenizer.json", shards_dir)
    raw = GPT(m, shards["vocab_size"]).to(device)  # the plain module: weights in, weights out, evaluation
    raw.activation_checkpointing = t.activation_checkpointing
    scaler = torch.amp.GradScaler(device.type, enabled=precision == "fp16")
    loader = MixtureLoader(shards_dir, m.seq_len, t.batch_size, t.seed, world.rank, world.size, grad_accum)
    if loader.skipped and world.main:
        log(f"train: sources {loader.skipped} have fewer than seq_len+1 tokens and are not sampled")
    ckpt_dir = out / "checkpoints"
    if world.main:
        out.mkdir(parents=True, exist_ok=True)
        shutil.copy(tokenizer_dir / "tokenizer.json", out / "tokenizer.json")
    meta = {"config": cfg.to_dict(), "seed": t.seed, "ids": ids, "vocab_size": shards["vocab_size"],
            "n_params": raw.num_params(), "precision": precision, "device": str(device), "prompts": prompts,
            "world_size": world.size, "grad_accum": grad_accum}

    step = 0
    state = None
    existing = list_checkpoints(ckpt_dir)
    if resume and existing:
        latest = existing[-1]
        verify_checkpoint(latest)
        load_model_weights(raw, latest)  # before wrapping: FSDP then shards the loaded weights
        state = load_training_state(latest)
        step = state["step"]
        if world.main:
            log(f"train: resumed from {latest} (step {step})")
    elif resume:
        raise UserError(f"--resume: no checkpoint to resume from in {ckpt_dir}")
    elif existing and world.main:
        log(f"train: found checkpoints up to {existing[-1].name} from an unfinished run; starting over "
            f"(pass --resume to continue it instead)")
        shutil.rmtree(ckpt_dir)
    barrier(world)
    model = wrap_model(raw, world, t.fsdp, device)
    optimizer = build_optimizer(raw, cfg, device)  # FSDP2 has already made raw's parameters DTensor shards
    if state is not None:
        load_optimizer_state(model, optimizer, state["optimizer"], t.fsdp)
        scaler.load_state_dict(state["scaler"])
        loader.load_state_dict(state["loader"])
        set_rng_state(state["rng"])
    if t.compile:
        model = torch.compile(model)
    if world.main:
        _truncate_metrics(out / "metrics.jsonl", step)
    monitor = (Monitor(cfg, out, raw, device, precision, loader, start_step=step,  # MONITOR
                       group_norms=not (t.fsdp and world.size > 1))
               if world.main else NullMonitor())

    tokens_per_step = t.batch_size * grad_accum * world.size * m.seq_len
    if world.main:
        shape = describe_preset(m)
        log(f"train: {raw.num_params():,} parameters{f' ({shape})' if shape else ''} on {device} ({precision}) "
            f"x {world.size} rank(s), {t.max_steps} steps x {tokens_per_step:,} tokens ({grad_accum} micro-batch(es) "
            f"per step)")
    metrics_file = open(out / "metrics.jsonl", "a", encoding="utf-8") if world.main else None

    def record(row: dict) -> None:
        if metrics_file is not None:
            metrics_file.write(json.dumps(row) + "\n")
            metrics_file.flush()
        monitor.publish(row)  # MONITOR: TensorBoard / W&B

    def checkpoint(at: int) -> Path | None:
        model_state, optimizer_state = full_state(model if t.fsdp else raw, optimizer, t.fsdp)
        if not world.main:
            return None
        return save_checkpoint(ckpt_dir, at, raw, optimizer,
                               {"scaler": scaler.state_dict(), "loader": loader.state_dict()},
                               meta, t.keep_last, files=(out / "tokenizer.json",),
                               model_state=model_state, optimizer_state=optimizer_state)

    batches = Prefetcher(loader, step, t.max_steps, t.prefetch)
    model.train()
    progress = bar(total=t.max_steps, initial=step, desc="train", unit="step", lines=False,
                   **({} if world.main else {"file": open(os.devnull, "w")}))
    plain = world.main and not bars_on()  # in a log: one line per log step instead of the bar, as nanoGPT does
    loop_start, loop_start_step = time.perf_counter(), step
    window_start, window_tokens = time.perf_counter(), 0
    last_checkpoint = time.monotonic()
    while step < t.max_steps:
        lr = _set_lr(optimizer, lr_factor(step, t.max_steps, t.warmup_steps, t.schedule, t.min_lr_ratio))
        loss_sum = 0.0
        for micro in range(grad_accum):
            with monitor.data_timer():  # MONITOR: time waiting for data
                x, y, _ = batches.get(step, micro)
            x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
            with no_sync(model, micro < grad_accum - 1):  # DDP all-reduces on the last micro-batch only
                with autocast(device, precision):
                    _, loss = model(x, y)
                scaler.scale(loss / grad_accum).backward()
            loss_sum += float(loss.detach())
        loss_value = mean_over_ranks(loss_sum / grad_accum, world, device)
        scaler.unscale_(optimizer)
        monitor.before_update(step + 1)  # MONITOR: per-group grad norms, weights before the update
        grad_norm = clip_gradients(model, t.grad_clip, t.fsdp)
        if not math.isfinite(loss_value) or not math.isfinite(grad_norm):
            _halt(out if world.main else None, step, loss_value, grad_norm,
                  monitor.diagnose(step, loss_value, grad_norm, lr))  # MONITOR
        scaler.step(optimizer)
        scaler.update()
        optimizer.zero_grad(set_to_none=True)
        step += 1
        loader.position = step
        window_tokens += tokens_per_step
        progress.update(1)
        if step % t.log_every == 0 or step == t.max_steps:
            sync(device)
            elapsed = time.perf_counter() - window_start
            row = {"step": step, "loss": loss_value, "lr": lr, "grad_norm": grad_norm,
                   "tokens_per_s": window_tokens / max(elapsed, 1e-9), "tokens": step * tokens_per_step,
                   "data_wait_s": batches.wait_seconds}
            monitor.on_log(step, row, elapsed)  # MONITOR: norms, MFU, data wait, memory, detectors
            record(row)
            progress.set_postfix(loss=f"{loss_value:.3f}", tok_s=f"{row['tokens_per_s']:.0f}")
            if plain:
                log(step_line(step, t.max_steps, row, (time.perf_counter() - loop_start) / (step - loop_start_step)))
            window_start, window_tokens = time.perf_counter(), 0
        due_by_time = bool(t.checkpoint_minutes) and any_rank(
            time.monotonic() - last_checkpoint >= 60 * t.checkpoint_minutes, world, device)
        if step % t.checkpoint_every == 0 or step == t.max_steps or due_by_time:
            checkpoint(step)
            last_checkpoint = time.monotonic()
        if step % t.eval_every == 0 or step == t.max_steps:
            evaluation = evaluate_domains(raw, shards_dir, t.batch_size, cfg.eval.max_batches, device, precision)
            samples = generate_samples(raw, tokenizer, prompts, cfg.eval, seed=t.seed)
            val_loss = mean_over_domains(evaluation)
            record(monitor.on_eval(step, {"step": step, "eval": evaluation,  # MONITOR: diffs, detectors
                                          "val_loss": val_loss}, samples))
            if world.main:
                mark_best(ckpt_dir, step, val_loss)
                (out / "samples").mkdir(exist_ok=True)
                write_json(out / "samples" / f"step_{step:07d}.json", samples)
            window_start = time.perf_counter()  # evaluation time is not training throughput
    batches.close()
    progress.close()
    barrier(world)
    summary = {"steps": step, "tokens": step * tokens_per_step, "n_params": raw.num_params(),
               "n_params_non_embedding": raw.num_params(embeddings=False), "device": str(device),
               "precision": precision, "world_size": world.size, "epochs_per_source": loader.epochs(),
               "monitor": monitor.close()["detectors"]}  # MONITOR: verdict per detector
    if metrics_file is not None:
        metrics_file.close()
        best = best_checkpoint(ckpt_dir)
        summary["checkpoint"] = str(list_checkpoints(ckpt_dir)[-1])
        summary["best_checkpoint"] = str(best) if best else None
        write_json(out / "summary.json", summary)
    return summary


def step_line(step: int, max_steps: int, row: dict, seconds_per_step: float) -> str:
    """The log line of a training step. The ETA counts evaluations and checkpoints: wall time per step so far."""
    return (f"train: step {step}/{max_steps} | loss {row['loss']:.4f} | lr {row['lr']:.2e} | "
            f"{row['tokens_per_s']:,.0f} tok/s | ETA {duration((max_steps - step) * seconds_per_step)}")


def no_sync(model: torch.nn.Module, skip: bool):
    """Skip DDP's gradient all-reduce on the micro-batches before the last (a no-op otherwise)."""
    return model.no_sync() if skip and hasattr(model, "no_sync") else contextlib.nullcontext()


def clip_gradients(model: torch.nn.Module, max_norm: float, fsdp: bool = False) -> float:
    if not fsdp:
        return float(torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm if max_norm > 0 else float("inf")))
    # FSDP2: gradients are DTensor shards. Reduce the norm to one replicated number first, then scale every shard
    # by the same coefficient, rather than leave torch to mix partial and replicated values.
    grads = [p.grad for p in model.parameters() if p.grad is not None]
    norm = float(torch.nn.utils.get_total_norm(grads).full_tensor())
    if max_norm > 0 and norm > max_norm:
        torch._foreach_mul_(grads, max_norm / (norm + 1e-6))
    return norm


def _truncate_metrics(path: Path, step: int) -> None:
    """Drop rows logged after the checkpoint we resume from: they will be produced again."""
    if not path.exists():
        return
    keep = [line for line in path.read_text(encoding="utf-8").splitlines()
            if line.strip() and json.loads(line)["step"] <= step] if step else []
    path.write_text("".join(line + "\n" for line in keep), encoding="utf-8")


def _halt(out: Path | None, step: int, loss: float, grad_norm: float, diagnosis: dict) -> None:
    """`out` is None on ranks other than 0: rank 0 writes the diagnosis, every rank stops."""
    if out is not None:
        write_json(out / "diagnosis.json", diagnosis)  # MONITOR: the diagnosis comes from monitor.diagnose
    where = f"see {out / 'diagnosis.json'}" if out is not None else "rank 0 wrote diagnosis.json"
    raise TrainingHalted(f"training stopped at step {step}: loss {loss}, grad norm {grad_norm} is not finite "
                         f"({len(diagnosis.get('nonfinite_grads', []))} parameters with non-finite gradients); "
                         f"{where}")
