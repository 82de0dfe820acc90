"""How many characters the tokenizer's sample takes from each stratum: each domain, and each language of the prose.

The sample is drawn to its quotas. The largest sample that meets every quota is

    on_quota = min(tokenizer.sample_chars, available(d) / quota(d) for each domain d,
                   available(l) / (quota(l) * prose share) for each language l with a quota)

so a corpus smaller than `sample_chars`, or a stratum short of text, gives a sample smaller than the budget, and the
over-represented strata are subsampled: without this, a corpus under the budget was taken whole and its quotas did
nothing (issue 37: code 76% of the sample against a 10% quota). The sample is never shrunk below the floor
`vocab_size * tokenizer.min_sample_chars_per_vocab` (nor past the budget): a smaller one leaves the vocabulary
unfilled or its merges learned from a handful of occurrences (docs/benchmarks.md, "Tokenizer sample quotas"). Below
the floor the short strata give all they have, the others fill the floor in proportion to their quotas, and the
quotas are not met; sample_verdicts.py says which and by how much.

Inside a domain, sources share its characters by weight; inside the prose, each source's characters are split over
the languages (fit_cells) so that both the sources' and the languages' totals hold where the text allows it.
"""
from __future__ import annotations

from collections import defaultdict
from dataclasses import asdict, dataclass

from ..config import Config
from ..errors import UserError

OTHER = "other"  # the languages not named in tokenizer.language_quotas, together
FIT_ROUNDS = 50  # alternating row/column scalings of fit_cells: a few sources by a few languages settle long before


def fill(total: float, shares: dict[str, float], available: dict[str, float]) -> dict[str, float]:
    """Split `total` by `shares`; a key with less `available` gets all it has, the others share its slack."""
    budget = {k: 0.0 for k in shares}
    active = {k for k, s in shares.items() if s > 0}
    remaining = total
    while active:
        weight = sum(shares[k] for k in active)
        full = {k for k in active if available.get(k, 0) <= remaining * shares[k] / weight}
        if not full:
            for k in active:
                budget[k] = remaining * shares[k] / weight
            break
        for k in full:
            budget[k] = available.get(k, 0)
            remaining -= budget[k]
        active -= full
    return budget


def water_fill(total: int, shares: dict[str, float], available: dict[str, int]) -> dict[str, int]:
    """fill() in whole characters."""
    return {k: int(v) for k, v in fill(total, shares, available).items()}


def domain_quotas(cfg: Config) -> dict[str, float]:
    """Normalized share of the sample per domain: the config's quotas, else the domains' source weights."""
    domains = {s.domain for s in cfg.data.sources}
    given = cfg.tokenizer.domain_quotas
    if given:
        unknown = sorted(set(given) - domains)
        if unknown:
            raise UserError(f"tokenizer.domain_quotas names domain(s) {unknown} that no source has; "
                            f"domains: {sorted(domains)}")
        raw = {d: float(given.get(d, 0.0)) for d in domains}
    else:
        raw = defaultdict(float)
        for s in cfg.data.sources:
            raw[s.domain] += s.weight
    total = sum(raw.values())
    return {d: raw[d] / total for d in sorted(domains)}


def language_quotas(cfg: Config) -> dict[str, float] | None:
    """Share of the prose sample per named language, and OTHER for the rest; None without language quotas."""
    quotas = cfg.tokenizer.language_quotas
    if not quotas:
        return None
    total = sum(quotas.values())
    if total > 1.0 + 1e-9:
        raise UserError(f"tokenizer.language_quotas sum to {total:.3f}; they are shares of the prose sample and "
                        f"must sum to at most 1 (the rest goes to the other languages)")
    return {**quotas, OTHER: max(0.0, 1.0 - total)}


@dataclass
class SamplePlan:
    budget: int  # tokenizer.sample_chars
    floor: int  # vocab_size * tokenizer.min_sample_chars_per_vocab: the sample is not shrunk below it for quotas
    on_quota: int  # the largest sample that meets every quota
    size: int  # characters the strata are given in all
    quotas_met: bool
    limited_by: list[list[str]]  # [kind, name] of the strata whose text set on_quota below the budget
    domain_quotas: dict[str, float]
    domain_available: dict[str, int]
    domain_chars: dict[str, int]
    language_quotas: dict[str, float] | None
    language_available: dict[str, int] | None
    language_chars: dict[str, int] | None

    def as_dict(self) -> dict:
        return asdict(self)


def plan_sample(budget: int, floor: int, domain_q: dict[str, float], domain_available: dict[str, int],
                prose_domains: set[str], language_q: dict[str, float] | None = None,
                language_available: dict[str, int] | None = None) -> SamplePlan:
    """Characters per domain and per prose language: on the quotas when at least the floor can be, else as
    close to them as the text allows at the floor (or at the whole corpus, when it is smaller still)."""
    prose_share = sum(q for d, q in domain_q.items() if d in prose_domains)
    limits = {("domain", d): domain_available.get(d, 0) / q for d, q in domain_q.items() if q > 0}
    if language_q and prose_share > 0:
        limits.update({("language", k): (language_available or {}).get(k, 0) / (q * prose_share)
                       for k, q in language_q.items() if q > 0})
    on_quota = int(min([budget, *limits.values()]))
    floor = min(floor, budget)
    met = on_quota >= floor
    if met:
        domain_chars = {d: int(q * on_quota) for d, q in domain_q.items()}
    else:
        everything = sum(domain_available.get(d, 0) for d, q in domain_q.items() if q > 0)
        domain_chars = water_fill(min(floor, everything), domain_q, domain_available)
    language_chars = None
    if language_q:
        prose = sum(c for d, c in domain_chars.items() if d in prose_domains)
        language_chars = ({k: int(q * prose) for k, q in language_q.items()} if met else
                          water_fill(prose, language_q, language_available or {}))
    size = sum(domain_chars.values())
    # the strata that give all they have: the ones that set on_quota, and below the floor every one short of it
    limited_by = [list(k) for k, v in sorted(limits.items()) if v < budget and int(v) <= max(on_quota, size)]
    return SamplePlan(budget=budget, floor=floor, on_quota=on_quota, size=size,
                      quotas_met=met, limited_by=limited_by, domain_quotas=domain_q,
                      domain_available=dict(domain_available), domain_chars=domain_chars,
                      language_quotas=language_q, language_available=language_available,
                      language_chars=language_chars)


def fit_cells(available: dict[str, dict[str, int]], rows: dict[str, int],
              columns: dict[str, int]) -> dict[str, dict[str, int]]:
    """Characters per (source, language) cell, at most what the cell holds, with each source's row summing to
    `rows` and each language's column to `columns` where the text allows both: iterative proportional fitting,
    each scaling capped by the cells' text (fill). Where no table meets both, the columns (the languages, which
    the fertility verdicts judge) are the ones held."""
    cells = {s: {k: float(v) for k, v in row.items()} for s, row in available.items()}
    for _ in range(FIT_ROUNDS):
        for s, row in cells.items():
            cells[s] = fill(rows.get(s, 0), row, available[s])
        for k, target in columns.items():
            column = fill(target, {s: row.get(k, 0.0) for s, row in cells.items()},
                          {s: available[s].get(k, 0) for s in cells})
            for s, v in column.items():
                cells[s][k] = v
    return {s: {k: int(v) for k, v in row.items()} for s, row in cells.items()}
