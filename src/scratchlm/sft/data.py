"""SFT data: a JSONL file of conversations, checked line by line, encoded and packed into training rows.

One line is either {"prompt": "...", "response": "...", "system": "..." (optional)} or
{"messages": [{"role": "system"|"user"|"assistant", "content": "..."}, ...]}: an optional system turn first,
then user and assistant alternating, ending with the assistant.
"""
from __future__ import annotations

from pathlib import Path

import torch

from ..errors import UserError
from ..userjsonl import numbered_json_lines
from .template import ROLES, chat_ids


def _messages(item, where: str) -> list[dict]:
    if not isinstance(item, dict):
        raise UserError(f"{where}: expected a JSON object")
    if "messages" in item:
        msgs = item["messages"]
    elif "prompt" in item and "response" in item:
        msgs = ([{"role": "system", "content": item["system"]}] if item.get("system") else []) + [
            {"role": "user", "content": item["prompt"]}, {"role": "assistant", "content": item["response"]}]
    else:
        raise UserError(f"{where}: needs `messages`, or `prompt` and `response`")
    if not isinstance(msgs, list) or not msgs:
        raise UserError(f"{where}: `messages` must be a non-empty list")
    for i, m in enumerate(msgs):
        if not isinstance(m, dict) or m.get("role") not in ROLES:
            raise UserError(f"{where}: turn {i + 1} needs a role among {', '.join(ROLES)}")
        if not isinstance(m.get("content"), str) or not m["content"].strip():
            raise UserError(f"{where}: turn {i + 1} ({m['role']}) has empty or non-string content")
    turns = msgs[1:] if msgs[0]["role"] == "system" else msgs
    for i, m in enumerate(turns):
        expected = "user" if i % 2 == 0 else "assistant"
        if m["role"] != expected:
            raise UserError(f"{where}: turn {i + 1 + (len(msgs) - len(turns))} is `{m['role']}`, expected "
                            f"`{expected}` (an optional system turn first, then user and assistant alternating)")
    if turns[-1]["role"] != "assistant":
        raise UserError(f"{where}: the last turn must be the assistant's (there is nothing to learn otherwise)")
    return msgs


def read_conversations(path: Path) -> tuple[list[list[dict]], list[int]]:
    """The conversations and the line each one is on (1-based), for messages that name a pair."""
    out, lines = [], []
    for where, item in numbered_json_lines(path, "SFT data file"):
        out.append(_messages(item, where))
        lines.append(where.line)
    if not out:
        raise UserError(f"SFT data file {path} holds no conversations")
    return out, lines


def pack_rows(examples: list[tuple[list[int], list[int]]], row_len: int, pad_id: int,
              pack: bool = True, what: str = "conversation") -> tuple[torch.Tensor, torch.Tensor, int]:
    """Rows of `row_len` tokens and their masks; returns (ids, mask, dropped).

    Packing puts conversations one after another in a row until the next would not fit; one is never split,
    because the second half of an answer without its question teaches the wrong thing. A conversation longer
    than a row is dropped and counted.
    """
    rows: list[tuple[list[int], list[int]]] = []
    dropped = 0
    for ids, mask in examples:
        if len(ids) > row_len:
            dropped += 1
            continue
        if pack and rows and len(rows[-1][0]) + len(ids) <= row_len:
            rows[-1][0].extend(ids)
            rows[-1][1].extend(mask)
        else:
            rows.append((list(ids), list(mask)))
    if not rows:
        raise UserError(f"every {what} is longer than the model's context ({row_len} tokens)")
    ids_t = torch.full((len(rows), row_len), pad_id, dtype=torch.long)
    mask_t = torch.zeros((len(rows), row_len), dtype=torch.long)
    for i, (ids, mask) in enumerate(rows):
        ids_t[i, :len(ids)] = torch.tensor(ids)
        mask_t[i, :len(mask)] = torch.tensor(mask)
    return ids_t, mask_t, dropped


def encode_conversations(tokenizer, conversations: list[list[dict]]) -> list[tuple[list[int], list[int]]]:
    return [chat_ids(tokenizer, c) for c in conversations]
