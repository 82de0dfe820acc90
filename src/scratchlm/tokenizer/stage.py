"""Tokenizer stages: train the BPE tokenizer on the training split, then tokenize everything into shards."""
from __future__ import annotations

from pathlib import Path
from typing import Iterator

import numpy as np

from ..config import Config
from ..data.jsonl import read_jsonl
from ..data.provenance import ProvenanceWriter
from ..ids import read_json, write_json
from ..progress import bar, log
from .bpe import BOS, load_tokenizer, special_ids, train_bpe
from .shards import TokenShardWriter

ENCODE_BATCH = 512


def _train_docs(data_dir: Path) -> Iterator[dict]:
    stats = read_json(data_dir / "stats.json")
    for files in stats["train_files"].values():
        for name in files:
            yield from read_jsonl(data_dir / "train" / name)


def train_tokenizer(cfg: Config, data_dir: Path, out: Path) -> dict:
    t = cfg.tokenizer
    budget = t.sample_chars

    def sample() -> Iterator[str]:
        nonlocal budget
        for doc in _train_docs(data_dir):
            if budget <= 0:
                return
            text = doc["text"][: t.max_doc_chars]
            budget -= len(text)
            yield text

    log(f"tokenizer: training byte-level BPE, vocab {t.vocab_size}, on up to {t.sample_chars:,} chars")
    tok = train_bpe(bar(sample(), desc="tokenizer sample", unit="doc"), t.vocab_size, t.min_frequency)
    tok.save(str(out / "tokenizer.json"))
    info = {"vocab_size": tok.get_vocab_size(), "sample_chars": t.sample_chars - max(budget, 0),
            "special_tokens": special_ids(tok)}
    write_json(out / "tokenizer_info.json", info)
    return info


def tokenize_corpus(cfg: Config, data_dir: Path, tokenizer_dir: Path, out: Path) -> dict:
    tok = load_tokenizer(tokenizer_dir / "tokenizer.json")
    vocab = tok.get_vocab_size()
    bos = tok.token_to_id(BOS)
    stats = read_json(data_dir / "stats.json")
    domains = sorted({s.domain for s in cfg.data.sources})
    domain_ids = {d: i for i, d in enumerate(domains)}
    counts = np.zeros(vocab, dtype=np.int64)  # unigram counts of the training tokens: the baseline to beat
    (out / "train").mkdir(parents=True, exist_ok=True)
    (out / "val").mkdir(exist_ok=True)
    summary: dict = {"vocab_size": vocab, "domains": domains, "train": {}, "val": {}}

    def encode_into(writer: TokenShardWriter, docs, label: str, count: bool) -> dict:
        n_docs = n_bytes = 0
        batch: list[dict] = []
        provenance = ProvenanceWriter(writer.path)  # which document each token range came from

        def flush():
            nonlocal n_docs, n_bytes
            encoded = tok.encode_batch([d["text"] for d in batch], add_special_tokens=False)
            arrays = [np.asarray([bos, *enc.ids], dtype=np.int64) for enc in encoded]
            if count and arrays:
                counts[:] += np.bincount(np.concatenate(arrays), minlength=vocab)
            for doc, ids in zip(batch, arrays):
                writer.add(ids, domain_ids[doc["domain"]])
                provenance.add(doc, len(ids))
                n_docs += 1
                n_bytes += len(doc["text"].encode("utf-8"))
            batch.clear()

        for doc in bar(docs, desc=f"tokenize {label}", unit="doc"):
            batch.append(doc)
            if len(batch) >= ENCODE_BATCH:
                flush()
        flush()
        provenance.close()
        return {"docs": n_docs, "bytes": n_bytes, "tokens": writer.close()}

    for src in cfg.data.sources:
        files = [data_dir / "train" / n for n in stats["train_files"][src.name]]
        writer = TokenShardWriter(out / "train" / f"{src.name}.bin", vocab)
        docs = (doc for f in files for doc in read_jsonl(f))
        summary["train"][src.name] = {"domain": src.domain, "weight": src.weight,
                                      **encode_into(writer, docs, src.name, count=True)}
    for domain in domains:
        path = data_dir / "val" / f"{domain}.jsonl"
        if path.exists():
            writer = TokenShardWriter(out / "val" / f"{domain}.bin", vocab)
            summary["val"][domain] = encode_into(writer, read_jsonl(path), f"val/{domain}", count=False)
    np.save(out / "unigram_counts.npy", counts)
    write_json(out / "shards.json", summary)
    total = sum(v["tokens"] for v in summary["train"].values())
    log(f"tokenize: {total:,} training tokens, "
        f"{sum(v['tokens'] for v in summary['val'].values()):,} validation tokens")
    return summary
