"""`scratchlm eval -c F --checkpoint PATH`: the full evaluation of one checkpoint, stored next to it.

Perplexity / bits per byte / top-k per domain, diversity of generations, HumanEval for code models, and the
config's own tasks; then the checkpoint's report, which also shows the human ratings once a sheet is scored.
"""
from __future__ import annotations

import time
from pathlib import Path

from ..config import Config
from ..ids import write_json
from ..model.complete import complete_text
from ..pipeline import Artifact, require
from ..progress import log
from .diversity import diversity_metrics, verdict_lines
from .humaneval import run_humaneval
from .sandbox import Isolation, require_isolation
from .report import write_checkpoint_report
from .scoring import score_checkpoint
from .store import EVAL_FILE, check_same_tokenizer, checkpoint_id, evals_dir
from .tasks import run_tasks


def wants_humaneval(cfg: Config) -> bool:
    if cfg.eval.suite.humaneval == "auto":
        return any(s.domain == "code" for s in cfg.data.sources)
    return cfg.eval.suite.humaneval == "on"


def humaneval_isolation(cfg: Config) -> Isolation | None:
    """Where HumanEval will run model-written code (None: it does not run); refused in one line without a
    sandbox, unless the user asked for the unsafe path. Checked before the model is even loaded."""
    return require_isolation(cfg.eval.suite.unsafe_run_code_unsandboxed) if wants_humaneval(cfg) else None


def sample_generations(model, tokenizer, prompts: list[str], cfg: Config) -> list[dict]:
    e = cfg.eval
    out = []
    for i, prompt in enumerate(prompts):
        for j in range(e.suite.diversity_samples):
            text = complete_text(model, tokenizer, prompt, e.max_new_tokens, temperature=e.temperature,
                                 top_k=e.top_k, seed=cfg.train.seed + 1000 * i + j)
            out.append({"prompt": prompt, "completion": text})
    return out


def evaluate_suite(cfg: Config, art: dict[str, Artifact], checkpoint: Path, device=None) -> dict:
    """device: where to evaluate (default: the config's training device; the eval watcher passes its own)."""
    checkpoint = Path(checkpoint).resolve()
    isolation = humaneval_isolation(cfg)
    shards = require(art, "shards").dir
    check_same_tokenizer(checkpoint, require(art, "tokenizer").dir / "tokenizer.json")
    log(f"eval: checkpoint {checkpoint} (id {checkpoint_id(checkpoint)})")
    scored = score_checkpoint(cfg, checkpoint, shards, device)
    model, tokenizer, e = scored.model, scored.tokenizer, cfg.eval
    generations = sample_generations(model, tokenizer, scored.prompts, cfg)
    result = {"checkpoint": str(checkpoint), "checkpoint_id": checkpoint_id(checkpoint), "step": scored.meta["step"],
              "date": time.strftime("%Y-%m-%dT%H:%M:%S"), **scored.scores,
              "diversity": diversity_metrics([g["completion"] for g in generations]), "generations": generations,
              "humaneval": None, "tasks": run_tasks(model, tokenizer, cfg)}
    if wants_humaneval(cfg):
        result["humaneval"] = run_humaneval(
            model, tokenizer, problems=e.suite.humaneval_problems, samples=e.suite.humaneval_samples,
            max_new_tokens=e.suite.humaneval_max_new_tokens, temperature=e.suite.humaneval_temperature,
            timeout_s=e.suite.sandbox_timeout_s, memory_mb=e.suite.sandbox_memory_mb, seed=cfg.train.seed,
            isolation=isolation)
    out = evals_dir(checkpoint)
    out.mkdir(parents=True, exist_ok=True)
    write_json(out / EVAL_FILE, result)
    report = write_checkpoint_report(out)
    for line in verdict_lines(result["diversity"]):
        log(f"eval: {line}")
    log(f"eval: results in {out / EVAL_FILE}, report {report}")
    return result
