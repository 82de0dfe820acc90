"""Tokens before the tokenizer exists, and the one verdict on corpus size.

chars/4 is a rule of thumb for English web text with a 50k vocabulary; code, other languages and small
vocabularies are far off it. So the prepare stage samples the cleaned corpus, and a throwaway byte-level BPE
(tokenizer/token_estimate.py) measures tokens/char per source on it. After the tokenizer stage, the report
replaces the estimate with real counts.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

MIN_TOKENS_PER_PARAM, MAX_TOKENS_PER_PARAM = 20, 100  # Chinchilla-style budget (Hoffmann et al. 2022: ~20)
TOO_SMALL = 5  # below this many tokens per parameter the model mostly memorizes: error


@dataclass(frozen=True)
class SizeEstimate:
    """What the corpus-size verdict needs from stages that come after data (the tokenizer, the model). The stage
    registry hands them in, so the data package imports neither."""
    tokens_per_char: Callable[[dict[str, list[str]], int], dict]  # (source -> sampled texts, vocab size) -> ratios
    model_params: int  # parameters of the configured model


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
