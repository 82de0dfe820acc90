"""`scratchlm eval -c F --checkpoint PATH`: the full evaluation of one checkpoint, stored next to it.

Perplexity / bits per byte / top-k per domain, diversity of generations, HumanEval for code models, and the
config's own tasks; then the checkpoint's report, which also shows the human ratings once a sheet is scored.
"""
from __future__ import annotations

import time
from pathlib import Path

from ..config import Config
from ..ids import write_json
from ..pipeline import plan_artifacts, require
from ..progress import log
from ..train.checkpoint import load_model
from ..train.device import pick_device, pick_precision
from .complete import complete_text
from .diversity import diversity_metrics
from .humaneval import run_humaneval
from .loss import evaluate_domains, mean_over_domains, unigram_baseline
from .report import write_checkpoint_report
from .store import EVAL_FILE, check_same_tokenizer, checkpoint_id, evals_dir
from .tasks import run_tasks


def wants_humaneval(cfg: Config) -> bool:
    if cfg.eval.humaneval == "auto":
        return any(s.domain == "code" for s in cfg.data.sources)
    return cfg.eval.humaneval == "on"


def sample_generations(model, tokenizer, prompts: list[str], cfg: Config) -> list[dict]:
    e = cfg.eval
    out = []
    for i, prompt in enumerate(prompts):
        for j in range(e.diversity_samples):
            text = complete_text(model, tokenizer, prompt, e.max_new_tokens, temperature=e.temperature,
                                 top_k=e.top_k, seed=cfg.train.seed + 1000 * i + j)
            out.append({"prompt": prompt, "completion": text})
    return out


def evaluate_suite(cfg: Config, checkpoint: Path) -> dict:
    checkpoint = Path(checkpoint).resolve()
    art = plan_artifacts(cfg)
    shards = require(art, "shards").dir
    check_same_tokenizer(checkpoint, require(art, "tokenizer").dir / "tokenizer.json")
    device = pick_device(cfg.train.device)
    precision = pick_precision(cfg.train.precision, device)
    model, tokenizer, meta = load_model(checkpoint, device)
    e = cfg.eval
    log(f"eval: checkpoint {checkpoint} (id {checkpoint_id(checkpoint)})")
    domains = evaluate_domains(model, shards, cfg.train.batch_size, e.max_batches, device, precision)
    baseline = unigram_baseline(shards, model.cfg.seq_len, cfg.train.batch_size * e.max_batches)
    for d, r in domains.items():
        r["unigram_loss"] = baseline.get(d)
    generations = sample_generations(model, tokenizer, e.prompts or meta.get("prompts", []), cfg)
    result = {"checkpoint": str(checkpoint), "checkpoint_id": checkpoint_id(checkpoint), "step": meta["step"],
              "date": time.strftime("%Y-%m-%dT%H:%M:%S"), "domains": domains,
              "val_loss": mean_over_domains(domains),
              "unigram_loss": sum(baseline.values()) / max(1, len(baseline)),
              "diversity": diversity_metrics([g["completion"] for g in generations]), "generations": generations,
              "humaneval": None, "tasks": run_tasks(model, tokenizer, cfg)}
    if wants_humaneval(cfg):
        result["humaneval"] = run_humaneval(
            model, tokenizer, problems=e.humaneval_problems, samples=e.humaneval_samples,
            max_new_tokens=e.humaneval_max_new_tokens, temperature=e.humaneval_temperature,
            timeout_s=e.sandbox_timeout_s, memory_mb=e.sandbox_memory_mb, seed=cfg.train.seed)
    out = evals_dir(checkpoint)
    out.mkdir(parents=True, exist_ok=True)
    write_json(out / EVAL_FILE, result)
    report = write_checkpoint_report(out)
    log(f"eval: results in {out / EVAL_FILE}, report {report}")
    return result
