"""Your own domain tasks, one JSONL file per task (config `[[eval.suite.tasks]]` name / path / kind).

multiple_choice: {"prompt": "...", "choices": ["...", "..."], "answer": 0}   (answer: index or the choice text)
  scored by log-likelihood: the choice the model finds most probable after the prompt is its answer. Accuracy
  is reported raw and normalized by the choice's length in bytes (long choices otherwise lose by default).
completion: {"prompt": "...", "answer": "..."}
  greedy completion, scored by exact match with the answer (whitespace-stripped; one line when the answer is).
"""
from __future__ import annotations

from pathlib import Path

import torch

from ..config import Config, TaskConfig
from ..errors import UserError
from ..model.complete import complete_text
from ..userjsonl import numbered_json_lines
from ..tokenizer.bpe import prompt_ids


def read_task(path: Path, kind: str) -> list[dict]:
    items = []
    for where, item in numbered_json_lines(path, "task file"):
        if not isinstance(item, dict) or not isinstance(item.get("prompt"), str):
            raise UserError(f"{where}: needs a string `prompt`")
        if kind == "multiple_choice":
            choices = item.get("choices")
            if not (isinstance(choices, list) and len(choices) >= 2 and all(isinstance(c, str) for c in choices)):
                raise UserError(f"{where}: `choices` must be a list of at least two strings")
            answer = item.get("answer")
            if isinstance(answer, str) and answer in choices:
                answer = choices.index(answer)
            if not (isinstance(answer, int) and not isinstance(answer, bool) and 0 <= answer < len(choices)):
                raise UserError(f"{where}: `answer` must be a choice index in 0..{len(choices) - 1} or a choice text")
            item = {**item, "answer": answer}
        elif not isinstance(item.get("answer"), str):
            raise UserError(f"{where}: a completion task needs a string `answer`")
        items.append(item)
    if not items:
        raise UserError(f"task file {path} holds no items")
    return items


@torch.no_grad()
def continuation_logprob(model, tokenizer, prompt: str, continuation: str) -> float:
    """Sum of log p(continuation tokens | prompt), context cut from the left to the model's seq_len."""
    device = model.tok_emb.weight.device
    ctx = prompt_ids(tokenizer, prompt)  # the start of a document, as in training; the continuation has no EOS
    cont = tokenizer.encode(continuation, add_special_tokens=False).ids
    if not cont:
        return 0.0
    ids = (ctx + cont)[-(model.cfg.seq_len + 1):]
    x = torch.tensor([ids[:-1]], device=device)
    logp = torch.log_softmax(model(x)[0][0].float(), dim=-1)
    targets = torch.tensor(ids[1:], device=device)
    picked = logp[torch.arange(len(targets), device=device), targets]
    return float(picked[-len(cont):].sum())


def score_multiple_choice(model, tokenizer, items: list[dict]) -> dict:
    raw = norm = 0
    for item in items:
        lps = [continuation_logprob(model, tokenizer, item["prompt"], c) for c in item["choices"]]
        per_byte = [lp / max(1, len(c.encode("utf-8"))) for lp, c in zip(lps, item["choices"])]
        raw += max(range(len(lps)), key=lps.__getitem__) == item["answer"]
        norm += max(range(len(per_byte)), key=per_byte.__getitem__) == item["answer"]
    return {"items": len(items), "accuracy": raw / len(items), "accuracy_per_byte": norm / len(items),
            "chance": sum(1 / len(i["choices"]) for i in items) / len(items)}


def score_completion(model, tokenizer, items: list[dict]) -> dict:
    hits, examples = 0, []
    for item in items:
        answer = item["answer"].strip()
        budget = len(tokenizer.encode(answer, add_special_tokens=False).ids) + 4
        stop = ("\n",) if "\n" not in answer else ()
        got = complete_text(model, tokenizer, item["prompt"], budget, temperature=0.0, stop=stop).strip()
        hits += got == answer
        if len(examples) < 5:
            examples.append({"prompt": item["prompt"], "answer": answer, "output": got})
    return {"items": len(items), "exact_match": hits / len(items), "examples": examples}


def run_tasks(model, tokenizer, cfg: Config) -> dict[str, dict]:
    out = {}
    for task in cfg.eval.suite.tasks:
        out[task.name] = run_task(model, tokenizer, task, cfg.resolve(task.path))
    return out


def run_task(model, tokenizer, task: TaskConfig, path: Path) -> dict:
    items = read_task(path, task.kind)
    scorer = score_multiple_choice if task.kind == "multiple_choice" else score_completion
    return {"kind": task.kind, "path": str(path), **scorer(model, tokenizer, items)}
