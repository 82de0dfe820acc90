"""The chat template, built from the tokenizer's own special tokens.

    <|bos|><|system|>…<|end|><|user|>…<|end|><|assistant|>…<|end|><|user|>…

Content is encoded on its own and the markers are inserted as token IDs, so the template cannot depend on how
a marker string happens to be split. The loss mask is 1 on assistant content and on the <|end|> closing it (so
the model learns to stop), 0 everywhere else: the model is taught to answer, not to predict the user.
A conversation has no closing <|eos|>, unlike a pretraining document: an answer ends at <|end|>, which every
runtime stops on (bpe.STOP_TOKENS, the HF generation_config, the GGUF's end-of-turn token), and after an
answer's <|end|> the model could not tell "conversation over" from "the user speaks next" anyway.
"""
from __future__ import annotations

from ..errors import UserError
from ..tokenizer.bpe import BOS, CHAT_TOKENS, END

ROLES = ("system", "user", "assistant")
# The same template for transformers' tokenizer.apply_chat_template (written by the HF export).
JINJA_TEMPLATE = (BOS + "{% for m in messages %}<|{{ m['role'] }}|>{{ m['content'] }}" + END + "{% endfor %}"
                  "{% if add_generation_prompt %}<|assistant|>{% endif %}")


def marker_ids(tokenizer) -> dict[str, int]:
    ids = {role: tokenizer.token_to_id(f"<|{role}|>") for role in ROLES}
    ids["end"], ids["bos"] = tokenizer.token_to_id(END), tokenizer.token_to_id(BOS)
    missing = [t for t, i in zip([*(f"<|{r}|>" for r in ROLES), END, BOS], ids.values()) if i is None]
    if missing:
        raise UserError(f"the tokenizer has no {', '.join(missing)} token; chat needs {', '.join(CHAT_TOKENS)}")
    return ids


def chat_ids(tokenizer, messages: list[dict], add_generation_prompt: bool = False) -> tuple[list[int], list[int]]:
    """Token IDs of a conversation and the loss mask over them (1 = a token the model is trained to produce)."""
    m = marker_ids(tokenizer)
    ids, mask = [m["bos"]], [0]
    for msg in messages:
        content = tokenizer.encode(msg["content"], add_special_tokens=False).ids
        train = 1 if msg["role"] == "assistant" else 0
        ids += [m[msg["role"]], *content, m["end"]]
        mask += [0, *([train] * len(content)), train]
    if add_generation_prompt:
        ids.append(m["assistant"])
        mask.append(0)
    return ids, mask
