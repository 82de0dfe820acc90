"""The largest model of the same family that fits: same head size, same depth-to-width ratio, same heads per
d_model, same GQA grouping, scaled down one layer at a time; printed as a config diff ready to paste."""
from __future__ import annotations

import dataclasses
from collections.abc import Callable

from ..config import ModelConfig
from ..toml_text import toml_value
from .arithmetic import count_params, flops_per_token


def family(m: ModelConfig) -> list[ModelConfig]:
    """Smaller members of m's family, largest first. A member is a whole number of head groups wide, each group
    as wide in d_model as the target's (d_model / (n_head / group)): heads per d_model stay the target's, so the
    attention width keeps its share of d_model also where [model] head_dim is set apart from d_model / n_head."""
    group = m.n_head // (m.n_kv_head or m.n_head)
    groups = m.n_head // group
    width_per_group = m.d_model / groups  # head_dim * group when head_dim is implicit
    aspect = m.d_model / m.n_layer
    out, widest = [], groups
    for n_layer in range(m.n_layer, 0, -1):
        # never wider than the member above: rounding to whole groups must not make a shallower member larger
        k = min(widest, max(1, round(n_layer * aspect / width_per_group)))
        if n_layer == m.n_layer:
            k = min(k, groups - 1)  # same depth: one head group narrower (none with a single group, as in MQA)
        if k <= 0:
            continue
        widest = k
        n_head = k * group
        out.append(dataclasses.replace(m, n_layer=n_layer, d_model=round(k * width_per_group), n_head=n_head,
                                       n_kv_head=None if m.n_kv_head is None else k))
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
