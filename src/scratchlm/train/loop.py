"""The pretraining loop: batches -> forward/backward (grad accumulation) -> clip -> step -> log/eval/checkpoint.

Order of events at a step boundary is deliberate: the checkpoint is written *before* evaluation, so a crash
while evaluating or sampling never costs training progress.
"""
from __future__ import annotations

import json
import math
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
from ..progress import bar, log
from ..tokenizer.bpe import load_tokenizer
from ..tokenizer.shards import check_tokenizer_matches
from .checkpoint import (list_checkpoints, load_model_weights, load_training_state, save_checkpoint,
                         set_rng_state, verify_checkpoint)
from .device import autocast, pick_device, pick_precision, sync
from .loader import MixtureLoader
from .schedule import lr_factor


class TrainingHalted(UserError):
    """The run stopped on purpose (non-finite loss); a diagnosis file says why."""


def build_optimizer(model: torch.nn.Module, cfg: Config, device: torch.device) -> torch.optim.Optimizer:
    t = cfg.train
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    groups = [{"params": decay, "weight_decay": t.weight_decay}, {"params": no_decay, "weight_decay": 0.0}]
    opt = torch.optim.AdamW(groups, lr=t.learning_rate, betas=(t.beta1, t.beta2),
                            fused=device.type == "cuda")
    for g in opt.param_groups:
        g["initial_lr"] = t.learning_rate
    return opt


def _set_lr(optimizer, factor: float) -> float:
    for g in optimizer.param_groups:
        g["lr"] = g["initial_lr"] * factor
    return optimizer.param_groups[0]["lr"]


def train_model(cfg: Config, shards_dir: Path, tokenizer_dir: Path, out: Path, ids: dict,
                prompts: list[str], resume: bool = False) -> dict:
    t, m = cfg.train, cfg.model
    if t.threads:
        torch.set_num_threads(t.threads)
    device = pick_device(t.device)
    precision = pick_precision(t.precision, device)
    torch.manual_seed(t.seed)
    shards = read_json(shards_dir / "shards.json")
    tokenizer = load_tokenizer(tokenizer_dir / "tokenizer.json")
    if tokenizer.get_vocab_size() != shards["vocab_size"]:
        raise UserError(f"tokenizer {tokenizer_dir} has {tokenizer.get_vocab_size()} tokens but the shards in "
                        f"{shards_dir} were made with {shards['vocab_size']}; retokenize")
    check_tokenizer_matches(shards, tokenizer_dir / "tokenizer.json", shards_dir)
    model = GPT(m, shards["vocab_size"]).to(device)
    optimizer = build_optimizer(model, cfg, device)
    scaler = torch.amp.GradScaler(device.type, enabled=precision == "fp16")
    loader = MixtureLoader(shards_dir, m.seq_len, t.batch_size, t.seed)
    if loader.skipped:
        log(f"train: sources {loader.skipped} have fewer than seq_len+1 tokens and are not sampled")
    ckpt_dir = out / "checkpoints"
    out.mkdir(parents=True, exist_ok=True)
    shutil.copy(tokenizer_dir / "tokenizer.json", out / "tokenizer.json")
    meta = {"config": cfg.to_dict(), "seed": t.seed, "ids": ids, "vocab_size": shards["vocab_size"],
            "n_params": model.num_params(), "precision": precision, "device": str(device), "prompts": prompts}

    step = 0
    existing = list_checkpoints(ckpt_dir)
    if resume and existing:
        latest = existing[-1]
        verify_checkpoint(latest)
        load_model_weights(model, latest)
        state = load_training_state(latest)
        optimizer.load_state_dict(state["optimizer"])
        scaler.load_state_dict(state["scaler"])
        loader.load_state_dict(state["loader"])
        set_rng_state(state["rng"])
        step = state["step"]
        log(f"train: resumed from {latest} (step {step})")
    elif resume:
        raise UserError(f"--resume: no checkpoint to resume from in {ckpt_dir}")
    elif existing:
        log(f"train: found checkpoints up to {existing[-1].name} from an unfinished run; starting over "
            f"(pass --resume to continue it instead)")
        shutil.rmtree(ckpt_dir)
    _truncate_metrics(out / "metrics.jsonl", step)

    log(f"train: {model.num_params():,} parameters on {device} ({precision}), "
        f"{t.max_steps} steps x {t.batch_size * t.grad_accum * m.seq_len:,} tokens")
    metrics_file = open(out / "metrics.jsonl", "a", encoding="utf-8")

    def record(row: dict) -> None:
        metrics_file.write(json.dumps(row) + "\n")
        metrics_file.flush()

    def checkpoint(at: int) -> Path:
        return save_checkpoint(ckpt_dir, at, model, optimizer,
                               {"scaler": scaler.state_dict(), "loader": loader.state_dict()},
                               meta, t.keep_last, files=(out / "tokenizer.json",))

    tokens_per_step = t.batch_size * t.grad_accum * m.seq_len
    model.train()
    progress = bar(total=t.max_steps, initial=step, desc="train", unit="step")
    window_start, window_tokens = time.perf_counter(), 0
    while step < t.max_steps:
        lr = _set_lr(optimizer, lr_factor(step, t.max_steps, t.warmup_steps, t.schedule, t.min_lr_ratio))
        loss_sum = 0.0
        for micro in range(t.grad_accum):
            x, y, _ = loader.batch(step, micro)
            x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
            with autocast(device, precision):
                _, loss = model(x, y)
            scaler.scale(loss / t.grad_accum).backward()
            loss_sum += float(loss.detach())
        loss_value = loss_sum / t.grad_accum
        scaler.unscale_(optimizer)
        grad_norm = float(torch.nn.utils.clip_grad_norm_(model.parameters(), t.grad_clip if t.grad_clip > 0
                                                         else float("inf")))
        if not math.isfinite(loss_value) or not math.isfinite(grad_norm):
            _halt(out, step, loss_value, grad_norm, model)
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
                   "tokens_per_s": window_tokens / max(elapsed, 1e-9), "tokens": step * tokens_per_step}
            record(row)
            progress.set_postfix(loss=f"{loss_value:.3f}", tok_s=f"{row['tokens_per_s']:.0f}")
            window_start, window_tokens = time.perf_counter(), 0
        if step % t.checkpoint_every == 0 or step == t.max_steps:
            checkpoint(step)
        if step % t.eval_every == 0 or step == t.max_steps:
            evaluation = evaluate_domains(model, shards_dir, t.batch_size, cfg.eval.max_batches, device, precision)
            samples = generate_samples(model, tokenizer, prompts, cfg.eval, seed=t.seed)
            record({"step": step, "eval": evaluation, "val_loss": mean_over_domains(evaluation)})
            (out / "samples").mkdir(exist_ok=True)
            write_json(out / "samples" / f"step_{step:07d}.json", samples)
            window_start = time.perf_counter()  # evaluation time is not training throughput
    progress.close()
    metrics_file.close()
    final = list_checkpoints(ckpt_dir)[-1]
    summary = {"steps": step, "tokens": step * tokens_per_step, "checkpoint": str(final),
               "n_params": model.num_params(), "n_params_non_embedding": model.num_params(embeddings=False),
               "device": str(device), "precision": precision, "epochs_per_source": loader.epochs()}
    write_json(out / "summary.json", summary)
    return summary


def _truncate_metrics(path: Path, step: int) -> None:
    """Drop rows logged after the checkpoint we resume from: they will be produced again."""
    if not path.exists():
        return
    keep = [line for line in path.read_text(encoding="utf-8").splitlines()
            if line.strip() and json.loads(line)["step"] <= step] if step else []
    path.write_text("".join(line + "\n" for line in keep), encoding="utf-8")


def _halt(out: Path, step: int, loss: float, grad_norm: float, model) -> None:
    bad = [n for n, p in model.named_parameters() if p.grad is not None and not torch.isfinite(p.grad).all()]
    write_json(out / "diagnosis.json", {"step": step, "loss": loss, "grad_norm": grad_norm,
                                        "nonfinite_grads": bad})
    raise TrainingHalted(f"training stopped at step {step}: loss {loss}, grad norm {grad_norm} is not finite; "
                         f"see {out / 'diagnosis.json'}")
