"""A Python value written as TOML, for the config files scratchlm writes (`scratchlm init`, the quality
thresholds, the resume check's config). tomllib reads TOML but cannot write it."""
from __future__ import annotations

from typing import Any


def toml_value(v: Any) -> str:
    """`v` (bool, str, int, float, list or tuple, dict) as a TOML value; a dict becomes an inline table."""
    if isinstance(v, bool):  # before int: True is an int too
        return "true" if v else "false"
    if isinstance(v, str):
        return '"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(toml_value(x) for x in v) + "]"
    if isinstance(v, float):
        return repr(v)
    if isinstance(v, dict):
        return "{ " + ", ".join(f"{k} = {toml_value(x)}" for k, x in v.items()) + " }" if v else "{}"
    return str(v)
