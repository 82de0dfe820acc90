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
from dataclasses import dataclass
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


def field_docs() -> dict[str, str]:
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


# ---------------------------------------------------------------------------------------------------------
# The profile read in the document's language
#
# A profile's thresholds are English (Gopher's stop words, word lengths, ASCII sentence ends). Every rule that
# depends on the language takes that language's value from clean/language_rules.json instead (FineWeb-2's
# per-language configs), and is off for a language the table does not know. Precedence, highest first: the
# source's `language_rules.<lang>`, `[data.language_rules.<lang>]`, a key the user set in the profile's table,
# the language table loosened by the profile (technical text keeps the looser of its own and the language's
# bound), the profile.

# QualityConfig field -> LanguageRules field, with the direction in which a value is looser.
_LANGUAGE_FIELDS = {
    "min_mean_word_len": ("min_mean_word_len", min),
    "max_mean_word_len": ("max_mean_word_len", max),
    "min_alpha_word_share": ("min_alpha_word_share", min),
    "fw_min_punct_line_share": ("min_punct_line_share", min),
    "fw_max_newlines_per_word": ("max_newlines_per_word", max),
}
# Rules counted in whitespace-separated words: meaningless in a script written without spaces.
_WORD_FIELDS = ("min_words", "max_words", "min_mean_word_len", "max_mean_word_len", "min_stop_words",
                "fw_max_newlines_per_word", "max_hash_per_word", "max_ellipsis_per_word")


@dataclass(frozen=True)
class QualitySettings:
    """What the quality step of one source needs: its profile (user overrides applied), which profile keys the
    user set, and the per-language overrides (data-wide, then the source's)."""
    profile: str
    config: QualityConfig
    user_keys: tuple[str, ...]
    language_overrides: tuple[tuple[str, tuple[tuple[str, Any], ...]], ...] = ()

    @classmethod
    def of_source(cls, source, data, profile: str) -> "QualitySettings":
        """`profile`: the source's filter set, resolved when the config left it to `auto`."""
        given = getattr(data.quality, profile)
        merged = {lang: dict(v) for lang, v in data.language_rules.items()}
        for lang, v in source.language_rules.items():
            merged.setdefault(lang, {}).update(v)
        frozen = tuple(sorted((lang, tuple(sorted((k, tuple(x) if isinstance(x, list) else x)
                                                  for k, x in v.items()))) for lang, v in merged.items()))
        return cls(profile, profile_config(profile, given), tuple(sorted(given)), frozen)

    def for_language(self, lang: str | None) -> tuple[QualityConfig, list[str]]:
        """(the profile read in `lang`, the language-dependent rules that are off for lack of data: no entry for the
        language, no stop-word list, or a script without spaces; a threshold FineWeb-2 set to "off" for a
        language is its published choice and not listed)."""
        from .clean.language_rules import rules_for

        cfg, base, off = self.config, self.config, []
        overrides = {k: list(v) if isinstance(v, tuple) else v
                     for k, v in dict(self.language_overrides).get(lang or "", ())}
        rules = rules_for(lang, overrides) if lang else None
        change: dict[str, Any] = {}
        if base.min_stop_words is not None and "stop_words" not in self.user_keys:
            if rules is None or rules.stop_words is None:
                change["min_stop_words"] = None
                off.append("stop_words")
            else:
                change["stop_words"] = tuple(sorted(rules.stop_words))
        for field_name, (rule_field, looser) in _LANGUAGE_FIELDS.items():
            ours = getattr(base, field_name)
            if ours is None or field_name in self.user_keys:
                continue
            theirs = getattr(rules, rule_field) if rules is not None else None
            if theirs is None:  # FineWeb-2 switched it off for this language, or we know nothing of it
                change[field_name] = None
                if rules is None:
                    off.append(field_name)
                continue
            relaxed = getattr(PROSE, field_name) != ours  # the profile loosened the English bound on purpose
            change[field_name] = looser(ours, theirs) if relaxed else theirs
        ends = rules.terminal_punctuation if rules is not None else None
        if ends:
            if base.c4_terminal_punctuation is not None:
                change["c4_terminal_punctuation"] = tuple(ends)
            change["fw_punctuation"] = tuple(ends)
        if rules is not None and not rules.spaces:
            for field_name in _WORD_FIELDS:
                if getattr(base, field_name) is not None:
                    change[field_name] = None
            off.append("word-count rules (no spaces between words)")
            change["max_top_ngram_char_share"] = ()
            change["max_dup_ngram_char_share"] = ()
        return dataclasses.replace(cfg, **change), sorted(set(off))
