"""Named model sizes. A preset fills the `[model]` keys a config leaves unset; any key written out wins.

Parameter counts below assume the default 32768-token vocabulary with tied embeddings; `GPT.num_params()` gives
the exact figure for a config (the `train` stage logs it).
"""
from __future__ import annotations

from typing import Any

from .errors import UserError

PRESETS: dict[str, dict[str, Any]] = {
    # The quickstart's model: trains in minutes on 2 CPU cores.
    "tiny": {"n_layer": 4, "d_model": 192, "n_head": 6, "seq_len": 256},
    # ~48M parameters.
    "50m": {"n_layer": 10, "d_model": 512, "n_head": 8, "seq_len": 1024},
    # GPT-2 small's shape, ~110M parameters.
    "125m": {"n_layer": 12, "d_model": 768, "n_head": 12, "seq_len": 1024},
    # GPT-2 medium's shape, ~336M parameters.
    "350m": {"n_layer": 24, "d_model": 1024, "n_head": 16, "seq_len": 1024},
    # Llama-3.2-1B's shape (GQA with 8 KV heads, SwiGLU width 8192), ~1.04B parameters.
    "1b": {"n_layer": 16, "d_model": 2048, "n_head": 32, "n_kv_head": 8, "mlp_ratio": 6.0, "seq_len": 2048},
}


PRESET_KEYS = tuple(dict.fromkeys(k for shape in PRESETS.values() for k in shape))  # the keys a preset decides


def apply_preset(raw_model: dict[str, Any], where: str) -> dict[str, Any]:
    name = raw_model["preset"]
    if name not in PRESETS:
        raise UserError(f"{where}: unknown `model.preset` {name!r}; choose one of {', '.join(PRESETS)}")
    return {**PRESETS[name], **raw_model}


def preset_overrides(model) -> list[str]:
    """The keys of `model.preset` that the config overrides. apply_preset fills every preset key the file leaves
    unset, so a final value that differs from the preset's can only have been written out."""
    shape = PRESETS.get(model.preset or "", {})
    return [k for k, v in shape.items() if getattr(model, k) != v]


def describe_preset(model) -> str | None:
    """One line for the plan and the train log: "preset tiny", or "preset tiny, overridden: n_layer, d_model"."""
    if not model.preset:
        return None
    overridden = preset_overrides(model)
    return f"preset {model.preset}" + (f", overridden: {', '.join(overridden)}" if overridden else "")
