"""The last steps: validation drawn per domain from the clean, deduplicated corpus (val_split.py), without the
documents whose near copies would stay in training (val_guard.py), then each unit's drawn documents diverted to
validation; of a document too long to hold out whole, only its tail."""
from __future__ import annotations

import os
import shutil
from collections import Counter

from ..progress import log
from .jsonl import read_jsonl
from .paragraph_step import FIND_DUPLICATE_PARAGRAPHS
from .ranked_runs import RankedDocs, run_rows
from .short_docs import LengthFloor
from .step import Corpus, CorpusContext, CorpusStep, DocumentStep
from .step_context import StepContext
from .units import Unit
from .val_guard import CopyPool
from .val_split import HELD_OUT_PIECE, PIECE_SUFFIX, SPLIT_FROM, WHOLE, ValidationSettings, draw_validation, tail_cut

GUARD_ROUNDS = 8  # draws that put back near-copied documents, answered from one scan of the corpus (val_guard.py)
# The guard's scan runs at about 10 MB/s per process; spawning a pool costs a second or two, so a corpus smaller
# than this is scanned in this process.
GUARD_PARALLEL_CHARS = 32_000_000
SPILL = ".ranked"  # the draw order's sorted runs, removed when the draw is done


def draw(ctx: CorpusContext) -> dict:
    """{"chosen": unit name -> {doc id: budget}, "plan": per domain, "near_copied": doc id -> its copy}, from the
    paragraph step's survivors (its decisions are in the units' keys, so they are in this step's too).

    A drawn document whose near copy would stay in training, by the decontaminate guard's measure (val_guard.py),
    is put back and the draw redone without it, until a draw has none (or GUARD_ROUNDS pass: the guard then
    removes what is left, and says it is the split's doing). Nothing is moved or dropped: such a document simply
    stays in training with its copies; each one is counted in the domain's plan and named in result.json."""
    s: ValidationSettings = ctx.settings
    decided = ctx.corpus.decision(FIND_DUPLICATE_PARAGRAPHS)
    rows = run_rows(ctx.corpus.data.sort_mb)
    survivors = {domain: RankedDocs(read_jsonl(ctx.runner.cache / decided.file(name)), s.seed,
                                    ctx.out / SPILL / domain, rows)
                 for domain, name in decided.result["survivors"].items()}
    try:
        chosen, plan, near_copied = _draw_guarded(ctx, survivors)
    finally:
        for ranked in survivors.values():
            ranked.close()
        shutil.rmtree(ctx.out / SPILL, ignore_errors=True)
    if near_copied:
        log(f"validation: {len(near_copied)} drawn document(s) put back in training, as near copies of them "
            f"would stay there (each holds >= {s.guard_coverage:.0%} of its {s.guard_ngram}-grams)")
    return {"chosen": chosen, "plan": plan, "near_copied": near_copied}


def _draw_guarded(ctx: CorpusContext, survivors: dict[str, RankedDocs]) -> tuple[dict, dict, dict]:
    s: ValidationSettings = ctx.settings
    domain_of = {u.name: u.domain for u in ctx.runner.units}
    near_copied: dict[str, dict] = {}
    near_per_domain: Counter = Counter()
    excluded: set[str] = set()  # the put-back documents and their copies: a copy drawn next would be one too
    pool: CopyPool | None = None  # what one scan of the corpus says of every document the draws may reach
    for round_ in range(GUARD_ROUNDS):
        chosen, plan = draw_validation(s, survivors, excluded)
        if not s.guard_coverage or round_ == GUARD_ROUNDS - 1:  # the last draw stands, copies or not
            break
        found = pool.near_copies(chosen) if pool is not None else None
        if found is None:
            if pool is not None:
                log(f"validation: draw {round_ + 1} reached past the {len(pool.members):,} documents fingerprinted "
                    f"for the draws; scanning the corpus again")
            pool = CopyPool.scan(s, survivors, chosen, excluded, ctx.docs, _scan_workers(ctx, survivors), pool)
            found = pool.near_copies(chosen)
            assert found is not None, "a pool answers the draw it was built for"
        if not found:
            break
        near_copied.update(found)
        near_per_domain.update(domain_of[unit] for unit, docs in chosen.items() for doc_id in docs if doc_id in found)
        excluded |= found.keys() | {f["copy"] for f in found.values()}
    for domain, p in plan.items():
        p["near_copied"] = near_per_domain[domain]
    return chosen, plan, near_copied


def _scan_workers(ctx: CorpusContext, survivors: dict[str, RankedDocs]) -> int:
    """Local processes for the near-copy scan (the executor's workers may be a cluster's)."""
    chars = sum(ranked.chars for ranked in survivors.values())
    return min(ctx.runner.workers, os.cpu_count() or 1) if chars >= GUARD_PARALLEL_CHARS else 1


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
SPLIT = DocumentStep("split", split_validation, LengthFloor.of, drawn, whole=True)  # train/ links to its documents
