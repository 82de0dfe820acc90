"""Per-language thresholds for the heuristic quality rules, keyed by the language identifier's label ("de", "ja").

The data lives in language_rules.json next to this file. It comes from FineWeb-2's per-language filter configs
(github.com/huggingface/fineweb-2, configs/<iso639-3>_<Script>.yml; Penedo et al. 2025, "FineWeb2: One Pipeline to
Scale Them All"), mapped from fastText lid.176 labels and renamed to our rule names by
bench/build_language_rules.py, which regenerates it from a FineWeb-2 checkout. English is not in FineWeb-2 and takes
Gopher's and FineWeb's published defaults. The JSON's "_about" says what each field means and where the numbers
stop applying (scripts without spaces, Korean).

A value of None means the rule is off for that language. Users override per language from their config:

    rules_for("de", {"stop_words": ["ja", "nein"], "min_alpha_word_share": False})   # False: switch the rule off
"""
import dataclasses
import difflib
import functools
import json
from dataclasses import dataclass
from importlib import resources

from scratchlm.errors import UserError

# For a language the table does not know: sentence ends of Latin-script prose.
DEFAULT_TERMINAL_PUNCTUATION = (".", "!", "?", "…", '"', "'", "”", "’", "»", "“", "«", "‘")


@dataclass(frozen=True)
class LanguageRules:
    lang: str
    name: str
    source: str
    spaces: bool  # False: words are not separated by spaces, so whitespace tokens are not words
    stop_words: frozenset[str] | None  # None: no list for this language -> the stop-word rule is off
    min_mean_word_len: float | None
    max_mean_word_len: float | None
    min_alpha_word_share: float | None
    min_punct_line_share: float | None
    max_newlines_per_word: float | None
    terminal_punctuation: tuple[str, ...]


_FIXED = ("lang", "name", "source")


def override_keys() -> tuple[str, ...]:
    """The fields a user may set for a language."""
    return tuple(f.name for f in dataclasses.fields(LanguageRules) if f.name not in _FIXED)


@functools.cache
def _table() -> dict[str, dict]:
    text = resources.files("scratchlm.data.clean").joinpath("language_rules.json").read_text(encoding="utf-8")
    return json.loads(text)["languages"]


def known_languages() -> tuple[str, ...]:
    return tuple(sorted(_table()))


def _coerce(lang: str, key: str, value):
    """A JSON or TOML value as the dataclass holds it. False in a user's table switches a rule off (None)."""
    def bad(expected: str):
        return UserError(f"language rules for {lang!r}: {key} must be {expected}, got {value!r}")

    if key == "spaces":
        if not isinstance(value, bool):
            raise bad("true or false")
        return value
    if key == "terminal_punctuation":
        if not isinstance(value, (list, tuple)) or not all(isinstance(c, str) and c for c in value):
            raise bad("a list of strings (to switch the rule off, set min_punct_line_share = false)")
        return tuple(value)
    if value is False or value is None:
        return None
    if key == "stop_words":
        if not isinstance(value, (list, tuple)) or not all(isinstance(w, str) for w in value):
            raise bad("a list of strings, or false")
        return frozenset(w.lower() for w in value)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise bad("a number, or false")
    return float(value)


def _check_keys(lang: str, overrides: dict) -> None:
    valid = override_keys()
    for key in overrides:
        if key not in valid:
            closest = difflib.get_close_matches(key, valid, n=1, cutoff=0.0)[0]
            raise UserError(f"language rules for {lang!r}: unknown key {key!r}; did you mean {closest!r}? "
                            f"(valid keys: {', '.join(valid)})")


@functools.cache
def _base(lang: str) -> LanguageRules | None:
    entry = _table().get(lang)
    if entry is None:
        return None
    return LanguageRules(lang=lang, name=entry["name"], source=entry["source"],
                         **{k: _coerce(lang, k, entry[k]) for k in override_keys()})


def rules_for(lang: str, overrides: dict | None = None) -> LanguageRules | None:
    """The rules for a language code, with a user's overrides applied; None for an unknown code without overrides."""
    base = _base(lang)
    if not overrides:
        return base
    _check_keys(lang, overrides)
    changes = {k: _coerce(lang, k, v) for k, v in overrides.items()}
    if base is None:
        # A language the table lacks, described entirely by the user: rules they did not set stay off.
        base = LanguageRules(lang=lang, name=lang, source="config", spaces=True, stop_words=None,
                             min_mean_word_len=None, max_mean_word_len=None, min_alpha_word_share=None,
                             min_punct_line_share=None, max_newlines_per_word=None,
                             terminal_punctuation=DEFAULT_TERMINAL_PUNCTUATION)
    else:
        changes["source"] = f"{base.source} + config"
    return dataclasses.replace(base, **changes)
