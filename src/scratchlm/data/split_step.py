"""The last steps: validation drawn per domain from the clean, deduplicated corpus (val_split.py), then each
unit's drawn documents diverted to validation; of a document too long to hold out whole, only its tail."""
from __future__ import annotations

from .paragraph_step import FIND_DUPLICATE_PARAGRAPHS
from .short_docs import LengthFloor
from .step import Corpus, CorpusContext, CorpusStep, DocumentStep
from .step_context import StepContext
from .units import Unit
from .val_split import HELD_OUT_PIECE, PIECE_SUFFIX, SPLIT_FROM, WHOLE, ValidationSettings, draw_validation, tail_cut


def draw(ctx: CorpusContext) -> dict:
    """{"chosen": unit name -> {doc id: budget}, "plan": per domain}, from the paragraph step's survivors (its
    decisions are in the units' keys, so they are in this step's too)."""
    survivors = ctx.corpus.decision(FIND_DUPLICATE_PARAGRAPHS).result["survivors"]
    chosen, plan = draw_validation(ctx.settings, survivors)
    return {"chosen": chosen, "plan": plan}


def drawn(corpus: Corpus, unit: Unit) -> list[tuple[str, int]]:
    return sorted(corpus.decision(DRAW_VALIDATION).result["chosen"].get(unit.name, {}).items())


def split_validation(doc: dict, ctx: StepContext) -> dict | None:
    """Divert the drawn documents to validation; of a document too long to hold out whole, only its tail."""
    budget = ctx.memo.setdefault("val", dict(ctx.state)).get(doc["id"])
    if budget is None:
        return doc
    if budget == WHOLE:
        ctx.divert("val", doc)
        return None
    cut = tail_cut(doc["text"], budget, ctx.settings.min_chars)
    if cut is None:  # no paragraph or line boundary leaves a tail that fits: the document stays in training
        ctx.note("val_piece", "no_boundary")
        return doc
    piece_id = doc["id"] + PIECE_SUFFIX
    ctx.divert_piece("val", {**doc, "id": piece_id, "text": doc["text"][cut:], SPLIT_FROM: doc["id"]})
    return {**doc, "text": doc["text"][:cut].rstrip(), HELD_OUT_PIECE: piece_id}


DRAW_VALIDATION = CorpusStep("draw_validation", draw, ValidationSettings.of)
SPLIT = DocumentStep("split", split_validation, LengthFloor.of, drawn)
