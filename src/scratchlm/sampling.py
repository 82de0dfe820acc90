"""The sampling defaults: one source for `scratchlm generate`, `scratchlm chat` and the exports' generation config,
so that an exported model answers a prompt the way the command does (same temperature, top-k, top-p, repetition
penalty, length). No torch here: `--help` reads these without loading it.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Sampling:
    max_new_tokens: int
    temperature: float  # 0: greedy
    top_k: int  # 0: the whole vocabulary
    top_p: float  # 1.0: no nucleus cut
    repetition_penalty: float  # 1.0: none; CTRL's: the logits of every token already in the context shrink by it


# A base model continues text: sampled as trained, without a penalty, which would also push code away from the
# identifiers it must repeat. What `generate` uses and what a base checkpoint's export carries.
GENERATE = Sampling(max_new_tokens=100, temperature=0.8, top_k=50, top_p=1.0, repetition_penalty=1.0)
# A fine-tuned model answers: cooler and with a nucleus cut for coherent answers, and with CTRL's mild penalty,
# because small models fine-tuned from scratch fall into loops ("the the the", a repeated sentence) within a few
# dozen tokens; 1.1 is below CTRL's 1.2, which starts to garble word choice. Chosen over dropping the penalty from
# chat (the other way to make chat and the export agree): the export of a fine-tuned checkpoint now carries 1.1.
CHAT = Sampling(max_new_tokens=200, temperature=0.7, top_k=50, top_p=0.95, repetition_penalty=1.1)


def for_checkpoint(meta: dict) -> Sampling:
    """The defaults for a checkpoint's export: chat's for a fine-tuned one (its meta names its fine-tuning), else
    generate's."""
    return CHAT if meta.get("sft") else GENERATE
