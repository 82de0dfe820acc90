"""Duplicate paragraphs, corpus-wide, after the filters: cut from prose documents (not from code: that would
break the file); a document that cuts leave as a skeleton (too short, or mostly headings) is dropped with the
rule `skeleton`. The documents that survive, with their lengths, are what the validation draw picks from."""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from ..progress import bar, log
from .dedup_step import apply_dedup, close_decisions, decision_writers, decisions_of
from .jsonl import ShardWriter
from .paragraph_split import split_paragraphs
from .step import Corpus, CorpusContext, CorpusStep, DocumentStep

def _paragraph_texts(text: str, indices: list[int]) -> list[str]:
    paragraphs = split_paragraphs(text)  # the paragraph deduper's boundary: its indices
    return [paragraphs[i] for i in indices if i < len(paragraphs)]


@dataclass(frozen=True)
class ParagraphDedupSettings:
    skip: bool  # paragraph_dedup in data.skip: only skeletons are looked for
    fuzzy_threshold: float
    min_paragraph_words: int
    min_docs: int
    min_chars: int
    prose_sources: tuple[str, ...]  # the sources whose documents lose paragraphs and can become skeletons

    @classmethod
    def of(cls, corpus: Corpus) -> ParagraphDedupSettings:
        d = corpus.data
        return cls("paragraph_dedup" in d.skip, d.fuzzy_threshold, d.min_paragraph_words, d.paragraph_min_docs,
                   d.min_chars, tuple(sorted(s.name for s in d.sources if s.filter_profile != "code")))


def find_duplicate_paragraphs(ctx: CorpusContext) -> dict:
    """{"report", "survivors": domain -> its file of [doc id, kept chars, unit name] rows beside result.json}:
    written as found, so nothing held here grows with the number of documents."""
    from .clean.structure import skeleton_reason, structural_paragraphs
    from .dedup import ParagraphDedupConfig, ParagraphDeduper

    s: ParagraphDedupSettings = ctx.settings

    def deduper() -> ParagraphDeduper:
        return ParagraphDeduper(ParagraphDedupConfig(min_words=s.min_paragraph_words, threshold=s.fuzzy_threshold))

    def dedups(unit) -> bool:
        return unit.source in s.prose_sources and "paragraph_duplicate" not in unit.skip_rules

    paragraphs, accept = (None, None) if s.skip else (deduper(), None)
    total = ctx.docs_total()
    # Structural paragraphs per document, parsed once when there are two passes; only non-empty sets are kept
    # (small beside the deduper's index, which holds a signature per paragraph).
    protected: dict[str, frozenset[int]] | None = None

    def structural(doc: dict) -> frozenset[int]:
        return structural_paragraphs(doc["text"]) if protected is None else protected.get(doc["id"], frozenset())

    if paragraphs is not None and s.min_docs > 2:
        # First pass: how many documents hold each paragraph. A paragraph in a few pages is documentation they
        # share (a stock option text, the alphabet list of every iso_8859 page); one in many is a template.
        copies: Counter = Counter()
        counter, found = deduper(), {}
        for unit, doc in bar(ctx.docs(), total=total, desc="dedup: paragraph copies", unit="doc"):
            if dedups(unit):
                if kept_apart := structural_paragraphs(doc["text"]):
                    found[doc["id"]] = kept_apart
                copies.update(r.first for r in counter.process(doc["id"], doc["text"], kept_apart)[1])
        protected = found
        del counter  # its index is as large as the second pass's: not both at once
        accept = lambda r: copies[r.first] + 1 >= s.min_docs  # noqa: E731
    para_stats = Counter()
    skeletons = 0
    survivors: dict[str, ShardWriter] = {}
    writers = decision_writers(ctx.units, ctx.out)
    for unit, doc in bar(ctx.docs(), total=total, desc="dedup: paragraphs", unit="doc"):
        doc_id, text, decision = doc["id"], doc["text"], None
        if paragraphs is not None and dedups(unit):
            text, removed = paragraphs.process(doc_id, doc["text"], structural(doc), accept)
            if removed:
                pieces = _paragraph_texts(doc["text"], [r.index for r in removed])
                para_stats["docs"] += 1
                para_stats["paragraphs"] += len(removed)
                para_stats["chars"] += sum(len(p) for p in pieces)
                kinds = Counter(r.kind for r in removed)
                detail = (f"{', '.join(f'{n} {k}' for k, n in sorted(kinds.items()))} duplicate paragraphs of "
                          f"earlier documents, e.g. {removed[0].first_doc_id}")
                decision = {"action": "cut", "text": text, "removed": pieces, "detail": detail}
        why = None if "skeleton" in unit.skip_rules or unit.source not in s.prose_sources \
            else skeleton_reason(text, doc.get("chars_read", len(doc["text"])), s.min_chars)
        if why:
            decision = {"action": "drop", "rule": "skeleton", "detail": why}
            skeletons += 1
        else:
            if unit.domain not in survivors:
                survivors[unit.domain] = ShardWriter(ctx.out, f"survivors-{unit.domain}", per_shard=1 << 62, level=1)
            survivors[unit.domain].write([doc_id, len(text), unit.name])
        if decision is not None:
            writers[unit.name].write({"id": doc_id, **decision})
    close_decisions(writers, ctx.out)
    log(f"dedup: {para_stats['paragraphs']} duplicate paragraphs cut from {para_stats['docs']} documents; "
        f"{skeletons} documents left as skeletons dropped")
    report = {"paragraph": dict(para_stats), "skeletons": skeletons,
              "skipped": ["paragraph_dedup"] if s.skip else []}
    return {"report": report, "survivors": {domain: w.close()[0].name for domain, w in survivors.items()}}


FIND_DUPLICATE_PARAGRAPHS = CorpusStep("find_duplicate_paragraphs", find_duplicate_paragraphs,
                                       ParagraphDedupSettings.of)
PARAGRAPHS = DocumentStep("paragraphs", apply_dedup, state=decisions_of(FIND_DUPLICATE_PARAGRAPHS))
