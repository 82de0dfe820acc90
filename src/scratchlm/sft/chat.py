"""`scratchlm chat --checkpoint PATH`: a conversation in the terminal, the answer streamed as it is sampled."""
from __future__ import annotations

import sys
from typing import Callable

from ..model.generate import generate
from ..tokenizer.bpe import stop_ids
from ..train.checkpoint import load_model
from ..train.device import pick_device
from .template import chat_ids, marker_ids


def stream_reply(model, tokenizer, messages: list[dict], write: Callable[[str], None], *, max_new_tokens: int,
                 temperature: float, top_k: int, top_p: float, repetition_penalty: float, seed: int | None) -> str:
    ids, _ = chat_ids(tokenizer, messages, add_generation_prompt=True)
    stops = stop_ids(tokenizer)  # <|end|> closes the answer; the others if a weakly tuned model emits them
    new: list[int] = []
    shown = ""
    for tok in generate(model, ids, max_new_tokens, temperature=temperature, top_k=top_k, top_p=top_p,
                        repetition_penalty=repetition_penalty, stop_ids=stops, seed=seed):
        if tok in stops:
            break
        new.append(tok)
        text = tokenizer.decode(new, skip_special_tokens=True)
        if not text.endswith("\ufffd"):  # wait for the rest of a UTF-8 character split across tokens
            write(text[len(shown):])
            shown = text
    return tokenizer.decode(new, skip_special_tokens=True)


def chat_loop(args, ask: Callable[[str], str] | None = None) -> None:
    ask = ask or input  # looked up per call: a default of `input` would freeze whatever it was at import time
    model, tokenizer, _ = load_model(args.checkpoint, pick_device())
    marker_ids(tokenizer)  # fail now, with the reason, if the tokenizer has no chat tokens
    messages = [{"role": "system", "content": args.system}] if args.system else []

    def write(text: str) -> None:
        sys.stdout.write(text)
        sys.stdout.flush()

    print("chat: empty line or Ctrl-D to quit", file=sys.stderr)
    while True:
        try:
            user = ask("you> ")
        except EOFError:
            break
        if not user.strip():
            break
        messages.append({"role": "user", "content": user})
        write("model> ")
        reply = stream_reply(model, tokenizer, messages, write, max_new_tokens=args.max_new_tokens,
                             temperature=args.temperature, top_k=args.top_k, top_p=args.top_p,
                             repetition_penalty=args.repetition_penalty, seed=args.seed)
        write("\n")
        messages.append({"role": "assistant", "content": reply})
