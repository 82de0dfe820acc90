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

The draw is redone without the documents found, and their replacements may have copies too: rather than scan
the corpus once per draw (near_copies), CopyPool fingerprints every document a later draw may reach (the first
ones of each domain's draw order, past the split by a margin) and scans the corpus once, keeping every copy of
each in scan order; each draw is then answered from memory, exactly as near_copies would answer it.
"""
from __future__ import annotations

from contextlib import closing
from typing import TYPE_CHECKING, Callable, Iterable, Iterator

from .dedup.fingerprint import text_words
from .dedup.ngram_index import ContaminationIndex
from .dedup.ngram_pool import chunks, scanned_chunks
from .dedup.ngram_scan import item_coverage, scan_texts
from .ranked_runs import RankedDocs
from .val_split import WHOLE, ValidationSettings, tail_cut

if TYPE_CHECKING:
    from .units import Unit

SET = "validation"  # the one eval set the index holds here; its name never leaves this module
CHUNK_DOCS, CHUNK_CHARS = 256, 2_000_000  # documents per numpy call and per task sent to a worker
# A pool reaches past the last document its draw holds out by as many documents again (at least POOL_MARGIN_DOCS),
# or as many characters again (at least POOL_MARGIN_CHARS) if that comes first: room for the redraws after
# documents are put back: the stdlib codecs (18 put back, 7 scans when each draw scanned) and 94 MB of stdlib
# sources, manpages and Debian handbooks (47 put back, 4 scans) each take one scan (bench/guard_draw_bench.py).
POOL_MARGIN_DOCS, POOL_MARGIN_CHARS = 32, 1_000_000
# Texts kept of the documents that share an n-gram with a long document's widest tail, to measure its narrower
# tails without a scan; past this many characters, such a tail needs a scan.
KEEP_CHARS = 64_000_000

Key = tuple[str, int]  # (doc id, where the text validation would hold of it starts: 0 whole, else its tail's cut)
Copy = tuple[int, str, float]  # (position in scan order, doc id, coverage)


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


class CopyPool:
    """Every document a draw may hold out, up to a margin past the one it was built for, and each one's copies:
    from one scan of the corpus, answers near_copies for any later draw that stays within it.

    Of a document that may give a tail (its domain draws tails), the tail's cut moves with the share the draw
    gives it, so its widest tail is fingerprinted, and the documents sharing any n-gram with it are kept: a
    narrower tail's n-grams are some of the widest one's, so its copies are among those, measured when a draw
    asks."""

    def __init__(self, s: ValidationSettings, members: dict[str, tuple[str, str, int]], tail_domains: set[str]):
        self.s = s
        self.members = members  # doc id -> (unit name, domain, chars): the documents fingerprinted
        self.tail_domains = tail_domains  # domains whose members may give a tail
        self.position: dict[str, int] = {}  # member -> its position in the corpus (scan order)
        self.texts: dict[str, str] = {}  # member that may give a tail -> its text, where its tails are cut
        self.widest: dict[str, int] = {}  # ... -> the cut of its widest tail, the one fingerprinted
        self.copies: dict[Key, list[Copy]] = {}  # a text fingerprinted -> its copies in scan order (see scan)
        # member -> the documents sharing an n-gram with its widest tail, (position, doc id) in scan order
        self.touching: dict[str, list[tuple[int, str]]] = {}
        self.kept: dict[str, str] = {}  # the texts of those documents
        self.kept_chars = 0  # the characters of those texts that are not members' own (at most KEEP_CHARS)
        self.overflow: set[str] = set()  # members whose touching documents were not all kept (KEEP_CHARS)

    @classmethod
    def scan(cls, s: ValidationSettings, survivors: dict[str, RankedDocs],
             chosen: dict[str, dict[str, int]], excluded: set[str],
             docs: Callable[[], Iterable[tuple[Unit, dict]]], workers: int = 1,
             previous: CopyPool | None = None) -> CopyPool:
        """The pool of the draw `chosen` (drawn without `excluded`, which no later draw holds out either), and of
        `previous`'s members: two passes over `docs` (their texts, then the scan), the scan over `workers`."""
        budgets = {doc_id: budget for picked in chosen.values() for doc_id, budget in picked.items()}
        members = {} if previous is None else {d: m for d, m in previous.members.items() if d not in excluded}
        tail_domains = set() if previous is None else set(previous.tail_domains)
        spare = {}  # domain -> the most characters any draw holds out of it: exclusions only shrink it
        for domain, ranked in survivors.items():
            spare[domain] = int(s.val_max_share * ranked.chars)
            for doc_id, chars, unit in _reach(ranked, budgets, excluded):
                members[doc_id] = (unit, domain, chars)
                if budgets.get(doc_id, WHOLE) != WHOLE:
                    tail_domains.add(domain)
        pool = cls(s, members, tail_domains)
        items: dict[Key, str] = {}
        for pos, (unit, doc) in enumerate(docs()):
            member = members.get(doc["id"])
            if member is None or member[0] != unit.name:
                continue
            doc_id, text, (_, domain, chars) = doc["id"], doc["text"], member
            pool.position[doc_id] = pos
            # No draw holds out whole more than its domain can spare, nor gives a tail under min_chars.
            if chars <= spare[domain] or budgets.get(doc_id) == WHOLE:
                items[doc_id, 0] = text
            if domain in tail_domains and chars // 2 >= s.min_chars or budgets.get(doc_id, WHOLE) != WHOLE:
                pool.texts[doc_id] = text
                if (widest := tail_cut(text, len(text), s.min_chars)) is not None:
                    pool.widest[doc_id] = widest
                    items[doc_id, widest] = text[widest:]
                if budgets.get(doc_id, WHOLE) != WHOLE and (cut := tail_cut(text, budgets[doc_id], s.min_chars)):
                    items[doc_id, cut] = text[cut:]  # this draw's own tail: answered even past KEEP_CHARS
        pool._scan(items, docs, workers)
        return pool

    def _scan(self, items: dict[Key, str], docs: Callable[[], Iterable[tuple[Unit, dict]]], workers: int) -> None:
        """Of every text in `items`: the copies (documents holding >= guard_coverage of its n-grams) in scan order,
        up to the first that is no member (that one no draw answered here holds out, so no later copy is named);
        of every widest tail: the documents sharing any of its n-grams, and their texts."""
        s = self.s
        keys = list(items)
        index = ContaminationIndex.build([(SET, str(k), items[key]) for k, key in enumerate(keys)],
                                         n=s.guard_ngram, min_words=s.guard_min_words)
        items.clear()
        self.copies = {key: [] for key in keys}
        widest = {k: key[0] for k, key in enumerate(keys) if self.widest.get(key[0]) == key[1]}
        done: set[int] = set()
        pos = -1
        with closing(scanned_chunks(index, chunks((doc for _, doc in docs()), CHUNK_DOCS, CHUNK_CHARS),
                                    workers)) as scanned:
            for chunk, chunk_matches in scanned:
                for doc, matches in zip(chunk, chunk_matches):
                    pos += 1
                    if not matches:
                        continue
                    doc_id = doc["id"]
                    for (_, item), share in item_coverage(index, matches).items():
                        k = int(item)
                        if (owner := widest.get(k)) is not None and owner not in self.overflow:
                            self._touch(owner, pos, doc)
                        if share >= s.guard_coverage and k not in done:
                            self.copies[keys[k]].append((pos, doc_id, round(min(share, 1.0), 4)))
                            if doc_id not in self.position:
                                done.add(k)

    def _touch(self, owner: str, pos: int, doc: dict) -> None:
        """`doc`, at `pos` in scan order, shares an n-gram with the widest tail of `owner`: keep its text, to
        measure the owner's narrower tails against, unless KEEP_CHARS is reached (then the owner's are scanned)."""
        doc_id = doc["id"]
        if doc_id not in self.kept:
            text = self.texts.get(doc_id)  # a member's own text is held already
            if text is None and self.kept_chars + len(doc["text"]) <= KEEP_CHARS:
                text = doc["text"]
                self.kept_chars += len(text)
            if text is not None:
                self.kept[doc_id] = text
        if doc_id in self.kept:
            self.touching.setdefault(owner, []).append((pos, doc_id))
        else:
            self.overflow.add(owner)

    def near_copies(self, chosen: dict[str, dict[str, int]]) -> dict[str, dict] | None:
        """near_copies of the texts validation would hold of the draw `chosen` (the whole text, or the tail
        split_validation cuts), scanned over the corpus: the same mapping in the same order (the loop it replaced is
        kept in tests/test_validation_guard_pool.py to check that); None when the draw reached past the pool."""
        held: list[tuple[int, str, Key]] = []  # (position, doc id, text), in corpus order as the scan's index
        for picked in chosen.values():
            for doc_id, budget in picked.items():
                if doc_id not in self.members:
                    return None
                if doc_id not in self.position:  # not among the documents (never the case): nothing is held
                    continue
                if budget == WHOLE:
                    key = (doc_id, 0)
                else:
                    if doc_id not in self.texts:
                        return None
                    cut = tail_cut(self.texts[doc_id], budget, self.s.min_chars)
                    if cut is None:  # no boundary gives a tail: the split step leaves it in training
                        continue
                    key = (doc_id, cut)
                if key not in self.copies and not self._measure_tail(*key):
                    return None
                held.append((self.position[doc_id], doc_id, key))
        held.sort()
        candidates = {doc_id for _, doc_id, _ in held}
        # near_copies names, for each candidate, the first copy in scan order that is no candidate itself; it
        # fills its mapping as the scan finds them: in the copies' order, then in the candidates' (its index's).
        found = sorted((copy[0], pos, doc_id, copy) for pos, doc_id, key in held
                       if (copy := next((c for c in self.copies[key] if c[1] not in candidates), None)))
        return {doc_id: {"copy": copy[1], "coverage": copy[2]} for _, _, doc_id, copy in found}

    def _measure_tail(self, doc_id: str, cut: int) -> bool:
        """The copies of the tail of `doc_id` from `cut`, from the documents sharing an n-gram with its widest
        tail; False where they may lie elsewhere (a scan is needed)."""
        s = self.s
        widest = self.widest.get(doc_id)
        if widest is None or cut < widest or doc_id in self.overflow:
            return False
        text = self.texts[doc_id]
        words = text_words(text[cut:])
        if min(s.guard_min_words, s.guard_ngram) <= len(words) < s.guard_ngram:
            return False  # fingerprinted whole, as one shorter window: not among the widest tail's n-grams
        wide = text_words(text[widest:])
        if words and wide[len(wide) - len(words):] != words:
            return False  # never seen: a tail starts a paragraph or a line, so its words end the widest tail's
        index = ContaminationIndex.build([(SET, "tail", text[cut:])], n=s.guard_ngram, min_words=s.guard_min_words)
        copies: list[Copy] = []
        touching = self.touching.get(doc_id, [])
        for start in range(0, len(touching), CHUNK_DOCS):
            batch = touching[start:start + CHUNK_DOCS]
            for (pos, other), matches in zip(batch, scan_texts(index, [self.kept[o] for _, o in batch])):
                share = item_coverage(index, matches).get((SET, "tail"), 0.0)
                if share >= s.guard_coverage:
                    copies.append((pos, other, round(min(share, 1.0), 4)))
        self.copies[doc_id, cut] = copies
        return True


def _reach(ranked: RankedDocs, budgets: dict[str, int], excluded: set[str]) -> Iterator[tuple[str, int, str]]:
    """The documents of a domain a later draw may hold out: those in its draw order up to the last one held out
    now, and a margin past it (of as many documents and characters again, at least POOL_MARGIN_*), but the
    excluded. None where nothing is held out now: a draw that holds out nothing of a domain never will."""
    reach = reach_chars = chars_so_far = 0
    for k, (doc_id, chars, _) in enumerate(ranked):
        chars_so_far += chars
        if doc_id in budgets:
            reach, reach_chars = k + 1, chars_so_far
    if not reach:
        return
    margin_docs, margin_chars = max(reach, POOL_MARGIN_DOCS), max(reach_chars, POOL_MARGIN_CHARS)
    past = past_chars = 0
    for k, (doc_id, chars, unit) in enumerate(ranked):
        if k >= reach:
            if past >= margin_docs or past_chars >= margin_chars:
                return
            past, past_chars = past + 1, past_chars + chars
        if doc_id not in excluded:
            yield doc_id, chars, unit
