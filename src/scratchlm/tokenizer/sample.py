"""The tokenizer's training sample, stratified by domain and language.

A tokenizer trained on whatever comes first in the corpus serves that part well and everything else badly.
The character budget (`tokenizer.sample_chars`) is therefore split into quotas: per domain (by default each
domain's share of the source weights, so the tokenizer sees the mix the model will train on) and, when
`tokenizer.language_quotas` is set, per language (shares of the prose part of the sample, i.e. the domains not
in `tokenizer.code_domains`). A domain with less text than its quota gives all it has and the rest goes to the
other domains in proportion to their quotas. Inside a source, documents are drawn by a hash of their ID, so the
sample spreads over the whole source instead of its first files; with language quotas, whose fill rate is only
known once documents are read, prose sources are read in order until each language's quota is full.

Only the training split is read; the validation split is held out for the fertility report, and any sampled
document that also appears there (by ID or by text) is skipped and counted, so the report measures text the
tokenizer never saw.
"""
from __future__ import annotations

from collections import Counter, defaultdict
from pathlib import Path
from typing import Iterator

import xxhash

from ..config import Config
from ..data.jsonl import read_jsonl
from ..errors import UserError
from ..ids import read_json
from .langid import labeled_language

OVERSAMPLE = 1.25  # draw a bit more than budget/available so random gaps still fill the budget
OTHER = "other"  # the languages not named in tokenizer.language_quotas, together


def water_fill(total: int, shares: dict[str, float], available: dict[str, int]) -> dict[str, int]:
    """Split `total` by `shares`; a key with less `available` gets all it has, the others share its slack."""
    budget = {k: 0 for k in shares}
    active = {k for k, s in shares.items() if s > 0}
    remaining = total
    while active:
        weight = sum(shares[k] for k in active)
        full = {k for k in active if available.get(k, 0) <= remaining * shares[k] / weight}
        if not full:
            for k in active:
                budget[k] = int(remaining * shares[k] / weight)
            break
        for k in full:
            budget[k] = available.get(k, 0)
            remaining -= budget[k]
        active -= full
    return budget


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


def language_budgets(cfg: Config, prose_budget: int) -> dict[str, int] | None:
    quotas = cfg.tokenizer.language_quotas
    if not quotas:
        return None
    total = sum(quotas.values())
    if total > 1.0 + 1e-9:
        raise UserError(f"tokenizer.language_quotas sum to {total:.3f}; they are shares of the prose sample and "
                        f"must sum to at most 1 (the rest goes to the other languages)")
    out = {lang: int(prose_budget * q) for lang, q in quotas.items()}
    out[OTHER] = int(prose_budget * (1.0 - total))
    return out


def _held_out(data_dir: Path) -> tuple[set[str], set[int]]:
    ids, texts = set(), set()
    for path in sorted((data_dir / "val").glob("*.jsonl")):
        for doc in read_jsonl(path):
            ids.add(doc["id"])
            texts.add(xxhash.xxh3_64_intdigest(doc["text"].encode()))
    return ids, texts


def _uniform(doc_id: str) -> float:
    return xxhash.xxh3_64_intdigest(doc_id.encode(), seed=0x70CE) / 2.0 ** 64


class StratifiedSample:
    """Iterate `texts()` once to feed the trainer; `composition()` then says what the sample held."""

    def __init__(self, cfg: Config, data_dir: Path):
        self.cfg, self.data_dir = cfg, data_dir
        t = cfg.tokenizer
        self.stats = read_json(data_dir / "stats.json")
        self.code_domains = set(t.code_domains)
        self.quotas = domain_quotas(cfg)
        # max_doc_chars caps what one document contributes, so a source cannot give more than this estimate
        available = {s.name: min(self.stats["sources"][s.name]["train"]["chars"],
                                 self.stats["sources"][s.name]["train"]["docs"] * t.max_doc_chars)
                     for s in cfg.data.sources}
        by_domain = defaultdict(int)
        for s in cfg.data.sources:
            by_domain[s.domain] += available[s.name]
        domain_budget = water_fill(t.sample_chars, self.quotas, by_domain)
        self.source_budget: dict[str, int] = {}
        for domain, budget in domain_budget.items():
            members = [s for s in cfg.data.sources if s.domain == domain]
            self.source_budget.update(water_fill(budget, {s.name: s.weight for s in members}, available))
        self.available = available
        self.language_budget = language_budgets(cfg, sum(
            self.source_budget[s.name] for s in cfg.data.sources if s.domain not in self.code_domains))
        self.docs = Counter()
        self.chars = Counter()  # keys: ("source", name), ("domain", d), ("language", l)
        self.skipped = Counter()

    def _language_key(self, lang: str) -> str:
        return lang if lang in self.language_budget else OTHER

    def texts(self) -> Iterator[str]:
        held_ids, held_texts = _held_out(self.data_dir)
        cap = self.cfg.tokenizer.max_doc_chars
        for src in self.cfg.data.sources:
            left = self.source_budget[src.name]
            if left <= 0:
                continue
            p = min(1.0, OVERSAMPLE * left / max(self.available[src.name], 1))
            if self.language_budget is not None and src.domain not in self.code_domains:
                p = 1.0
            for doc in self._source_docs(src.name):
                if left <= 0:
                    break
                if _uniform(doc["id"]) >= p or not doc["text"]:
                    continue
                if doc["id"] in held_ids or xxhash.xxh3_64_intdigest(doc["text"].encode()) in held_texts:
                    self.skipped["in_validation_split"] += 1
                    continue
                lang = "code" if src.domain in self.code_domains else labeled_language(doc)
                room = left
                if self.language_budget is not None and src.domain not in self.code_domains:
                    key = self._language_key(lang)
                    room = min(room, self.language_budget[key])
                    if room <= 0:
                        self.skipped["language_quota_full"] += 1
                        continue
                    self.language_budget[key] -= min(len(doc["text"]), cap, room)
                text = doc["text"][:min(cap, room)]  # the last document is cut so quotas hold exactly
                left -= len(text)
                for key in (("source", src.name), ("domain", src.domain), ("language", lang)):
                    self.docs[key] += 1
                    self.chars[key] += len(text)
                yield text

    def _source_docs(self, name: str) -> Iterator[dict]:
        for file in self.stats["train_files"][name]:
            yield from read_jsonl(self.data_dir / "train" / file)

    def composition(self) -> dict:
        total = sum(v for (kind, _), v in self.chars.items() if kind == "source")

        def table(kind: str, target: dict[str, float | None]) -> dict:
            keys = sorted({k for (kd, k) in self.chars if kd == kind} | set(target),
                          key=lambda k: -self.chars[(kind, k)])
            return {k: {"quota": target.get(k), "docs": self.docs[(kind, k)], "chars": self.chars[(kind, k)],
                        "share": self.chars[(kind, k)] / total if total else 0.0} for k in keys}

        sources = table("source", self.source_budget)
        for entry in sources.values():
            entry["target_chars"] = entry.pop("quota")
        return {
            "budget_chars": self.cfg.tokenizer.sample_chars, "chars": total,
            "docs": sum(v for (kind, _), v in self.docs.items() if kind == "source"),
            "max_doc_chars": self.cfg.tokenizer.max_doc_chars,
            "domains": table("domain", self.quotas),
            "languages": table("language", dict(self.cfg.tokenizer.language_quotas)),
            "sources": sources,
            "skipped": dict(self.skipped),
        }


def composition_lines(composition: dict, top: int = 8) -> list[str]:
    """What the sample held against what was asked, from the record the tokenizer manifest keeps: a domain with
    less text than its quota gives all it has, so the two differ and both are worth seeing. Language quotas are
    shares of the prose part of the sample, so the languages are compared on that part."""
    domains = ", ".join(f"{d} {_pct(r['quota'])} -> {r['share']:.0%}" for d, r in composition["domains"].items())
    lines = [f"sample of {composition['chars']:,} chars from {composition['docs']:,} documents; by domain, quota -> "
             f"actual share of the sample: {domains}"]
    prose = {k: r for k, r in composition["languages"].items() if k != "code"}
    if any(r["quota"] is not None for r in prose.values()):
        total = sum(r["chars"] for r in prose.values()) or 1
        langs = ", ".join(f"{k} {_pct(r['quota'])} -> {r['chars'] / total:.0%}" for k, r in list(prose.items())[:top])
        lines.append(f"by language, quota -> actual share of the prose sample: {langs}")
    return lines


def _pct(quota: float | None) -> str:
    return "no quota" if quota is None else f"{quota:.0%}"
