"""From the probe's measured step to the whole run: training, checkpoints, evaluations, one restart, cost."""
from __future__ import annotations

import math

from ..config import Config
from ..train.compile_choice import chosen_step


def _events(steps: int, every: int) -> int:
    """How often the loop does something 'every N steps and at the end'."""
    return steps // every + (1 if steps % every else 0)


def _checkpoints(t) -> int:
    """Checkpoint steps of an external-evaluation run: those of checkpoint_every and those of eval_every."""
    n, c, e = t.max_steps, t.checkpoint_every, t.eval_every
    last = 0 if n % c == 0 or n % e == 0 else 1
    return n // c + n // e - n // math.lcm(c, e) + last


def extrapolate(cfg: Config, probe: dict, n_domains: int, n_prompts: int,
                price_per_hour: float | None = None, compile_decision: dict | None = None) -> dict:
    """compile_decision: train/compile_choice.py's; a compiled run steps at the compiled speed after compiling."""
    t = cfg.train
    step, compile_once = chosen_step(compile_decision, probe["step_seconds"])
    train = t.max_steps * step + compile_once
    n_eval = _events(t.max_steps, t.eval_every)
    external = t.eval == "external"  # the watcher evaluates beside the run, from a checkpoint at each eval step
    n_ckpt = _checkpoints(t) if external else _events(t.max_steps, t.checkpoint_every)
    checkpoints = n_ckpt * probe["checkpoint_seconds"]
    # evaluation runs batches of train.batch_size; the probe timed batches of its own micro-batch
    eval_batch = probe["eval_batch_seconds"] * t.batch_size / probe["micro_batch"]
    one_eval = n_domains * cfg.eval.max_batches * eval_batch + n_prompts * cfg.eval.max_new_tokens * \
        probe["decode_token_seconds"]
    evals = 0.0 if external else n_eval * one_eval
    # A crash just before the next checkpoint loses checkpoint_every steps: plan for the worst case, once.
    lost = min(t.checkpoint_every, t.max_steps) * step
    restart = lost + probe["restore_seconds"] + probe["build_seconds"] + compile_once  # a new process compiles again
    total = train + checkpoints + evals + restart
    out = {"train_seconds": train, "step_seconds": step, "compile_seconds": compile_once,
           "checkpoints": n_ckpt, "checkpoint_seconds": checkpoints,
           "evaluations": n_eval, "eval_seconds": evals, "eval_external": external, "restart_seconds": restart,
           "restart_lost_steps": min(t.checkpoint_every, t.max_steps), "total_seconds": total,
           "checkpoint_bytes_on_disk": probe["checkpoint_bytes"] * min(t.keep_last, n_ckpt)}
    if price_per_hour is not None:
        out["cost"] = total / 3600 * price_per_hour
        out["price_per_hour"] = price_per_hour
    return out
