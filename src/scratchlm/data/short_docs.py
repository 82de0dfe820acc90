"""The length floor every editing step applies again: a document too short to learn from, or left as a skeleton
of headings by the lines a step cut out of it, is dropped with the reason in the ledger."""
from __future__ import annotations

from dataclasses import dataclass

from .clean.structure import short_of, skeleton_reason
from .step import Corpus
from .step_context import StepContext
from .units import Unit


def too_short(doc: dict, ctx: StepContext, min_chars: int) -> bool:
    if not short_of(doc["text"], min_chars):
        return False
    read = doc.get("chars_read", 0)
    if read >= min_chars:  # it was long enough until a step cut lines out of it
        why = skeleton_reason(doc["text"], read, min_chars)
        if why is None:  # the cuts took little of a page that was short already
            return False
        ctx.drop(doc["id"], "skeleton", why, doc["text"])
    else:
        ctx.drop(doc["id"], "too_short", f"{len(doc['text'])} < {min_chars} chars", doc["text"])
    return True


@dataclass(frozen=True)
class LengthFloor:
    """The settings of a step whose only setting is the length floor: what its cuts may leave, or the shortest
    tail the split holds out."""
    min_chars: int

    @classmethod
    def of(cls, corpus: Corpus, unit: Unit) -> LengthFloor:
        return cls(corpus.data.min_chars)
