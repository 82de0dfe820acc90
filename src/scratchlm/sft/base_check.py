"""The gate before fine-tuning: the base must be evaluated, and its evaluation must show it learned something.

Fine-tuning does not fix a weak base; without the base's numbers nobody can tell what fine-tuning changed.
--force passes both gates, with a warning in the log, and the fine-tuning records which it passed (forced.py).
"""
from __future__ import annotations

from pathlib import Path

from ..errors import UserError
from ..eval.base_quality import ADVICE, judge_base
from ..forced import forced_record
from ..ids import read_json
from ..progress import log


def check_base(checkpoint: Path, evaluation: Path | None, force: bool) -> tuple[dict | None, list[dict]]:
    """The base's verdict (eval/base_quality.judge_base), or None when it has no evaluation and force is set; and
    the record of the gate --force went past (forced.forced_record), empty when none."""
    if evaluation is None:
        problem = f"base checkpoint {checkpoint} has no evaluation"
        if not force:
            raise UserError(f"{problem}: run `scratchlm eval suite {checkpoint} -c CONFIG` first (or pass --force)")
        log(f"warning: fine-tuning base checkpoint {checkpoint} with no evaluation (--force)")
        return None, forced_record({"sft": [{"name": "base evaluated", "level": "error", "summary": problem}]})
    verdict = judge_base(read_json(evaluation))
    if verdict["level"] in ("weak", "unknown"):  # unknown: an evaluation without a finite loss shows nothing
        why = "too weak to fine-tune" if verdict["level"] == "weak" else "not judged by its evaluation"
        problem = f"base checkpoint {checkpoint} is {why} ({evaluation}): {verdict['message']}"
        if not force:
            raise UserError(f"{problem}; {ADVICE} (or pass --force)")
        log(f"warning: {problem}; fine-tuning anyway (--force)")
        return verdict, forced_record({"sft": [{"name": "base quality", "level": "error", "summary": problem}]})
    return verdict, []
