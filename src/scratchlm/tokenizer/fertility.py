"""Fertility: what the tokenizer costs on text it never saw, per domain and per language, with verdicts.

tokens/word is the classic fertility (words are whitespace-separated, so it is only meaningful for languages
that put spaces between words); chars/token and bytes/token compare across scripts and for code. The share of
the vocabulary actually used on held-out text tells whether the vocabulary is too big for the domain: unused
rows of the embedding matrix cost parameters and never get trained.
"""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Iterable

import numpy as np
from tokenizers import Tokenizer

from .bpe import SPECIAL_TOKENS
from .langid import UNDETERMINED, language_of

MAX_TOKENS_PER_WORD = 1.4  # well-served languages sit around 1.1-1.3 with a 32k-50k vocabulary
MAX_LANGUAGE_COST_RATIO = 1.5  # a language paying 1.5x the tokens trains on 1/1.5 of the text per token
MAX_UNUSED_VOCAB = 0.10
NO_WORD_SPACES = {"zh", "ja", "th", "lo", "km", "my", "bo", "wuu", "yue"}  # tokens/word is undefined there
BATCH = 256
TOP = 10


@dataclass
class Tally:
    docs: int = 0
    words: int = 0
    chars: int = 0
    bytes: int = 0
    tokens: int = 0

    def add(self, text: str, n_tokens: int) -> None:
        self.docs += 1
        self.words += len(text.split())
        self.chars += len(text)
        self.bytes += len(text.encode("utf-8"))
        self.tokens += n_tokens

    def metrics(self) -> dict:
        return {"docs": self.docs, "words": self.words, "chars": self.chars, "bytes": self.bytes,
                "tokens": self.tokens,
                "tokens_per_word": self.tokens / self.words if self.words else None,
                "chars_per_token": self.chars / self.tokens if self.tokens else None,
                "bytes_per_token": self.bytes / self.tokens if self.tokens else None}


def document_language(doc: dict, code_domains: Iterable[str]) -> str:
    if doc.get("domain") in set(code_domains):
        return "code"
    return doc.get("lang") or language_of(doc["text"])


def measure(tok: Tokenizer, docs: Iterable[dict], code_domains: Iterable[str] = ("code",)) -> dict:
    """Fertility metrics of `tok` on `docs` (dicts with "text" and optionally "domain" and "lang")."""
    code_domains = tuple(code_domains)
    overall, by_domain, by_language = Tally(), defaultdict(Tally), defaultdict(Tally)
    counts = np.zeros(tok.get_vocab_size(), dtype=np.int64)
    batch: list[dict] = []

    def flush() -> None:
        for doc, enc in zip(batch, tok.encode_batch([d["text"] for d in batch], add_special_tokens=False)):
            n = len(enc.ids)
            for tally in (overall, by_domain[doc.get("domain", "all")],
                          by_language[document_language(doc, code_domains)]):
                tally.add(doc["text"], n)
            if n:
                counts[:] += np.bincount(enc.ids, minlength=len(counts))
        batch.clear()

    for doc in docs:
        batch.append(doc)
        if len(batch) >= BATCH:
            flush()
    flush()
    return {"overall": overall.metrics(),
            "domains": {d: t.metrics() for d, t in sorted(by_domain.items())},
            "languages": {lang: t.metrics() for lang, t in sorted(by_language.items(), key=lambda kv: -kv[1].chars)},
            "vocab": vocab_usage(tok, counts)}


def vocab_usage(tok: Tokenizer, counts: np.ndarray) -> dict:
    special = {tok.token_to_id(t) for t in SPECIAL_TOKENS} - {None}
    regular = np.asarray([i for i in range(len(counts)) if i not in special])
    used = int((counts[regular] > 0).sum())
    total = int(counts.sum())
    frequent = [i for i in np.argsort(-counts, kind="stable")[:TOP] if counts[i] > 0]
    vocab = tok.get_vocab()  # byte-level strings: one character per byte, so len() is the token's byte length
    longest = sorted((i for i in vocab.values() if i not in special), key=lambda i: (-len(tok.id_to_token(i)), i))
    return {"size": int(len(regular)), "used": used, "used_share": used / len(regular) if len(regular) else 0.0,
            "most_frequent": [{"token": tok.decode([int(i)]), "count": int(counts[i]), "share": counts[i] / total}
                              for i in frequent],
            "longest": [{"token": tok.decode([i]), "bytes": len(tok.id_to_token(i))} for i in longest[:TOP]]}


def languages_of_use(result: dict, min_share: float, named: Iterable[str] = ()) -> list[str]:
    """Prose languages with at least `min_share` of the held-out prose characters, plus those named in quotas."""
    prose = {k: v for k, v in result["languages"].items() if k not in ("code", UNDETERMINED)}
    total = sum(v["chars"] for v in prose.values())
    named = set(named)
    return [k for k, v in prose.items() if k in named or (total and v["chars"] / total >= min_share)]


def verdicts(result: dict, min_share: float, named: Iterable[str] = ()) -> list[dict]:
    out = []
    langs = languages_of_use(result, min_share, named)
    spaced = {k: result["languages"][k]["tokens_per_word"] for k in langs
              if k not in NO_WORD_SPACES and result["languages"][k]["tokens_per_word"]}
    for lang in langs:
        tpw = spaced.get(lang)
        if tpw is None:
            out.append({"level": "ok", "check": f"tokens/word {lang}",
                        "message": f"{lang}: no spaces between words, tokens/word not measured; chars/token "
                                   f"{result['languages'][lang]['chars_per_token']:.2f}"})
            continue
        bad = tpw > MAX_TOKENS_PER_WORD
        out.append({"level": "warning" if bad else "ok", "check": f"tokens/word {lang}",
                    "message": f"{lang}: {tpw:.2f} tokens/word" + (
                        f" > {MAX_TOKENS_PER_WORD}: words are split into pieces; grow the vocabulary or give {lang} "
                        f"a larger share of the sample (tokenizer.language_quotas)" if bad else
                        f" <= {MAX_TOKENS_PER_WORD}")})
    if len(spaced) > 1:
        best = min(spaced, key=spaced.get)
        worst = max(spaced, key=spaced.get)
        ratio = spaced[worst] / spaced[best]
        bad = ratio > MAX_LANGUAGE_COST_RATIO
        out.append({"level": "warning" if bad else "ok", "check": "language cost ratio",
                    "message": f"{worst} costs {ratio:.2f}x the tokens per word of {best}" + (
                        f" (> {MAX_LANGUAGE_COST_RATIO}x): the model sees less {worst} text per token and its "
                        f"context holds less of it; rebalance tokenizer.language_quotas" if bad else
                        f" (<= {MAX_LANGUAGE_COST_RATIO}x)") + "; measured as tokens/word on held-out text, "
                                                                "not on parallel text"})
    vocab = result["vocab"]
    unused = 1.0 - vocab["used_share"]
    bad = unused > MAX_UNUSED_VOCAB
    out.append({"level": "warning" if bad else "ok", "check": "vocabulary used",
                "message": f"{unused:.0%} of the {vocab['size']:,} tokens never appear in "
                           f"{result['overall']['tokens']:,} held-out tokens" + (
                               f" (> {MAX_UNUSED_VOCAB:.0%}): the vocabulary may be too large for this domain, or "
                               f"the held-out text too small to tell" if bad else "")})
    return out
