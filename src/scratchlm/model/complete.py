"""Prompt in, text out: the one path from a prompt to generated text, shared by the evaluations, the training
samples, `scratchlm generate` and chat (BOS, stop tokens and strings, decoding, streaming)."""
from __future__ import annotations

from typing import Callable

from ..tokenizer.bpe import prompt_ids, stop_ids
from .generate import generate

STOP_CHECK_EVERY = 4  # decoding the tail every token costs more than the check saves


def complete_text(model, tokenizer, prompt: str, max_new_tokens: int, **options) -> str:
    """complete_ids for a prompt that starts a document, as every training document starts (bpe.prompt_ids)."""
    return complete_ids(model, tokenizer, prompt_ids(tokenizer, prompt), max_new_tokens, **options)


def complete_ids(model, tokenizer, ids: list[int], max_new_tokens: int, *, stop: tuple[str, ...] = (),
                 write: Callable[[str], None] | None = None, **sampling) -> str:
    """The text sampled after `ids`: it ends at a stop token (bpe.stop_ids), at `max_new_tokens`, or before the
    first stop string. `sampling` takes generate()'s keywords (temperature, top_k, top_p, seed, ...).

    write: receives the text as it is sampled, for a terminal; a piece ending in part of a UTF-8 character
    (byte-level tokens can split one) waits for the rest. Stop strings cut the returned text only.
    """
    new: list[int] = []
    shown = ""
    for i, tok in enumerate(generate(model, ids, max_new_tokens, stop_ids=stop_ids(tokenizer), **sampling)):
        new.append(tok)
        if write is not None:
            text = tokenizer.decode(new, skip_special_tokens=True)  # the whole tail: a character may span tokens
            if not text.endswith("\ufffd"):
                write(text[len(shown):])
                shown = text
        if stop and i % STOP_CHECK_EVERY == 0 and _cut(tokenizer.decode(new, skip_special_tokens=True), stop)[1]:
            break
    return _cut(tokenizer.decode(new, skip_special_tokens=True), stop)[0]


def _cut(text: str, stop: tuple[str, ...]) -> tuple[str, bool]:
    cuts = [i for i in (text.find(s) for s in stop) if i >= 0]
    return (text[:min(cuts)], True) if cuts else (text, False)
