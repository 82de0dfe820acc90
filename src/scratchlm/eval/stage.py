"""The evaluation stage: final-checkpoint metrics per domain against the unigram baseline, plus samples."""
from __future__ import annotations

from pathlib import Path

from ..config import Config
from ..ids import write_json
from .samples import generate_samples
from .scoring import score_checkpoint


def evaluate_checkpoint(cfg: Config, checkpoint: Path, shards_dir: Path, out: Path) -> dict:
    scored = score_checkpoint(cfg, checkpoint, shards_dir)
    samples = generate_samples(scored.model, scored.tokenizer, scored.prompts, cfg.eval, seed=cfg.train.seed)
    result = {"checkpoint": str(checkpoint), "step": scored.meta["step"], **scored.scores, "samples": samples}
    write_json(out / "eval.json", result)
    return result
