"""The per-language rule table (FineWeb-2 configs mapped to lid.176 codes), its loader, and the prose fixtures."""
import json
from pathlib import Path

import pytest

from scratchlm.data.clean.language_rules import LanguageRules, known_languages, override_keys, rules_for
from scratchlm.errors import UserError

PROSE = Path(__file__).parent / "fixtures" / "prose"
FIXTURE_LANGS = ("de", "fr", "es", "nl")
# Korean has spaces, but FineWeb-2's Korean stop words are morphemes that never stand alone between spaces.
NO_WHITESPACE_STOP_WORDS = {"ko"}


def _docs(lang: str) -> list[dict]:
    with open(PROSE / f"{lang}.jsonl", encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


@pytest.mark.parametrize("lang", known_languages())
def test_every_entry_is_complete(lang):
    r = rules_for(lang)
    assert isinstance(r, LanguageRules) and r.lang == lang
    assert r.name and r.source
    assert "." in r.terminal_punctuation and "!" in r.terminal_punctuation and "?" in r.terminal_punctuation
    if r.spaces and lang not in NO_WHITESPACE_STOP_WORDS:
        assert r.stop_words, f"{lang}: no stop words"
        assert all(w == w.lower() and w.strip() for w in r.stop_words)
    if not r.spaces:
        # words are not whitespace tokens there: the word rules must be off
        assert r.stop_words is None and r.min_mean_word_len is None and r.max_mean_word_len is None
    for share in (r.min_alpha_word_share, r.min_punct_line_share):
        assert share is None or 0 < share <= 1


def test_coverage():
    langs = set(known_languages())
    assert len(langs) >= 30
    must = ("en de fr es nl it pt ru pl ja zh ko ar tr vi id sv cs uk fa hi el ro hu da fi no he th bg ca sk hr sr "
            "lt sl et lv bn ta").split()
    assert not [lang for lang in must if lang not in langs]
    assert list(known_languages()) == sorted(langs)


@pytest.mark.parametrize("lang", ["ja", "zh", "th"])
def test_scripts_without_spaces(lang):
    r = rules_for(lang)
    assert r.spaces is False and r.stop_words is None
    assert "。" in rules_for("ja").terminal_punctuation and "。" in rules_for("zh").terminal_punctuation


def test_known_values():
    de = rules_for("de")
    assert {"der", "die", "und"} <= de.stop_words and "für" in de.stop_words
    assert de.max_mean_word_len == 15 and de.min_alpha_word_share == pytest.approx(0.774)
    assert de.min_punct_line_share is None  # FineWeb-2's 0.0: the rule is off for German
    en = rules_for("en")
    assert en.stop_words == frozenset(["the", "be", "to", "of", "and", "that", "have", "with"])
    assert (en.min_mean_word_len, en.max_mean_word_len, en.min_alpha_word_share) == (3, 10, 0.8)
    assert "srp_Latn" in rules_for("sr").source
    assert {"i", "je"} <= rules_for("sr").stop_words  # Latin-script Serbian passes too
    assert "।" in rules_for("hi").terminal_punctuation and "؟" in rules_for("ar").terminal_punctuation
    assert rules_for("als").name == "Alemannic"  # lid.176's als is not ISO 639-3 als (Tosk Albanian)


def test_unknown_language():
    assert rules_for("xx") is None
    assert rules_for("xx", {}) is None


def test_overrides():
    r = rules_for("de", {"min_alpha_word_share": False, "stop_words": ["Ja", "nein"], "max_mean_word_len": 18})
    assert r.min_alpha_word_share is None
    assert r.stop_words == frozenset(["ja", "nein"])
    assert r.max_mean_word_len == 18.0 and r.min_mean_word_len == rules_for("de").min_mean_word_len
    assert r.source.endswith("+ config")
    assert rules_for("de").min_alpha_word_share == pytest.approx(0.774)  # the cached base is untouched


def test_overrides_for_a_language_not_in_the_table():
    r = rules_for("xx", {"stop_words": ["ka", "mo"], "terminal_punctuation": [".", "!"]})
    assert r.lang == "xx" and r.source == "config" and r.spaces is True
    assert r.stop_words == frozenset(["ka", "mo"]) and r.terminal_punctuation == (".", "!")
    assert r.min_mean_word_len is None and r.min_alpha_word_share is None
    assert "." in rules_for("xx", {"spaces": False}).terminal_punctuation


def test_unknown_override_key_suggests_the_closest():
    with pytest.raises(UserError, match=r"'stopwords'.*did you mean 'stop_words'"):
        rules_for("de", {"stopwords": ["ja"]})
    with pytest.raises(UserError, match="did you mean"):
        rules_for("xx", {"min_alpha_share": 0.5})


def test_bad_override_values():
    with pytest.raises(UserError, match="stop_words"):
        rules_for("de", {"stop_words": "der"})  # a string, not a list
    with pytest.raises(UserError, match="max_mean_word_len"):
        rules_for("de", {"max_mean_word_len": "18"})
    with pytest.raises(UserError, match="terminal_punctuation"):
        rules_for("de", {"terminal_punctuation": False})


def test_override_keys():
    assert set(override_keys()) == {f for f in LanguageRules.__dataclass_fields__} - {"lang", "name", "source"}


@pytest.mark.parametrize("lang", FIXTURE_LANGS)
def test_prose_fixture_parses(lang):
    docs = _docs(lang)
    assert 25 <= len(docs) <= 40
    assert (PROSE / f"{lang}.jsonl").stat().st_size < 120_000
    for d in docs:
        assert set(d) == {"text", "origin"} and ":" in d["origin"]
        paragraphs = d["text"].split("\n\n")
        assert len(d["text"]) >= 1500 and 5 <= len(paragraphs) <= 12


@pytest.mark.parametrize("lang", FIXTURE_LANGS)
def test_stop_words_fit_real_prose(lang):
    # Gopher's rule: at least 2 stop-word occurrences. Every real document must clear it by its own language's list.
    stop_words = rules_for(lang).stop_words
    for d in _docs(lang):
        words = [w.strip(".,;:!?()[]\"'“”„«»").lower() for w in d["text"].split()]
        assert sum(w in stop_words for w in words) >= 2, d["origin"]
