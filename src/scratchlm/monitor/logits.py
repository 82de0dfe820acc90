"""Logit statistics and prediction entropy over validation tokens.

A model that grows overconfident shows it here before the loss does: the largest logit keeps rising and the
entropy of its predictions keeps falling, while the validation loss stalls. Entropy (nats) can be read against
the loss directly: for a calibrated model the mean entropy is close to the mean cross-entropy.
"""
from __future__ import annotations

import torch


class LogitStats:
    def __init__(self) -> None:
        self.count = 0
        self.max = float("-inf")
        self.sum_token_max = self.sum = self.sum_sq = self.sum_entropy = 0.0
        self.n_logits = 0

    @torch.no_grad()
    def update(self, logits: torch.Tensor) -> None:
        # Row-wise reductions only: at a 32k+ vocabulary a full-size temporary per statistic would double the
        # evaluation's memory.
        z = logits.float().reshape(-1, logits.size(-1))
        row_var, row_mean = torch.var_mean(z, dim=-1, correction=0)
        token_max = z.max(dim=-1).values
        p = torch.softmax(z, dim=-1)
        expected_logit = (p.unsqueeze(1) @ z.unsqueeze(-1)).reshape(-1)
        entropy = torch.logsumexp(z, dim=-1) - expected_logit  # H = log Z - E_p[z]
        vocab = z.size(-1)
        self.count += z.size(0)
        self.n_logits += z.numel()
        self.max = max(self.max, float(token_max.max()))
        self.sum_token_max += float(token_max.sum())
        self.sum += float(row_mean.double().sum()) * vocab
        self.sum_sq += float((row_var.double() + row_mean.double().square()).sum()) * vocab
        self.sum_entropy += float(entropy.sum())

    def result(self) -> dict[str, float]:
        if not self.count:
            return {}
        mean = self.sum / self.n_logits
        var = max(0.0, self.sum_sq / self.n_logits - mean * mean)
        return {"logit_max": self.max, "logit_max_mean": self.sum_token_max / self.count,
                "logit_std": var ** 0.5, "entropy": self.sum_entropy / self.count}
