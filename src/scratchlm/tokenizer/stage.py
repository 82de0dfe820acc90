"""Tokenizer stages: train the BPE tokenizer on a stratified sample of the training split and measure it on
the held-out split, then tokenize everything into shards on every core, each document as
<|bos|> text <|eos|> (bpe.DOCUMENT_WRAP): validation shards too, so validation loss counts the end of a document."""
from __future__ import annotations

from collections import Counter, deque

from pathlib import Path
from typing import Iterable, Iterator

import numpy as np

from ..config import Config
from ..data.jsonl import read_jsonl
from ..data.language_step import wanted_languages
from ..data.markers import count_markers
from ..errors import UserError
from ..executor import data_executor
from ..ids import read_json, write_json
from ..progress import bar, log
from .bpe import (document_wrap_ids, load_tokenizer, save_tokenizer, special_ids, tokenizer_content_id,
                  train_bpe)
from .fertility import languages_of_use, measure, verdicts
from .parallel import ParallelEncoder, chunked
from .sample import StratifiedSample
from .sample_verdicts import SIZE_CHECK, composition_lines, sample_verdicts
from .shards import SourceShardWriter, dtype_for_vocab

NO_SPLIT = 1 << 62  # validation files stay one file per domain: eval reads val/<domain>.bin


def _val_docs(data_dir: Path) -> Iterator[dict]:
    for path in sorted((data_dir / "val").glob("*.jsonl")):
        yield from read_jsonl(path)


def kept_languages(cfg: Config) -> list[str]:
    """The languages the data stage keeps in the prose sources, each of which gets a fertility verdict; a source
    that keeps every language ([]) names none."""
    prose = [s for s in cfg.data.sources if s.domain not in set(cfg.tokenizer.code_domains)]
    return list(dict.fromkeys(lang for s in prose for lang in wanted_languages(cfg.data, s)))


def heldout_fertility(cfg: Config, tok, data_dir: Path) -> dict:
    t = cfg.tokenizer
    result = measure(tok, bar(_val_docs(data_dir), desc="fertility on validation", unit="doc"), t.code_domains)
    kept = kept_languages(cfg)
    result["languages_of_use"] = languages_of_use(result, t.min_language_share, [*t.language_quotas, *kept])
    result["kept_languages"] = kept
    if result["overall"]["docs"] == 0:
        result["verdicts"] = [{"level": "warning", "check": "held-out text",
                               "message": "no validation split (data.val_fraction = 0 or too few documents): "
                                          "fertility was not measured"}]
    else:
        result["verdicts"] = verdicts(result, t.min_language_share, t.language_quotas, kept, t.min_judged_words)
    return result


def train_tokenizer(cfg: Config, data_dir: Path, out: Path) -> dict:
    t = cfg.tokenizer
    sample = StratifiedSample(cfg, data_dir)
    log(f"tokenizer: training byte-level BPE, vocab {t.vocab_size}, on a stratified sample of {sample.plan.size:,} "
        f"chars (budget {t.sample_chars:,}; domain quotas: "
        + ", ".join(f"{d} {q:.0%}" for d, q in sample.quotas.items()) + ")")
    tok = train_bpe(bar(sample.texts(), desc="tokenizer sample", unit="doc"), t.vocab_size, t.min_frequency)
    path = save_tokenizer(tok, out)
    composition = sample.composition()
    composition["verdicts"] = sample_verdicts(composition, t)
    for line in composition_lines(composition):
        log(f"tokenizer: {line}")
    fertility = heldout_fertility(cfg, tok, data_dir)
    fertility["tokenizer_id"] = tokenizer_content_id(path)
    write_json(out / "fertility.json", fertility)
    # `scratchlm check` and the report read these: the sample's verdicts, then the held-out fertility's
    info = {"vocab_size": tok.get_vocab_size(), "tokenizer_id": fertility["tokenizer_id"],
            "sample_chars": composition["chars"], "special_tokens": special_ids(tok), "sample": composition,
            "verdicts": composition["verdicts"] + fertility["verdicts"]}
    write_json(out / "tokenizer_info.json", info)
    for v in info["verdicts"]:
        if v["level"] != "ok" or v["check"] == SIZE_CHECK:  # the size says when the sample is under the budget
            log(f"tokenizer: {v['level']}: {v['message']}")
    return info


def encode_stream(encoder: ParallelEncoder, writer: SourceShardWriter, docs: Iterable[dict], domain_id: int,
                   label: str, counts: np.ndarray | None) -> dict:
    tally = {"docs": 0, "chars": 0, "bytes": 0}
    # Markers written in the texts, which the encoder turns into their characters, never special IDs (bpe.text_only)
    as_text: Counter = Counter()
    pending: deque[dict] = deque()  # documents sent to the encoder, not yet written: for provenance

    def texts() -> Iterator[str]:
        for doc in bar(docs, desc=f"tokenize {label}", unit="doc"):
            pending.append({k: doc.get(k) for k in ("id", "source", "orig_id")})
            text = doc["text"]
            tally["docs"] += 1
            tally["chars"] += len(text)
            tally["bytes"] += len(text.encode("utf-8"))
            as_text.update(count_markers(text))
            yield text

    for tokens, lengths in encoder.encode(chunked(texts())):
        writer.add_many(tokens, lengths, domain_id, [pending.popleft() for _ in range(len(lengths))])
        if counts is not None and len(tokens):
            counts += np.bincount(tokens, minlength=len(counts))
    files = writer.close()
    return {**tally, "tokens": writer.n_tokens, "files": files, "markers_as_text": dict(as_text)}


def tokenize_corpus(cfg: Config, data_dir: Path, tokenizer_dir: Path, out: Path) -> dict:
    tok_path = tokenizer_dir / "tokenizer.json"
    tok = load_tokenizer(tok_path)
    vocab = tok.get_vocab_size()
    stats = read_json(data_dir / "stats.json")
    domains = sorted({s.domain for s in cfg.data.sources})
    domain_ids = {d: i for i, d in enumerate(domains)}
    counts = np.zeros(vocab, dtype=np.int64)  # unigram counts of the training tokens: the baseline to beat
    (out / "train").mkdir(parents=True, exist_ok=True)
    (out / "val").mkdir(exist_ok=True)
    summary: dict = {"vocab_size": vocab, "tokenizer_id": tokenizer_content_id(tok_path), "domains": domains,
                     "shard_tokens": cfg.shards.shard_tokens, "train": {}, "val": {}}
    executor = data_executor(cfg, cfg.shards.workers)
    with ParallelEncoder(tok_path, dtype_for_vocab(vocab), document_wrap_ids(tok), executor=executor) as encoder:
        log(f"tokenize: {encoder.workers} worker process(es) ({cfg.data.executor} executor)")
        for src in cfg.data.sources:
            docs = (doc for n in stats["train_files"][src.name] for doc in read_jsonl(data_dir / "train" / n))
            writer = SourceShardWriter(out / "train", src.name, vocab, cfg.shards.shard_tokens)
            summary["train"][src.name] = {"domain": src.domain, "weight": src.weight,
                                          **encode_stream(encoder, writer, docs, domain_ids[src.domain],
                                                           src.name, counts)}
        for domain in domains:
            path = data_dir / "val" / f"{domain}.jsonl"
            if path.exists():
                writer = SourceShardWriter(out / "val", domain, vocab, NO_SPLIT)
                summary["val"][domain] = encode_stream(encoder, writer, read_jsonl(path), domain_ids[domain],
                                                        f"val/{domain}", None)
    summary["tokens_per_domain"] = _per_domain(summary)
    summary["markers_as_text"] = dict(sum((Counter(v["markers_as_text"]) for split in ("train", "val")
                                           for v in summary[split].values()), Counter()))
    summary["special_ids_in_text"] = _specials_in_text(tok, counts, summary)
    if summary["special_ids_in_text"]:  # a guardrail, not a statistic: such shards teach a false document end
        import tokenizers

        raise UserError(f"tokenize: {summary['special_ids_in_text']:,} special token IDs in the training shards "
                        f"came from document text, not from the document wrap; this `tokenizers` "
                        f"({tokenizers.__version__}) does not honour encode_special_tokens (bpe.text_only)")
    np.save(out / "unigram_counts.npy", counts)
    write_json(out / "shards.json", summary)
    total = sum(v["tokens"] for v in summary["train"].values())
    log(f"tokenize: {total:,} training tokens, "
        f"{sum(v['tokens'] for v in summary['val'].values()):,} validation tokens")
    return summary


def _specials_in_text(tok, counts: np.ndarray, summary: dict) -> int:
    """Special IDs in the training shards beyond each document's own BOS and EOS: 0 unless encoding broke."""
    n_docs = sum(v["docs"] for v in summary["train"].values())
    wrap = set(document_wrap_ids(tok))
    return int(sum(counts[i] - (n_docs if i in wrap else 0) for i in set(special_ids(tok).values()) - {None}))


def _per_domain(summary: dict) -> dict:
    """Corpus size per domain in real tokens of this tokenizer, for the data report."""
    out = {d: {"train_docs": 0, "train_chars": 0, "train_tokens": 0, "val_tokens": 0} for d in summary["domains"]}
    for entry in summary["train"].values():
        row = out[entry["domain"]]
        row["train_docs"] += entry["docs"]
        row["train_chars"] += entry["chars"]
        row["train_tokens"] += entry["tokens"]
    for domain, entry in summary["val"].items():
        out[domain]["val_tokens"] = entry["tokens"]
    for row in out.values():
        row["chars_per_token"] = row["train_chars"] / row["train_tokens"] if row["train_tokens"] else None
    return out
