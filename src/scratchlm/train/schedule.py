"""Learning-rate schedules as a factor of the peak rate: warmup + cosine, warmup-stable-decay, constant."""
from __future__ import annotations

import math

WSD_DECAY_SHARE = 0.2  # WSD spends the last 20% of steps decaying, the usual choice (MiniCPM, Hägele et al. 2024)


def lr_factor(step: int, max_steps: int, warmup: int, schedule: str, min_ratio: float) -> float:
    if warmup > 0 and step < warmup:
        return (step + 1) / warmup
    if schedule == "constant":
        return 1.0
    if schedule == "wsd":
        decay_start = max(warmup, int(max_steps * (1 - WSD_DECAY_SHARE)))
        if step < decay_start:
            return 1.0
        progress = (step - decay_start) / max(1, max_steps - decay_start)
        return 1.0 - (1.0 - min_ratio) * min(1.0, progress)
    progress = min(1.0, (step - warmup) / max(1, max_steps - warmup))
    return min_ratio + (1 - min_ratio) * 0.5 * (1 + math.cos(math.pi * progress))
