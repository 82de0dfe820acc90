"""The gate before fine-tuning: the base must be evaluated, and its evaluation must show it learned something.

Fine-tuning does not fix a weak base; without the base's numbers nobody can tell what fine-tuning changed.
--force passes both gates, with a warning in the log.
"""
from __future__ import annotations

from pathlib import Path

from ..errors import UserError
from ..eval.base_quality import ADVICE, judge_base
from ..ids import read_json
from ..progress import log


def check_base(checkpoint: Path, evaluation: Path | None, force: bool) -> dict | None:
    """The base's verdict (eval/base_quality.judge_base), or None when it has no evaluation and force is set."""
    if evaluation is None:
        if not force:
            raise UserError(f"base checkpoint {checkpoint} has no evaluation: run `scratchlm eval suite {checkpoint} "
                            "-c CONFIG` first (or pass --force)")
        log(f"warning: fine-tuning base checkpoint {checkpoint} with no evaluation (--force)")
        return None
    verdict = judge_base(read_json(evaluation))
    if verdict["level"] in ("weak", "unknown"):  # unknown: an evaluation without a finite loss shows nothing
        why = "too weak to fine-tune" if verdict["level"] == "weak" else "not judged by its evaluation"
        problem = f"base checkpoint {checkpoint} is {why} ({evaluation}): {verdict['message']}"
        if not force:
            raise UserError(f"{problem}; {ADVICE} (or pass --force)")
        log(f"warning: {problem}; fine-tuning anyway (--force)")
    return verdict
