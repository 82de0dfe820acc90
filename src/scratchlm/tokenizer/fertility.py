"""Fertility: what the tokenizer costs on text it never saw, per domain and per language, with verdicts.

tokens/word is the classic fertility (words are whitespace-separated, so it is only meaningful for languages
that put spaces between words); chars/token and bytes/token compare across scripts and for code. The verdict
reads tokens/word on the prose of each document: its paragraphs and list items, without code blocks, options,
tables, or the paths and identifiers a sentence mentions (data/clean/structure.py tells the lines apart).
Technical text is full of `/etc/fstab` and `--no-preserve-root`, which no vocabulary turns into one token;
counted as words, they push every manual above the threshold and "grow the vocabulary" never clears it.
A figure measured on a few documents, or mostly on one, is said to be so. Every language the config keeps
(data.languages) or gives a quota is judged however small its share of the held-out text, with the number of prose
words the figure rests on; under tokenizer.min_judged_words it is shown, not judged (tokens/word moves by 0.10-0.16
between 500-word stretches of one language, docs/benchmarks.md), and a kept language the held-out text lacks is
said to be unmeasured. Other languages are judged from tokenizer.min_language_share of the held-out prose.

The share of the vocabulary actually used on held-out text tells whether the vocabulary is too big for the
domain: unused rows of the embedding matrix cost parameters and never get trained. Long entries that are runs
of one symbol (table borders, rules) are flagged: the sample taught them, ordinary text never uses them.
"""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Iterable

import numpy as np
from tokenizers import Tokenizer

from ..config import TokenizerConfig
from ..data.clean.structure import LIST, NOT_A_WORD, PROSE, parse
from .bpe import SPECIAL_TOKENS
from .langid import UNDETERMINED, labeled_language

MAX_TOKENS_PER_WORD = 1.4  # well-served languages sit around 1.1-1.3 on prose with a 32k-50k vocabulary
MIN_SAMPLE_DOCS = 10  # a tokens/word figure from fewer documents ...
MAX_DOC_SHARE = 0.5  # ... or with more than this share of its words from one document is not firm
DEGENERATE_MIN_BYTES = 32  # a vocabulary entry this long with no letter or digit is a border, not a word
MAX_LANGUAGE_COST_RATIO = 1.5  # a language paying 1.5x the tokens trains on 1/1.5 of the text per token
MAX_UNUSED_VOCAB = 0.10
MIN_JUDGED_WORDS = TokenizerConfig().min_judged_words  # the config's default, for callers without a config
NO_WORD_SPACES = {"zh", "ja", "th", "lo", "km", "my", "bo", "wuu", "yue"}  # tokens/word is undefined there
BATCH = 256
TOP = 10


def prose_words(text: str) -> list[str]:
    """The words of a document's prose lines (paragraphs and list items; not code, options, tables or
    headings), without the paths, options and identifiers the sentences mention."""
    return [w for line in parse(text) if line.kind in (PROSE, LIST) for w in line.text.split()
            if not NOT_A_WORD.search(w)]


@dataclass
class Tally:
    docs: int = 0
    words: int = 0
    chars: int = 0
    bytes: int = 0
    tokens: int = 0
    prose_docs: int = 0
    prose_words: int = 0
    prose_tokens: int = 0
    largest_prose_words: int = 0  # of one document: how much the figure leans on it

    def add(self, text: str, n_tokens: int, n_prose_words: int, n_prose_tokens: int) -> None:
        self.docs += 1
        self.words += len(text.split())
        self.chars += len(text)
        self.bytes += len(text.encode("utf-8"))
        self.tokens += n_tokens
        if n_prose_words:
            self.prose_docs += 1
            self.prose_words += n_prose_words
            self.prose_tokens += n_prose_tokens
            self.largest_prose_words = max(self.largest_prose_words, n_prose_words)

    def metrics(self) -> dict:
        return {"docs": self.docs, "words": self.words, "chars": self.chars, "bytes": self.bytes,
                "tokens": self.tokens,
                "tokens_per_word": self.tokens / self.words if self.words else None,
                "chars_per_token": self.chars / self.tokens if self.tokens else None,
                "bytes_per_token": self.bytes / self.tokens if self.tokens else None,
                "prose_docs": self.prose_docs, "prose_words": self.prose_words, "prose_tokens": self.prose_tokens,
                "prose_tokens_per_word": self.prose_tokens / self.prose_words if self.prose_words else None,
                "largest_doc_share": self.largest_prose_words / self.prose_words if self.prose_words else None}


def fertility(m: dict) -> float | None:
    """The tokens/word the verdicts, the report's plot and `tokenizer compare` judge: on prose words."""
    return m.get("prose_tokens_per_word")


def sample_caveat(m: dict) -> str:
    """Why a tokens/word figure is not firm, or "" when it rests on enough documents."""
    docs, share = m.get("prose_docs", 0), m.get("largest_doc_share")
    if docs >= MIN_SAMPLE_DOCS and (share is None or share <= MAX_DOC_SHARE):
        return ""
    return (f"measured on only {docs} document(s), the largest holding {share or 0:.0%} of the prose words: a "
            f"small sample, the figure may not hold")


def document_language(doc: dict, code_domains: Iterable[str]) -> str:
    if doc.get("domain") in set(code_domains):
        return "code"
    return labeled_language(doc)


def measure(tok: Tokenizer, docs: Iterable[dict], code_domains: Iterable[str] = ("code",)) -> dict:
    """Fertility metrics of `tok` on `docs` (dicts with "text" and optionally "domain" and "lang")."""
    code_domains = tuple(code_domains)
    overall, by_domain, by_language = Tally(), defaultdict(Tally), defaultdict(Tally)
    counts = np.zeros(tok.get_vocab_size(), dtype=np.int64)
    batch: list[dict] = []

    def flush() -> None:
        langs = [document_language(doc, code_domains) for doc in batch]
        prose = [[] if lang == "code" else prose_words(doc["text"]) for doc, lang in zip(batch, langs)]
        whole = tok.encode_batch([d["text"] for d in batch], add_special_tokens=False)
        prose_enc = tok.encode_batch([" ".join(words) for words in prose], add_special_tokens=False)
        for doc, lang, enc, words, penc in zip(batch, langs, whole, prose, prose_enc):
            n = len(enc.ids)
            for tally in (overall, by_domain[doc.get("domain", "all")], by_language[lang]):
                tally.add(doc["text"], n, len(words), len(penc.ids))
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
    degenerate = [i for i in longest if degenerate_entry(tok.decode([i]), len(tok.id_to_token(i)))]
    return {"size": int(len(regular)), "used": used, "used_share": used / len(regular) if len(regular) else 0.0,
            "most_frequent": [{"token": tok.decode([int(i)]), "count": int(counts[i]), "share": counts[i] / total}
                              for i in frequent],
            "longest": [{"token": tok.decode([i]), "bytes": len(tok.id_to_token(i))} for i in longest[:TOP]],
            "degenerate_count": len(degenerate),
            "degenerate": [{"token": tok.decode([i]), "bytes": len(tok.id_to_token(i))} for i in degenerate[:TOP]]}


def degenerate_entry(text: str, n_bytes: int) -> bool:
    """A long entry with no letter or digit (a border "────…", a rule "=====…"); indentation is not one: runs
    of spaces are how code is tokenized."""
    return n_bytes >= DEGENERATE_MIN_BYTES and bool(text.strip()) and not any(c.isalnum() for c in text)


def languages_of_use(result: dict, min_share: float, named: Iterable[str] = ()) -> list[str]:
    """Prose languages of the held-out text that are `named` (kept by the config or given a quota), whatever
    their share, and the others with at least `min_share` of the held-out prose characters."""
    prose = {k: v for k, v in result["languages"].items() if k not in ("code", UNDETERMINED)}
    total = sum(v["chars"] for v in prose.values())
    named = set(named)
    return [k for k, v in prose.items() if k in named or (total and v["chars"] / total >= min_share)]


def verdicts(result: dict, min_share: float, named: Iterable[str] = (), kept: Iterable[str] = (),
             min_words: int = MIN_JUDGED_WORDS) -> list[dict]:
    """The fertility verdicts: the report, `scratchlm check` and `tokenizer compare` all print these. Every
    language in `kept` (data.languages) or `named` (tokenizer.language_quotas) gets one, with the number of
    held-out prose words it rests on; under `min_words` the figure is shown but not judged."""
    kept, named = list(kept), list(named)
    out = [absent_verdict(lang, "data.languages" if lang in kept else "tokenizer.language_quotas")
           for lang in dict.fromkeys(kept + named) if lang not in result["languages"]]
    judged = {}
    for lang in languages_of_use(result, min_share, kept + named):
        m = result["languages"][lang]
        if lang in NO_WORD_SPACES:
            out.append({"level": "ok", "check": f"tokens/word {lang}",
                        "message": f"{lang}: no spaces between words, tokens/word not measured; chars/token "
                                   f"{_num(m['chars_per_token'])}"})
            continue
        tpw, words = fertility(m), m.get("prose_words", 0)
        on = f"{_num(tpw)} tokens/word on {words:,} held-out prose words"
        if words < min_words:
            out.append({"level": "warning", "check": f"tokens/word {lang}",
                        "message": f"{lang}: {on}, too small to judge: {words:,} words < {min_words:,} "
                                   f"(tokenizer.min_judged_words); hold out more {lang} text (data.val_min_chars) "
                                   f"to know whether the tokenizer serves it"})
            continue
        judged[lang] = tpw
        bad = tpw > MAX_TOKENS_PER_WORD
        caveat = sample_caveat(m)
        out.append({"level": "warning" if bad else "ok", "check": f"tokens/word {lang}",
                    "message": f"{lang}: {on}" + (
                        f" > {MAX_TOKENS_PER_WORD}: words are split into pieces; grow the vocabulary or give {lang} "
                        f"a larger share of the sample (tokenizer.language_quotas)" if bad else
                        f" <= {MAX_TOKENS_PER_WORD}") + (f"; {caveat}" if caveat else "")})
    if len(judged) > 1:
        out.append(cost_ratio_verdict(result, judged))
    vocab = result["vocab"]
    unused = 1.0 - vocab["used_share"]
    bad = unused > MAX_UNUSED_VOCAB
    out.append({"level": "warning" if bad else "ok", "check": "vocabulary used",
                "message": f"{unused:.0%} of the {vocab['size']:,} tokens never appear in "
                           f"{result['overall']['tokens']:,} held-out tokens" + (
                               f" (> {MAX_UNUSED_VOCAB:.0%}): the vocabulary may be too large for this domain, or "
                               f"the held-out text too small to tell" if bad else "")})
    n = vocab.get("degenerate_count", 0)
    examples = ", ".join(f"{t['token'][:12]!r}… ({t['bytes']} B)" for t in vocab.get("degenerate", [])[:3])
    out.append({"level": "warning" if n else "ok", "check": "degenerate vocabulary entries",
                "message": (f"{n} entries of {DEGENERATE_MIN_BYTES}+ bytes without a letter or digit, e.g. {examples}: "
                            f"borders and rules of the sample's tables, rows of the embedding that text never "
                            f"uses; clean such lines out of the corpus or accept the waste") if n else
                           f"no entry of {DEGENERATE_MIN_BYTES}+ bytes without a letter or digit"})
    return out


def absent_verdict(lang: str, where: str) -> dict:
    """A language the config asks for that the held-out text does not hold: nothing measured is not ok."""
    return {"level": "warning", "check": f"tokens/word {lang}",
            "message": f"{lang}: named in {where} but absent from the held-out text: its tokens/word is not "
                       f"measured; the validation split drew no {lang} document (data.val_min_chars holds out more)"}


def cost_ratio_verdict(result: dict, judged: dict[str, float]) -> dict:
    """The costliest judged language against the cheapest, in tokens per prose word."""
    best = min(judged, key=judged.get)
    worst = max(judged, key=judged.get)
    ratio = judged[worst] / judged[best]
    bad = ratio > MAX_LANGUAGE_COST_RATIO
    small = [k for k in (worst, best) if sample_caveat(result["languages"][k])]
    return {"level": "warning" if bad else "ok", "check": "language cost ratio",
            "message": f"{worst} costs {ratio:.2f}x the tokens per word of {best}" + (
                f" (> {MAX_LANGUAGE_COST_RATIO}x): the model sees less {worst} text per token and its "
                f"context holds less of it; rebalance tokenizer.language_quotas" if bad else
                f" (<= {MAX_LANGUAGE_COST_RATIO}x)") + "; measured as tokens/word on held-out prose, "
                                                        "not on parallel text"
            + (f"; {' and '.join(small)} measured on a small sample" if small else "")}


def _num(v: float | None) -> str:
    return "-" if v is None else f"{v:.2f}"
