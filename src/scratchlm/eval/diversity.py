"""Diversity of generations: distinct-n and the repeated n-gram rate.

A model can reach a good validation loss and still write the same phrase in a loop; these two numbers catch it.
distinct-n = unique n-grams / all n-grams over a set of generations (low: the generations look alike).
repeated n-gram rate = share of n-grams inside one generation that already occurred earlier in it (high: loops).
Both are computed on whitespace words, so they do not depend on the tokenizer. Word measures miss loops inside
one "word" ('cpcpcpcp_____' over and over), so the character n-gram repetition rate and the compression ratio of
model/repetition.py are recorded too, and `diversity_verdicts` turns the numbers into ok / warning / error.
"""
from __future__ import annotations

from ..model.repetition import CHAR_NGRAM, compression_ratio, repeated_char_ngram_rate

# Thresholds, calibrated on 300-character chunks (a 64-token generation) of Python's stdlib, /usr/share/doc and
# man pages in 8 languages (docs/benchmarks.md, "Repetition of generations"): the mean character 10-gram repeat
# rate over 16 chunks never exceeded 0.19 and distinct-2 never fell below 0.65; loops score 0.69-1.0 and 0.04.
# Mean repeated character n-gram rate per generation, above: about a third, and half, of the generations loop.
REPETITION_WARNING, REPETITION_ERROR = 0.30, 0.45
DISTINCT2_WARNING, DISTINCT2_ERROR = 0.50, 0.25  # distinct-2 over all generations, below


def ngrams(words: list[str], n: int) -> list[tuple[str, ...]]:
    return [tuple(words[i:i + n]) for i in range(len(words) - n + 1)]


def distinct_n(texts: list[str], n: int) -> float | None:
    grams = [g for t in texts for g in ngrams(t.split(), n)]
    return len(set(grams)) / len(grams) if grams else None


def repeated_ngram_rate(texts: list[str], n: int = 4) -> float | None:
    repeated = total = 0
    for t in texts:
        grams = ngrams(t.split(), n)
        total += len(grams)
        repeated += len(grams) - len(set(grams))
    return repeated / total if total else None


def _mean(values: list[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return sum(known) / len(known) if known else None


def diversity_metrics(texts: list[str]) -> dict[str, float | None]:
    return {"distinct_1": distinct_n(texts, 1), "distinct_2": distinct_n(texts, 2),
            "distinct_3": distinct_n(texts, 3), "repeated_4gram_rate": repeated_ngram_rate(texts, 4),
            "repeated_char_ngram_rate": _mean([repeated_char_ngram_rate(t) for t in texts]),
            "compression_ratio": _mean([compression_ratio(t) for t in texts]), "generations": len(texts)}


def _level(value: float, warning: float, error: float, above: bool) -> str:
    worse = (lambda a, b: a >= b) if above else (lambda a, b: a < b)
    return "error" if worse(value, error) else ("warning" if worse(value, warning) else "ok")


def diversity_verdicts(div: dict) -> list[dict]:
    """Verdicts {name, level, message} on repetition and distinct-2, each naming its number and threshold.
    A measure that could not be taken (texts too short, an evaluation from before it existed) gives none."""
    out = []
    rate = div.get("repeated_char_ngram_rate")
    if rate is not None:
        level = _level(rate, REPETITION_WARNING, REPETITION_ERROR, above=True)
        ratio = div.get("compression_ratio")
        zlib_note = f", zlib compression ratio {ratio:.2f}" if ratio is not None else ""
        out.append({"name": "repetition", "level": level, "message": (
            f"generations repeat {rate:.0%} of their character {CHAR_NGRAM}-grams{zlib_note} (warning at "
            f"{REPETITION_WARNING:.0%}, error at {REPETITION_ERROR:.0%}; natural text stays below 20%)"
            + ("" if level == "ok" else ": the model loops; train longer or on more data, or sample with a "
               "higher temperature"))})
    d2 = div.get("distinct_2")
    if d2 is not None:
        level = _level(d2, DISTINCT2_WARNING, DISTINCT2_ERROR, above=False)
        out.append({"name": "distinct-2", "level": level, "message": (
            f"distinct-2 over {div.get('generations')} generations is {d2:.2f} (warning below "
            f"{DISTINCT2_WARNING:.2f}, error below {DISTINCT2_ERROR:.2f}; natural text stays above 0.65)"
            + ("" if level == "ok" else ": the generations say the same few things"))})
    return out


def verdict_lines(div: dict) -> list[str]:
    """One line per verdict, as the log and the reports show them."""
    return [f"{v['level']}: {v['name']}: {v['message']}" for v in diversity_verdicts(div)]
