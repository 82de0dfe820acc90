"""The evaluation stage: final-checkpoint metrics per domain against the unigram baseline, plus samples."""
from __future__ import annotations

from pathlib import Path

from ..config import Config
from ..ids import write_json
from ..train.checkpoint import load_model
from ..train.device import pick_device, pick_precision
from .loss import evaluate_domains, mean_over_domains, unigram_baseline
from .samples import generate_samples


def evaluate_checkpoint(cfg: Config, checkpoint: Path, shards_dir: Path, out: Path) -> dict:
    device = pick_device(cfg.train.device)
    precision = pick_precision(cfg.train.precision, device)
    model, tokenizer, meta = load_model(checkpoint, device)
    e = cfg.eval
    domains = evaluate_domains(model, shards_dir, cfg.train.batch_size, e.max_batches, device, precision)
    baseline = unigram_baseline(shards_dir, model.cfg.seq_len, cfg.train.batch_size * e.max_batches)
    for d, r in domains.items():
        r["unigram_loss"] = baseline.get(d)
    samples = generate_samples(model, tokenizer, e.prompts or meta.get("prompts", []), e, seed=cfg.train.seed)
    result = {"checkpoint": str(checkpoint), "step": meta["step"], "domains": domains,
              "val_loss": mean_over_domains(domains),
              "unigram_loss": sum(baseline.values()) / max(1, len(baseline)), "samples": samples}
    write_json(out / "eval.json", result)
    return result
