"""docs/config.md, the config reference: `python -m scratchlm.config_reference > docs/config.md`.

Every key with its default, its allowed values and its meaning, read from config.py (the defaults, the ranges
declared beside each key by bounded(), the CHOICES table validate() checks, the comment beside each key); then the
filter profiles' thresholds, one column per profile, each threshold's published value and source cited once. A test
compares the committed file with this output, so the reference cannot drift from the code.
"""
from __future__ import annotations

import dataclasses
import typing

from . import config as C
from .config_template import comments, published_value
from .toml_text import toml_value

HEADER = """# Config reference

Generated from `src/scratchlm/config.py` by `python -m scratchlm.config_reference > docs/config.md`; do not edit
by hand (a test checks that this file matches). `scratchlm init DIR` writes the keys most runs change;
`scratchlm init --full DIR` writes every key below with its default. A file holding only `[[data.sources]]` tables
is a valid config: every other key has the default shown. Keys marked *operational* change how a stage runs, never
what it produces, so changing one reruns nothing.
"""


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def _default(f: dataclasses.Field) -> str:
    if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
        return "required"
    value = f.default if f.default is not dataclasses.MISSING else f.default_factory()
    return "unset" if value is None else f"`{toml_value(value)}`"


def _allowed(dotted: str, f: dataclasses.Field) -> str:
    if (limits := f.metadata.get("range")) is not None:
        return f"{'each ' if f.default_factory is dict else ''}{limits}"
    if dotted in C.CHOICES:
        return C.either(C.CHOICES[dotted])
    if dotted == "data.sources.profile":
        from .data.quality_config import PROFILES

        return C.either((*PROFILES, "auto"))
    if f.metadata.get("file_name"):
        return C.FILE_NAME_RULE
    return ""


def _rows(dotted: str, cls) -> list[str]:
    meanings = comments(cls)
    rows = ["| key | default | allowed | meaning |", "|---|---|---|---|"]
    for f in dataclasses.fields(cls):
        table = dataclasses.is_dataclass(f.default_factory)
        if table and f.name != "quality":
            continue  # a section within the section: its own table below
        key = f"{dotted}.{f.name}"
        meaning = meanings.get(f.name, "") + (" (*operational*)" if f.metadata.get("in_id") is False else "")
        default = "none" if table else _default(f)  # [data.quality]: see the profiles' table
        rows.append(f"| `{f.name}` | {_cell(default)} | {_cell(_allowed(key, f))} | {_cell(meaning)} |")
    return rows


def _tables(dotted: str, cls, title: str) -> list[str]:
    """The section's table, then those of the sections and [[tables]] within it."""
    lines = [f"## {title}", ""]
    if not cls.__doc__.startswith(f"{cls.__name__}("):  # dataclasses make up a docstring for a class without one
        lines += [" ".join(cls.__doc__.split()), ""]
    lines += _rows(dotted, cls) + [""]
    hints = typing.get_type_hints(cls)
    for f in dataclasses.fields(cls):
        inner = typing.get_args(hints[f.name])
        if dataclasses.is_dataclass(f.default_factory) and f.name != "quality":
            lines += _tables(f"{dotted}.{f.name}", f.default_factory, f"[{dotted}.{f.name}]")
        elif typing.get_origin(hints[f.name]) is list and inner and dataclasses.is_dataclass(inner[0]):
            lines += _tables(f"{dotted}.{f.name}", inner[0], f"[[{dotted}.{f.name}]]")
    return lines


def _shown(value) -> str:
    return "off" if value is None else f"`{toml_value(value)}`"


def _quality_table() -> list[str]:
    from .data.clean.quality import QualityConfig
    from .data.quality_config import PROFILES, field_docs

    docs = field_docs()
    lines = ["## Filter profiles: [data.quality.<profile>]", "",
             "Each source is filtered by one profile (`data.sources.profile`; `auto` picks prose or technical from "
             "the source's documents). A key set in `[data.quality.<profile>]` replaces that profile's value; `false` "
             "switches a rule off. The rule column states the source and the published value; the language-dependent "
             "rules (stop words, word lengths, alphabetic share, sentence punctuation) are read in each document's "
             "language from FineWeb-2's per-language tables, and `[data.language_rules.<lang>]` overrides them.", "",
             f"| key | {' | '.join(PROFILES)} | published | rule (source) |",
             f"|---|{'---|' * len(PROFILES)}---|---|"]
    for f in dataclasses.fields(QualityConfig):
        values = " | ".join(_cell(_shown(getattr(p, f.name))) for p in PROFILES.values())
        rule = _cell(docs.get(f.name, ""))
        lines.append(f"| `{f.name}` | {values} | {_cell(_shown(published_value(f.name)))} | {rule} |")
    return lines + [""]


def render_reference() -> str:
    hints = typing.get_type_hints(C.Config)
    lines = [HEADER]
    for f in dataclasses.fields(C.Config):
        if f.name != "path":
            lines += _tables(f.name, hints[f.name], f"[{f.name}]")
    lines += _quality_table()
    return "\n".join(lines)


if __name__ == "__main__":
    print(render_reference(), end="")
