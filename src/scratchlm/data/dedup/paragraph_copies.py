"""Duplicate paragraphs decided from the units' paragraph sketches (paragraph_sketch.py) by sorting on disk.

ParagraphDeduper (paragraphs.py) walks the corpus once holding every kept paragraph's key, signature and band
keys: about 450 bytes a paragraph, tens of GB at the mission's 100M paragraphs. Here every corpus-wide question
is a sort of rows cut into buckets on disk (disk_dedup.Buckets), one bucket in memory at a time. A paragraph is a
number, its unit << 32 | its row in the unit's sketch, so numbers sort in input order; a document likewise.

  exact       rows (xxh3 key, paragraph, document) by key: the first paragraph of each key represents it; the
              others have its signature, so they share its fate (sweep);
  candidates  rows (band key, paragraph, document) of the representatives, by key: a paragraph's candidates
              are, for each of its band keys, the first max_candidates_per_bucket paragraphs holding it in
              earlier documents; verified on the signatures (estimated Jaccard >= threshold), a unit at a time;
  sweep       unit by unit in input order, as ParagraphDeduper walks: a representative is cut when a verified
              candidate was kept, in favour of the earliest such; a copy of a kept paragraph in another document
              is an exact cut, a copy in its own document stays, a copy of a cut one is cut with it. Each unit's
              verdicts are saved and memory-mapped back for the later units;
  min_docs    a cut stands only when the paragraph is in min_docs documents (in a few pages it is documentation
              they share, a stock option text; in many, a template): cuts counted per kept paragraph, in buckets
              by its unit.

The one difference from ParagraphDeduper: its candidates are the first *kept* paragraphs of a band key, here the
first ones, kept or cut, so that the sweep needs no table per band key (tests/test_paragraph_copies.py checks
the two cut the same paragraphs on the built-in corpus). What is in memory is a unit's rows and one bucket.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from . import disk_dedup
from .disk_dedup import Buckets, Sketches, bucket_of, buckets_for, first_of_key, gather, local, numbers, \
    signature_jaccard, unit_of
from .minhash import band_keys, ranges
from .paragraphs import ParagraphDedupConfig

KEPT, EXACT, NEAR = 0, 1, 2
KINDS = {EXACT: "exact", NEAR: "near"}


@dataclass(frozen=True)
class Cut:
    paragraph: int  # its index in the document (paragraphs_and_breaks)
    kind: str  # "exact" or "near"
    first_doc_id: str  # the document holding the kept paragraph it repeats


def _documents(sk: Sketches, u: int) -> np.ndarray:
    return (np.int64(u) << 32) | np.asarray(sk.load(u, "doc"))


def _representatives(followers: Buckets, u: int, n: int) -> np.ndarray:
    """Per row of unit u: is it the first paragraph of its exact key."""
    rep = np.ones(n, dtype=bool)
    rep[local(followers.read(u)[:, 0])] = False
    return rep


def exact_followers(sk: Sketches, work: Path, sort_mb: int) -> Buckets:
    """Rows (paragraph, its key's first paragraph, same document?) of every later paragraph, by its unit."""
    parts = buckets_for(sum(sk.sizes), sort_mb)
    rows = Buckets(work, "exact", 4)
    for u, n in enumerate(sk.sizes):
        keys = np.asarray(sk.load(u, "exact")).view(np.int64)
        rows.add(bucket_of(keys[:, 0], parts), np.column_stack([keys, numbers(u, n), _documents(sk, u)]))
    followers = Buckets(work, "followers", 3)
    for part in range(parts):
        r = rows.read(part)
        r = r[np.lexsort((r[:, 2], r[:, 1], r[:, 0]))]
        first = first_of_key(r[:, :2], r[:, 2])
        copy = np.flatnonzero(first != np.arange(len(r)))
        followers.add(unit_of(r[copy, 2]),
                      np.column_stack([r[copy, 2], r[first[copy], 2], r[copy, 3] == r[first[copy], 3]]))
    return followers


def earlier_document_pairs(keys: np.ndarray, docs: np.ndarray, cap: int) -> tuple[np.ndarray, np.ndarray]:
    """For rows sorted by (key, paragraph): (row, earlier row) pairs, each row with the first `cap` rows of its
    key that are in earlier documents (a paragraph repeated inside its own document is no cut)."""
    index = np.arange(len(keys))
    key_starts = np.concatenate(([True], keys[1:] != keys[:-1])) if len(keys) else np.empty(0, bool)
    doc_starts = key_starts | np.concatenate(([True], docs[1:] != docs[:-1])) if len(keys) else key_starts
    group = np.maximum.accumulate(np.where(key_starts, index, 0))
    own_doc = np.maximum.accumulate(np.where(doc_starts, index, 0))
    counts = np.minimum(own_doc - group, cap)
    return np.repeat(index, counts), ranges(group, counts)


def chunk_rows(cfg: ParagraphDedupConfig, sort_mb: int) -> int:
    """Paragraphs whose candidates are verified at once: each has at most bands x max_candidates_per_bucket."""
    return max(64, (sort_mb << 20) // (disk_dedup.SORT_BYTES_PER_ROW * cfg.bands * cfg.max_candidates_per_bucket))


def _chunk(unit, block):
    """The bucket of the candidates of a unit's block of chunk_rows paragraphs (numbers or arrays of them)."""
    return (unit << 24) | block


def candidates(sk: Sketches, work: Path, cfg: ParagraphDedupConfig, followers: Buckets, sort_mb: int) -> Buckets:
    """Rows (paragraph, earlier candidate) of the representatives, by the later paragraph's chunk."""
    parts = buckets_for(sum(sk.sizes) * cfg.bands, sort_mb)
    rows = Buckets(work, "bands", 3)
    for u, n in enumerate(sk.sizes):
        at = np.flatnonzero(_representatives(followers, u, n))
        keys = band_keys(np.asarray(sk.load(u, "sig"))[at], cfg.bands, cfg.rows).ravel().view(np.int64)
        rows.add(bucket_of(keys, parts), np.column_stack([keys, np.repeat(numbers(u, n)[at], cfg.bands),
                                                          np.repeat(_documents(sk, u)[at], cfg.bands)]))
    found, block = Buckets(work, "candidates", 2), chunk_rows(cfg, sort_mb)
    for part in range(parts):
        r = rows.read(part)
        r = r[np.lexsort((r[:, 1], r[:, 0]))]
        later, earlier = earlier_document_pairs(r[:, 0], r[:, 2], cfg.max_candidates_per_bucket)
        found.add(_chunk(unit_of(r[later, 1]), local(r[later, 1]) // block),
                  np.column_stack([r[later, 1], r[earlier, 1]]))
    return found


class Verdicts:
    """Per unit, per sketch row: kept, or cut (how, in favour of which paragraph); saved as each unit is swept."""

    def __init__(self, work: Path):
        self.dir = work / "verdicts"
        self.dir.mkdir()

    def save(self, u: int, kind: np.ndarray, first: np.ndarray) -> None:
        np.save(self.dir / f"kind{u}.npy", kind)
        np.save(self.dir / f"first{u}.npy", first)

    def of(self, name: str, paragraphs: np.ndarray) -> np.ndarray:
        return gather(lambda u: np.load(self.dir / f"{name}{u}.npy", mmap_mode="r"), paragraphs)

    def load(self, name: str, u: int) -> np.ndarray:
        return np.load(self.dir / f"{name}{u}.npy")


def sweep(sk: Sketches, work: Path, cfg: ParagraphDedupConfig, followers: Buckets, found: Buckets,
          sort_mb: int) -> Verdicts:
    verdicts, rows = Verdicts(work), chunk_rows(cfg, sort_mb)
    for u, n in enumerate(sk.sizes):
        kind = np.where(_representatives(followers, u, n), KEPT, -1).astype(np.int8)  # -1: a follower, below
        first = np.full(n, -1, dtype=np.int64)
        for chunk in range(-(-n // rows)):  # in input order: a chunk's candidates in this unit are decided
            _sweep_chunk(sk, cfg, verdicts, u, found.read(_chunk(u, chunk)), kind, first)
        copies = followers.read(u)  # (paragraph, representative, same document)
        if len(copies):
            rep, mine = copies[:, 1], unit_of(copies[:, 1]) == u
            rep_kind, rep_first = np.empty(len(copies), np.int8), np.empty(len(copies), np.int64)
            rep_kind[mine], rep_first[mine] = kind[local(rep[mine])], first[local(rep[mine])]
            if not mine.all():
                rep_kind[~mine], rep_first[~mine] = verdicts.of("kind", rep[~mine]), verdicts.of("first", rep[~mine])
            kept, same = rep_kind == KEPT, copies[:, 2].astype(bool)
            at = local(copies[:, 0])
            kind[at] = np.where(kept, np.where(same, KEPT, EXACT), NEAR)
            first[at] = np.where(kept, np.where(same, -1, rep), rep_first)
        verdicts.save(u, kind, first)
    return verdicts


def _sweep_chunk(sk: Sketches, cfg: ParagraphDedupConfig, verdicts: Verdicts, u: int, pairs: np.ndarray,
                 kind: np.ndarray, first: np.ndarray) -> None:
    """Cut the representatives of one chunk of unit u that have a kept, verified candidate (kind, first: the
    unit's verdicts so far, updated)."""
    pairs = np.unique(pairs, axis=0)  # sorted by (paragraph, candidate); a pair often shares bands
    edges = pairs[signature_jaccard(sk, pairs) >= cfg.threshold] if len(pairs) else pairs
    earlier = unit_of(edges[:, 1]) < u
    settled = edges[earlier]  # their candidates' verdicts are saved: all at once
    if len(settled):
        settled = settled[verdicts.of("kind", settled[:, 1]) == KEPT]
    if len(settled):
        once = np.concatenate(([True], settled[1:, 0] != settled[:-1, 0]))  # the earliest kept candidate
        first[local(settled[once, 0])] = settled[once, 1]
        kind[local(settled[once, 0])] = NEAR
    for p, q in local(edges[~earlier]).tolist():  # candidates in this unit: in input order, q decided before p
        if first[p] < 0 and kind[q] == KEPT:
            first[p], kind[p] = q | (u << 32), NEAR


def copies_per_kept(sk: Sketches, work: Path, verdicts: Verdicts) -> None:
    """Per unit, per row: how many cuts name it as the kept paragraph (saved, for the min_docs rule)."""
    cuts = Buckets(work, "cuts", 1)
    for u in range(len(sk.sizes)):
        first = verdicts.load("first", u)
        cuts.add(unit_of(first[first >= 0]), first[first >= 0, None])
    for u, n in enumerate(sk.sizes):
        np.save(verdicts.dir / f"copies{u}.npy", np.bincount(local(cuts.read(u)[:, 0]), minlength=n))


class ParagraphCopies:
    """The cuts of each unit's documents, read one unit at a time."""

    def __init__(self, sk: Sketches, verdicts: Verdicts, min_docs: int):
        self.sk, self.verdicts, self.min_docs = sk, verdicts, min_docs

    def of_unit(self, u: int) -> dict[int, list[Cut]]:
        """{document's position in the unit: its cuts, in paragraph order}."""
        kind, first = self.verdicts.load("kind", u), self.verdicts.load("first", u)
        rows = np.flatnonzero(first >= 0)
        if self.min_docs > 2 and len(rows):  # in min_docs documents: the kept one and min_docs - 1 copies
            rows = rows[self.verdicts.of("copies", first[rows]) + 1 >= self.min_docs]
        if not len(rows):
            return {}
        kept_docs = (unit_of(first[rows]) << 32) | gather(lambda v: self.sk.load(v, "doc"), first[rows])
        kept_ids = self.sk.gather("ids", kept_docs).tolist()
        docs, paragraphs = np.asarray(self.sk.load(u, "doc"))[rows], np.asarray(self.sk.load(u, "para"))[rows]
        out: dict[int, list[Cut]] = {}
        for doc, paragraph, k, kept_id in zip(docs.tolist(), paragraphs.tolist(), kind[rows].tolist(), kept_ids):
            out.setdefault(doc, []).append(Cut(paragraph, KINDS[k], kept_id))
        return out


def find_paragraph_copies(dirs: list[Path], work: Path, cfg: ParagraphDedupConfig, min_docs: int,
                          sort_mb: int = 256) -> ParagraphCopies:
    """The cuts among the paragraphs sketched in `dirs` (one per unit, in input order); `work`: scratch space,
    which the caller removes after reading the cuts; sort_mb: about the memory one bucket's sort takes."""
    sk = Sketches(dirs)
    work.mkdir(parents=True, exist_ok=True)
    followers = exact_followers(sk, work, sort_mb)
    verdicts = sweep(sk, work, cfg, followers, candidates(sk, work, cfg, followers, sort_mb), sort_mb)
    if min_docs > 2:
        copies_per_kept(sk, work, verdicts)
    return ParagraphCopies(sk, verdicts, min_docs)
