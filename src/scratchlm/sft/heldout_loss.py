"""The loss on the held-out conversations' answers: the one number that says whether fine-tuning generalizes
while it runs. Weighted by answer tokens, so a long answer counts for its length, as in training."""
from __future__ import annotations

import torch

from ..model.device import autocast

BATCH = 16  # rows per forward pass: evaluation keeps no activations, so it can take more than training's batch


@torch.no_grad()
def heldout_loss(model, ids: torch.Tensor, mask: torch.Tensor, device, precision: str) -> float:
    """Mean cross-entropy over the answer tokens (mask 1) of packed rows `ids` [N, T+1]; leaves the model as found."""
    was_training = model.training
    model.eval()
    total = torch.zeros((), dtype=torch.float64, device=device)
    tokens = 0
    for start in range(0, len(ids), BATCH):
        rows, rmask = ids[start:start + BATCH].to(device), mask[start:start + BATCH].to(device)
        counted = int(rmask[:, 1:].sum())
        if counted == 0:
            continue
        with autocast(device, precision):
            _, loss = model(rows[:, :-1], rows[:, 1:], loss_mask=rmask[:, 1:])
        total += loss.double() * counted
        tokens += counted
    model.train(was_training)
    return float(total) / max(tokens, 1)
