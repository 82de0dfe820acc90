"""`scratchlm init`: the full annotated config, generated from the dataclasses so it can never drift from them."""
from __future__ import annotations

import dataclasses
import inspect
import typing
import re
from pathlib import Path

from . import config as C
from .presets import PRESET_KEYS
from .toml_text import toml_value

SECTIONS = [(f.name, typing.get_type_hints(C.Config)[f.name]) for f in dataclasses.fields(C.Config) if f.name != "path"]
APART = ("sources", "tasks", "sets", "quality", "language_rules")  # tables rendered apart, with examples
_FIELD_LINE = re.compile(r"^\s+(\w+):[^=]*=\s*.*?(?:#\s*(.*))?$")

def _comments(cls) -> dict[str, str]:
    out = {}
    for line in inspect.getsource(cls).splitlines():
        m = _FIELD_LINE.match(line)
        if m and m.group(2):
            out[m.group(1)] = m.group(2).strip()
    return out

def _keys(name: str, cls, given: dict) -> list[str]:
    """One line per key of a section: its value (the default unless given) and its comment."""
    comments, lines = _comments(cls), []
    for f in dataclasses.fields(cls):
        default = f.default if f.default is not dataclasses.MISSING else f.default_factory()
        if f.name in APART or dataclasses.is_dataclass(default):
            continue
        value = given.get(f.name, default)
        if value is None:
            lines.append(f"# {f.name} =   # {comments.get(f.name, '')} (unset by default)")
            continue
        comment = f"  # {comments[f.name]}" if f.name in comments else ""
        live = f.name in given or not (name == "model" and f.name in PRESET_KEYS)
        lines.append(("" if live else "# ") + f"{f.name} = {toml_value(value)}{comment}")
    return lines + [""]


def render_config(sources: list[dict], overrides: dict[str, dict] | None = None) -> str:
    overrides = overrides or {}
    lines = ["# scratchlm config. Every key below shows its default; delete any you do not need to change.",
             "# Paths are relative to this file.", ""]
    for name, cls in SECTIONS:
        lines.append(f"[{name}]")
        if name == "model":
            lines += ["# The shape keys a preset decides are written commented out: a live key would override the",
                      "# preset (the plan and the train log name every override). Without a preset they default",
                      "# to the values shown."]
        lines += _keys(name, cls, overrides.get(name, {}))
        for f in dataclasses.fields(cls):  # a section within the section: [eval.suite]
            if f.name not in APART and dataclasses.is_dataclass(f.default_factory):
                lines += [f"[{name}.{f.name}]"] + (
                    [f"# {line.strip()}" for line in inspect.getdoc(f.default_factory).splitlines()])
                lines += _keys(f"{name}.{f.name}", f.default_factory, overrides.get(name, {}).get(f.name, {}))
        if name == "data":
            from .data.quality_config import template_lines

            lines += template_lines(overrides.get("data", {}).get("quality"))
            lines += _language_rules_example()
    src_comments = _comments(C.SourceConfig)
    lines += ["# One table per source. name, domain and path are required. Also per source: languages, profile,",
              '# skip_rules = ["repeated_line"] (switch ledger rules off for this source; `scratchlm data audit`',
              "# measures which ones are wrong), and [data.sources.language_rules.<lang>] like the table above.",
              f"# html_extract = \"auto\"  # {src_comments['html_extract']}"]
    for s in sources:
        lines.append("[[data.sources]]")
        for key, value in s.items():
            comment = f"  # {src_comments[key]}" if key in src_comments else ""
            lines.append(f"{key} = {toml_value(value)}{comment}")
        lines.append("")
    lines += _eval_set_example()
    return "\n".join(lines)


def _language_rules_example() -> list[str]:
    return ["# Per-language rules: stop words, word-length bounds, alphabetic share and sentence punctuation are read",
            "# in each document's detected language, from FineWeb-2's per-language configs (data/clean/",
            "# language_rules.json, 173 languages); a language without a stop-word list has that rule off. Override",
            "# one language for every source (false switches a rule off):",
            "# [data.language_rules.de]",
            '# stop_words = ["der", "die", "und", "in", "den"]',
            "# max_mean_word_len = 18", ""]


def _eval_set_example() -> list[str]:
    comments = _comments(C.EvalSetConfig)
    example = {"name": "support-qa", "path": "eval/support_qa.jsonl", "fields": ["question", "answer"],
               "domain": "support"}
    lines = ["# Held-out eval sets (optional): fixed before training, fingerprinted, and removed from the training",
             "# data wherever it holds a copy (`scratchlm data decontaminate`). One table per set:", "# [[eval.sets]]"]
    lines += [f"# {k} = {toml_value(v)}" + (f"  # {comments[k]}" if k in comments else "") for k, v in example.items()]
    return lines + [""]


EXAMPLE_SOURCES = [
    {"name": "docs", "domain": "docs", "path": "data/docs/", "format": "text", "weight": 1.0, "profile": "technical"},
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
