"""`scratchlm generate`: load a checkpoint and stream tokens to the terminal as they are sampled."""
from __future__ import annotations

import sys

from .checkpoint import load_model
from .complete import complete_text
from .device import pick_device


def write_now(text: str) -> None:
    """To the terminal at once: stdout is buffered, and streaming is the point."""
    sys.stdout.write(text)
    sys.stdout.flush()


def stream_to_stdout(args) -> None:
    model, tokenizer, _ = load_model(args.checkpoint, pick_device())
    sys.stdout.write(args.prompt)
    complete_text(model, tokenizer, args.prompt, args.max_new_tokens, write=write_now,
                  temperature=args.temperature, top_k=args.top_k, top_p=args.top_p,
                  repetition_penalty=args.repetition_penalty, use_cache=not args.no_cache, seed=args.seed)
    sys.stdout.write("\n")
