"""How many training tokens the corpus has, and how long its documents are in tokens.

Exact when the shards exist (shards.json, the shards' document index). Before that, estimated: characters
from the data stage's stats.json when it has run, otherwise from a sample of the source files scaled by their
size on disk; tokens per character from the trained tokenizer when it exists, otherwise from a BPE trained on
half of the sample and measured on the other half. Every estimate states its sample and ratio.
"""
from __future__ import annotations

import dataclasses

import numpy as np

from ..config import Config
from ..data.readers import iter_source, source_files
from ..ids import read_json
from ..pipeline import Artifact
from ..tokenizer.bpe import load_tokenizer, shard_tokens, train_bpe
from ..tokenizer.shards import TokenShard

SAMPLE_CHARS = 1_000_000  # per source; enough for a tokens/char ratio within a few percent
PERCENTILES = (10, 25, 50, 75, 90, 99)


def _sample_source(cfg: Config, src) -> tuple[list[str], int, int]:
    """(documents, bytes of the files read whole, bytes of all files): whole files until SAMPLE_CHARS."""
    files = source_files(src, cfg.base_dir, cfg.workdir)
    texts, chars, read_bytes = [], 0, 0
    for f in files:
        one = dataclasses.replace(src, path=str(f))
        texts += [d["text"] for d in iter_source(one, cfg.base_dir, cfg.data.max_chars) if isinstance(d, dict)]
        read_bytes += f.stat().st_size
        chars = sum(map(len, texts))
        if chars >= SAMPLE_CHARS:
            break
    return texts, read_bytes, sum(f.stat().st_size for f in files)


def _tokens_per_char(cfg: Config, art: dict[str, Artifact], texts: list[str]) -> tuple[float, str]:
    if art["tokenizer"].done:
        tok = load_tokenizer(art["tokenizer"].dir / "tokenizer.json")
        sample = texts
        how = "the trained tokenizer"
    else:
        train, sample = texts[0::2], texts[1::2] or texts
        tok = train_bpe(iter(train), cfg.tokenizer.vocab_size, cfg.tokenizer.min_frequency)
        how = (f"a BPE (vocab {cfg.tokenizer.vocab_size}) trained on {sum(map(len, train)):,} sampled chars "
               f"(fewer merges than the real one: an overestimate)")
    chars = sum(map(len, sample))
    tokens = shard_tokens(tok, sample)
    ratio = tokens / max(1, chars)
    return ratio, f"{ratio:.3f} tokens/char measured with {how} on {chars:,} chars"


def corpus_tokens(cfg: Config, art: dict[str, Artifact]) -> dict:
    if art["shards"].done:
        shards = read_json(art["shards"].dir / "shards.json")
        per_source = {n: v["tokens"] for n, v in shards["train"].items()}
        return {"tokens": sum(per_source.values()), "per_source": per_source, "exact": True,
                "how": f"counted in the training shards ({art['shards'].dir / 'shards.json'})"}
    samples = {s.name: _sample_source(cfg, s) for s in cfg.data.sources}
    all_texts = [t for texts, _, _ in samples.values() for t in texts]
    if not all_texts:
        return {"tokens": 0, "per_source": {}, "exact": False, "how": "no readable document in the sources"}
    ratio, ratio_how = _tokens_per_char(cfg, art, all_texts[:: max(1, len(all_texts) // 2000)])
    per_source = {}
    if art["data"].done:
        stats = read_json(art["data"].dir / "stats.json")
        for name, s in stats["sources"].items():
            per_source[name] = int(s["train"]["chars"] * ratio)
        chars_how = "training characters from the data stage (after cleaning, dedup and the validation split)"
    else:
        for name, (texts, read_bytes, total_bytes) in samples.items():
            per_source[name] = int(sum(map(len, texts)) * total_bytes / max(1, read_bytes) * ratio)
        chars_how = ("raw characters of the sources (before cleaning and dedup), extrapolated from the files "
                     "read by their size on disk")
    return {"tokens": sum(per_source.values()), "per_source": per_source, "exact": False,
            "tokens_per_char": ratio, "how": f"estimate: {chars_how} x {ratio_how}"}


FAR_SHORTER = 4  # a document under seq_len / 4 tokens fills under a quarter of a training window


def _train_doc_lengths(art: dict[str, Artifact]) -> np.ndarray:
    lengths = []
    for path in sorted((art["shards"].dir / "train").glob("*.bin")):
        shard = TokenShard(path)
        if len(shard.docs):
            lengths.append(np.diff(np.append(shard.docs[:, 0], len(shard))))
    return np.concatenate(lengths) if lengths else np.zeros(0, dtype=np.int64)


def document_lengths(art: dict[str, Artifact], seq_len: int) -> dict | None:
    """Document lengths in tokens from the shards' document index: percentiles, and the share of documents
    (and of tokens) in documents far shorter than the context."""
    if not art["shards"].done:
        return None
    lens = _train_doc_lengths(art)
    if not len(lens):
        return None
    limit = max(1, seq_len // FAR_SHORTER)
    short = lens < limit
    return {"docs": int(len(lens)), "percentiles": {str(p): int(np.percentile(lens, p)) for p in PERCENTILES},
            "mean": float(lens.mean()), "short_limit": limit, "share_docs_short": float(short.mean()),
            "share_tokens_short": float(lens[short].sum() / max(1, lens.sum())),
            "how": "document index of the training shards (.idx.npy)"}
