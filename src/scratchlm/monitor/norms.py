"""Gradient norms, weight norms and update-to-weight ratios, per layer group.

A layer group is the embedding, each transformer block, the final norm and an untied LM head. Per-group numbers
show what the total hides: one block whose gradients explode, or weights that AdamW keeps inflating (a growing
weight norm silently shrinks the effective learning rate |update| / |weight|).
"""
from __future__ import annotations

import torch


GAINS_ONLY = "final_norm"  # the group of the final norm's gains: 1-D, no weight decay, no matrix to inflate


def layer_group(name: str) -> str:
    parts = name.split(".")
    if parts[0] == "blocks":
        return f"block{parts[1]}"
    return {"tok_emb": "embedding", "norm_f": GAINS_ONLY}.get(parts[0], parts[0])


def grouped_parameters(model: torch.nn.Module) -> dict[str, list[torch.nn.Parameter]]:
    groups: dict[str, list[torch.nn.Parameter]] = {}
    for name, p in model.named_parameters():  # a tied weight is yielded once, under its first name
        groups.setdefault(layer_group(name), []).append(p)
    return groups


def _norm(tensors: list[torch.Tensor]) -> float:
    if not tensors:
        return 0.0
    return float(torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(t.float()) for t in tensors])))


def grad_norms(groups: dict[str, list[torch.nn.Parameter]]) -> dict[str, float]:
    return {g: _norm([p.grad for p in ps if p.grad is not None]) for g, ps in groups.items()}


def weight_norms(groups: dict[str, list[torch.nn.Parameter]]) -> dict[str, float]:
    return {g: _norm([p.detach() for p in ps]) for g, ps in groups.items()}


# Where the copy of the weights is kept, whatever the device: on a GPU a copy there would add 4 bytes a parameter to
# the step's peak (20 with AdamW's 16), exactly when a log step lands on the largest micro-batch that fits. The price
# is a device-to-host copy of the weights at log steps only. The update is ~1e-3 of a weight: a lower-precision copy
# would round by more than that, so the copy stays exact (the parameters' own dtype).
HOST = torch.device("cpu")
# Elements of a weight brought back to its device at a time to take the difference: the only device memory the
# measurement takes (16 MiB of fp32).
SLICE = 1 << 22


class UpdateRatio:
    """|w_after - w_before| / |w_after| per group, from a copy of the weights taken just before the step."""

    def __init__(self) -> None:
        self.before: dict[str, list[torch.Tensor]] | None = None

    def snapshot(self, groups: dict[str, list[torch.nn.Parameter]]) -> None:
        self.before = {g: [p.detach().to(HOST, copy=True) for p in ps] for g, ps in groups.items()}

    def measure(self, groups: dict[str, list[torch.nn.Parameter]]) -> dict[str, float]:
        if self.before is None:
            return {}
        out = {}
        for g, ps in groups.items():
            delta = _norm([_delta_norm(p.detach(), b) for p, b in zip(ps, self.before[g])])
            out[g] = delta / max(_norm([p.detach() for p in ps]), 1e-12)
        self.before = None  # free the copy until the next log step
        return out


def _delta_norm(after: torch.Tensor, before: torch.Tensor) -> torch.Tensor:
    """|after - before|, a SLICE at a time. The difference is made in place in the copy, which is spent: on a CPU
    device the copy is the slice itself, and no temporary is made at all."""
    after, before = after.reshape(-1), before.reshape(-1)
    norms = []
    for start in range(0, before.numel(), SLICE):
        piece = before[start:start + SLICE].to(after.device)
        norms.append(torch.linalg.vector_norm(piece.sub_(after[start:start + SLICE]).float()))
        del piece
    return torch.linalg.vector_norm(torch.stack(norms)) if norms else after.new_zeros((), dtype=torch.float32)


def nonfinite_gradients(model: torch.nn.Module) -> list[str]:
    return [n for n, p in model.named_parameters() if p.grad is not None and not torch.isfinite(p.grad).all()]
