"""Diversity of generations: distinct-n and the repeated n-gram rate.

A model can reach a good validation loss and still write the same phrase in a loop; these two numbers catch it.
distinct-n = unique n-grams / all n-grams over a set of generations (low: the generations look alike).
repeated n-gram rate = share of n-grams inside one generation that already occurred earlier in it (high: loops).
Both are computed on whitespace words, so they do not depend on the tokenizer.
"""
from __future__ import annotations


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


def diversity_metrics(texts: list[str]) -> dict[str, float | None]:
    return {"distinct_1": distinct_n(texts, 1), "distinct_2": distinct_n(texts, 2),
            "distinct_3": distinct_n(texts, 3), "repeated_4gram_rate": repeated_ngram_rate(texts, 4),
            "generations": len(texts)}
