"""The evaluation's LM head, a chunk of tokens at a time, as training's loss is (model/head_loss.py).

Evaluating through full logits built fp32 [B, T, V] plus the softmax, log-softmax and logsumexp temporaries at the
training micro-batch: one batch of 16 x 128 tokens at a 32K vocabulary added 775 MiB to a process whose whole
training step (weights and optimizer state included) peaked 283 MiB above its start. Here a chunk's logits, and
the one temporary its statistics need, live only while that chunk's loss, top-k hits and logit statistics are
taken: the same batch adds 131 MiB, which plan/memory.py counts (`eval_batch_bytes`). The numbers equal the
full-logits path's to float rounding (tests/test_eval_chunked_head.py).
"""
from __future__ import annotations

from functools import partial
from typing import NamedTuple

import torch
import torch.nn.functional as F

from ..model.head_loss import CHUNK_TOKENS, cap_logits
from ..monitor.logits import LogitStats

TOP_K = 10


class HeadTotals(NamedTuple):
    """Sums over the tokens of a batch."""

    loss: float  # cross-entropy, nats
    top1: int  # tokens whose target is the most likely token
    top10: int  # ... among the TOP_K most likely
    tokens: int


@torch.no_grad()
def evaluate_head(h: torch.Tensor, weight: torch.Tensor, softcap: float, *, targets: torch.Tensor,
                  stats: LogitStats, chunk_tokens: int = CHUNK_TOKENS) -> HeadTotals:
    """Loss, top-1 and top-10 hits of h [N, d] under the head weight [V, d] against targets [N], adding the
    logit statistics to `stats`. Logits are softcapped as training's are; under autocast the matmul runs in
    autocast's dtype, as the plain head's did, and everything after it in fp32."""
    sums = torch.zeros(3, dtype=torch.float64, device=h.device)  # loss, top-1, top-10: read back once, at the end
    for start in range(0, h.size(0), chunk_tokens):
        t = targets[start:start + chunk_tokens, None]
        z = cap_logits(F.linear(h[start:start + chunk_tokens], weight).float(), softcap)
        rows = stats.update(z)
        hit = z.topk(min(TOP_K, z.size(1)), dim=-1).indices == t
        sums += torch.stack([(rows.log_z - z.gather(1, t).squeeze(1)).double().sum(), hit[:, 0].sum(),
                             hit.any(dim=-1).sum()])
        del z, rows  # before the next chunk's logits are made, not after
    loss, top1, top10 = sums.tolist()
    return HeadTotals(loss, int(top1), int(top10), targets.numel())


@torch.no_grad()
def evaluate_batch(model, x: torch.Tensor, y: torch.Tensor, stats: LogitStats) -> HeadTotals:
    """One batch of windows x -> y [B, T] through the model's own head (GPT.forward's `head`: inside forward, where
    FSDP has gathered the weights). The caller sets eval mode and autocast."""
    _, totals = model(x, head=partial(evaluate_head, targets=y.reshape(-1), stats=stats))
    return totals
