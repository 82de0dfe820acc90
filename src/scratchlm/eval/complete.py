"""Prompt in, text out: the one generation helper the evaluations share (stop strings and tokens, BOS, seed)."""
from __future__ import annotations

from ..model.generate import generate
from ..tokenizer.bpe import prompt_ids, stop_ids

STOP_CHECK_EVERY = 4  # decoding the tail every token costs more than the check saves


def complete_text(model, tokenizer, prompt: str, max_new_tokens: int, *, temperature: float = 0.8,
                  top_k: int = 50, seed: int | None = None, stop: tuple[str, ...] = ()) -> str:
    """Sample a completion of `prompt`; it ends at a stop token (bpe.stop_ids), at `max_new_tokens`, or before the
    first stop string."""
    ids = prompt_ids(tokenizer, prompt)
    new: list[int] = []
    for i, tok in enumerate(generate(model, ids, max_new_tokens, temperature=temperature, top_k=top_k,
                                     seed=seed, stop_ids=stop_ids(tokenizer))):
        new.append(tok)
        if stop and i % STOP_CHECK_EVERY == 0 and _cut(tokenizer.decode(new, skip_special_tokens=True), stop)[1]:
            break
    return _cut(tokenizer.decode(new, skip_special_tokens=True), stop)[0]


def _cut(text: str, stop: tuple[str, ...]) -> tuple[str, bool]:
    cuts = [i for i in (text.find(s) for s in stop) if i >= 0]
    return (text[:min(cuts)], True) if cuts else (text, False)
