"""The batch of one optimizer step. Training, the plan and the mix warnings all take it from here, so the tokens
per step the plan prices and the mix divides among sources are the tokens the training loop really draws."""
from __future__ import annotations

import os
from dataclasses import dataclass

from ..config import Config
from ..errors import UserError


@dataclass(frozen=True)
class EffectiveBatch:
    micro_batch: int  # sequences per forward/backward on one rank (train.batch_size)
    grad_accum: int  # micro-batches per optimizer step on one rank
    world: int  # data-parallel ranks
    sequences: int  # per optimizer step, all ranks together
    tokens: int  # per optimizer step, all ranks together


def ranks_launched() -> int:
    """The data-parallel ranks torchrun started (WORLD_SIZE), 1 outside torchrun: the world of a run not yet begun,
    for the plan and the mix, made before training."""
    return int(os.environ.get("WORLD_SIZE", "1"))


def effective_batch(cfg: Config, world: int = 1) -> EffectiveBatch:
    """`train.batch_tokens`, when set, fixes the global batch: grad_accum is derived from it, per rank, and
    `train.grad_accum` is ignored. Otherwise each of the `world` ranks runs batch_size x grad_accum sequences."""
    t, seq_len = cfg.train, cfg.model.seq_len
    grad_accum = t.grad_accum
    if t.batch_tokens:
        per_micro = t.batch_size * seq_len * world
        if t.batch_tokens % per_micro:
            raise UserError(f"`train.batch_tokens` = {t.batch_tokens} is not a multiple of batch_size x seq_len x "
                            f"world size = {t.batch_size} x {seq_len} x {world} = {per_micro}; use a multiple "
                            f"of {per_micro} or change `train.batch_size`")
        grad_accum = t.batch_tokens // per_micro
    sequences = t.batch_size * grad_accum * world
    return EffectiveBatch(t.batch_size, grad_accum, world, sequences, sequences * seq_len)
