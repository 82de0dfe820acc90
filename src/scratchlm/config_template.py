"""`scratchlm init`: the annotated config, generated from the dataclasses so it can never drift from them.

Two sizes: the short file (the default) holds the keys most runs change (SHORT_KEYS), `init --full` every key with
its default. Both load to the same Config for the same given values: a key the short file leaves out takes the
default the full file writes. A key's comment is its meaning (the dataclass comment) and its allowed range
(config.py, bounded()). Where the value beside it is a filter profile's or the user's, not the documented one, the
comment says who set it instead of repeating a published threshold the value departs from.
"""
from __future__ import annotations

import dataclasses
import inspect
import re
import typing
from pathlib import Path

from . import config as C
from .presets import PRESET_KEYS, PRESETS
from .toml_text import toml_value

SECTIONS = [(f.name, typing.get_type_hints(C.Config)[f.name]) for f in dataclasses.fields(C.Config) if f.name != "path"]
APART = ("sources", "tasks", "sets", "quality", "language_rules")  # tables rendered apart, with examples
# A field and its trailing comment; required fields (`path: str  # ...`) have no `=`.
_FIELD_LINE = re.compile(r"^\s+(\w+):[^=#]*(?:=\s*.*?)?(?:#\s*(.*))?$")

# What the short file writes (`scratchlm init`): where the data is, what to keep, how big a model, how long, on
# what budget. The model's shape keys are written commented out, for the preset to decide.
SHORT_KEYS = {
    "run": ("workdir",),
    "data": ("languages",),
    "tokenizer": ("vocab_size",),
    "model": ("preset", "n_layer", "d_model", "n_head", "seq_len"),
    "train": ("max_steps", "batch_size", "grad_accum", "learning_rate", "device"),
    "plan": ("budget_hours", "price_per_hour"),
}


def comments(cls) -> dict[str, str]:
    """field -> the comment beside it in config.py: the key's meaning."""
    out = {}
    for line in inspect.getsource(cls).splitlines():
        m = _FIELD_LINE.match(line)
        if m and m.group(2):
            out[m.group(1)] = m.group(2).strip()
    return out


def range_text(f: dataclasses.Field) -> str:
    """The key's allowed values from its declaration (bounded()), as validate() words them; "" if it declares none."""
    limits = f.metadata.get("range")
    if limits is None:
        return ""
    return f"{'each ' if f.default_factory is dict else ''}must be {limits}"


def _comment(*parts: str) -> str:
    text = "; ".join(p for p in parts if p)
    return f"  # {text}" if text else ""


def _shape_note(name: str, key: str, given: dict) -> tuple[typing.Any, str] | None:
    """(value, note) for a model shape key the preset decides: the preset's value, said to be the preset's."""
    preset = given.get("preset")
    if name != "model" or key not in PRESET_KEYS or key in given or preset not in PRESETS:
        return None
    return PRESETS[preset].get(key), f"from preset `{preset}`"


def _keys(name: str, cls, given: dict, only: tuple[str, ...] | None = None) -> list[str]:
    """One line per key of a section: its value (the default unless given) and its comment. only: these keys (and
    the given ones), for the short file."""
    meanings, lines = comments(cls), []
    for f in dataclasses.fields(cls):
        default = f.default if f.default is not dataclasses.MISSING else f.default_factory()
        if f.name in APART or dataclasses.is_dataclass(default):
            continue
        if only is not None and f.name not in only and f.name not in given:
            continue
        value, note = given.get(f.name, default), ""
        if (shape := _shape_note(name, f.name, given)) is not None and shape[0] is not None:
            value, note = shape
        if value is None:
            lines.append(f"# {f.name} =" + _comment(meanings.get(f.name, ""), "unset by default", range_text(f)))
            continue
        live = f.name in given or not (name == "model" and f.name in PRESET_KEYS)
        lines.append(("" if live else "# ") + f"{f.name} = {toml_value(value)}"
                     + _comment(meanings.get(f.name, ""), note, range_text(f)))
    return lines


def _section(name: str, cls, given: dict, full: bool) -> list[str]:
    """`[name]` and its keys, then its sections within ([eval.suite]); nothing for a short file with none to show."""
    lines = _keys(name, cls, given, None if full else SHORT_KEYS.get(name, ()))
    if name == "model" and lines:
        lines = (["# The shape keys a preset decides are written commented out: a live key would override the",
                  "# preset (the plan and the train log name every override). Without a preset they default",
                  "# to the values shown."] if full else
                 ["# Set a preset for the model's size; the shape keys it decides stay commented out."]) + lines
    lines = ([f"[{name}]", *lines, ""] if lines or full else [])
    for f in dataclasses.fields(cls):  # a section within the section: [eval.suite]
        if f.name not in APART and dataclasses.is_dataclass(f.default_factory):
            keys = _keys(f"{name}.{f.name}", f.default_factory, given.get(f.name, {}), None if full else ())
            if keys or full:
                doc = [f"# {line.strip()}" for line in inspect.getdoc(f.default_factory).splitlines()] if full else []
                lines += [f"[{name}.{f.name}]", *doc, *keys, ""]
    return lines


def render_config(sources: list[dict], overrides: dict[str, dict] | None = None, full: bool = True) -> str:
    """The config file: every key (full) or the short file's keys; `overrides` (section -> key -> value) are written
    live in either."""
    overrides = overrides or {}
    head = ("# scratchlm config. Every key below shows its default; delete any you do not need to change."
            if full else "# scratchlm config: the keys most runs change. `scratchlm init --full DIR` writes every key "
                         "with its\n# default and meaning; docs/config.md lists them.")
    lines = [head, "# Paths are relative to this file.", ""]
    for name, cls in SECTIONS:
        lines += _section(name, cls, overrides.get(name, {}), full)
        if name == "data":
            lines += quality_lines(overrides.get("data", {}).get("quality") or {}, full)
            lines += _language_rules_example() if full else []
    lines += _sources_lines(sources, full)
    lines += _eval_set_example() if full else []
    return "\n".join(lines)


def _sources_lines(sources: list[dict], full: bool) -> list[str]:
    src_comments = comments(C.SourceConfig)
    fields = {f.name: f for f in dataclasses.fields(C.SourceConfig)}
    if full:
        lines = ["# One table per source. name, domain and path are required. Also per source: languages, profile,",
                 '# skip_rules = ["repeated_line"] (switch ledger rules off for this source; `scratchlm data audit`',
                 "# measures which ones are wrong), and [data.sources.language_rules.<lang>] like the table above.",
                 f"# html_extract = \"auto\"  # {src_comments['html_extract']}"]
    else:
        lines = ["# One table per source: name, domain and path are required (docs/config.md lists the other keys)."]
    for s in sources:
        lines.append("[[data.sources]]")
        for key, value in s.items():
            lines.append(f"{key} = {toml_value(value)}" + _comment(src_comments.get(key, ""), range_text(fields[key])))
        lines.append("")
    return lines


# ---------------------------------------------------------------------------------------------------------------
# The filter profiles' thresholds, [data.quality.<profile>]. Their meanings are comments in clean/quality.py that
# state the published value ("at most 0.1"); a profile or a user that departs from it gets a comment saying so,
# never that text beside a value it contradicts.

def published_value(key: str):
    """The value the threshold's source published: the prose profile's (the web-crawl papers), or for a rule prose
    leaves off (the code-file rules) the code profile's."""
    from .data.quality_config import PROFILES

    prose = getattr(PROFILES["prose"], key)
    return prose if prose is not None else getattr(PROFILES["code"], key)


def quality_comment(profile: str, key: str, value, user_set: bool, doc: str) -> str:
    """doc: "origin: the rule, with its published value" (data/quality_config.py)."""
    published = published_value(key)
    if value == published:
        return doc
    if value is None:
        return f"off in the `{profile}` filter set; {doc}"
    origin = doc.split(": ", 1)[0]
    who = "your value" if user_set else f"the `{profile}` filter set's value"
    shown = toml_value(False if published is None else published)
    return f"{origin}: {who} (published: {shown}; docs/config.md describes the rule)"


def quality_lines(given_all: dict[str, dict], full: bool) -> list[str]:
    """`[data.quality.<profile>]` for every profile: each threshold commented out (the file loads back with the
    profile's own) but the keys the user set. The short file writes only the profiles and keys the user set."""
    from .data.clean.quality import QualityConfig
    from .data.quality_config import PROFILES, field_docs, profile_config

    docs, lines = field_docs(), []
    for name in PROFILES:
        given = given_all.get(name, {})
        if not (full or given):
            continue
        cfg = profile_config(name, given)
        lines.append(f"[data.quality.{name}]  # thresholds of the `{name}` filter set; false switches a rule off")
        for f in dataclasses.fields(QualityConfig):
            if not (full or f.name in given):
                continue
            value = getattr(cfg, f.name)
            comment = quality_comment(name, f.name, value, f.name in given, docs.get(f.name, ""))
            lines.append(f"{'' if f.name in given else '# '}{f.name} = {toml_value(False if value is None else value)}"
                         + _comment(comment))
        lines.append("")
    return lines


def _language_rules_example() -> list[str]:
    return ["# Per-language rules: stop words, word-length bounds, alphabetic share and sentence punctuation are read",
            "# in each document's detected language, from FineWeb-2's per-language configs (data/clean/",
            "# language_rules.json, 173 languages); a language without a stop-word list has that rule off. Override",
            "# one language for every source (false switches a rule off):",
            "# [data.language_rules.de]",
            '# stop_words = ["der", "die", "und", "in", "den"]',
            "# max_mean_word_len = 18", ""]


def _eval_set_example() -> list[str]:
    meanings = comments(C.EvalSetConfig)
    example = {"name": "support-qa", "path": "eval/support_qa.jsonl", "fields": ["question", "answer"],
               "domain": "support"}
    lines = ["# Held-out eval sets (optional): fixed before training, fingerprinted, and removed from the training",
             "# data wherever it holds a copy (`scratchlm data decontaminate`). One table per set:", "# [[eval.sets]]"]
    lines += [f"# {k} = {toml_value(v)}" + _comment(meanings.get(k, "")) for k, v in example.items()]
    return lines + [""]


EXAMPLE_SOURCES = [
    {"name": "docs", "domain": "docs", "path": "data/docs/", "format": "text", "weight": 1.0, "profile": "technical"},
    {"name": "forum", "domain": "forum", "path": "data/forum/*.jsonl.zst", "text_field": "text", "weight": 1.0},
]


def write_init(directory: Path, full: bool = False) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "scratchlm.toml"
    if path.exists():
        from .errors import UserError

        raise UserError(f"{path} already exists; not overwriting it")
    path.write_text(render_config(EXAMPLE_SOURCES, full=full), encoding="utf-8")
    return path
