"""Is a pretrained base good enough to build on? Its validation loss against the unigram baseline, one verdict.

The unigram baseline is what a model that learned only token frequencies scores; a base barely below it has
learned almost nothing about context, and fine-tuning it teaches a chat format to a model that cannot write.
`scratchlm sft` refuses such a base, and the run report and the pipeline's last log line say the same words.
"""
from __future__ import annotations

import math

# The base's mean validation loss must be at least this share below the unigram baseline's. Any use of context
# (even a bigram model) beats unigram by far more on natural text; the quickstart's tiny demo model reaches 40%
# (4.23 vs 7.07 nats/token), and a base at 6.695 vs 6.663 (worse than unigram) fails.
MIN_GAIN_OVER_UNIGRAM = 0.10
ADVICE = "invest in data and pretraining (more tokens, a longer run), not in more fine-tuning epochs"


def _mean(values: list) -> float | None:
    known = [v for v in values if v is not None]
    return sum(known) / len(known) if known else None


def judge_base(evaluation: dict) -> dict:
    """{level: ok | weak | unknown, val_loss, unigram_loss, gain, bpb, message} from an eval.json (the eval
    stage's or the suite's). gain = share of the unigram loss the model removes (negative: worse than unigram)."""
    val, unigram = evaluation.get("val_loss"), evaluation.get("unigram_loss")
    bpb = _mean([d.get("bpb") for d in evaluation.get("domains", {}).values()])
    if val is None or not unigram or not math.isfinite(val) or not math.isfinite(unigram):
        return {"level": "unknown", "val_loss": val, "unigram_loss": unigram, "gain": None, "bpb": bpb,
                "message": f"no finite validation loss ({val}) and unigram baseline ({unigram}) to judge the base by"}
    gain = (unigram - val) / unigram
    level = "ok" if gain >= MIN_GAIN_OVER_UNIGRAM else "weak"
    relation = f"{gain:.1%} below" if gain >= 0 else f"{-gain:.1%} above (worse than)"
    parts = [f"validation loss {val:.3f} nats/token vs unigram baseline {unigram:.3f}: {relation} the baseline "
             f"({'ok' if level == 'ok' else 'weak'}: a base must be at least {MIN_GAIN_OVER_UNIGRAM:.0%} below it)"]
    if bpb is not None:
        parts.append(f"{bpb:.3f} bits/byte")
    for name, t in (evaluation.get("tasks") or {}).items():
        if t.get("kind") == "multiple_choice" and t.get("accuracy") is not None:
            parts.append(f"task {name} accuracy {t['accuracy']:.3f} (chance {t.get('chance') or 0:.3f})")
        elif t.get("exact_match") is not None:
            parts.append(f"task {name} exact match {t['exact_match']:.3f}")
    return {"level": level, "val_loss": val, "unigram_loss": unigram, "gain": gain, "bpb": bpb,
            "message": "; ".join(parts)}
