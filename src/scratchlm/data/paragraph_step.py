"""Duplicate paragraphs, corpus-wide, after the filters: cut from prose documents (not from code: that would
break the file); a document that cuts leave as a skeleton (too short, or mostly headings) is dropped with the
rule `skeleton`. The documents that survive, with their lengths, are what the validation draw picks from."""
from __future__ import annotations

import shutil
from collections import Counter
from dataclasses import dataclass
from typing import Iterator

from ..progress import bar, log
from .dedup.paragraph_sketch import save_paragraph_sketch, sketch_paragraphs
from .dedup.paragraphs import rebuild
from .dedup_step import DecisionFiles, apply_dedup, decisions_of
from .jsonl import ShardWriter
from .paragraph_split import paragraphs_and_breaks
from .step import Corpus, CorpusContext, CorpusStep, DocumentStep
from .units import Unit


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
        return cls("paragraph_dedup" in d.skip, d.paragraph_fuzzy_threshold, d.min_paragraph_words,
                   d.paragraph_min_docs, d.min_chars,
                   tuple(sorted(s.name for s in d.sources if s.filter_profile != "code")))


def paragraph_sketch_settings(corpus: Corpus, unit: Unit):
    from .dedup.paragraph_sketch import ParagraphDedupConfig, ParagraphSketchSettings

    d = corpus.data
    cuts = "paragraph_dedup" not in d.skip and corpus.prose(unit) and "paragraph_duplicate" not in unit.skip_rules
    # the threshold is applied when deciding: it does not change a sketch
    return ParagraphSketchSettings(ParagraphDedupConfig(min_words=d.min_paragraph_words) if cuts else None)


def find_duplicate_paragraphs(ctx: CorpusContext) -> dict:
    """{"report", "survivors": domain -> its file of [doc id, kept chars, unit name] rows beside result.json}.
    The cuts are decided from the units' paragraph sketches, sorted on disk (dedup/paragraph_copies.py), then
    applied here in one pass over the documents, unit by unit: nothing held grows with the corpus."""
    from .dedup.paragraph_copies import find_paragraph_copies
    from .dedup.paragraphs import ParagraphDedupConfig

    s: ParagraphDedupSettings = ctx.settings
    work = ctx.out / ".work"
    try:
        copies = None if s.skip else find_paragraph_copies(
            [ctx.runner.outputs[PARAGRAPH_SKETCH.name][u.name] for u in ctx.units], work,
            ParagraphDedupConfig(min_words=s.min_paragraph_words, threshold=s.fuzzy_threshold), s.min_docs,
            ctx.corpus.data.sort_mb)
        para_stats, skeletons, survivors = _cut(ctx, copies)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    log(f"dedup: {para_stats['paragraphs']} duplicate paragraphs cut from {para_stats['docs']} documents; "
        f"{skeletons} documents left as skeletons dropped")
    report = {"paragraph": dict(para_stats), "skeletons": skeletons,
              "skipped": ["paragraph_dedup"] if s.skip else []}
    return {"report": report, "survivors": survivors}


def _cut(ctx: CorpusContext, copies) -> tuple[Counter, int, dict[str, str]]:
    """Cut each document's duplicate paragraphs and judge what is left: a decision per changed document, a
    survivors row per kept one. Returns the cut counts, the skeletons dropped, the survivors files by domain."""
    from .clean.structure import skeleton_reason

    s: ParagraphDedupSettings = ctx.settings
    para_stats, skeletons = Counter(), 0
    survivors: dict[str, ShardWriter] = {}
    decisions = DecisionFiles(ctx.out)
    for unit, doc, cuts in bar(_docs_with_cuts(ctx, copies), total=ctx.docs_total(), desc="dedup: paragraphs",
                               unit="doc"):
        doc_id, text, decision = doc["id"], doc["text"], None
        if cuts:
            paragraphs, separators = paragraphs_and_breaks(doc["text"])
            text = rebuild(paragraphs, separators, {c.paragraph for c in cuts})
            pieces = [paragraphs[c.paragraph] for c in cuts]
            para_stats.update(docs=1, paragraphs=len(cuts), chars=sum(len(p) for p in pieces))
            kinds = Counter(c.kind for c in cuts)
            detail = (f"{', '.join(f'{n} {k}' for k, n in sorted(kinds.items()))} duplicate paragraphs of "
                      f"earlier documents, e.g. {cuts[0].first_doc_id}")
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
            decisions.write(unit.name, {"id": doc_id, **decision})
    decisions.close()
    return para_stats, skeletons, {domain: w.close()[0].name for domain, w in survivors.items()}


def _docs_with_cuts(ctx: CorpusContext, copies) -> Iterator[tuple[Unit, dict, list]]:
    """Every document in input order, with the paragraphs to cut from it (the cuts of one unit in memory)."""
    for u, unit in enumerate(ctx.units):
        cuts = copies.of_unit(u) if copies is not None else {}
        for position, (_, doc) in enumerate(ctx.runner.iter_docs([unit])):
            yield unit, doc, cuts.get(position, [])


PARAGRAPH_SKETCH = DocumentStep("paragraph_sketch", sketch_paragraphs, paragraph_sketch_settings,
                                finish=save_paragraph_sketch, writes_docs=False)
FIND_DUPLICATE_PARAGRAPHS = CorpusStep("find_duplicate_paragraphs", find_duplicate_paragraphs,
                                       ParagraphDedupSettings.of, reads=PARAGRAPH_SKETCH)
PARAGRAPHS = DocumentStep("paragraphs", apply_dedup, state=decisions_of(FIND_DUPLICATE_PARAGRAPHS))
