"""`scratchlm generate`: load a checkpoint and stream tokens to the terminal as they are sampled."""
from __future__ import annotations

import sys

from ..tokenizer.bpe import prompt_ids, stop_ids
from ..train.checkpoint import load_model
from ..train.device import pick_device
from .generate import generate


def stream_to_stdout(args) -> None:
    model, tokenizer, _ = load_model(args.checkpoint, pick_device())
    ids = prompt_ids(tokenizer, args.prompt)
    sys.stdout.write(args.prompt)
    new: list[int] = []
    shown = ""
    for tok in generate(model, ids, args.max_new_tokens, temperature=args.temperature, top_k=args.top_k,
                        top_p=args.top_p, repetition_penalty=args.repetition_penalty,
                        stop_ids=stop_ids(tokenizer), use_cache=not args.no_cache, seed=args.seed):
        new.append(tok)
        # Decode the whole tail each time: byte-level tokens can split a UTF-8 character across tokens.
        text = tokenizer.decode(new, skip_special_tokens=True)
        if not text.endswith("\ufffd"):
            sys.stdout.write(text[len(shown):])
            sys.stdout.flush()
            shown = text
    sys.stdout.write("\n")
