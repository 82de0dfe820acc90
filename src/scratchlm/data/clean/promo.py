"""Promotional / spam / templated-text scorer.

Seven surface signals, each measured as a density, squashed to [0, 1] by dividing by a saturation point
(the density at which the signal is as strong as it gets), and combined as a noisy-OR (see _SCALE).
Landing pages light up several signals at once (lexicon, calls to action, prices, "!", ALL CAPS); SEO spam lights up
the templated-sentence signal; link farms the URL signal. Technical prose lights up almost none of them.
"""
import re
from dataclasses import dataclass

# Documents above this are promotional enough to drop from a pretraining corpus. Only the templated signal
# reaches it alone; otherwise two or more signals must be strong together. Measured on CPython 3.11: the
# 79 pydoc_data.topics entries and the 1685 docstrings of 20+ words in Lib/*.py score at most 0.27 (99th
# percentile 0.22); the landing page and the templated SEO page in tests/test_clean_promo.py score 0.89
# and 0.76.
PROMO_THRESHOLD = 0.5

_MARKETING = re.compile(
    r"\b(best|greatest|finest|cheapest|lowest prices?|biggest savings|ultimate|unbeatable|amazing|incredible"
    r"|exclusive|limited[- ]time|(?<!not )(?<!never )guaranteed?|risk[- ]free|money[- ]back|free shipping"
    r"|free trial|free gift"
    r"|100% free|for free|no obligation|discount(ed|s)?|(great|best|hot|daily) deals?|on sale|sale|bargains?"
    r"|bonus|hurry|must-have|top[- ]rated|best[- ]selling|bestsellers?|world[- ]class|revolutionary|premium|luxury"
    r"|number one|satisfaction|buy now|sign up|special offer|act now|don'?t miss)\b|(?<!\w)#1\b",
    re.IGNORECASE,
)
_CALL_TO_ACTION = re.compile(
    r"\b(buy|shop|order|call|book|register|join|apply|subscribe|download|act) (now|today)\b"
    r"|\badd to (cart|basket|bag)\b|\bsign up\b|\bget started\b|\bclick here\b|\blearn more\b"
    r"|\bstart (your|a) free trial\b|\btry it (for )?free\b|\bget (yours|it now|your free)\b|\bclaim your\b"
    r"|\bdon'?t miss( out)?\b|\bcontact us today\b|\bcheck ?out now\b",
    re.IGNORECASE,
)
_PRICE = re.compile(
    r"[$€£¥]\s?\d[\d,]*(\.\d\d)?"
    r"|\b\d[\d,]*(\.\d\d)?\s?(usd|eur|gbp|dollars|euros)\b"
    r"|\b\d{1,3}\s?% (off|discount|savings?)\b|\bsave (up to )?(\d{1,3}\s?%|[$€£]\s?\d+)"
    r"|\bhalf[- ]price\b|\bbuy one,? get one\b",
    re.IGNORECASE,
)
_URL = re.compile(r"\bhttps?://\S+|\bwww\.\S+", re.IGNORECASE)
_EXCLAMATION = re.compile(r"!+(?=\s|$)")  # sentence-ending "!", not "!=" or "{!r}"
_CAPS_WORD = re.compile(r"\b[A-Z]{3,}\b")
_WORD = re.compile(r"\b\w[\w'-]*\b")
_SENTENCE_SPLIT = re.compile(r"(?<=[.!?])\s+|\n+")
_DIGITS = re.compile(r"\d+")


@dataclass(frozen=True)
class PromoScore:
    total: float  # noisy-OR of the saturated components, in [0, 1]; compare with PROMO_THRESHOLD
    lexicon: float  # marketing words/phrases per word
    calls_to_action: float  # calls to action per sentence
    prices: float  # prices and discounts per 100 words
    urls: float  # URLs per 100 words
    exclamations: float  # sentence-ending "!" per sentence
    caps: float  # share of words that are ALL CAPS (3+ letters)
    templated: float  # share of sentences that share a template with 2+ other sentences


# component: (saturation point, alone): a component at or past its saturation point scores `alone` on its
# own. Components combine as a noisy-OR, total = 1 - prod(1 - alone * saturated), so independent signals
# reinforce each other and no single one except the templated-sentence signal (near-certain evidence of
# generated text) reaches PROMO_THRESHOLD by itself: one enthusiastic review full of "best" is not spam.
_SCALE = {
    "lexicon": (0.05, 0.45),
    "calls_to_action": (0.20, 0.45),
    "prices": (3.0, 0.35),
    "urls": (5.0, 0.30),
    "exclamations": (0.40, 0.30),
    "caps": (0.10, 0.25),
    "templated": (0.50, 0.60),
}


def _templated_share(sentences: list[list[str]]) -> float:
    # A template keeps its frame and swaps a slot: "Best hotels in Paris at low prices." /
    # "Best hotels in Rome at low prices.". Key a sentence by its first 3 and last 2 words (digits
    # folded); a key shared by 3+ sentences is a template.
    long = [s for s in sentences if len(s) >= 6]
    if len(long) < 5:
        return 0.0
    keys = [tuple(s[:3] + s[-2:]) for s in long]
    counts: dict[tuple, int] = {}
    for key in keys:
        counts[key] = counts.get(key, 0) + 1
    return sum(counts[key] >= 3 for key in keys) / len(long)


def promo_score(text: str, templates: bool = True) -> PromoScore:
    """How promotional / spammy / templated one document reads. `templates=False` leaves the templated-sentence
    signal out: a reference page repeats its sentence frames by design ("If x is a NaN, a NaN is returned." for
    every variant), and on the man pages and Python docs of docs/benchmarks.md it was what made real pages
    score as spam."""
    words = _WORD.findall(text)
    if not words:
        return PromoScore(0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0)
    # Per-word densities use at least 50 words: one "best" in a 15-word docstring is not a density.
    n_words = max(len(words), 50)
    raw_sentences = [s for s in _SENTENCE_SPLIT.split(text) if _WORD.search(s)]
    n_sentences = max(len(raw_sentences), 1)
    # Only sentence-like pieces (ending in . ! ?) can be templated prose; this leaves out code lines and
    # doctest transcripts, which repeat their frame legitimately.
    sentences = [_WORD.findall(_DIGITS.sub("0", s.lower())) for s in raw_sentences if s.rstrip().endswith((".", "!", "?"))]
    values = {
        "lexicon": len(_MARKETING.findall(text)) / n_words,
        "calls_to_action": len(_CALL_TO_ACTION.findall(text)) / n_sentences,
        "prices": 100 * len(_PRICE.findall(text)) / n_words,
        "urls": 100 * len(_URL.findall(text)) / n_words,
        "exclamations": len(_EXCLAMATION.findall(text)) / n_sentences,
        "caps": len(_CAPS_WORD.findall(text)) / n_words,
        "templated": _templated_share(sentences) if templates else 0.0,
    }
    keep = 1.0
    for name, (scale, alone) in _SCALE.items():
        keep *= 1.0 - alone * min(1.0, values[name] / scale)
    return PromoScore(total=1.0 - keep, **values)
