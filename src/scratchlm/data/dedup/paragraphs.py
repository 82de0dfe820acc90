"""Paragraph-level deduplication across a corpus, in one streaming pass.

Whole-document dedup misses boilerplate inside otherwise different documents: the same MIT license under a
different copyright line in a thousand READMEs, a cookie banner, a generated header. ParagraphDeduper keeps the
first occurrence of each paragraph and removes later repeats from later documents, exact (same normalized text)
or near (MinHash on word 3-grams, verified estimated Jaccard >= threshold). Paragraphs shorter than min_words are
never touched: a lone "}" or "Returns:" repeats everywhere and means nothing.

A paragraph is text between blank lines. Separators are kept, so the surviving text keeps its layout.
Memory per distinct kept paragraph: a 16-byte exact key, num_perm*4 bytes of signature, bands*16 bytes of index.
"""

from array import array
from dataclasses import dataclass

import numpy as np
import xxhash

from scratchlm.data.dedup.minhash import (
    BandIndex,
    MinHashConfig,
    RowStore,
    band_keys,
    estimated_jaccard,
    signatures_and_counts,
)
from scratchlm.data.dedup.words import normalize_to_bytes
from scratchlm.data.paragraph_split import paragraphs_and_breaks
from scratchlm.errors import UserError

_EXCERPT_CHARS = 80


@dataclass(frozen=True)
class RemovedParagraph:
    index: int  # position of the paragraph in the original document, counting from 0
    kind: str  # "exact" or "near"
    first_doc_id: str  # the document holding the kept first occurrence
    excerpt: str  # the start of the removed paragraph, whitespace collapsed
    first: int = -1  # the kept first occurrence (its row in the index): the paragraph's copies share it


@dataclass(frozen=True)
class ParagraphDedupConfig:
    min_words: int = 10
    # Paragraphs are short, so 3-grams (5-grams would leave a 12-word paragraph 8 shingles) and more bands of
    # fewer rows: P(candidate) = 1 - (1 - J^4)^16 is ~1.0 at J = 0.8; verification then restores precision.
    ngram: int = 3
    num_perm: int = 64
    bands: int = 16
    rows: int = 4
    threshold: float = 0.8
    seed: int = 1
    backend: str = "auto"
    max_candidates_per_bucket: int = 8

    def __post_init__(self) -> None:
        if self.min_words < 1:
            raise UserError(f"ParagraphDedupConfig: min_words must be >= 1, got {self.min_words}")

    def minhash(self) -> MinHashConfig:
        return MinHashConfig(
            ngram=self.ngram,
            num_perm=self.num_perm,
            bands=self.bands,
            rows=self.rows,
            threshold=self.threshold,
            seed=self.seed,
            backend=self.backend,
            max_candidates_per_bucket=self.max_candidates_per_bucket,
        )


def _excerpt(paragraph: str) -> str:
    return " ".join(paragraph.split())[:_EXCERPT_CHARS]


def eligible_paragraphs(text: str, min_words: int,
                        protected: frozenset[int]) -> tuple[list[str], list[str], list[bytes], list[int]]:
    """(paragraphs, separators, normalized paragraphs, the indices of those dedup may cut: min_words words or
    more, not protected). The one definition for the in-memory deduper and the sketch the disk path sorts."""
    paragraphs, separators = paragraphs_and_breaks(text)
    normalized = [normalize_to_bytes(p) for p in paragraphs]
    eligible = [i for i, n in enumerate(normalized) if n and n.count(b" ") + 1 >= min_words and i not in protected]
    return paragraphs, separators, normalized, eligible


def rebuild(paragraphs: list[str], separators: list[str], removed) -> str:
    """The text without the paragraphs whose indices are in `removed`, each keeping the break before it."""
    if not removed:
        return "".join(p + s for p, s in zip(paragraphs, separators + [""]))
    out: list[str] = []
    for i, paragraph in enumerate(paragraphs):
        if i in removed:
            continue
        if out:
            out.append(separators[i - 1])  # the break that preceded this paragraph in the original
        out.append(paragraph)
    return "".join(out)


class ParagraphDeduper:
    """Feed documents in order with process(); each returns its text minus paragraphs seen in earlier documents."""

    def __init__(self, cfg: ParagraphDedupConfig = ParagraphDedupConfig()) -> None:
        self.cfg = cfg
        self._minhash = cfg.minhash()
        self._doc_ids: list[str] = []
        self._first_of_text: dict[bytes, tuple[int, int]] = {}  # exact key -> (document number, index row)
        self._signatures = RowStore(cfg.num_perm, np.uint32)  # one row per kept, indexed paragraph
        self._doc_of_paragraph = array("q")  # document number of each signature row
        self._index = BandIndex(cfg.max_candidates_per_bucket)
        self.num_removed = {"exact": 0, "near": 0}

    def process(self, doc_id: str, text: str, protected: frozenset[int] = frozenset(),
                accept=None) -> tuple[str, list[RemovedParagraph]]:
        """(text without the paragraphs seen in earlier documents, what was removed). Paragraphs whose index is in
        `protected` (code, tables, option lists: structure.structural_paragraphs) are left alone: a translated
        manual needs its command examples, though the original has them too. With `accept`, only the copies it
        accepts are cut (the others stay in the text; the index is the same either way)."""
        doc_number = len(self._doc_ids)
        self._doc_ids.append(doc_id)
        paragraphs, separators, normalized, eligible = eligible_paragraphs(text, self.cfg.min_words, protected)
        keys = {i: xxhash.xxh3_128_digest(normalized[i]) for i in eligible}

        removed: dict[int, RemovedParagraph] = {}
        for i in eligible:
            first = self._first_of_text.get(keys[i])
            if first is not None:
                removed[i] = RemovedParagraph(i, "exact", self._doc_ids[first[0]], _excerpt(paragraphs[i]), first[1])

        candidates = [i for i in eligible if i not in removed]
        if candidates:
            texts = [normalized[i].decode("utf-8") for i in candidates]
            signatures, _ = signatures_and_counts(texts, self._minhash)
            bands = band_keys(signatures, self.cfg.bands, self.cfg.rows)
            near = self._near_matches(signatures, bands)
            for row, i in enumerate(candidates):
                if near[row] >= 0:
                    first_doc = self._doc_of_paragraph[near[row]]
                    removed[i] = RemovedParagraph(i, "near", self._doc_ids[first_doc], _excerpt(paragraphs[i]),
                                                  int(near[row]))
            keep = near < 0
            kept = [i for i, k in zip(candidates, keep.tolist()) if k]
            self._register(doc_number, [keys[i] for i in kept], signatures[keep], bands[keep])

        if accept is not None:
            removed = {i: r for i, r in removed.items() if accept(r)}
        for item in removed.values():
            self.num_removed[item.kind] += 1
        return rebuild(paragraphs, separators, removed), [removed[i] for i in sorted(removed)]

    def _near_matches(self, signatures: np.ndarray, bands: np.ndarray) -> np.ndarray:
        """For each row, the earliest stored paragraph verified similar to it, or -1."""
        earliest = np.full(len(signatures), -1, dtype=np.int64)
        positions, stored = self._index.lookup(bands.ravel())
        if len(positions) == 0:
            return earliest
        rows = positions // self.cfg.bands
        similar = estimated_jaccard(signatures[rows], self._signatures.rows[stored]) >= self.cfg.threshold
        rows, stored = rows[similar], stored[similar]
        order = np.lexsort((stored, rows))  # per row, smallest stored number (= earliest paragraph) first
        rows, stored = rows[order], stored[order]
        first_of_row = np.concatenate(([True], rows[1:] != rows[:-1])) if len(rows) else np.empty(0, bool)
        earliest[rows[first_of_row]] = stored[first_of_row]
        return earliest

    def _register(self, doc_number: int, exact_keys: list[bytes], rows: np.ndarray, bands: np.ndarray) -> None:
        # Registered after the whole document is processed, so a paragraph repeated inside one document is kept
        # (only repeats across documents are removed).
        first = self._signatures.append(rows)
        for j, key in enumerate(exact_keys):
            self._first_of_text.setdefault(key, (doc_number, first + j))
        self._doc_of_paragraph.extend([doc_number] * len(rows))
        items = np.repeat(np.arange(first, first + len(rows)), self.cfg.bands)
        self._index.add(bands.ravel(), items)
