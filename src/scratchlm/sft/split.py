"""The held-out conversations: given by the user (`sft.heldout`), or drawn from the data (`sft.heldout_share`).

Fine-tuning on a few hundred pairs can end with a falling training loss and a model that learned nothing, or
only the training answers by heart; only conversations it never trained on tell the two apart. A drawn split is
by conversation (never a turn of one on each side) and seeded, so the same data and config hold out the same ones.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import torch

from ..config import Config
from ..errors import UserError
from .data import read_conversations


@dataclass
class Split:
    train: list[list[dict]]
    heldout: list[list[dict]]
    train_lines: list[int]  # each conversation's line in its file, for messages that name it
    heldout_lines: list[int]
    how: str  # "given: PATH", "drawn: N of M (share)" or "none"
    given: Path | None = None  # the held-out file, when the user gave one


def split_conversations(cfg: Config, data_path: Path) -> Split:
    conversations, lines = read_conversations(data_path)
    s = cfg.sft
    if s.heldout:
        given = Path(s.heldout)
        given = given if given.is_absolute() or cfg.path is None else cfg.path.parent / given
        heldout, heldout_lines = read_conversations(given)
        return Split(conversations, heldout, lines, heldout_lines, f"given: {given}", given)
    n = drawn_count(len(conversations), s.heldout_share)
    if n == 0:
        return Split(conversations, [], lines, [], "none")
    pick = set(torch.randperm(len(conversations), generator=torch.Generator().manual_seed(s.seed))[:n].tolist())
    keep = [i for i in range(len(conversations)) if i not in pick]
    held = sorted(pick)
    return Split([conversations[i] for i in keep], [conversations[i] for i in held], [lines[i] for i in keep],
                 [lines[i] for i in held], f"drawn: {n} of {len(conversations)} ({s.heldout_share:.0%})")


def drawn_count(total: int, share: float) -> int:
    """At least one held out when a share is asked for, and at least one left to train on."""
    if share <= 0:
        return 0
    if total < 2:
        raise UserError(f"sft.heldout_share = {share:g} needs at least 2 conversations ({total} given); set "
                        "sft.heldout_share = 0 or give held-out conversations in sft.heldout")
    return min(total - 1, max(1, math.floor(total * share)))
