"""The quality-rule profiles as the config exposes them: `[data.quality.prose]`, `[data.quality.technical]` and
`[data.quality.code]`.

The thresholds and their origins live in one place, clean/quality.py's QualityConfig. This module turns a
user's override table into a QualityConfig (TOML has no null, so `false` switches a rule off and lists
become tuples), checks the keys, and renders every profile for `scratchlm init` with the comments that
document each threshold, read from QualityConfig's source so they cannot drift.
"""
from __future__ import annotations

import dataclasses
import difflib
import inspect
import re
from typing import Any

from ..errors import UserError
from .clean.quality import CODE, PROSE, TECHNICAL, QualityConfig

PROFILES = {"prose": PROSE, "technical": TECHNICAL, "code": CODE}
_FIELDS = [f.name for f in dataclasses.fields(QualityConfig)]
_FIELD = re.compile(r"^    (\w+): [^=]+= .*?(?:  # (.*))?$")
_SECTION = re.compile(r"^    # --- (.*?) -+$")


_OPTIONAL = {f.name for f in dataclasses.fields(QualityConfig) if "None" in str(f.type)}


def _as_config_value(key: str, value: Any) -> Any:
    if value is False and key in _OPTIONAL:
        return None
    if isinstance(value, list):
        return tuple(_as_config_value("", v) for v in value)
    return value


def check_overrides(quality, where: str) -> None:
    for profile in PROFILES:
        for key in getattr(quality, profile):
            if key not in _FIELDS:
                close = difflib.get_close_matches(key, _FIELDS, n=1, cutoff=0.6)
                hint = f"; did you mean `{close[0]}`?" if close else ""
                raise UserError(f"{where}: unknown key `{key}` in [data.quality.{profile}]{hint}")


def profile_config(profile: str, overrides: dict[str, Any]) -> QualityConfig:
    """The profile's QualityConfig with the user's overrides applied."""
    return dataclasses.replace(PROFILES[profile], **{k: _as_config_value(k, v) for k, v in overrides.items()})


def _field_docs() -> dict[str, str]:
    """field -> "origin: comment", from the comments above and beside each field of QualityConfig."""
    docs, block, origin = {}, [], ""
    for line in inspect.getsource(QualityConfig).splitlines():
        if m := _SECTION.match(line):
            origin, block = m.group(1), []
        elif line.strip().startswith("#"):
            block.append(line.strip().lstrip("#").strip())
        elif m := _FIELD.match(line):
            text = " ".join(block + ([m.group(2)] if m.group(2) else []))
            docs[m.group(1)] = f"{origin}: {text}" if text else origin
            block = []
        elif not line.strip():
            block = []
    return docs


def _toml(value: Any) -> str:
    if value is None:
        return "false"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(value, (tuple, list)):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    return repr(value)


def template_lines(overrides: dict[str, dict] | None = None) -> list[str]:
    """`[data.quality.prose]` and `[data.quality.code]`: every threshold with its default and origin, commented
    out (so the file loads back with exactly the defaults) except the keys `overrides` sets."""
    docs = _field_docs()
    lines = []
    for name in PROFILES:
        given = (overrides or {}).get(name, {})
        cfg = profile_config(name, given)
        lines.append(f"[data.quality.{name}]  # thresholds of the `{name}` filter set; false switches a rule off")
        for f in dataclasses.fields(QualityConfig):
            prefix = "" if f.name in given else "# "
            lines.append(f"{prefix}{f.name} = {_toml(getattr(cfg, f.name))}  # {docs.get(f.name, '')}".rstrip(" #"))
        lines.append("")
    return lines
