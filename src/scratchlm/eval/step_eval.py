"""One evaluation during training: the same whether the trainer runs it between steps (train.eval = "inline") or
the eval watcher runs it on the step's checkpoint (train.eval = "external"), so that both give the same rows.

Per-domain validation metrics on the fixed validation windows, the fixed-prompt samples, and what is kept of them
beside the run: samples/step_N.json and best.json.
"""
from __future__ import annotations

from pathlib import Path

from ..config import Config
from ..ids import write_json
from ..model.best import mark_best
from .loss import evaluate_domains, mean_over_domains
from .samples import generate_samples


def evaluate_step(model, tokenizer, shards_dir: Path, cfg: Config, prompts: list[str], device, precision: str,
                  step: int) -> tuple[dict, list[dict]]:
    """The evaluation row of `step` (step, eval per domain, val_loss) and the samples."""
    evaluation = evaluate_domains(model, shards_dir, cfg.train.batch_size, cfg.eval.max_batches, device, precision)
    samples = generate_samples(model, tokenizer, prompts, cfg.eval, seed=cfg.train.seed)
    return {"step": step, "eval": evaluation, "val_loss": mean_over_domains(evaluation)}, samples


def keep_evaluation(train_dir: Path, step: int, val_loss: float, samples: list[dict]) -> None:
    mark_best(train_dir / "checkpoints", step, val_loss)
    (train_dir / "samples").mkdir(exist_ok=True)
    write_json(train_dir / "samples" / f"step_{step:07d}.json", samples)
