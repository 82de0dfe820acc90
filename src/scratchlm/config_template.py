"""`scratchlm init`: the full annotated config, generated from the dataclasses so it can never drift from them."""
from __future__ import annotations

import dataclasses
import inspect
import re
from pathlib import Path

from . import config as C
from .model.presets import PRESET_KEYS

SECTIONS = [("run", C.RunConfig), ("data", C.DataConfig), ("tokenizer", C.TokenizerConfig),
            ("shards", C.ShardsConfig), ("model", C.ModelConfig), ("train", C.TrainConfig), ("eval", C.EvalConfig),
            ("decontaminate", C.DecontaminateConfig), ("sft", C.SFTConfig),
            ("monitor", C.MonitorConfig)]
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
        if name == "model":
            lines += ["# The shape keys a preset decides are written commented out: a live key would override the",
                      "# preset (the plan and the train log name every override). Without a preset they default",
                      "# to the values shown."]
        for f in dataclasses.fields(cls):
            if f.name in ("sources", "tasks", "sets", "quality", "language_rules"):  # tables are rendered apart
                continue
            default = f.default if f.default is not dataclasses.MISSING else f.default_factory()
            given = f.name in overrides.get(name, {})
            value = overrides[name][f.name] if given else default
            if value is None:
                lines.append(f"# {f.name} =   # {comments.get(f.name, '')} (unset by default)")
                continue
            comment = f"  # {comments[f.name]}" if f.name in comments else ""
            live = given or not (name == "model" and f.name in PRESET_KEYS)
            lines.append(("" if live else "# ") + f"{f.name} = {_toml_value(value)}{comment}")
        lines.append("")
        if name == "data":
            from .data.quality_config import template_lines

            lines += template_lines(overrides.get("data", {}).get("quality"))
            lines += _language_rules_example()
    src_comments = _comments(C.SourceConfig)
    lines += ["# One table per source. name, domain and path are required. Also per source: languages, profile,",
              '# skip_rules = ["repeated_line"] (switch ledger rules off for this source; `scratchlm data audit`',
              "# measures which ones are wrong), and [data.sources.language_rules.<lang>] like the table above."]
    for s in sources:
        lines.append("[[data.sources]]")
        for key, value in s.items():
            comment = f"  # {src_comments[key]}" if key in src_comments else ""
            lines.append(f"{key} = {_toml_value(value)}{comment}")
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
    lines += [f"# {k} = {_toml_value(v)}" + (f"  # {comments[k]}" if k in comments else "") for k, v in example.items()]
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
