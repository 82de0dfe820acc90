"""`scratchlm sft -c F --data pairs.jsonl`: supervised fine-tuning of an evaluated base checkpoint.

Refuses an unevaluated base, or one barely better than the unigram baseline (unless --force; base_check.py).
Runs the template-leak check first and records its verdict.
Output: `<workdir>/sft/<id>/checkpoints/step_*` (loadable like any checkpoint), metrics.jsonl, summary.json.
"""
from __future__ import annotations

import json
import time
from pathlib import Path

import torch

from ..config import Config
from ..eval.store import check_same_tokenizer, checkpoint_id, find_evaluation
from ..ids import content_id, file_digest, write_json
from ..model.checkpoint import load_model
from ..model.device import autocast, pick_device, pick_precision
from ..pipeline import Artifact, require
from ..progress import bar, log
from ..tokenizer.bpe import PAD
from ..train.checkpoint import save_checkpoint
from ..train.schedule import lr_factor
from .base_check import check_base
from .data import encode_conversations, pack_rows, read_conversations
from .leak import describe, scan_for_markers


def sft_learning_rate(cfg: Config) -> float:
    return cfg.sft.learning_rate or cfg.train.learning_rate * cfg.sft.lr_scale


def run_sft(cfg: Config, art: dict[str, Artifact], data_path: Path, checkpoint: Path | None = None,
            force: bool = False) -> dict:
    s = cfg.sft
    if checkpoint is None:
        checkpoint = Path(require(art, "train").manifest()["result"]["checkpoint"])
    checkpoint = Path(checkpoint).resolve()
    if art["tokenizer"].done:
        check_same_tokenizer(checkpoint, art["tokenizer"].dir / "tokenizer.json")
    evaluation = find_evaluation(checkpoint, art["eval"].dir / "eval.json")
    base_quality = check_base(checkpoint, evaluation, force)
    leak = scan_for_markers(require(art, "data").dir)
    log(describe(leak))

    device = pick_device(cfg.train.device)
    precision = pick_precision(cfg.train.precision, device)
    model, tokenizer, meta = load_model(checkpoint, device)
    conversations = read_conversations(data_path)
    ids, mask, dropped = pack_rows(encode_conversations(tokenizer, conversations), model.cfg.seq_len + 1,
                                   tokenizer.token_to_id(PAD), s.pack)
    run_id = content_id("sft", checkpoint_id(checkpoint), file_digest(Path(data_path)), cfg.section("sft"))
    out = cfg.workdir / "sft" / run_id
    out.mkdir(parents=True, exist_ok=True)
    lr = sft_learning_rate(cfg)
    log(f"sft: {len(conversations)} conversations ({dropped} longer than the context, dropped) in {len(ids)} rows, "
        f"{int(mask.sum()):,} trained tokens, lr {lr:g}, {s.max_steps} steps -> {out}")

    torch.manual_seed(s.seed)
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=s.weight_decay, betas=(0.9, 0.95))
    rng = torch.Generator().manual_seed(s.seed)
    order = torch.randperm(len(ids), generator=rng)
    cursor = 0
    model.train()
    losses = []
    with open(out / "metrics.jsonl", "w", encoding="utf-8") as metrics:
        for step in bar(range(s.max_steps), desc="sft", unit="step"):
            if cursor + s.batch_size > len(order):
                order, cursor = torch.randperm(len(ids), generator=rng), 0
            pick = order[cursor:cursor + s.batch_size]
            cursor += s.batch_size
            rows, rmask = ids[pick].to(device), mask[pick].to(device)
            factor = lr_factor(step, s.max_steps, s.warmup_steps, "cosine", s.min_lr_ratio)
            for g in optimizer.param_groups:
                g["lr"] = lr * factor
            with autocast(device, precision):
                _, loss = model(rows[:, :-1], rows[:, 1:], loss_mask=rmask[:, 1:])
            loss.backward()
            if s.grad_clip > 0:
                torch.nn.utils.clip_grad_norm_(model.parameters(), s.grad_clip)
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            losses.append(float(loss.detach()))
            metrics.write(json.dumps({"step": step + 1, "loss": losses[-1], "lr": lr * factor}) + "\n")
    sft_meta = {**meta, "base_checkpoint": str(checkpoint), "base_checkpoint_id": checkpoint_id(checkpoint),
                "base_evaluation": str(evaluation) if evaluation else None,
                "sft": {"config": cfg.section("sft"), "data": str(data_path), "learning_rate": lr,
                        "conversations": len(conversations), "dropped_too_long": dropped, "leak": leak["found"]}}
    (out / "tokenizer.json").write_bytes((checkpoint / "tokenizer.json").read_bytes())
    final = save_checkpoint(out / "checkpoints", s.max_steps, model, optimizer, {}, sft_meta, keep_last=1,
                            files=(out / "tokenizer.json",))
    summary = {"checkpoint": str(final), "base_checkpoint": str(checkpoint), "steps": s.max_steps,
               "learning_rate": lr, "conversations": len(conversations), "rows": len(ids),
               "dropped_too_long": dropped, "trained_tokens": int(mask.sum()),
               "first_loss": losses[0], "last_loss": sum(losses[-5:]) / len(losses[-5:]), "leak_check": leak,
               "base_evaluated": evaluation is not None, "base_quality": base_quality,
               "created": time.strftime("%Y-%m-%dT%H:%M:%S")}
    write_json(out / "summary.json", summary)
    log(f"sft: loss {summary['first_loss']:.3f} -> {summary['last_loss']:.3f}; checkpoint {final}")
    return summary
