"""Which drawn validation documents have near copies left in training, by the decontaminate guard's own measure.

The decontaminate stage guards the validation split: a training document holding at least
`decontaminate.validation_min_coverage` of a validation document's n-grams is a copy of it, and is removed.
On a corpus of near-identical files (generated codecs, license headers, forks) whole clusters sit under the
dedup's similarity threshold yet hold one another's n-grams, so a split drawn without looking sends one member
to validation and leaves its copies in training: the guard then removes a large part of the training text and
stops the run. The draw asks this module instead, and skips a document whose copies would stay in training
(split_step.py), so the validation loss is measured on text the model never saw a near copy of.

The measure is the guard's: the same fingerprints, index and coverage (data/dedup/ngram_index.py, ngram_scan.py,
item_coverage), so the draw and the guard cannot disagree about what a copy is.
"""
from __future__ import annotations

from contextlib import closing
from typing import Iterable

from .dedup.ngram_index import ContaminationIndex
from .dedup.ngram_pool import chunks, scanned_chunks
from .dedup.ngram_scan import item_coverage

SET = "validation"  # the one eval set the index holds here; its name never leaves this module
CHUNK_DOCS, CHUNK_CHARS = 256, 2_000_000  # documents per numpy call and per task sent to a worker


def near_copies(candidates: dict[str, str], docs: Iterable[dict], ngram: int, min_words: int,
                min_coverage: float, workers: int = 1) -> dict[str, dict]:
    """candidate id -> {"copy": the first document found holding at least min_coverage of its n-grams,
    "coverage": that share}, for the candidates (document id -> the text validation would hold of it: the whole
    text or its tail) with such a copy among `docs`, scanned over `workers` processes (in order, so the first
    copy found is the same for any number). No candidate is a copy of another (they all leave training), nor of
    itself (of a held-out tail, the beginning left in training holds no copy: val_split.py)."""
    if not candidates:
        return {}
    index = ContaminationIndex.build([(SET, doc_id, text) for doc_id, text in candidates.items()],
                                     n=ngram, min_words=min_words)
    found: dict[str, dict] = {}
    with closing(scanned_chunks(index, chunks(docs, CHUNK_DOCS, CHUNK_CHARS), workers)) as scanned:
        for chunk, chunk_matches in scanned:
            for doc, matches in zip(chunk, chunk_matches):
                for (_, item), share in item_coverage(index, matches).items():
                    if share >= min_coverage and item not in found and doc["id"] not in candidates:
                        found[item] = {"copy": doc["id"], "coverage": round(min(share, 1.0), 4)}
    return found
