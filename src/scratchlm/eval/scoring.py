"""The core both evaluations of a checkpoint share (the eval stage and `scratchlm eval`): the model loaded on
the configured device, its loss per domain on the validation shards against the unigram baseline, and the
prompts to sample from it."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..config import Config
from ..model.checkpoint import load_model
from ..model.device import pick_device, recorded_precision
from .loss import evaluate_domains, mean_over_domains, unigram_baseline


@dataclass
class ScoredCheckpoint:
    model: object
    tokenizer: object
    meta: dict
    scores: dict  # domains (loss, bits/byte, top-k, unigram_loss each), val_loss, unigram_loss: in this order
    prompts: list[str]  # the config's, else those the run sampled during training


def score_checkpoint(cfg: Config, checkpoint: Path, shards_dir: Path, device=None) -> ScoredCheckpoint:
    """device: where to evaluate (default: the config's training device)."""
    device = pick_device(cfg.train.device) if device is None else device
    model, tokenizer, meta = load_model(checkpoint, device)
    precision = recorded_precision(cfg.train.precision, meta, device)[0]  # the run's, where it trained
    batch, max_batches = cfg.train.batch_size, cfg.eval.max_batches
    domains = evaluate_domains(model, shards_dir, batch, max_batches, device, precision)
    baseline = unigram_baseline(shards_dir, model.cfg.seq_len, batch * max_batches)  # on the same windows
    for d, r in domains.items():
        r["unigram_loss"] = baseline.get(d)
    scores = {"domains": domains, "val_loss": mean_over_domains(domains),
              "unigram_loss": sum(baseline.values()) / max(1, len(baseline))}
    return ScoredCheckpoint(model, tokenizer, meta, scores, cfg.eval.prompts or meta.get("prompts", []))
