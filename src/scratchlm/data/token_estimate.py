"""Tokens before the tokenizer exists: a ratio tokens/char measured on a sample, and the size verdict.

chars/4 is a rule of thumb for English web text with a 50k vocabulary; code, other languages and small
vocabularies are far off it. So the prepare stage trains a throwaway byte-level BPE (same pre-tokenizer and
vocabulary size as the real one) on half of a sample of the cleaned corpus, and measures tokens/char per
source on the other half. After the tokenizer stage, the report replaces the estimate with real counts.
"""
from __future__ import annotations

from ..config import Config

MIN_TOKENS_PER_PARAM, MAX_TOKENS_PER_PARAM = 20, 100  # Chinchilla-style budget (Hoffmann et al. 2022: ~20)
TOO_SMALL = 5  # below this many tokens per parameter the model mostly memorizes: error


def measure_ratio(samples: dict[str, list[str]], vocab_size: int) -> dict:
    """samples: source -> sampled document texts. Returns the ratio per source and how it was measured."""
    from ..tokenizer.bpe import shard_tokens, train_bpe

    train = [t for texts in samples.values() for t in texts[0::2]]
    total_chars = sum(len(t) for texts in samples.values() for t in texts)
    if not train:
        return {"method": "no documents to sample", "sample_chars": 0, "ratio": {}}
    tok = train_bpe(train, vocab_size, min_frequency=2)
    ratio = {}
    for source, texts in samples.items():
        held_out = texts[1::2] or texts[0::2]  # a one-document source is measured on what trained the BPE
        chars = sum(len(t) for t in held_out)
        tokens = shard_tokens(tok, held_out)  # counted as the shards will: BOS and EOS included
        ratio[source] = tokens / chars if chars else 0.0
    return {"method": f"byte-level BPE (vocab {tok.get_vocab_size()}) trained on half of the sample, "
                      "tokens/char measured per source on the other half",
            "sample_chars": total_chars, "sample_docs": sum(len(t) for t in samples.values()), "ratio": ratio}


def sample_texts(run, budget_per_source: int) -> dict[str, list[str]]:
    """Up to budget_per_source characters of each source's training documents, in input order, documents
    capped at 20k chars so one huge file cannot be the whole sample. Stops reading a source at its budget."""
    out: dict[str, list[str]] = {}
    for source in dict.fromkeys(u.source for u in run.units):
        texts, used = out.setdefault(source, []), 0
        for _, doc in run.iter_docs([u for u in run.units if u.source == source]):
            if used >= budget_per_source:
                break
            texts.append(doc["text"][:20_000])
            used += len(texts[-1])
    return out


def model_params(cfg: Config) -> int:
    """Parameter count of the configured model, built on the meta device (no memory, no init)."""
    import torch

    from ..model.gpt import GPT

    with torch.device("meta"):
        return GPT(cfg.model, cfg.tokenizer.vocab_size).num_params()


def size_level(per_param: float, wanted: float = MIN_TOKENS_PER_PARAM) -> tuple[str, str]:
    """The one verdict on corpus size (data stage, plan, check and report all call it): (level, advice).
    `wanted` moves the warning line (`scratchlm plan --tokens-per-param`); the error line stays at TOO_SMALL."""
    if per_param < TOO_SMALL:
        return "error", (f"under {TOO_SMALL} tokens per parameter the model will memorize this corpus: add data "
                         "or shrink the model")
    if per_param < wanted:
        return "warning", f"below {wanted:g} tokens per parameter: the model is larger than the data supports"
    if per_param <= MAX_TOKENS_PER_PARAM:
        return "ok", f"within {wanted:g}-{MAX_TOKENS_PER_PARAM} tokens per parameter"
    return "ok", f"over {MAX_TOKENS_PER_PARAM} tokens per parameter: a larger model could use this data"


def size_verdict(tokens: int, params: int, counted: str, wanted: float = MIN_TOKENS_PER_PARAM) -> dict:
    per_param = tokens / params if params else 0.0
    level, advice = size_level(per_param, wanted)
    return {"level": level, "tokens": tokens, "params": params, "tokens_per_param": round(per_param, 2),
            "counted": counted, "message": f"{tokens:,} tokens ({counted}) for {params:,} parameters = "
                                           f"{per_param:.1f} tokens/parameter: {advice}"}
