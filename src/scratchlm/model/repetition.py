"""Repetition inside one generated text, measured on characters so that loops inside a word count too.

A word n-gram measure misses 'cpcpcpcp_____cpcpcpcp_____' (one long "word") and needs many words before it
sees anything. Two character-level measures that do not depend on the tokenizer or on whitespace:
  repeated character n-gram rate = share of character n-grams that already occurred earlier in the text;
  compression ratio = zlib-compressed bytes / raw bytes (a loop compresses far better than natural text).
Lives with the model, below monitor and eval, so both can use it (today the eval suite does; the training
monitor's `repetition` detector still counts word n-grams, see docs/monitoring.md).
Thresholds are calibrated in docs/benchmarks.md ("Repetition of generations").
"""
from __future__ import annotations

import zlib

CHAR_NGRAM = 10  # long enough that common words and suffixes (" the ", "tion ") do not count as repeats
MIN_CHARS = 40  # below this a text is too short to say anything about its repetition


def repeated_char_ngram_rate(text: str, n: int = CHAR_NGRAM) -> float | None:
    """Share of character n-grams already seen earlier in the text; None when the text is too short."""
    if len(text) < max(MIN_CHARS, n + 1):
        return None
    grams = [text[i:i + n] for i in range(len(text) - n + 1)]
    return 1.0 - len(set(grams)) / len(grams)


def compression_ratio(text: str) -> float | None:
    """zlib (level 9) size over raw UTF-8 size; None when the text is too short for the ratio to mean much."""
    raw = text.encode("utf-8")
    if len(text) < MIN_CHARS:
        return None
    return len(zlib.compress(raw, 9)) / len(raw)
