"""Domain mix arithmetic: a source's weight is its share of the training tokens, whatever its size on disk.

The loader draws each training sequence's source with probability = normalized weight, from a generator seeded
by (seed, step, micro-step), so the mix is deterministic and reached in expectation: the share a source gets over
a run of N sequences is off its target by about sqrt(p(1-p)/N), under 0.5 percentage points from 10,000 sequences
on. That is why it is not forced exactly by down-sampling lists; what matters is what the plan implies and what a
run actually drew, and this module computes both:
  target tokens  = share x planned tokens (max_steps x the tokens of an optimizer step, batch.py)
  epochs         = target tokens / the source's tokens  (> 1: repeated, < 1: down-sampled)
  achieved       = the tokens the loader really drew per source (train summary's epochs x source tokens)
Warnings: a source repeated more than MAX_EPOCHS times (beyond ~4 epochs repeated data is worth much less than
fresh data, Muennighoff et al. 2023), and a domain an eval set measures that gets almost no training tokens.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field

from .batch import effective_batch, ranks_launched

MAX_EPOCHS = 4.0
MIN_DOMAIN_SHARE = 0.01  # an eval set's domain with less than this share of the training tokens is "almost none"


@dataclass
class SourceMix:
    name: str
    domain: str
    weight: float
    tokens: int  # the source's training tokens on disk
    target_share: float
    target_tokens: int
    epochs: float
    achieved_tokens: int | None = None
    achieved_share: float | None = None
    note: str = ""


@dataclass
class MixPlan:
    planned_tokens: int
    sequences: int | None
    sources: list[SourceMix]
    warnings: list[str] = field(default_factory=list)

    @property
    def verdict(self) -> str:
        return "warning" if self.warnings else "ok"

    def to_dict(self) -> dict:
        return {"planned_tokens": self.planned_tokens, "sequences": self.sequences, "verdict": self.verdict,
                "warnings": self.warnings, "sources": [asdict(s) for s in self.sources]}

    def to_markdown(self) -> list[str]:
        achieved = any(s.achieved_share is not None for s in self.sources)
        header = "| source | domain | weight | tokens on disk | target share | target tokens | epochs |"
        rule = "|---|---|---:|---:|---:|---:|---:|"
        if achieved:
            header += " achieved share | achieved tokens |"
            rule += "---:|---:|"
        lines = [f"Planned run: {self.planned_tokens:,} training tokens"
                 + (f" ({self.sequences:,} sequences)" if self.sequences else "") + f"; verdict **{self.verdict}**.",
                 "", header + " note |", rule + "---|"]
        for s in self.sources:
            row = (f"| {s.name} | {s.domain} | {s.weight:g} | {s.tokens:,} | {s.target_share:.1%} | "
                   f"{s.target_tokens:,} | {s.epochs:.2f} |")
            if achieved:
                row += (f" {s.achieved_share:.1%} | {s.achieved_tokens:,} |" if s.achieved_share is not None
                        else " - | - |")
            lines.append(row + f" {s.note} |")
        lines += [""] + [f"- warning: {w}" for w in self.warnings]
        return lines


def plan_mix(sources: list[dict], planned_tokens: int, seq_len: int | None = None,
             drawn_tokens: dict[str, int] | None = None, eval_domains: list[str] = ()) -> MixPlan:
    """sources: {"name", "domain", "weight", "tokens"} each. A source too small to cut one sequence from
    (tokens <= seq_len + 1) is never sampled, as in the loader; its weight goes to the others."""
    usable = [s for s in sources if seq_len is None or s["tokens"] > seq_len + 1]
    total_weight = sum(s["weight"] for s in usable) or 1.0
    sequences = planned_tokens // seq_len if seq_len else None
    rows: list[SourceMix] = []
    drawn_total = sum((drawn_tokens or {}).values())
    for s in sources:
        share = s["weight"] / total_weight if s in usable else 0.0
        target = round(share * planned_tokens)
        row = SourceMix(s["name"], s["domain"], s["weight"], s["tokens"], share, target,
                        target / s["tokens"] if s["tokens"] else math.inf)
        if s not in usable:
            row.note = f"too small to sample (needs more than seq_len + 1 = {seq_len + 1} tokens)"
        elif sequences:
            spread = math.sqrt(share * (1 - share) / sequences)
            row.note = f"sampling spread of the share +-{spread:.2%}"
        if drawn_tokens is not None:
            row.achieved_tokens = int(drawn_tokens.get(s["name"], 0))
            row.achieved_share = row.achieved_tokens / drawn_total if drawn_total else 0.0
        rows.append(row)
    plan = MixPlan(planned_tokens, sequences, rows)
    for r in rows:
        if r.target_tokens and r.epochs > MAX_EPOCHS:
            plan.warnings.append(f"source `{r.name}` is repeated {r.epochs:.1f} times (more than {MAX_EPOCHS:g} "
                                 f"epochs): beyond that the model memorizes it; add data or lower its weight")
    domain_share: dict[str, float] = {}
    for r in rows:
        domain_share[r.domain] = domain_share.get(r.domain, 0.0) + r.target_share
    for domain in dict.fromkeys(d for d in eval_domains if d):
        share = domain_share.get(domain, 0.0)
        if share < MIN_DOMAIN_SHARE:
            plan.warnings.append(f"domain `{domain}` is measured by an eval set but gets {share:.2%} of the "
                                 f"training tokens: add a source of that domain or raise its weight")
    return plan


def mix_from_shards(shards: dict, planned_tokens: int, seq_len: int | None = None,
                    epochs_per_source: dict[str, float] | None = None, eval_domains: list[str] = ()) -> MixPlan:
    """The plan for a shards.json summary; with the train summary's epochs per source, what was really drawn."""
    sources = [{"name": name, "domain": info["domain"], "weight": info["weight"], "tokens": info["tokens"]}
               for name, info in shards["train"].items()]
    drawn = None
    if epochs_per_source is not None:
        drawn = {s["name"]: round(epochs_per_source.get(s["name"], 0.0) * s["tokens"]) for s in sources}
    return plan_mix(sources, planned_tokens, seq_len, drawn, eval_domains)


def planned_mix(cfg, shards: dict) -> MixPlan:
    """The mix the config's run will draw: max_steps optimizer steps of the batch training uses."""
    planned = cfg.train.max_steps * effective_batch(cfg, ranks_launched()).tokens
    return mix_from_shards(shards, planned, cfg.model.seq_len, eval_domains=[s.domain for s in cfg.eval.sets])
