"""Exact, near-duplicate and paragraph-level deduplication for the data-prepare stage."""

from scratchlm.data.dedup.containment import ContainmentConfig, ContainmentFinder
from scratchlm.data.dedup.exact import ExactDeduper
from scratchlm.data.dedup.minhash import FuzzyDeduper, MinHashConfig, minhash_signatures
from scratchlm.data.dedup.paragraphs import ParagraphDedupConfig, ParagraphDeduper, RemovedParagraph
from scratchlm.data.dedup.words import normalize_for_hash, word_shingles

__all__ = [
    "ContainmentConfig",
    "ContainmentFinder",
    "ExactDeduper",
    "FuzzyDeduper",
    "MinHashConfig",
    "ParagraphDedupConfig",
    "ParagraphDeduper",
    "RemovedParagraph",
    "minhash_signatures",
    "normalize_for_hash",
    "word_shingles",
]
