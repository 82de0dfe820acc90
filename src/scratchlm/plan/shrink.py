"""The largest model of the same family that fits: same head size, same depth-to-width ratio, same GQA grouping,
scaled down one layer at a time; printed as a config diff ready to paste."""
from __future__ import annotations

import dataclasses
from typing import Callable

from ..config import ModelConfig
from ..toml_text import toml_value
from .arithmetic import count_params, flops_per_token


def family(m: ModelConfig) -> list[ModelConfig]:
    """Smaller members of m's family, largest first."""
    head_dim = m.d_model // m.n_head
    group = m.n_head // (m.n_kv_head or m.n_head)
    aspect = m.d_model / m.n_layer
    unit = head_dim * group  # d_model must stay a whole number of head groups
    out, seen = [], set()
    for n_layer in range(m.n_layer, 0, -1):
        d = max(unit, int(round(n_layer * aspect / unit)) * unit)
        if n_layer == m.n_layer:
            d = min(d, m.d_model - unit)  # same depth: one head group narrower
        if d <= 0 or (n_layer, d) in seen or d > m.d_model:
            continue
        seen.add((n_layer, d))
        n_head = d // head_dim
        out.append(dataclasses.replace(m, n_layer=n_layer, d_model=d, n_head=n_head,
                                       n_kv_head=None if m.n_kv_head is None else n_head // group))
    return out


def largest_fitting(m: ModelConfig, vocab: int, fits: Callable[[ModelConfig], dict | None]) -> dict | None:
    """`fits(candidate)` returns extra config changes (e.g. a batch split) when it fits, None when it does not."""
    for cand in family(m):
        extra = fits(cand)
        if extra is not None:
            return {"model": cand, "extra": extra, "params": count_params(cand, vocab).total,
                    "flops_per_token": flops_per_token(cand, vocab)["total"]}
    return None


def config_diff(old: ModelConfig, new: ModelConfig, extra_train: dict) -> str:
    lines = ["[model]"]
    for f in dataclasses.fields(ModelConfig):
        a, b = getattr(old, f.name), getattr(new, f.name)
        if a != b:
            lines += [f"-{f.name} = {_toml(a)}", f"+{f.name} = {_toml(b)}"]
    if extra_train:
        lines.append("[train]")
        for key, (a, b) in extra_train.items():
            lines += [f"-{key} = {_toml(a)}", f"+{key} = {_toml(b)}"]
    return "\n".join(lines)


def _toml(v) -> str:
    return "# unset" if v is None else toml_value(v)
