"""Measured precision per cleaning rule: the one function that turns labeled audit items into figures and
verdicts. `data audit rate`, `scratchlm check` and the run report all read them from here.

Per (source, rule): n labeled, k labeled wrong, the rate k/n with its 95% Wilson score interval. For a rule
the rate is its false-positive rate (removals that were a mistake); for the pseudo-rule `kept` it is the
false-negative rate (junk that reached training). A rule nobody labeled is "not audited", never ok.
"""
from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass
from typing import Iterable

from .audit_sheet import KEPT

MAX_WRONG_RATE = 0.10  # above this share of wrong decisions a rule, or the kept documents, is a warning
Z95 = 1.959963984540054  # two-sided 95% normal quantile
NOT_AUDITED = "not audited"


def wilson_interval(k: int, n: int, z: float = Z95) -> tuple[float, float]:
    """Score interval for k successes in n: unlike p ± z·se it stays inside 0..1 and is honest at k = 0 or
    small n, which is where a 20-item audit lives."""
    if n == 0:
        return 0.0, 1.0
    p, z2 = k / n, z * z
    denom = 1 + z2 / n
    center = (p + z2 / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n)) / denom
    # at k = 0 and k = n the bounds are exactly 0 and 1; rounding would otherwise leave 0.9999999999999999
    return (0.0 if k == 0 else center - half), (1.0 if k == n else center + half)


def skip_rules_line(rules: Iterable[str]) -> str:
    return f"skip_rules = {json.dumps(list(rules))}"  # JSON string lists are TOML arrays


@dataclass(frozen=True)
class RuleFigure:
    source: str
    rule: str
    decisions: int | None  # records of the rule in the ledger (kept documents for `kept`), when known
    labeled: int
    wrong: int
    rate: float | None
    low: float | None
    high: float | None
    level: str  # "ok", "warning" or NOT_AUDITED

    @property
    def kept(self) -> bool:
        return self.rule == KEPT

    def figure(self) -> str:
        """`4/20 = 20% (8-42%)`"""
        if self.rate is None:
            return "not audited"
        return f"{self.wrong}/{self.labeled} = {self.rate:.0%} ({self.low * 100:.0f}-{self.high * 100:.0f}%)"

    def short(self) -> str:
        return (f"junk kept on {self.source} " if self.kept else f"{self.rule} on {self.source} ") + self.figure()

    def message(self) -> str:
        if self.level == NOT_AUDITED:
            made = f"{self.decisions:,} decisions, " if self.decisions is not None else ""
            return f"{'kept documents' if self.kept else self.rule} on {self.source}: not audited ({made}none labeled)"
        if self.kept:
            text = f"junk kept on {self.source}: {self.figure()} of the kept documents should have been removed"
            return text + (f", above {MAX_WRONG_RATE:.0%}: a filter misses them; read the sheet's notes on them "
                           "and tighten the rule that should catch them" if self.level == "warning" else "")
        text = f"{self.rule} on {self.source}: {self.figure()} of its removals were wrong"
        return text + (f", above {MAX_WRONG_RATE:.0%}; to switch it off for this source put "
                       f"`{skip_rules_line([self.rule])}` in the [[data.sources]] entry with "
                       f"`name = {json.dumps(self.source)}`" if self.level == "warning" else "")

    def as_dict(self) -> dict:
        return {**asdict(self), "message": self.message()}


def _figure(source: str, rule: str, labels: list[str], decisions: int | None) -> RuleFigure:
    n, k = len(labels), labels.count("wrong")
    if n == 0:
        return RuleFigure(source, rule, decisions, 0, 0, None, None, None, NOT_AUDITED)
    low, high = wilson_interval(k, n)
    level = "warning" if k / n > MAX_WRONG_RATE else "ok"
    return RuleFigure(source, rule, decisions, n, k, k / n, low, high, level)


def audit_figures(items: Iterable[dict], decisions: dict[str, dict] | None = None) -> list[RuleFigure]:
    """Per (source, rule) of the items and of `decisions` (source -> rule -> count in the ledger, so rules
    that were never sampled or labeled still show up as not audited), in source order with `kept` last."""
    labels: dict[tuple[str, str], list[str]] = {}
    for source, rules in (decisions or {}).items():
        for rule in rules:
            labels.setdefault((source, rule), [])
    for item in items:
        got = labels.setdefault((item["source"], item["rule"]), [])
        if item["label"] is not None:
            got.append(item["label"])
    sources = list(dict.fromkeys(s for s, _ in labels))
    keys = sorted(labels, key=lambda sr: (sources.index(sr[0]), sr[1] == KEPT))  # stable: first-seen order
    return [_figure(s, r, labels[(s, r)], (decisions or {}).get(s, {}).get(r)) for s, r in keys]


def skip_advice(figures: Iterable[RuleFigure]) -> list[str]:
    """The config line per source that switches off its rules in warning, several rules in one line."""
    by_source: dict[str, list[str]] = {}
    for f in figures:
        if f.level == "warning" and not f.kept:
            by_source.setdefault(f.source, []).append(f.rule)
    return [f"`{skip_rules_line(rules)}` in the [[data.sources]] entry with `name = {json.dumps(source)}`"
            for source, rules in by_source.items()]
