"""`scratchlm chat --checkpoint PATH`: a conversation in the terminal, the answer streamed as it is sampled."""
from __future__ import annotations

import sys
from typing import Callable

from ..model.checkpoint import load_model
from ..model.complete import complete_ids
from ..model.device import pick_device
from ..model.stream import write_now
from .template import chat_ids, marker_ids


def stream_reply(model, tokenizer, messages: list[dict], write: Callable[[str], None], *, max_new_tokens: int,
                 **sampling) -> str:
    """The assistant's answer to `messages`, written as it is sampled. It ends at <|end|>, or at another stop
    token if a weakly tuned model emits one (bpe.stop_ids)."""
    ids, _ = chat_ids(tokenizer, messages, add_generation_prompt=True)
    return complete_ids(model, tokenizer, ids, max_new_tokens, write=write, **sampling)


def chat_loop(args, ask: Callable[[str], str] | None = None) -> None:
    ask = ask or input  # looked up per call: a default of `input` would freeze whatever it was at import time
    model, tokenizer, _ = load_model(args.checkpoint, pick_device())
    marker_ids(tokenizer)  # fail now, with the reason, if the tokenizer has no chat tokens
    messages = [{"role": "system", "content": args.system}] if args.system else []
    print("chat: empty line or Ctrl-D to quit", file=sys.stderr)
    while True:
        try:
            user = ask("you> ")
        except EOFError:
            break
        if not user.strip():
            break
        messages.append({"role": "user", "content": user})
        write_now("model> ")
        reply = stream_reply(model, tokenizer, messages, write_now, max_new_tokens=args.max_new_tokens,
                             temperature=args.temperature, top_k=args.top_k, top_p=args.top_p,
                             repetition_penalty=args.repetition_penalty, seed=args.seed)
        write_now("\n")
        messages.append({"role": "assistant", "content": reply})
