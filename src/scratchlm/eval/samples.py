"""Fixed-prompt generations: read what the model actually writes, at every evaluation."""
from __future__ import annotations

from pathlib import Path

from ..config import EvalConfig
from ..data.jsonl import read_jsonl
from ..model.complete import complete_text

DEFAULT_PROMPT_CHARS = 60


def default_prompts(data_dir: Path) -> list[str]:
    """One prompt per domain: the opening of its first validation document, cut at a word boundary."""
    prompts = []
    for path in sorted((data_dir / "val").glob("*.jsonl")):
        for doc in read_jsonl(path):
            head = doc["text"][:DEFAULT_PROMPT_CHARS]
            cut = head.rfind(" ")
            prompts.append(head[:cut] if cut > DEFAULT_PROMPT_CHARS // 2 else head)
            break
    return prompts


def generate_samples(model, tokenizer, prompts: list[str], cfg: EvalConfig, seed: int) -> list[dict]:
    was_training = model.training  # generate() switches to eval mode; the trainer calls this mid-run
    out = []
    for i, prompt in enumerate(prompts):
        out.append({"prompt": prompt, "completion": complete_text(model, tokenizer, prompt, cfg.max_new_tokens,
                                                                  temperature=cfg.temperature, top_k=cfg.top_k,
                                                                  seed=seed + i)})
    model.train(was_training)
    return out
