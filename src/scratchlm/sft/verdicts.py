"""What a fine-tuning run learned, judged: collapse, memorisation, held-out loss rising, too many epochs.

Each verdict is {"name", "level", "message", "evidence"}, the same dict in the SFT log, its summary.json and
report.md, the run report and `scratchlm check` (sft/report.py renders them; nothing else words them).
"""
from __future__ import annotations

from ..levels import NOT_AVAILABLE

# Collapse: more than half of the held-out prompts get the same answer (and more of them than share one
# reference: "yes" may rightly answer most of a yes/no set), or the answers are less than half as varied as the
# references (a model that found one answer per topic). Either way it does not answer the question.
COLLAPSE_MOST_COMMON = 0.5
COLLAPSE_DISTINCT_RATIO = 0.5
# Memorisation: word-F1 on training prompts this far above held-out (0-1 scale). Held-out F1 over 40 prompts
# varies by about +-0.05 between draws of the same size, so 0.2 is a gap no draw explains.
MEMORISATION_GAP = 0.2
# Held-out loss rising: this far (nats/token) above its lowest while the training loss kept falling. Consecutive
# evaluations of the same model differ by nothing (no sampling), so the bound is there for real but tiny moves.
HELDOUT_RISE = 0.02
# Shares over fewer answers than this say nothing: one answer is always "the most common one".
MIN_ANSWERS = 5


def _verdict(name: str, level: str, message: str, evidence: dict) -> dict:
    return {"name": name, "level": level, "message": message, "evidence": evidence}


def epochs_verdict(epochs: float, bound: float) -> dict:
    """Passes over the training conversations: past a few, a small set is learned by heart (held-out loss rises
    after about one epoch in InstructGPT's and LIMA's runs; Alpaca stopped at 3)."""
    ev = {"epochs": round(epochs, 2), "max_epochs": bound}
    if epochs > bound:
        return _verdict("epochs", "warning", f"fine-tuning reads the training conversations {epochs:.1f} times "
                        f"(> sft.max_epochs = {bound:g}): lower sft.max_steps or add conversations", ev)
    return _verdict("epochs", "ok", f"fine-tuning reads the training conversations {epochs:.1f} times "
                    f"(at most {bound:g})", ev)


def heldout_loss_verdict(points: list[dict]) -> dict:
    """points: {"step", "heldout_loss", "train_loss"} per evaluation, the first before any update."""
    ev = {"evaluations": points}
    if len(points) < 2:
        return _verdict("held-out loss", NOT_AVAILABLE, "no held-out conversations (sft.heldout_share = 0 and "
                        "no sft.heldout): whether fine-tuning generalizes is not measured", ev)
    low = min(points, key=lambda p: p["heldout_loss"])
    last = points[-1]
    trained_on = [p["train_loss"] for p in points if p["step"] >= low["step"] and p["train_loss"] is not None]
    train_fell = len(trained_on) >= 2 and trained_on[-1] < trained_on[0]
    rise = last["heldout_loss"] - low["heldout_loss"]
    summary = (f"held-out loss {points[0]['heldout_loss']:.3f} before fine-tuning, lowest {low['heldout_loss']:.3f} "
               f"at step {low['step']}, {last['heldout_loss']:.3f} at the end (step {last['step']})")
    if rise > HELDOUT_RISE and train_fell:
        return _verdict("held-out loss", "warning", f"{summary}: rising by {rise:.3f} while the training loss fell "
                        f"({trained_on[0]:.3f} -> {trained_on[-1]:.3f}), the model is fitting the training "
                        f"conversations only: stop near step {low['step']} (sft.max_steps) or add conversations", ev)
    return _verdict("held-out loss", "ok", summary, ev)


def collapse_verdict(scores: dict | None) -> dict:
    """scores: answers.score() of the held-out prompts, greedy."""
    if not scores or scores["answers"] < MIN_ANSWERS:
        return _verdict("collapse", NOT_AVAILABLE, f"{scores['answers'] if scores else 'no'} held-out answers, "
                        f"fewer than {MIN_ANSWERS} (sft.answers, sft.heldout_share or sft.heldout)", {})
    ev = {k: scores[k] for k in ("answers", "distinct_share", "reference_distinct_share", "most_common_share",
                                 "reference_most_common_share", "most_common_answer")}
    floor = COLLAPSE_DISTINCT_RATIO * scores["reference_distinct_share"]
    what = (f"{scores['distinct_share']:.0%} of {scores['answers']} held-out answers are distinct (references "
            f"{scores['reference_distinct_share']:.0%}); the most common is {scores['most_common_share']:.0%} of them "
            f"(references {scores['reference_most_common_share']:.0%})")
    one_answer = scores["most_common_share"] > max(COLLAPSE_MOST_COMMON, scores["reference_most_common_share"])
    if one_answer or scores["distinct_share"] < floor:
        return _verdict("collapse", "error", f"{what}: the model gives a stock answer "
                        f"({scores['most_common_answer'][:80]!r}) instead of answering; train on more varied "
                        "conversations, lower the learning rate, or check the base", ev)
    return _verdict("collapse", "ok", what, ev)


def memorisation_verdict(heldout: dict | None, train: dict | None) -> dict:
    """Greedy word-F1 on training prompts against held-out prompts."""
    if not heldout or not train or min(heldout["answers"], train["answers"]) < MIN_ANSWERS:
        return _verdict("memorisation", NOT_AVAILABLE, f"needs answers to at least {MIN_ANSWERS} held-out and "
                        "as many training prompts", {})
    gap = train["word_f1"] - heldout["word_f1"]
    ev = {"train_word_f1": train["word_f1"], "heldout_word_f1": heldout["word_f1"], "gap": gap,
          "max_gap": MEMORISATION_GAP}
    what = f"word-F1 {train['word_f1']:.3f} on training prompts, {heldout['word_f1']:.3f} on held-out ones"
    if gap > MEMORISATION_GAP:
        return _verdict("memorisation", "warning", f"{what}: the model recites its training answers and does not "
                        "generalize; fewer steps, more conversations, or a lower learning rate", ev)
    return _verdict("memorisation", "ok", what, ev)


def sft_verdicts(epochs: float, max_epochs: float, points: list[dict], answers: dict | None) -> list[dict]:
    answers = answers or {}
    return [heldout_loss_verdict(points), collapse_verdict(answers.get("heldout_greedy")),
            memorisation_verdict(answers.get("heldout_greedy"), answers.get("train_greedy")),
            epochs_verdict(epochs, max_epochs)]
