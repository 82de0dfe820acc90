"""The tokenizer's training sample, stratified by domain and language.

A tokenizer trained on whatever comes first in the corpus serves that part well and everything else badly. The
sample is therefore drawn to quotas: per domain (by default each domain's share of the source weights, so the
tokenizer sees the mix the model will train on) and, when `tokenizer.language_quotas` is set, per language (shares
of the prose part of the sample, i.e. the domains not in `tokenizer.code_domains`). sample_plan.py decides how many
characters each stratum gives, at most `tokenizer.sample_chars`; this module finds what each one holds and draws.

What a source holds: its training characters from stats.json (each document up to max_doc_chars: an upper bound,
as a source's documents are not all as long), or, where that is not precise enough, counted by reading the source
once before the draw (a census): the prose sources when there are language quotas, since a document's language is
only known once it is read; and the sources of every domain that, by the bound, cannot fill its quota at the full
budget: one of them sets the sample's size (sample_plan.py) and is taken whole, where a bound too high (a huge
document cut to max_doc_chars) would leave it short of its quota. Reading those costs less than the sample does.

The draw: inside a source, a document is taken when a hash of its ID falls under its cell's rate (the cell's budget
over what it holds, with some slack), so the sample spreads over the whole source instead of its first files; a
second pass over the documents the first passed over fills a cell the first left short (a few large documents fall
under a rate all together or not at all). The last document of a cell is cut so the budgets hold exactly.

Only the training split is read; the validation split is held out for the fertility report, and any sampled
document that also appears there (by ID or by text) is skipped and counted, so the report measures text the
tokenizer never saw.
"""
from __future__ import annotations

from collections import Counter, defaultdict
from pathlib import Path
from typing import Iterator

import xxhash

from ..config import Config, SourceConfig
from ..data.jsonl import read_jsonl
from ..ids import read_json
from .langid import labeled_language
from .sample_plan import (OTHER, SamplePlan, domain_quotas, fit_cells, language_quotas, plan_sample,
                          water_fill)

OVERSAMPLE = 1.25  # draw a bit more than budget/available so random gaps still fill the budget
WHOLE = "*"  # the one cell of a source whose documents are not told apart by language
CODE = "code"  # the language of the documents of tokenizer.code_domains


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
        self.language_q = language_quotas(cfg)
        self.held_ids, self.held_texts = _held_out(data_dir)
        self._detected: dict[str, str] = {}  # languages detected on unlabeled documents: read twice, detected once
        # max_doc_chars caps what one document contributes, so a source cannot give more than this bound
        self.available = {s.name: {self._whole_cell(s): min(self.stats["sources"][s.name]["train"]["chars"],
                                                            self.stats["sources"][s.name]["train"]["docs"]
                                                            * t.max_doc_chars)} for s in cfg.data.sources}
        self.census = self._sources_to_count()
        for s in cfg.data.sources:
            if s.name in self.census:
                self.available[s.name] = self._count(s)
        self.plan = self._plan()
        self.source_budget = self._source_budgets()
        self.cell_budget = self._cell_budgets()
        self.docs = Counter()
        self.chars = Counter()  # keys: ("source", name), ("domain", d), ("language", l)
        self.skipped = Counter()

    def _sources_to_count(self) -> list[str]:
        """The prose sources under language quotas, and those of a domain whose bound is under its quota of the
        full budget."""
        bound = defaultdict(int)
        for s in self.cfg.data.sources:
            bound[s.domain] += sum(self.available[s.name].values())
        short = {d for d, q in self.quotas.items() if bound[d] < q * self.cfg.tokenizer.sample_chars}
        return [s.name for s in self.cfg.data.sources if self._by_language(s) or s.domain in short]

    def _source_budgets(self) -> dict[str, int]:
        """Each domain's characters over its sources, by weight."""
        out: dict[str, int] = {}
        for domain, budget in self.plan.domain_chars.items():
            members = [s for s in self.cfg.data.sources if s.domain == domain]
            out.update(water_fill(budget, {s.name: s.weight for s in members},
                                  {s.name: sum(self.available[s.name].values()) for s in members}))
        return out

    def _cell_budgets(self) -> dict[str, dict[str, int]]:
        """Each source's characters over its cells: one cell, or its languages under language quotas."""
        out = {s.name: {self._whole_cell(s): self.source_budget[s.name]} for s in self.cfg.data.sources
               if not self._by_language(s)}
        if self.language_q:
            names = [s.name for s in self.cfg.data.sources if self._by_language(s)]
            out.update(fit_cells({n: self.available[n] for n in names}, {n: self.source_budget[n] for n in names},
                                 self.plan.language_chars))
        return out

    def _plan(self) -> SamplePlan:
        t, by_domain, by_language = self.cfg.tokenizer, defaultdict(int), defaultdict(int)
        for s in self.cfg.data.sources:
            by_domain[s.domain] += sum(self.available[s.name].values())
            if self._by_language(s):
                for key, chars in self.available[s.name].items():
                    by_language[key] += chars
        prose = {s.domain for s in self.cfg.data.sources if s.domain not in self.code_domains}
        return plan_sample(t.sample_chars, t.vocab_size * t.min_sample_chars_per_vocab, self.quotas, by_domain,
                           prose, self.language_q, dict(by_language) if self.language_q else None)

    def _by_language(self, src: SourceConfig) -> bool:
        """Whether the source's documents are drawn per language: prose, with language quotas."""
        return bool(self.language_q) and src.domain not in self.code_domains

    def _whole_cell(self, src: SourceConfig) -> str:
        return CODE if src.domain in self.code_domains else WHOLE

    def _language(self, src: SourceConfig, doc: dict) -> str:
        if src.domain in self.code_domains:
            return CODE
        if doc.get("lang"):
            return doc["lang"]
        if doc["id"] not in self._detected:
            self._detected[doc["id"]] = labeled_language(doc)
        return self._detected[doc["id"]]

    def _cell(self, src: SourceConfig, doc: dict) -> str:
        if not self._by_language(src):
            return self._whole_cell(src)
        lang = self._language(src, doc)
        return lang if lang in self.language_q else OTHER

    def _held(self, doc: dict) -> bool:
        return doc["id"] in self.held_ids or xxhash.xxh3_64_intdigest(doc["text"].encode()) in self.held_texts

    def _count(self, src: SourceConfig) -> dict[str, int]:
        """The census: characters per cell of the source's training documents, each up to max_doc_chars."""
        cap, out = self.cfg.tokenizer.max_doc_chars, Counter()
        for doc in self._source_docs(src.name):
            if doc["text"] and not self._held(doc):
                out[self._cell(src, doc)] += min(len(doc["text"]), cap)
        return dict(out) or {self._whole_cell(src): 0}

    def texts(self) -> Iterator[str]:
        for src in self.cfg.data.sources:
            yield from self._draw(src)

    def _draw(self, src: SourceConfig) -> Iterator[str]:
        cap = self.cfg.tokenizer.max_doc_chars
        left = dict(self.cell_budget[src.name])
        rate = {k: min(1.0, OVERSAMPLE * b / max(self.available[src.name].get(k, 0), 1)) for k, b in left.items()}
        for second_pass in (False, True):
            if second_pass and not any(left[k] > 0 and rate[k] < 1 for k in left):
                return
            for doc in self._source_docs(src.name):
                if all(v <= 0 for v in left.values()):
                    return
                if not doc["text"]:
                    continue
                if self._held(doc):
                    if not second_pass:  # each held-out document counted once
                        self.skipped["in_validation_split"] += 1
                    continue
                key = self._cell(src, doc)
                if (_uniform(doc["id"]) < rate.get(key, 0.0)) == second_pass:
                    continue  # the first pass takes the documents under the rate, the second the others
                if left.get(key, 0) <= 0:
                    if key != WHOLE and key != CODE:
                        self.skipped["language_quota_full"] += 1
                    continue
                text = doc["text"][:min(cap, left[key])]  # the last document is cut so the budgets hold exactly
                left[key] -= len(text)
                for stat in (("source", src.name), ("domain", src.domain), ("language", self._language(src, doc))):
                    self.docs[stat] += 1
                    self.chars[stat] += len(text)
                yield text

    def _source_docs(self, name: str) -> Iterator[dict]:
        for file in self.stats["train_files"][name]:
            yield from read_jsonl(self.data_dir / "train" / file)

    def composition(self) -> dict:
        total = sum(v for (kind, _), v in self.chars.items() if kind == "source")
        prose = sum(v for (kind, k), v in self.chars.items() if kind == "language" and k != CODE)

        def table(kind: str, target: dict[str, float | None]) -> dict:
            keys = sorted({k for (kd, k) in self.chars if kd == kind} | set(target),
                          key=lambda k: -self.chars[(kind, k)])
            return {k: {"quota": target.get(k), "docs": self.docs[(kind, k)], "chars": self.chars[(kind, k)],
                        "share": self.chars[(kind, k)] / total if total else 0.0} for k in keys}

        sources = table("source", self.source_budget)
        for entry in sources.values():
            entry["target_chars"] = entry.pop("quota")
        languages = table("language", dict(self.cfg.tokenizer.language_quotas))
        for k, entry in languages.items():  # language quotas are shares of the prose part of the sample
            entry["prose_share"] = None if k == CODE else (entry["chars"] / prose if prose else 0.0)
        return {
            "budget_chars": self.cfg.tokenizer.sample_chars, "chars": total,
            "docs": sum(v for (kind, _), v in self.docs.items() if kind == "source"),
            "max_doc_chars": self.cfg.tokenizer.max_doc_chars,
            "plan": self.plan.as_dict(), "census": self.census,
            "domains": table("domain", self.quotas),
            "languages": languages,
            "sources": sources,
            "skipped": dict(self.skipped),
        }
