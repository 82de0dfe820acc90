"""`scratchlm sft -c F --data pairs.jsonl`: supervised fine-tuning of an evaluated base checkpoint.

Refuses an unevaluated base, or one barely better than the unigram baseline (unless --force; base_check.py).
Runs the template-leak check first, and scans the conversations against the evaluation data (overlap.py).
Holds conversations out (split.py), measures their loss before fine-tuning and every sft.eval_every steps, and
after the last step has the model answer held-out and training prompts (answers.py); verdicts.py judges it all.
Output: `<workdir>/sft/<id>/checkpoints/step_*` (loadable like any checkpoint), metrics.jsonl, summary.json,
report.md and loss.png.
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
from .answers import evaluate_answers
from .base_check import check_base
from .data import encode_conversations, pack_rows
from .heldout_loss import heldout_loss
from .leak import describe, scan_for_markers
from .overlap import scan_sft_overlap
from .report import log_verdicts, write_sft_report
from .split import split_conversations
from .verdicts import epochs_verdict, sft_verdicts


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
    base_quality, forced = check_base(checkpoint, evaluation, force)
    data_dir = require(art, "data").dir
    leak = scan_for_markers(data_dir)
    log(describe(leak))
    split = split_conversations(cfg, Path(data_path))
    overlap = scan_sft_overlap(cfg, data_dir, split.train, split.heldout, train_lines=split.train_lines,
                               heldout_lines=split.heldout_lines)
    log(f"sft: overlap with the evaluation data: {overlap['verdict']['message']}")

    device = pick_device(cfg.train.device)
    precision = pick_precision(cfg.train.precision, device)
    model, tokenizer, meta = load_model(checkpoint, device)
    row_len, pad = model.cfg.seq_len + 1, tokenizer.token_to_id(PAD)
    ids, mask, dropped = pack_rows(encode_conversations(tokenizer, split.train), row_len, pad, s.pack)
    held = (pack_rows(encode_conversations(tokenizer, split.heldout), row_len, pad, s.pack,
                      what=f"held-out conversation ({split.how})") if split.heldout else None)
    run_id = content_id("sft", checkpoint_id(checkpoint), file_digest(Path(data_path)),
                        file_digest(split.given) if split.given else None,
                        cfg.section("sft"))
    out = cfg.workdir / "sft" / run_id
    out.mkdir(parents=True, exist_ok=True)
    lr = sft_learning_rate(cfg)
    epochs = s.max_steps * s.batch_size / len(ids)
    log(f"sft: {len(split.train)} conversations ({dropped} longer than the context, dropped) in {len(ids)} rows, "
        f"{int(mask.sum()):,} trained tokens; held out: {split.how}"
        + (f" ({held[2]} longer than the context, dropped)" if held and held[2] else "")
        + f"; lr {lr:g}, {s.max_steps} steps -> {out}")
    log_verdicts([epochs_verdict(epochs, s.max_epochs)])  # known before the first step: say it now

    torch.manual_seed(s.seed)
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=s.weight_decay, betas=(0.9, 0.95))
    rng = torch.Generator().manual_seed(s.seed)
    order = torch.randperm(len(ids), generator=rng)
    cursor = 0
    model.train()
    losses: list[float] = []
    points: list[dict] = []

    def evaluate(step: int, metrics) -> None:
        """The held-out loss now, beside the mean training loss since the last evaluation."""
        if held is None:
            return
        since = losses[points[-1]["step"]:] if points else []
        point = {"step": step, "heldout_loss": heldout_loss(model, held[0], held[1], device, precision),
                 "train_loss": sum(since) / len(since) if since else None}
        points.append(point)
        metrics.write(json.dumps(point) + "\n")
        log(f"sft: step {step}: held-out loss {point['heldout_loss']:.4f}"
            + (f", training loss {point['train_loss']:.4f}" if point["train_loss"] is not None else ""))

    with open(out / "metrics.jsonl", "w", encoding="utf-8") as metrics:
        evaluate(0, metrics)  # the base's own held-out loss: what fine-tuning is measured against
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
            if (step + 1) % s.eval_every == 0 or step + 1 == s.max_steps:
                evaluate(step + 1, metrics)
    model.eval()
    answers = None
    if s.answers and split.heldout:
        count = min(s.answers, len(split.heldout))
        with bar(total=count * 2 + min(count, len(split.train)), desc="sft answers", unit="answer") as progress:
            answers = evaluate_answers(model, tokenizer, split.heldout, split.train, count, s.answer_max_new_tokens,
                                       s.seed, progress)
    verdicts = sft_verdicts(epochs, s.max_epochs, points, answers)
    log_verdicts(verdicts)

    sft_meta = {**meta, "base_checkpoint": str(checkpoint), "base_checkpoint_id": checkpoint_id(checkpoint),
                "base_evaluation": str(evaluation) if evaluation else None,
                "sft": {"config": cfg.section("sft"), "data": str(data_path), "learning_rate": lr,
                        "conversations": len(split.train), "heldout": split.how, "dropped_too_long": dropped,
                        "leak": leak["found"], **({"forced": forced} if forced else {})}}
    (out / "tokenizer.json").write_bytes((checkpoint / "tokenizer.json").read_bytes())
    final = save_checkpoint(out / "checkpoints", s.max_steps, model, optimizer, {}, sft_meta, keep_last=1,
                            files=(out / "tokenizer.json",))
    summary = {"checkpoint": str(final), "base_checkpoint": str(checkpoint), "steps": s.max_steps,
               "learning_rate": lr, "conversations": len(split.train), "rows": len(ids),
               "heldout": {"how": split.how, "conversations": len(split.heldout),
                           "dropped_too_long": held[2] if held else 0},
               "epochs": epochs, "dropped_too_long": dropped, "trained_tokens": int(mask.sum()),
               "first_loss": losses[0], "last_loss": sum(losses[-5:]) / len(losses[-5:]),
               "heldout_loss": points, "answers": answers, "verdicts": verdicts, "overlap": overlap,
               "leak_check": leak, "base_evaluated": evaluation is not None, "base_quality": base_quality,
               "created": time.strftime("%Y-%m-%dT%H:%M:%S"), **({"forced": forced} if forced else {})}
    write_json(out / "summary.json", summary)
    report = write_sft_report(out, summary, [{"step": i + 1, "loss": v} for i, v in enumerate(losses)])
    log(f"sft: loss {summary['first_loss']:.3f} -> {summary['last_loss']:.3f}; checkpoint {final}; report {report}")
    return summary
