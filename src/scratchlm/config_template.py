"""`scratchlm init`: the full annotated config, generated from the dataclasses so it can never drift from them."""
from __future__ import annotations

import dataclasses
import inspect
import re
from pathlib import Path

from . import config as C

SECTIONS = [("run", C.RunConfig), ("data", C.DataConfig), ("tokenizer", C.TokenizerConfig),
            ("shards", C.ShardsConfig), ("model", C.ModelConfig), ("train", C.TrainConfig), ("eval", C.EvalConfig)]
_FIELD_LINE = re.compile(r"^\s+(\w+):[^=]*=\s*.*?(?:#\s*(.*))?$")


def _comments(cls) -> dict[str, str]:
    out = {}
    for line in inspect.getsource(cls).splitlines():
        m = _FIELD_LINE.match(line)
        if m and m.group(2):
            out[m.group(1)] = m.group(2).strip()
    return out


def _toml_value(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, str):
        return '"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(v, list):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    if isinstance(v, float):
        return repr(v)
    if isinstance(v, dict):
        return "{ " + ", ".join(f"{k} = {_toml_value(x)}" for k, x in v.items()) + " }" if v else "{}"
    return str(v)


def render_config(sources: list[dict], overrides: dict[str, dict] | None = None) -> str:
    overrides = overrides or {}
    lines = ["# scratchlm config. Every key below shows its default; delete any you do not need to change.",
             "# Paths are relative to this file.", ""]
    for name, cls in SECTIONS:
        comments = _comments(cls)
        lines.append(f"[{name}]")
        for f in dataclasses.fields(cls):
            if f.name == "sources":
                continue
            default = f.default if f.default is not dataclasses.MISSING else f.default_factory()
            value = overrides.get(name, {}).get(f.name, default)
            if value is None:
                lines.append(f"# {f.name} =   # {comments.get(f.name, '')} (unset by default)")
                continue
            comment = f"  # {comments[f.name]}" if f.name in comments else ""
            lines.append(f"{f.name} = {_toml_value(value)}{comment}")
        lines.append("")
    src_comments = _comments(C.SourceConfig)
    lines.append("# One table per source. name, domain and path are required.")
    for s in sources:
        lines.append("[[data.sources]]")
        for key, value in s.items():
            comment = f"  # {src_comments[key]}" if key in src_comments else ""
            lines.append(f"{key} = {_toml_value(value)}{comment}")
        lines.append("")
    return "\n".join(lines)


EXAMPLE_SOURCES = [
    {"name": "docs", "domain": "docs", "path": "data/docs/", "format": "text", "weight": 1.0},
    {"name": "forum", "domain": "forum", "path": "data/forum/*.jsonl.zst", "text_field": "text", "weight": 1.0},
]


def write_init(directory: Path) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "scratchlm.toml"
    if path.exists():
        from .errors import UserError

        raise UserError(f"{path} already exists; not overwriting it")
    path.write_text(render_config(EXAMPLE_SOURCES), encoding="utf-8")
    return path
