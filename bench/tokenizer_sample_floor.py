"""The measurements behind two tokenizer defaults: `tokenizer.min_sample_chars_per_vocab` (how small a sample the
quotas may shrink it to) and `tokenizer.min_judged_words` (how few held-out prose words a tokens/word verdict may
rest on). docs/benchmarks.md, "Tokenizer sample quotas and kept-language verdicts", has the figures.

    python bench/tokenizer_sample_floor.py floor 4096 10 25 50 100 250 500   # vocab, then chars per vocab entry
    python bench/tokenizer_sample_floor.py floor 16384 10 25 50 100
    python bench/tokenizer_sample_floor.py words

Text nobody on the team wrote: the Debian Handbook's HTML in English, German and Spanish
(/usr/share/doc/debian-handbook/html/{en-US,de-DE,es-ES}), tags stripped, cut into documents of 20 paragraphs,
shuffled with a fixed seed; 150 documents (~0.9M characters) are held out, the rest (~2.8M) is the training text.
floor: a BPE trained on the first N characters of the training text, tokens/word on the held-out prose per
language, and whether the trainer filled the vocabulary. words: tokens/word of one tokenizer (4096 tokens,
1M characters) over consecutive stretches of N held-out prose words of one language: its spread is how far a
figure measured on N words can be from the language's own.
"""
import glob
import html
import random
import re
import statistics
import sys

from scratchlm.tokenizer.bpe import train_bpe
from scratchlm.tokenizer.fertility import measure, prose_words

HANDBOOK = "/usr/share/doc/debian-handbook/html"
LANGUAGES = ("en-US", "de-DE", "es-ES")
HELD_OUT = 150
PARAGRAPHS = 20


def documents() -> tuple[list[dict], list[dict]]:
    docs = []
    for lang in LANGUAGES:
        for f in sorted(glob.glob(f"{HANDBOOK}/{lang}/*.html")):
            page = re.sub(r"(?s)<(script|style|head).*?</\1>", " ", open(f, encoding="utf-8").read())
            text = re.sub(r"[ \t]+", " ", html.unescape(re.sub(r"<[^>]+>", " ", page)))
            paras = [p.strip() for p in re.split(r"\n\s*\n", text) if len(p.strip()) > 40]
            for i in range(0, len(paras), PARAGRAPHS):
                docs.append({"text": "\n\n".join(paras[i:i + PARAGRAPHS]), "lang": lang[:2], "domain": "prose"})
    random.Random(1).shuffle(docs)
    return docs[:HELD_OUT], docs[HELD_OUT:]


def first_chars(docs: list[dict], n: int) -> list[str]:
    out, total = [], 0
    for d in docs:
        if total >= n:
            break
        out.append(d["text"][:n - total])
        total += len(out[-1])
    return out


def floor(vocab: int, per_vocab: list[int]) -> None:
    val, train = documents()
    print(f"training text {sum(len(d['text']) for d in train):,} chars, held out {sum(len(d['text']) for d in val):,}")
    for per in per_vocab:
        tok = train_bpe(first_chars(train, per * vocab), vocab, 2)
        langs = measure(tok, val)["languages"]
        print(f"vocab {vocab}, {per} chars per entry ({per * vocab:,} chars): vocabulary {tok.get_vocab_size():,}; "
              "tokens/word " + ", ".join(f"{k} {m['prose_tokens_per_word']:.3f}" for k, m in langs.items()), flush=True)


def words() -> None:
    val, train = documents()
    tok = train_bpe(first_chars(train, 1_000_000), 4096, 2)
    for lang in ("en", "de", "es"):
        stream = [w for d in val if d["lang"] == lang for w in prose_words(d["text"])]
        for n in (100, 200, 500, 1000, 2000):
            figures = [len(tok.encode(" ".join(stream[i:i + n])).ids) / n for i in range(0, len(stream) - n, n)]
            print(f"{lang}, {n} words: {len(figures)} stretches, mean {statistics.mean(figures):.3f}, "
                  f"sd {statistics.stdev(figures):.3f}", flush=True)


if __name__ == "__main__":
    if sys.argv[1] == "floor":
        floor(int(sys.argv[2]), [int(a) for a in sys.argv[3:]])
    else:
        words()
