"""The validation split: which documents each domain holds out, within `data.val_max_share` of its characters.

Documents are drawn in a seeded hash order of their IDs (random, reproducible, independent of file order),
sorted on disk (ranked_runs.py).
A document too long to hold out whole without passing the share is skipped for a smaller one; when the small
ones do not give the domain enough validation text (`val_min_chars`) or documents (`val_min_docs`), the tail of
a long one is held out instead, cut at a paragraph boundary, and its beginning stays in training. The two
pieces are linked (`split_from` on the held-out piece, `held_out_piece` on the training remainder), so the
decontaminate stage does not take the piece for a copy of its own document. Whatever the draw cannot reach is
said in the domain's note, which the report prints.
"""
from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass
from typing import TYPE_CHECKING, Collection, Iterator

from .paragraph_split import paragraph_starts
from .ranked_runs import RankedDocs

if TYPE_CHECKING:
    from .step import Corpus

PIECE_SUFFIX = "#val"  # the held-out tail of document X is document X#val
SPLIT_FROM = "split_from"  # on the held-out piece: the ID of the document it was cut from
HELD_OUT_PIECE = "held_out_piece"  # on the training remainder: the ID of its held-out piece
WHOLE = 0  # budget of a document held out whole
_LINE_START = re.compile(r"\n")


@dataclass(frozen=True)
class ValidationSettings:
    domains: tuple[str, ...]
    seed: int
    val_fraction: float
    val_max_docs: int
    val_min_docs: int
    val_min_chars: int
    val_max_share: float
    min_chars: int  # the shortest held-out tail
    # The decontaminate guard's measure of a copy (val_guard.py): n-gram length, shortest item, share of a
    # validation document's n-grams a training document holds; coverage 0 when the guard is off.
    guard_ngram: int
    guard_min_words: int
    guard_coverage: float

    @classmethod
    def of(cls, corpus: Corpus) -> ValidationSettings:
        d, g = corpus.data, corpus.cfg.decontaminate
        return cls(tuple(sorted({s.domain for s in d.sources})), d.seed, d.val_fraction, d.val_max_docs,
                   d.val_min_docs, d.val_min_chars, d.val_max_share, d.min_chars, *guard_settings(g))


def guard_settings(g) -> tuple[int, int, float]:
    """(ngram, min_words, coverage; 0 = off) of the [decontaminate] guard that the draw applies: what the data
    stage reads of that section, so the data artifact's ID hashes exactly this (stages._data_identity)."""
    return g.ngram, g.min_words, g.validation_min_coverage if g.guard_validation else 0.0


def draw_validation(d: ValidationSettings, survivors: dict[str, RankedDocs | list],
                    excluded: Collection[str] = ()) -> tuple[dict[str, dict[str, int]], dict]:
    """(unit name -> {doc id: WHOLE or the most characters of its tail to hold out}, plan per domain).
    `survivors` is domain -> the documents that reach the split, as RankedDocs (or a list of their (doc id,
    chars, unit name)); those in `excluded` are never drawn (near copies of each other, one of them staying in
    training: val_guard.py)."""
    chosen: dict[str, dict[str, int]] = defaultdict(dict)
    plan = {}
    for domain in d.domains:
        items = survivors.get(domain, [])
        ranked = items if isinstance(items, RankedDocs) else RankedDocs(items, d.seed)
        for doc_id, (unit, budget) in _draw_domain(d, ranked, excluded).items():
            chosen[unit][doc_id] = budget
        plan[domain] = {"clean_docs": ranked.docs, "clean_chars": ranked.chars,
                        "max_chars": int(d.val_max_share * ranked.chars)}
    return chosen, plan


def _draw_domain(d: ValidationSettings, ranked: RankedDocs, excluded: Collection[str]) -> dict[str, tuple[str, int]]:
    n, total = ranked.docs, ranked.chars
    if excluded:  # few: the put-back documents and their copies
        left_out = [chars for doc_id, chars, _ in ranked if doc_id in excluded]
        n, total = n - len(left_out), total - sum(left_out)

    def items() -> Iterator[tuple[str, int, str]]:
        return (item for item in ranked if item[0] not in excluded)

    want = min(d.val_max_docs, max(d.val_min_docs, round(n * d.val_fraction)))
    if d.val_fraction == 0 or n < 2 * d.val_min_docs:
        return {}  # too few documents: holding some out would leave training nearly empty
    whole_limit = min(n - d.val_min_docs, d.val_max_docs)  # training keeps at least val_min_docs documents
    spare = int(d.val_max_share * total)
    picked: dict[str, tuple[str, int]] = {}
    held = 0

    def enough(limit: int) -> bool:
        # A few short documents make a validation loss that moves with the sample, not the model: keep drawing
        # until the text is large enough, within the share the domain can spare.
        return len(picked) >= limit or (len(picked) >= want and held >= d.val_min_chars)

    for doc_id, chars, unit in items():
        if enough(whole_limit):
            break
        if held + chars <= spare:
            picked[doc_id] = (unit, WHOLE)
            held += chars
    for doc_id, chars, unit in items():  # a tail leaves the document in training: only val_max_docs limits it
        room = spare - held
        if enough(d.val_max_docs) or room < d.min_chars:
            break
        if doc_id in picked:
            continue
        # Share what the domain can spare among the pieces still wanted; at most half a document, so training
        # keeps its beginning.
        budget = min(room // max(want - len(picked), 1), chars // 2)
        if budget >= d.min_chars:
            picked[doc_id] = (unit, budget)
            held += budget
    return picked


def tail_cut(text: str, budget: int, min_chars: int) -> int | None:
    """Offset where the held-out tail starts: the longest tail of at most `budget` characters (and at least
    `min_chars`) that starts a paragraph, else a line, in the second half of the text; None when there is none."""
    lowest = max(len(text) - budget, (len(text) + 1) // 2)
    line_starts = (m.end() for m in _LINE_START.finditer(text))
    for starts in (paragraph_starts(text), line_starts):
        start = next((s for s in starts if s >= lowest), None)
        if start is not None and len(text) - start >= min_chars:
            return start
    return None


def finish_plan(plan: dict, written: dict, d: ValidationSettings) -> dict:
    """The plan with what the split step really wrote (`written`: domain -> docs, chars, pieces) and a note for
    each domain whose validation split fell short of the config or could not be drawn."""
    for domain, p in plan.items():
        w = written.get(domain, {"docs": 0, "chars": 0, "pieces": 0})
        total = p["clean_chars"]
        share = w["chars"] / total if total else 0.0
        p.update(held_out=w["docs"], held_out_chars=w["chars"], pieces=w["pieces"], share=share, note="")
        if not w["docs"]:
            p["note"] = ("data.val_fraction = 0: no validation split" if d.val_fraction == 0 else
                         f"only {p['clean_docs']} clean documents; no validation split for this domain"
                         if p["clean_docs"] < 2 * d.val_min_docs else
                         f"no document or paragraph-bounded tail fits in val_max_share {d.val_max_share:.0%} of "
                         f"the domain's {total:,} characters: no validation split; add smaller documents")
        elif w["chars"] < d.val_min_chars:
            p["note"] = (f"validation text is {w['chars']:,} characters (< val_min_chars {d.val_min_chars:,}), "
                         f"{share:.1%} of the domain (val_max_share {d.val_max_share:.0%}): its loss is noisy; "
                         f"add data to this domain")
        elif w["docs"] < min(d.val_min_docs, p["clean_docs"]):
            p["note"] = (f"{w['docs']} validation document(s) (< val_min_docs {d.val_min_docs}): the documents are "
                         f"too long for val_max_share {d.val_max_share:.0%}")
        if w["pieces"]:
            p["note"] = "; ".join(x for x in (p["note"], (
                f"{w['pieces']} held-out piece(s) are the tails of documents too long to hold out whole, whose "
                f"beginnings stay in training")) if x)
        if p.get("near_copied"):  # absent from a plan drawn before the guard's measure was (cache)
            p["note"] = "; ".join(x for x in (p["note"], (
                f"{p['near_copied']} drawn document(s) put back in training: a near copy of each stays there "
                f"(>= {d.guard_coverage:.0%} of its {d.guard_ngram}-grams), so its loss would measure recall")) if x)
    return plan
