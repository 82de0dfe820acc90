"""Answer-level evaluation after fine-tuning: the model answers prompts and each answer is scored against the
reference answer.

A falling loss does not say the model answers: a model can learn the answers' format and language and still give
one stock answer to every question. So the model answers the held-out prompts (greedy, and with chat's sampling
defaults, which is what a user meets) and, greedy, as many training prompts. Scores are SQuAD's: exact match and
word-F1 after normalization (case, punctuation, spacing; no English article list, because most of our users'
pairs are not English), plus the share of distinct answers and the share that end with <|end|> before the length
cap. The verdicts read these (verdicts.py).
"""
from __future__ import annotations

from collections import Counter

from ..data.dedup.words import normalize_for_hash as normalize  # NFKC, lower case, no punctuation, one space
from ..model.generate import generate
from ..sampling import CHAT
from ..tokenizer.bpe import END, stop_ids
from .template import chat_ids


def word_f1(answer: str, reference: str) -> float:
    """SQuAD's F1 over the words of the normalized texts (a bag of words: order does not count)."""
    a, r = normalize(answer).split(), normalize(reference).split()
    if not a or not r:
        return float(a == r)
    common = sum((Counter(a) & Counter(r)).values())
    if common == 0:
        return 0.0
    precision, recall = common / len(a), common / len(r)
    return 2 * precision * recall / (precision + recall)


def answer(model, tokenizer, messages: list[dict], max_new_tokens: int, **sampling) -> tuple[str, bool]:
    """The model's answer to a conversation's last prompt, and whether it ended with <|end|> (not at the cap)."""
    ids, _ = chat_ids(tokenizer, messages, add_generation_prompt=True)
    new = list(generate(model, ids, max_new_tokens, stop_ids=stop_ids(tokenizer), **sampling))
    ended = bool(new) and new[-1] == tokenizer.token_to_id(END)
    return tokenizer.decode(new, skip_special_tokens=True).strip(), ended


def prompt_and_reference(conversation: list[dict]) -> tuple[list[dict], str]:
    """Everything before the last answer, and that answer."""
    return conversation[:-1], conversation[-1]["content"]


def score(answers: list[tuple[str, bool]], references: list[str]) -> dict:
    texts, refs = [normalize(a) for a, _ in answers], [normalize(r) for r in references]
    n = len(answers)
    top, top_count = Counter(texts).most_common(1)[0] if n else ("", 0)
    ref_top_count = Counter(refs).most_common(1)[0][1] if n else 0
    return {"answers": n,
            "exact_match": sum(t == r for t, r in zip(texts, refs)) / max(n, 1),
            "word_f1": sum(word_f1(a, r) for (a, _), r in zip(answers, references)) / max(n, 1),
            "distinct_share": len(set(texts)) / max(n, 1), "reference_distinct_share": len(set(refs)) / max(n, 1),
            "most_common_share": top_count / max(n, 1), "most_common_answer": top[:200],
            "reference_most_common_share": ref_top_count / max(n, 1),
            "end_share": sum(ended for _, ended in answers) / max(n, 1)}


def evenly_spread(items: list, k: int) -> list:
    """k items spread evenly over the list (all of them when it holds fewer): the same ones every run."""
    if len(items) <= k:
        return list(items)
    return [items[i * len(items) // k] for i in range(k)]


def evaluate_answers(model, tokenizer, heldout: list[list[dict]], train: list[list[dict]], count: int,
                     max_new_tokens: int, seed: int, progress=None) -> dict:
    """Scores of up to `count` held-out prompts, greedy and with chat's defaults, and of as many training prompts,
    greedy; with a few examples of each for the report."""
    result = {}
    chat = {"temperature": CHAT.temperature, "top_k": CHAT.top_k, "top_p": CHAT.top_p,
            "repetition_penalty": CHAT.repetition_penalty}
    runs = (("heldout_greedy", heldout, {"temperature": 0.0}), ("heldout_chat", heldout, chat),
            ("train_greedy", train, {"temperature": 0.0}))
    for name, conversations, sampling in runs:
        picked = evenly_spread(conversations, count)
        if not picked:
            continue
        answers, references = [], []
        for i, conversation in enumerate(picked):
            prompt, reference = prompt_and_reference(conversation)
            answers.append(answer(model, tokenizer, prompt, max_new_tokens, seed=seed + i, **sampling))
            references.append(reference)
            if progress is not None:
                progress.update(1)
        result[name] = score(answers, references)
        result[name]["examples"] = [{"prompt": p[-1]["content"], "reference": r, "answer": a, "ended": e}
                                    for p, r, (a, e) in zip((prompt_and_reference(c)[0] for c in picked[:3]),
                                                            references, answers)]
    result["sampling"] = {"greedy": {"temperature": 0.0}, "chat": chat, "max_new_tokens": max_new_tokens}
    return result
