"""Sampling: temperature, top-k, top-p and a repetition penalty, streaming one token at a time."""
from __future__ import annotations

from typing import Collection, Iterator

import torch

from ..sampling import GENERATE
from .kv_cache import KVCache

_EMPTY = torch.empty(0, dtype=torch.long)


def sample_next(logits: torch.Tensor, history: torch.Tensor, temperature: float, top_k: int, top_p: float,
                repetition_penalty: float, generator: torch.Generator | None) -> int:
    logits = logits.float().clone()
    if repetition_penalty != 1.0 and history.numel():
        # CTRL-style: shrink the logits of tokens already produced, so loops become less likely.
        prev = torch.unique(history)
        vals = logits[prev]
        logits[prev] = torch.where(vals > 0, vals / repetition_penalty, vals * repetition_penalty)
    if temperature <= 0:
        return int(torch.argmax(logits))
    logits = logits / temperature
    if top_k > 0:
        kth = torch.topk(logits, min(top_k, logits.numel())).values[-1]
        logits[logits < kth] = float("-inf")
    probs = torch.softmax(logits, dim=-1)
    if top_p < 1.0:
        sorted_p, order = torch.sort(probs, descending=True)
        drop = torch.cumsum(sorted_p, 0) - sorted_p > top_p
        sorted_p[drop] = 0
        probs = torch.zeros_like(probs).scatter_(0, order, sorted_p)
    return int(torch.multinomial(probs, 1, generator=generator))


@torch.no_grad()
def generate(model, prompt_ids: list[int], max_new_tokens: int, *, temperature: float = GENERATE.temperature,
             top_k: int = GENERATE.top_k, top_p: float = GENERATE.top_p,
             repetition_penalty: float = GENERATE.repetition_penalty, stop_ids: Collection[int] = (),
             use_cache: bool = True, seed: int | None = None) -> Iterator[int]:
    """Yield new token ids one by one, the last one a stop id if one was sampled (bpe.stop_ids). The context
    slides when it reaches the model's seq_len."""
    model.eval()
    device = model.tok_emb.weight.device
    generator = torch.Generator(device=device).manual_seed(seed) if seed is not None else None
    max_len = model.cfg.seq_len
    tokens = list(prompt_ids)[-max_len:]
    cache = KVCache.for_model(model) if use_cache else None
    pending = tokens  # what the model has not yet seen
    for _ in range(max_new_tokens):
        if cache is not None and cache.pos + len(pending) > max_len:
            # Out of context: keep the most recent half and prefill again.
            cache.reset()
            pending = tokens[-(max_len // 2):]
        if cache is None:
            pending = tokens[-max_len:]
        x = torch.tensor([pending], dtype=torch.long, device=device)
        logits, _ = model(x, kv_cache=cache)
        # The history tensor is only read by the repetition penalty; building it every token costs O(length).
        history = torch.tensor(tokens, dtype=torch.long, device=device) if repetition_penalty != 1.0 else _EMPTY
        nxt = sample_next(logits[0, -1], history, temperature, top_k, top_p, repetition_penalty, generator)
        tokens.append(nxt)
        pending = [nxt]
        yield nxt
        if nxt in stop_ids:
            return
