"""Logit statistics and prediction entropy over validation tokens.

A model that grows overconfident shows it here before the loss does: the largest logit keeps rising and the
entropy of its predictions keeps falling, while the validation loss stalls. Entropy (nats) can be read against
the loss directly: for a calibrated model the mean entropy is close to the mean cross-entropy.
"""
from __future__ import annotations

from typing import NamedTuple

import torch


class RowStats(NamedTuple):
    """Per-token statistics of fp32 logits [N, V], each [N]."""

    token_max: torch.Tensor
    mean: torch.Tensor
    var: torch.Tensor
    log_z: torch.Tensor  # logsumexp: the loss of a token is log_z - its target's logit
    entropy: torch.Tensor


@torch.no_grad()
def row_stats(z: torch.Tensor) -> RowStats:
    """Row-wise reductions only, and one temporary the size of z (the softmax's exponentials): at a 32k+ vocabulary
    a full-size temporary per statistic would multiply the evaluation's memory."""
    var, mean = torch.var_mean(z, dim=-1, correction=0)
    top = z.amax(dim=-1, keepdim=True)
    exp = (z - top).exp_()
    sum_exp = exp.sum(dim=-1)
    with torch.autocast(z.device.type, enabled=False):  # the evaluation calls this under autocast: a bf16 bmm
        expected_logit = (exp.unsqueeze(1) @ z.unsqueeze(-1)).reshape(-1) / sum_exp  # E_p[z]
    del exp
    log_z = top.squeeze(-1) + sum_exp.log()
    return RowStats(top.squeeze(-1), mean, var, log_z, log_z - expected_logit)  # H = log Z - E_p[z]


class LogitStats:
    """Sums over the tokens added, kept on the device: an evaluation adds a chunk of tokens at a time, and reading
    each chunk's numbers back would make the host wait for the device's queue at every chunk."""

    def __init__(self) -> None:
        self.count = 0
        self.n_logits = 0
        self.totals: dict[str, torch.Tensor] = {}

    @torch.no_grad()
    def update(self, logits: torch.Tensor) -> RowStats:
        """Adds the tokens of `logits` [..., V] (a chunk of them at a time: eval/chunked_head.py) and returns their
        row statistics, whose log_z the loss reuses."""
        z = logits.float().reshape(-1, logits.size(-1))
        rows = row_stats(z)
        vocab = z.size(-1)
        self.count += z.size(0)
        self.n_logits += z.numel()
        self._add("max", rows.token_max.max(), torch.maximum)
        self._add("sum_token_max", rows.token_max.double().sum())
        self._add("sum", rows.mean.double().sum() * vocab)
        self._add("sum_sq", (rows.var.double() + rows.mean.double().square()).sum() * vocab)
        self._add("sum_entropy", rows.entropy.double().sum())
        return rows

    def _add(self, key: str, value: torch.Tensor, combine=torch.add) -> None:
        self.totals[key] = combine(self.totals[key], value) if key in self.totals else value

    def result(self) -> dict[str, float]:
        if not self.count:
            return {}
        t = {key: float(value) for key, value in self.totals.items()}
        mean = t["sum"] / self.n_logits
        var = max(0.0, t["sum_sq"] / self.n_logits - mean * mean)
        return {"logit_max": t["max"], "logit_max_mean": t["sum_token_max"] / self.count,
                "logit_std": var ** 0.5, "entropy": t["sum_entropy"] / self.count}
