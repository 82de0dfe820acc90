"""Heuristic document-quality rules: Gopher quality + repetition, C4, FineWeb, and code-file checks.

quality_verdict(text, cfg) returns the rules a document fails (empty list = keep); c4_filter_lines removes
the lines C4 drops. Every threshold lives in QualityConfig; a rule whose threshold is None is off, which
is how profile_for_domain("code") switches off the rules that only make sense for prose.

References:
  Gopher: Rae et al. 2021, "Scaling Language Models: Methods, Analysis & Insights from Training Gopher",
          appendix A.1.1 (quality filter) and table A1 (repetition thresholds).
  C4:     Raffel et al. 2020, "Exploring the Limits of Transfer Learning with a Unified Text-to-Text
          Transformer" (T5), section 2.2.
  FineWeb: Penedo et al. 2024, "The FineWeb Datasets", section 3.4; defaults of datatrove's
          FineWebQualityFilter.
  Code:   Chen et al. 2021, "Evaluating Large Language Models Trained on Code" (Codex), section 3.1;
          Li et al. 2023, "StarCoder: may the source be with you!", section 3.
"""
import dataclasses
import re
import string
from dataclasses import dataclass

import numpy as np

from ..paragraph_split import split_paragraphs
from .structure import similarity_text

_PUNCT = string.punctuation + "“”‘’«»…–—"
_BULLETS = ("•", "●", "○", "▪", "◦", "‣", "⁃", "-", "*", "–")
_ELLIPSES = ("...", "…")
# A sentence: some word characters, then terminal punctuation (optionally closed by quotes/brackets),
# then whitespace or the end. Good enough to count sentences without a tokenizer model.
_SENTENCE_END = re.compile(r"\w[^.!?]*[.!?]+[\"'”’)\]]*(?=\s|$)")


@dataclass(frozen=True)
class QualityConfig:
    # --- Gopher quality filter (Rae et al. 2021, A.1.1) ----------------------------------------------
    # Word count bounds; a "word" is a whitespace token with at least one non-punctuation character.
    min_words: int | None = 50
    max_words: int | None = 100_000
    # Mean word length (characters, surrounding punctuation stripped) must lie in [3, 10].
    min_mean_word_len: float | None = 3.0
    max_mean_word_len: float | None = 10.0
    # Symbol-to-word ratio, for the hash symbol and for the ellipsis separately: at most 0.1.
    max_hash_per_word: float | None = 0.1
    max_ellipsis_per_word: float | None = 0.1
    # At most 90% of lines may start with a bullet point.
    max_bullet_line_share: float | None = 0.9
    # At most 30% of lines may end with an ellipsis.
    max_ellipsis_line_share: float | None = 0.3
    # At least 80% of words must contain an alphabetic character.
    min_alpha_word_share: float | None = 0.8
    # Count that share on the text outside tables and code blocks (structure.similarity_text): the rule looks for
    # text that is not language, and a reference page's table of code points is not that.
    alpha_share_outside_tables: bool = False
    # At least 2 occurrences of these English stop words (occurrences, not distinct words, as datatrove's
    # GopherQualityFilter counts them).
    min_stop_words: int | None = 2
    stop_words: tuple[str, ...] = ("the", "be", "to", "of", "and", "that", "have", "with")

    # --- Gopher repetition filter (Rae et al. 2021, table A1) ----------------------------------------
    max_dup_line_share: float | None = 0.30  # lines that repeat an earlier line / all lines
    max_dup_paragraph_share: float | None = 0.30  # same, for blank-line-separated paragraphs
    max_dup_line_char_share: float | None = 0.20  # characters in duplicate lines / characters in lines
    max_dup_paragraph_char_share: float | None = 0.20  # same, for paragraphs
    # (n, max share of word characters covered by the single most frequent n-gram)
    max_top_ngram_char_share: tuple[tuple[int, float], ...] = ((2, 0.20), (3, 0.18), (4, 0.16))
    # (n, max share of word characters covered by n-grams that already occurred earlier in the document)
    max_dup_ngram_char_share: tuple[tuple[int, float], ...] = (
        (5, 0.15), (6, 0.14), (7, 0.13), (8, 0.12), (9, 0.11), (10, 0.10),
    )

    # --- C4 (Raffel et al. 2020, 2.2) -----------------------------------------------------------------
    # Line rules, applied by c4_filter_lines: keep only lines ending in terminal punctuation (. ! ? or an
    # end quote), with at least 3 words, and without the word "javascript" (enable-JS warnings).
    c4_terminal_punctuation: tuple[str, ...] | None = (".", "!", "?", '"', "'", "”", "’")
    c4_min_words_per_line: int | None = 3
    c4_drop_javascript_lines: bool = True
    # Document rules: at least 5 sentences; no "lorem ipsum" placeholder; no curly bracket (C4's test for
    # code that slipped into prose pages).
    c4_min_sentences: int | None = 5
    c4_reject_lorem_ipsum: bool = True
    c4_reject_curly_braces: bool = True

    # --- FineWeb (Penedo et al. 2024, 3.4; datatrove FineWebQualityFilter defaults) --------------------
    # At least 12% of lines end with terminal punctuation (. ' " ! ?).
    fw_min_punct_line_share: float | None = 0.12
    fw_punctuation: tuple[str, ...] = (".", "'", '"', "!", "?")
    # At most 67% of lines may be short (<= 30 characters).
    fw_max_short_line_share: float | None = 0.67
    fw_short_line_chars: int = 30
    # Characters in duplicated lines / all non-newline characters: at most 1% (char_dup_ratio).
    fw_max_dup_line_char_ratio: float | None = 0.01
    # Newlines per word: above 0.3 the document is a list (menus, tag clouds, link lists), not prose.
    fw_max_newlines_per_word: float | None = 0.3

    # --- Code files (Codex 3.1, StarCoder 3); off for prose --------------------------------------------
    # Longest line at most 1000 chars (Codex). This is what catches minified JS/CSS and data blobs,
    # which are one or a few huge lines.
    code_max_line_chars: int | None = None
    # Mean line length at most 100 chars (Codex).
    code_max_mean_line_chars: float | None = None
    # Share of alphanumeric characters at least 0.25 (StarCoder; Codex: "small percentage").
    code_min_alnum_share: float | None = None
    # Auto-generation markers searched (case-insensitively) in the first 5 lines (StarCoder's
    # auto-generated filter looks at the first 5 lines); 0 or None disables it.
    code_autogen_head_lines: int | None = None
    code_autogen_markers: tuple[str, ...] = (
        "do not edit", "auto-generated", "autogenerated", "automatically generated", "generated by",
        "@generated", "code generated",
    )


PROSE = QualityConfig()

CODE = dataclasses.replace(
    PROSE,
    # Prose-only rules off: code has few English stop words, few sentence ends, many symbol tokens,
    # "#" comments, "..." in doctests, "-"/"*" leading lines, curly braces, short lines and repeated
    # lines ("}", "return None") by nature.
    min_words=10,  # a file under 10 tokens carries nothing to learn from
    min_mean_word_len=None, max_mean_word_len=None,
    max_hash_per_word=None, max_ellipsis_per_word=None,
    max_bullet_line_share=None, max_ellipsis_line_share=None,
    min_alpha_word_share=None, min_stop_words=None,
    max_dup_line_share=None, max_dup_paragraph_share=None,
    max_dup_line_char_share=None, max_dup_paragraph_char_share=None,
    max_top_ngram_char_share=(),
    # Copy-pasted blocks are still bad in code, but legitimate code repeats 10-token spans far more than
    # prose does (argument lists, test boilerplate): only flag files that are mostly repeated spans.
    # Measured on CPython 3.11's Lib/*.py and Lib/*/*.py (1063 files): median 0.013, 99th pct 0.26, max 0.54.
    max_dup_ngram_char_share=((10, 0.60),),
    c4_terminal_punctuation=None, c4_min_words_per_line=None, c4_drop_javascript_lines=False,
    c4_min_sentences=None, c4_reject_lorem_ipsum=False, c4_reject_curly_braces=False,
    fw_min_punct_line_share=None, fw_max_short_line_share=None,
    fw_max_dup_line_char_ratio=None, fw_max_newlines_per_word=None,
    code_max_line_chars=1000, code_max_mean_line_chars=100.0, code_min_alnum_share=0.25,
    code_autogen_head_lines=5,
)


# Technical prose: documentation, READMEs, manuals, API references, support tickets. Real sentences, so the
# Gopher quality and repetition rules stay, but interleaved with code blocks, Markdown headings, tables, URLs and
# command lines, which the web-crawl rules read as junk. Measured on the built-in corpus (pydoc topics and PyPI
# READMEs): the prose profile keeps 30% and 10% of their characters, mostly lost to the C4 line rules, the curly
# brace rule and FineWeb's 1% duplicate-line budget (a repeated ``` fence or table rule is enough to fail it).
TECHNICAL = dataclasses.replace(
    PROSE,
    max_mean_word_len=15.0,  # identifiers and URLs are long words
    max_hash_per_word=0.5,  # Markdown headings and shell comments
    min_alpha_word_share=0.5,  # operators, numbers and punctuation tokens in code lines
    alpha_share_outside_tables=True,  # man-pl/ascii(7), a table of 128 codes, measured 0.498 with its table
    c4_terminal_punctuation=None, c4_min_words_per_line=None, c4_drop_javascript_lines=False,  # code lines
    c4_min_sentences=None, c4_reject_curly_braces=False,  # a reference page has few sentences and many `{`
    fw_min_punct_line_share=None, fw_max_short_line_share=None,  # code lines are short and end in anything
    fw_max_dup_line_char_ratio=None,  # fences, table rules, "Returns:"; Gopher's duplicate-line shares remain
    # Off: a reference table extracted from HTML puts one cell per line (on the Python docs, the 4 pages this
    # rule dropped at 0.5 were the errno, http, audit-events and asyncio API tables).
    fw_max_newlines_per_word=None,
    # Code examples repeat short lines ("}", "let x = 1;") and identifiers: Gopher's line-level duplicate shares
    # read that as spam (on the Rust error index, 143 of 522 pages failed the line rule; the ones read were fine).
    max_dup_line_share=None, max_dup_line_char_share=None,
    # A reference page repeats its templates ("Availability: Unix.", "Changed in version 3.3:", "Defaults to
    # false.") in every entry; spam repeats whole passages. On 1,375 real pages (Python library docs, man pages
    # and the Debian Reference in 5 languages; docs/benchmarks.md) the largest shares were: repeated 5-grams
    # 0.31, 10-grams 0.28, top 2-gram 0.30, repeated paragraphs 0.42, and Gopher's bounds dropped 60 of them,
    # every one a real page. A page pasted twice scores about 0.5 on all of these and is still caught.
    max_dup_paragraph_share=0.5, max_dup_paragraph_char_share=0.45,
    max_top_ngram_char_share=((2, 0.40), (3, 0.37), (4, 0.34)),
    max_dup_ngram_char_share=((5, 0.45), (6, 0.44), (7, 0.43), (8, 0.42), (9, 0.41), (10, 0.40)),
)


def profile_for_domain(domain: str | None) -> QualityConfig:
    """The rule set for a document domain: "code" gets the code profile, every other domain is prose."""
    return CODE if (domain or "").strip().lower() == "code" else PROSE


@dataclass(frozen=True)
class Failure:
    rule: str  # e.g. "gopher_min_words", "c4_curly_braces", "fw_dup_line_char_ratio"
    value: float  # the document's measured value
    threshold: float  # the bound it broke


# ---------------------------------------------------------------------------------------------------------


class _Doc:
    """The splits every rule needs, computed once per document."""

    def __init__(self, text: str):
        self.text = text
        self.tokens = text.split()
        self.words = [t for t in self.tokens if t.strip(_PUNCT)]
        self.lines = [line.strip() for line in text.split("\n") if line.strip()]
        self.paragraphs = [p.strip() for p in split_paragraphs(text, any_space=True) if p.strip()]


def _high(out: list[Failure], rule: str, value: float, limit: float | None) -> None:
    if limit is not None and value > limit:
        out.append(Failure(rule, float(value), float(limit)))


def _low(out: list[Failure], rule: str, value: float, limit: float | None) -> None:
    if limit is not None and value < limit:
        out.append(Failure(rule, float(value), float(limit)))


def quality_verdict(text: str, cfg: QualityConfig = PROSE) -> list[Failure]:
    """Every rule the document fails under cfg; an empty list means keep it."""
    doc = _Doc(text)
    out: list[Failure] = []
    _low(out, "gopher_min_words", len(doc.words), cfg.min_words)
    _high(out, "gopher_max_words", len(doc.words), cfg.max_words)
    if not doc.words:
        return out  # every ratio below is undefined for a document without words
    _gopher_quality(doc, cfg, out)
    _gopher_repetition(doc, cfg, out)
    _c4_document(doc, cfg, out)
    _fineweb(doc, cfg, out)
    _code(doc, cfg, out)
    return out


def _gopher_quality(doc: _Doc, cfg: QualityConfig, out: list[Failure]) -> None:
    n_words = len(doc.words)
    mean_len = sum(len(w.strip(_PUNCT)) for w in doc.words) / n_words
    _low(out, "gopher_min_mean_word_len", mean_len, cfg.min_mean_word_len)
    _high(out, "gopher_max_mean_word_len", mean_len, cfg.max_mean_word_len)
    _high(out, "gopher_hash_per_word", doc.text.count("#") / n_words, cfg.max_hash_per_word)
    n_ellipses = sum(doc.text.count(e) for e in _ELLIPSES)
    _high(out, "gopher_ellipsis_per_word", n_ellipses / n_words, cfg.max_ellipsis_per_word)
    if doc.lines:
        bullets = sum(line.startswith(_BULLETS) for line in doc.lines) / len(doc.lines)
        _high(out, "gopher_bullet_line_share", bullets, cfg.max_bullet_line_share)
        ellipsis_lines = sum(line.endswith(_ELLIPSES) for line in doc.lines) / len(doc.lines)
        _high(out, "gopher_ellipsis_line_share", ellipsis_lines, cfg.max_ellipsis_line_share)
    tokens = similarity_text(doc.text).split() if cfg.alpha_share_outside_tables else doc.tokens
    alpha = sum(any(c.isalpha() for c in t) for t in tokens) / max(len(tokens), 1)
    _low(out, "gopher_alpha_word_share", alpha, cfg.min_alpha_word_share)
    if cfg.min_stop_words is not None:
        stop = set(cfg.stop_words)
        n_stop = sum(w.strip(_PUNCT).lower() in stop for w in doc.words)
        _low(out, "gopher_stop_words", n_stop, cfg.min_stop_words)


def _duplicates(items: list[str]) -> tuple[int, int]:
    """(number of items equal to an earlier item, characters in those repeats)."""
    seen: set[str] = set()
    n_dup = dup_chars = 0
    for item in items:
        if item in seen:
            n_dup += 1
            dup_chars += len(item)
        else:
            seen.add(item)
    return n_dup, dup_chars


def _dup_shares(items: list[str]) -> tuple[float, float]:
    """(share of items that repeat an earlier item, share of item characters in those repeats)."""
    n_dup, dup_chars = _duplicates(items)
    return n_dup / max(len(items), 1), dup_chars / max(sum(len(item) for item in items), 1)


# Random odd 64-bit multipliers: an n-gram's key is sum(word_id[i + j] * _MIX[j]) mod 2**64, which makes
# n-gram counting a few numpy calls. A collision needs a 2**-64 coincidence.
_MIX = np.random.default_rng(1729).integers(1, 2**63, size=16, dtype=np.uint64) * np.uint64(2) + np.uint64(1)


def _ngram_keys(ids: np.ndarray, n: int) -> np.ndarray:
    keys = np.zeros(len(ids) - n + 1, dtype=np.uint64)
    for j in range(n):
        keys += ids[j : len(ids) - n + 1 + j] * _MIX[j]
    return keys


def _gopher_repetition(doc: _Doc, cfg: QualityConfig, out: list[Failure]) -> None:
    line_share, line_chars = _dup_shares(doc.lines)
    _high(out, "gopher_dup_line_share", line_share, cfg.max_dup_line_share)
    _high(out, "gopher_dup_line_char_share", line_chars, cfg.max_dup_line_char_share)
    para_share, para_chars = _dup_shares(doc.paragraphs)
    _high(out, "gopher_dup_paragraph_share", para_share, cfg.max_dup_paragraph_share)
    _high(out, "gopher_dup_paragraph_char_share", para_chars, cfg.max_dup_paragraph_char_share)
    if not cfg.max_top_ngram_char_share and not cfg.max_dup_ngram_char_share:
        return

    words = doc.words
    vocab: dict[str, int] = {}
    ids = np.fromiter((vocab.setdefault(w, len(vocab)) for w in words), dtype=np.uint64, count=len(words))
    word_len = np.fromiter((len(w) for w in words), dtype=np.int64, count=len(words))
    total_chars = int(word_len.sum())
    prefix = np.concatenate([[0], np.cumsum(word_len)])

    for n, limit in cfg.max_top_ngram_char_share:
        if len(words) < n:
            continue
        _, first, counts = np.unique(_ngram_keys(ids, n), return_index=True, return_counts=True)
        top = int(np.argmax(counts))
        if counts[top] < 2:
            continue
        ngram_chars = int(prefix[first[top] + n] - prefix[first[top]])
        share = min(1.0, ngram_chars * int(counts[top]) / total_chars)
        _high(out, f"gopher_top_{n}gram_char_share", share, limit)

    for n, limit in cfg.max_dup_ngram_char_share:
        if len(words) < n:
            continue
        n_pos = len(words) - n + 1
        _, first = np.unique(_ngram_keys(ids, n), return_index=True)
        repeat = np.ones(n_pos, dtype=bool)
        repeat[first] = False  # first occurrences are not duplicates
        starts = np.flatnonzero(repeat)
        # Mark every word covered by some repeated n-gram (overlaps count once) with a difference array.
        cover = np.zeros(len(words) + 1, dtype=np.int64)
        np.add.at(cover, starts, 1)
        np.add.at(cover, starts + n, -1)
        covered = np.cumsum(cover[:-1]) > 0
        share = int(word_len[covered].sum()) / total_chars
        _high(out, f"gopher_dup_{n}gram_char_share", share, limit)


def _c4_document(doc: _Doc, cfg: QualityConfig, out: list[Failure]) -> None:
    if cfg.c4_min_sentences is not None:
        _low(out, "c4_min_sentences", len(_SENTENCE_END.findall(doc.text)), cfg.c4_min_sentences)
    if cfg.c4_reject_lorem_ipsum and "lorem ipsum" in doc.text.lower():
        out.append(Failure("c4_lorem_ipsum", 1.0, 0.0))
    if cfg.c4_reject_curly_braces and "{" in doc.text:
        out.append(Failure("c4_curly_braces", float(doc.text.count("{")), 0.0))


def _fineweb(doc: _Doc, cfg: QualityConfig, out: list[Failure]) -> None:
    if doc.lines:
        n = len(doc.lines)
        punct = sum(line.endswith(cfg.fw_punctuation) for line in doc.lines) / n
        _low(out, "fw_punct_line_share", punct, cfg.fw_min_punct_line_share)
        short = sum(len(line) <= cfg.fw_short_line_chars for line in doc.lines) / n
        _high(out, "fw_short_line_share", short, cfg.fw_max_short_line_share)
        if cfg.fw_max_dup_line_char_ratio is not None:
            ratio = _duplicates(doc.lines)[1] / max(len(doc.text.replace("\n", "")), 1)
            _high(out, "fw_dup_line_char_ratio", ratio, cfg.fw_max_dup_line_char_ratio)
    _high(out, "fw_newlines_per_word", doc.text.count("\n") / len(doc.words), cfg.fw_max_newlines_per_word)


def _code(doc: _Doc, cfg: QualityConfig, out: list[Failure]) -> None:
    raw_lines = doc.text.split("\n")
    if cfg.code_max_line_chars is not None:
        _high(out, "code_max_line_chars", max(len(line) for line in raw_lines), cfg.code_max_line_chars)
    if cfg.code_max_mean_line_chars is not None:
        _high(out, "code_mean_line_chars", len(doc.text) / len(raw_lines), cfg.code_max_mean_line_chars)
    if cfg.code_min_alnum_share is not None:
        alnum = sum(c.isalnum() for c in doc.text) / max(len(doc.text), 1)
        _low(out, "code_alnum_share", alnum, cfg.code_min_alnum_share)
    if cfg.code_autogen_head_lines:
        head = "\n".join(raw_lines[: cfg.code_autogen_head_lines]).lower()
        if any(marker in head for marker in cfg.code_autogen_markers):
            out.append(Failure("code_autogenerated", 1.0, 0.0))


# ---------------------------------------------------------------------------------------------------------


# A sentence that introduces a list or an example ends with a colon, and a parenthesised one with ".)": both are
# prose. C4 kept only . ! ? and quotes because on web pages such lines are rare and menus end in nothing.
_C4_ALSO_ENDS = (":",)
_CLOSERS = ")]}\"'”’»"


def c4_line_reason(line: str, cfg: QualityConfig = PROSE) -> str | None:
    """Which C4 line rule drops this (non-blank) line, or None to keep it."""
    stripped = line.strip()
    if cfg.c4_drop_javascript_lines and "javascript" in stripped.lower():
        return "javascript"
    ends = cfg.c4_terminal_punctuation
    if ends is not None and not (stripped.endswith(ends + _C4_ALSO_ENDS)
                                 or stripped.rstrip(_CLOSERS).endswith(ends + _C4_ALSO_ENDS)):
        return "no_terminal_punctuation"
    if cfg.c4_min_words_per_line is not None and len(stripped.split()) < cfg.c4_min_words_per_line:
        return "too_few_words"
    return None


def c4_filter_lines(text: str, cfg: QualityConfig = PROSE) -> tuple[str, list[str]]:
    """(text without the lines C4's line rules drop, the removed pieces). The rules read logical lines: a
    paragraph hard-wrapped over several lines (structure.parse) is judged by its last line and cut whole, or
    C4 would keep only the last line of every wrapped paragraph. Blank lines stay as paragraph breaks; a
    profile with the C4 line rules off (code, technical) returns the text unchanged."""
    if cfg.c4_terminal_punctuation is None and cfg.c4_min_words_per_line is None and not cfg.c4_drop_javascript_lines:
        return text, []
    from .structure import parse, units, unit_text, without

    lines = parse(text)
    cut: set[int] = set()
    removed = []
    for indices in units(lines):
        joined = " ".join(lines[i].text.strip() for i in indices)
        if c4_line_reason(joined, cfg):
            cut.update(indices)
            removed.append(unit_text(lines, indices))
    if not removed:
        return text, removed
    return without(lines, cut), removed
