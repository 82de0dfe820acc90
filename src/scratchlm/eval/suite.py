"""`scratchlm eval suite CHECKPOINT -c F`: the full evaluation of one checkpoint, stored next to it.

Perplexity / bits per byte / top-k per domain, diversity of generations, HumanEval for code models, and the
config's own tasks; then the checkpoint's report, which also shows the human ratings once a sheet is scored.

HumanEval takes hours on a CPU (164 problems x 10 samples of up to 256 tokens), so it runs only when asked
(`--humaneval`, or `eval.suite.humaneval = "on"`), or, for a code model under "auto", when its estimate fits the
command's cap: the first problem is solved and timed, the estimate printed, and the rest run only if it fits.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

from ..config import Config
from ..ids import write_json
from ..model.complete import complete_text
from ..pipeline import Artifact, require
from ..progress import duration, log
from .diversity import diversity_metrics, verdict_lines
from .humaneval import run_humaneval
from .sandbox import Isolation, require_isolation
from .report import write_checkpoint_report
from .scoring import score_checkpoint
from .store import EVAL_FILE, check_same_tokenizer, checkpoint_id, evals_dir
from .tasks import run_tasks


def wants_humaneval(cfg: Config) -> bool:
    """The config makes HumanEval part of the suite: "on", or "auto" with a code source."""
    if cfg.eval.suite.humaneval == "auto":
        return any(s.domain == "code" for s in cfg.data.sources)
    return cfg.eval.suite.humaneval == "on"


@dataclass(frozen=True)
class HumanEvalChoice:
    """What the command asked of HumanEval. The default, the eval watcher's: only when the config says "on"."""
    asked: bool = False  # --humaneval: run it whatever the estimate (and whatever the config)
    cap_minutes: float = 0.0  # under "auto", run it when the estimate is at most this; 0: only when asked

    def mode(self, cfg: Config) -> str | None:
        """run (asked, or "on"), capped (run if the estimate fits), skipped (left to the user), None (not wanted)."""
        if self.asked or cfg.eval.suite.humaneval == "on":
            return "run"
        if not wants_humaneval(cfg):
            return None
        return "capped" if self.cap_minutes > 0 else "skipped"


def humaneval_isolation(cfg: Config, choice: HumanEvalChoice = HumanEvalChoice()) -> Isolation | None:
    """Where HumanEval will run model-written code (None: it does not run); refused in one line without a
    sandbox, unless the user asked for the unsafe path. Checked before the model is even loaded."""
    needed = choice.mode(cfg) in ("run", "capped")
    return require_isolation(cfg.eval.suite.unsafe_run_code_unsandboxed) if needed else None


def how_to_run(cfg: Config, checkpoint: Path) -> str:
    return f"`scratchlm eval suite {checkpoint} -c {cfg.path or 'CONFIG'} --humaneval`"


def humaneval_go_on(cfg: Config, checkpoint: Path, choice: HumanEvalChoice):
    """run_humaneval's go_on: log the estimate, and under a cap, whether it fits."""
    capped = choice.mode(cfg) == "capped"

    def go_on(seconds: float, problems: int) -> bool:
        estimate = (f"about {duration(seconds)} for {problems} problems x {cfg.eval.suite.humaneval_samples} samples "
                    "(the first problem's time x the problems)")
        if capped and seconds > choice.cap_minutes * 60:
            log(f"eval: HumanEval skipped: {estimate}, over the {choice.cap_minutes:g}-minute cap "
                f"(--humaneval-cap-minutes); run it with {how_to_run(cfg, checkpoint)}")
            return False
        log(f"eval: HumanEval: {estimate}")
        return True
    return go_on


def sample_generations(model, tokenizer, prompts: list[str], cfg: Config) -> list[dict]:
    e = cfg.eval
    out = []
    for i, prompt in enumerate(prompts):
        for j in range(e.suite.diversity_samples):
            text = complete_text(model, tokenizer, prompt, e.max_new_tokens, temperature=e.temperature,
                                 top_k=e.top_k, seed=cfg.train.seed + 1000 * i + j)
            out.append({"prompt": prompt, "completion": text})
    return out


def evaluate_suite(cfg: Config, art: dict[str, Artifact], checkpoint: Path, device=None,
                   humaneval: HumanEvalChoice = HumanEvalChoice()) -> dict:
    """device: where to evaluate (default: the config's training device; the eval watcher passes its own)."""
    checkpoint = Path(checkpoint).resolve()
    isolation = humaneval_isolation(cfg, humaneval)
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
    mode = humaneval.mode(cfg)
    if mode == "skipped":
        log(f"eval: HumanEval skipped: not asked for (eval.suite.humaneval = \"auto\" runs it from `eval suite` "
            f"when its estimate fits --humaneval-cap-minutes); run it with {how_to_run(cfg, checkpoint)}")
    elif mode is not None:
        log("eval: HumanEval: timing the first problem for an estimate"
            + (f" (the cap: {humaneval.cap_minutes:g} minutes)" if mode == "capped" else ""))
        result["humaneval"] = run_humaneval(
            model, tokenizer, problems=e.suite.humaneval_problems, samples=e.suite.humaneval_samples,
            max_new_tokens=e.suite.humaneval_max_new_tokens, temperature=e.suite.humaneval_temperature,
            timeout_s=e.suite.sandbox_timeout_s, memory_mb=e.suite.sandbox_memory_mb, seed=cfg.train.seed,
            isolation=isolation, go_on=humaneval_go_on(cfg, checkpoint, humaneval))
    out = evals_dir(checkpoint)
    out.mkdir(parents=True, exist_ok=True)
    write_json(out / EVAL_FILE, result)
    report = write_checkpoint_report(out)
    for line in verdict_lines(result["diversity"]):
        log(f"eval: {line}")
    log(f"eval: results in {out / EVAL_FILE}, report {report}")
    return result
