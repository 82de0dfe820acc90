"""SFT pairs against the evaluation data, by the decontaminate guard's own measure.

Fine-tuning on a copy of the text a model is later evaluated on turns the evaluation into a test of recall. So
every fine-tuning pair (training and held-out) is scanned against
  - the pretraining validation split, per domain (the data artifact's val/<domain>.jsonl),
  - every [[eval.sets]],
and every held-out pair against the training pairs: a held-out pair sharing text with a training pair is not
held out, and its loss says nothing about generalization.

"Shares text" is what the decontaminate stage calls a copy: the same eval items (decontaminate/stage.py
load_eval_sets: the validation split only while decontaminate.guard_validation is on), the same word n-gram
fingerprints, index and scan (data/dedup/ngram_index.py, ngram_scan.py, ngram_pool.py), with
decontaminate.ngram and decontaminate.min_words. As there, the evaluation side is indexed and the pairs are
scanned: the stage already holds that index in memory for a whole training corpus. Unlike the stage, no coverage
threshold on the validation document applies: an answer quoting one passage of a long document holds a small
share of it, yet teaches that passage verbatim. Each overlap instead says which share of the pair is shared.

Nothing is removed. The result lists the overlaps, the totals per target, what could not be scanned, and a
verdict: a warning for any overlap, and for any target that was not scanned (absence is never reported as ok).
"""
from __future__ import annotations

import os
from collections import Counter, defaultdict
from contextlib import closing
from pathlib import Path
from typing import Iterable, Iterator, NamedTuple

from ..config import Config
from ..data.dedup.fingerprint import text_words
from ..data.dedup.ngram_index import ContaminationIndex
from ..data.dedup.ngram_pool import chunks, scanned_chunks
from ..data.dedup.ngram_scan import Match
from ..decontaminate.report import VALIDATION_PREFIX
from ..decontaminate.stage import load_eval_sets

TRAIN, HELDOUT = "train", "heldout"
SPLIT_WORDS = {TRAIN: "training", HELDOUT: "held-out"}
SFT_TRAIN = "sft_train"  # the target of the held-out check: the training pairs
VALIDATION = "validation"  # the key of the validation split in `not_scanned`, whatever its domains
# A system prompt is usually the same for every pair: fingerprinting it would make every held-out pair "share
# text" with training. It is never what an eval item or a validation document is copied into.
FINGERPRINTED_ROLES = ("user", "assistant")
FINGERPRINTED = ("the user and assistant turns of a pair, joined in order (an item made of a question and its "
                 "answer is matched across the two turns); system turns are left out")
MAX_LISTED = 200  # overlaps listed in the result, the largest shares first; the totals count all of them
CHUNK_DOCS, CHUNK_CHARS = 256, 2_000_000  # texts per numpy call and per task sent to a worker, as the stage


class PairText(NamedTuple):
    """A pair as fingerprinted: its text, where each turn lies in it, its number of words."""

    split: str
    index: int  # 0-based, in its list
    line: int | None  # 1-based line of the data file, when the caller knows it
    text: str
    turns: list[tuple[int, int, str]]  # (char start, char end, role) of each fingerprinted turn
    words: int


class Overlap(NamedTuple):
    pair: PairText
    target: str  # validation:<domain> | eval_set:<name> | sft_train
    item: str  # validation document ID | eval item ID | index of the training pair
    shared_ngrams: int  # the pair's windows inside the shared spans
    share: float  # of the pair's windows
    roles: tuple[str, ...]  # the turns the shared text lies in: "assistant" is text the model is trained to say


def scan_sft_overlap(
    cfg: Config,
    data_dir: Path | None,
    train: list[list[dict]],
    heldout: list[list[dict]],
    *,
    train_lines: list[int] | None = None,
    heldout_lines: list[int] | None = None,
    workers: int | None = None,
    max_listed: int = MAX_LISTED,
) -> dict:
    """Which SFT pairs (conversations as sft/data.py reads them) share n-grams with the validation split of the
    data artifact in `data_dir` (None: none to scan), with cfg.eval.sets, and, for held-out pairs, with training
    pairs. *_lines: the data file's line of each pair. workers: scan processes (default decontaminate.workers,
    0 = every core). Returns a JSON-able dict; see the module docstring."""
    g = cfg.decontaminate
    pairs = _pair_texts(TRAIN, train, train_lines) + _pair_texts(HELDOUT, heldout, heldout_lines)
    held = [p for p in pairs if p.split == HELDOUT]
    trained = [p for p in pairs if p.split == TRAIN]
    items, not_scanned = _eval_items(cfg, data_dir)
    pool = _pool_size(g.workers if workers is None else workers)
    indexes = [ContaminationIndex.build(items, n=g.ngram, min_words=g.min_words)]
    found = list(_overlaps(indexes[0], items, pairs, pool))
    if held:
        sft_items = [(SFT_TRAIN, str(p.index), p.text) for p in trained]
        indexes.append(ContaminationIndex.build(sft_items, n=g.ngram, min_words=g.min_words))
        found += _overlaps(indexes[1], sft_items, held, pool)
    return _result(pairs, _targets(indexes, found), found, not_scanned, g.ngram, g.min_words, max_listed)


def _pair_texts(split: str, conversations: list[list[dict]], lines: list[int] | None) -> list[PairText]:
    if lines is not None and len(lines) != len(conversations):
        raise ValueError(f"{len(lines)} line numbers for {len(conversations)} {split} pairs")
    out = []
    for k, turns in enumerate(conversations):
        text, spans = "", []
        for turn in turns:
            if turn["role"] in FINGERPRINTED_ROLES:
                start = len(text) + (1 if text else 0)
                text = f"{text}\n{turn['content']}" if text else turn["content"]
                spans.append((start, len(text), turn["role"]))
        out.append(PairText(split, k, lines[k] if lines is not None else None, text, spans, len(text_words(text))))
    return out


def _eval_items(cfg: Config, data_dir: Path | None) -> tuple[list[tuple[str, str, str]], dict[str, str]]:
    """The decontaminate stage's eval items as (target, item id, text), and what was not scanned and why."""
    items, _ = load_eval_sets(cfg, Path(data_dir) if data_dir is not None else None)
    not_scanned = {}
    if data_dir is None:
        not_scanned[VALIDATION] = "no data directory was given"
    elif not cfg.decontaminate.guard_validation:
        not_scanned[VALIDATION] = "decontaminate.guard_validation is false: the validation split is no eval set"
    elif not any(name.startswith(VALIDATION_PREFIX) for name, _, _ in items):
        not_scanned[VALIDATION] = f"no validation split in {data_dir}"
    return [(_target_name(name), item_id, text) for name, item_id, text in items], not_scanned


def _target_name(eval_set: str) -> str:
    if eval_set.startswith(VALIDATION_PREFIX):
        return f"{VALIDATION}:{eval_set.removeprefix(VALIDATION_PREFIX)}"
    return f"eval_set:{eval_set}"


def _pool_size(workers: int) -> int:
    """Processes for a scan, as decontaminate.workers says (0: every core); a scan of one chunk runs in this
    process whatever it says (_scan)."""
    return workers or os.cpu_count() or 1


def _overlaps(index: ContaminationIndex, items: list[tuple[str, str, str]], pairs: list[PairText],
              workers: int) -> Iterator[Overlap]:
    """Every (pair, item) sharing text, found both ways so that the shorter side is the one matched whole, as the
    stage matches an item of min_words..n-1 words: the items are indexed (`index`) and the pairs scanned, then
    the pairs of min_words..n-1 words are indexed and the items scanned. Shorter pairs are not checked, as the
    stage does not check such items. A short pair equal to a short item is found twice, and kept once."""
    seen: set[tuple[str, int, str, str]] = set()
    for overlap in _items_in_pairs(index, pairs, workers):
        seen.add((overlap.pair.split, overlap.pair.index, overlap.target, overlap.item))
        yield overlap
    short = [p for p in pairs if min(index.min_words, index.n) <= p.words < index.n]
    for overlap in _short_pairs_in_items(items, short, index.n, index.min_words, workers):
        if (overlap.pair.split, overlap.pair.index, overlap.target, overlap.item) not in seen:
            yield overlap


def _items_in_pairs(index: ContaminationIndex, pairs: list[PairText], workers: int) -> Iterator[Overlap]:
    if not index.fingerprints or not pairs:
        return
    window = _window_lengths(index)
    docs = [{"text": p.text, "pair": p} for p in pairs]
    for doc, matches in _scan(index, docs, workers):
        pair: PairText = doc["pair"]
        by_item: dict[tuple[str, str], list[Match]] = defaultdict(list)
        for m in matches:
            by_item[m.eval_set, m.item_id].append(m)
        for (target, item), spans in by_item.items():
            length = window[target, item]
            shared = sum(m.word_end - m.word_start - length + 1 for m in spans)
            yield Overlap(pair, target, item, shared, min(1.0, shared / max(pair.words - length + 1, 1)),
                          _roles(pair, spans))


def _short_pairs_in_items(items: list[tuple[str, str, str]], short: list[PairText], n: int, min_words: int,
                          workers: int) -> Iterator[Overlap]:
    """Pairs of min_words..n-1 words found whole inside an item (the scan of the pairs cannot see them: they
    hold no n-gram)."""
    if not items or not short:
        return
    by_key = {(p.split, str(p.index)): p for p in short}
    index = ContaminationIndex.build([(p.split, str(p.index), p.text) for p in short], n=n, min_words=min_words)
    docs = [{"text": text, "target": target, "item": item} for target, item, text in items]
    for doc, matches in _scan(index, docs, workers):
        for split, pair_index in sorted({(m.eval_set, m.item_id) for m in matches}):
            pair = by_key[split, pair_index]
            yield Overlap(pair, doc["target"], doc["item"], 1, 1.0, tuple(role for _, _, role in pair.turns))


def _scan(index: ContaminationIndex, docs: list[dict], workers: int) -> Iterator[tuple[dict, list[Match]]]:
    """The documents with their matches, in order; without a pool when they fit in one chunk."""
    batches = list(chunks(docs, CHUNK_DOCS, CHUNK_CHARS))
    with closing(scanned_chunks(index, iter(batches), min(workers, len(batches)))) as scanned:
        for chunk, chunk_matches in scanned:
            for doc, matches in zip(chunk, chunk_matches):
                if matches:
                    yield doc, matches


def _window_lengths(index: ContaminationIndex) -> dict[tuple[str, str], int]:
    """(target, item id) -> the words per fingerprint of that item: n, or its own length when it is shorter."""
    _, lengths = index.item_windows
    return {(index.set_names[s], item): int(length)
            for item, s, length in zip(index.item_ids, index.item_sets.tolist(), lengths.tolist())}


def _roles(pair: PairText, matches: Iterable[Match]) -> tuple[str, ...]:
    roles = {role for m in matches for start, end, role in pair.turns if start < m.char_end and m.char_start < end}
    return tuple(r for r in FINGERPRINTED_ROLES if r in roles)


def _targets(indexes: list[ContaminationIndex], found: list[Overlap]) -> dict[str, dict]:
    """Per target: its items, those too short to check (as the stage counts them), and the pairs of each split
    overlapping it."""
    overlapping = Counter((target, split) for target, split, _ in {(o.target, o.pair.split, o.pair.index)
                                                                    for o in found})
    targets: dict[str, dict] = {}
    for index in indexes:
        for k, target in enumerate(index.set_names):
            mine = index.item_sets == k
            splits = (HELDOUT,) if target == SFT_TRAIN else (TRAIN, HELDOUT)
            targets[target] = {
                "items": int(mine.sum()), "items_too_short": int((mine & ~index.item_checked).sum()),
                "overlapping_pairs": {s: overlapping[target, s] for s in splits}}
    return targets


def _result(pairs: list[PairText], targets: dict[str, dict], found: list[Overlap], not_scanned: dict[str, str],
            n: int, min_words: int, max_listed: int) -> dict:
    totals = Counter(p.split for p in pairs)
    too_short = Counter(p.split for p in pairs if p.words < min(min_words, n))
    training_lines = {p.index: p.line for p in pairs if p.split == TRAIN}
    ranked = sorted(found, key=lambda o: (-o.share, o.pair.split, o.pair.index, o.target, o.item))
    return {
        "ngram": n,
        "min_words": min_words,
        "fingerprinted": FINGERPRINTED,
        "pairs": {s: totals[s] for s in (TRAIN, HELDOUT)},
        "pairs_too_short": {s: too_short[s] for s in (TRAIN, HELDOUT)},
        "targets": targets,
        "not_scanned": not_scanned,
        "overlaps": [_overlap_record(o, training_lines) for o in ranked[:max_listed]],
        "overlaps_total": len(found),
        "verdict": _verdict(pairs, found, targets, not_scanned, n),
    }


def _overlap_record(o: Overlap, training_lines: dict[int, int | None]) -> dict:
    record = {"split": o.pair.split, "index": o.pair.index, "line": o.pair.line, "target": o.target,
              "item": o.item, "shared_ngrams": o.shared_ngrams, "share": round(o.share, 4), "roles": list(o.roles)}
    if o.target == SFT_TRAIN:
        record["item"] = int(o.item)
        record["item_line"] = training_lines[int(o.item)]
    return record


def _verdict(pairs: list[PairText], found: list[Overlap], targets: dict[str, dict], not_scanned: dict[str, str],
             n: int) -> dict:
    totals = Counter(p.split for p in pairs)
    parts = []
    for split in (TRAIN, HELDOUT):
        mine = [o for o in found if o.pair.split == split and o.target != SFT_TRAIN]
        validation = [o for o in mine if o.target.startswith(VALIDATION + ":")]
        if validation:
            per_domain = Counter(target.removeprefix(VALIDATION + ":")
                                 for target, _ in {(o.target, o.pair.index) for o in validation})
            detail = ", ".join(f"{d} {k}" for d, k in sorted(per_domain.items()))
            parts.append(f"{_pairs_phrase(validation, totals[split], split)} {n}-word spans with the pretraining "
                         f"validation split ({detail})")
        for target in sorted({o.target for o in mine} - {o.target for o in validation}):
            parts.append(f"{_pairs_phrase([o for o in mine if o.target == target], totals[split], split)} {n}-word "
                         f"spans with eval set '{target.removeprefix('eval_set:')}'")
    copied = [o for o in found if o.target == SFT_TRAIN]
    if copied:
        parts.append(f"{_pairs_phrase(copied, totals[HELDOUT], HELDOUT)} {n}-word spans with training pairs: "
                     f"not held out")
    gaps = [f"the {what} was not scanned: {why}" for what, why in
            ((VALIDATION + " split" if key == VALIDATION else key, why) for key, why in not_scanned.items())]
    if parts or gaps:
        return {"level": "warning", "message": "; ".join(parts + gaps)}
    scanned = ", ".join(sorted(targets)) or "nothing (no eval sets configured)"
    return {"level": "ok", "message": f"no SFT pair shares a {n}-word span with: {scanned}"}


def _pairs_phrase(overlaps: list[Overlap], total: int, split: str) -> str:
    """"6 of 374 training pairs share" / "1 of 40 held-out pairs shares"."""
    k = len({o.pair.index for o in overlaps})
    return f"{k} of {total} {SPLIT_WORDS[split]} pairs {'shares' if k == 1 else 'share'}"
