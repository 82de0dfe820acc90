"""The data stage's training split, read for the scan and written back without what the scan removed.

Only the files that lose text are rewritten; the others are hard links to the data stage's. While the scan
runs, only the removed character ranges of each touched document are kept, so memory stays small.
"""
from __future__ import annotations

import copy
from collections import defaultdict
from pathlib import Path
from typing import Iterator

from ..data.dedup.ngram_scan import Match
from ..data.jsonl import ShardWriter, read_jsonl
from ..data.ledger import Ledger
from ..disk import link_or_copy
from .cut import Decontaminated, gaps

_FILE = "__train_file"  # which data-stage file a document came from, while it passes through the scan


def train_docs(data_dir: Path, stats: dict) -> Iterator[dict]:
    """Every training document of the data artifact, marked with the file it came from."""
    for files in stats["train_files"].values():
        for name in files:
            for doc in read_jsonl(data_dir / "train" / name):
                doc[_FILE] = name
                yield doc


class Removals:
    """What the scan removed (record is scan_corpus's on_removal): the ranges per document, the losses per
    source, and one ledger entry per document and eval set, rule `contamination:<eval set>`."""

    def __init__(self, ledger: Ledger, mode: str):
        self.ledger, self.mode = ledger, mode
        self.spans: dict[str, dict[str, list[tuple[int, int]]]] = defaultdict(dict)  # file -> doc id -> ranges
        self.per_source: dict[str, dict[str, int]] = {}

    def record(self, doc: dict, matches: list[Match], result: Decontaminated) -> None:
        self.spans[doc[_FILE]][doc["id"]] = result.removed_spans
        lost = self.per_source.setdefault(doc["source"], {"docs_dropped": 0, "docs_cut": 0, "docs_delta": 0,
                                                          "chars": 0})
        lost["docs_dropped" if not result.kept else "docs_cut"] += 1
        lost["docs_delta"] += len(result.kept) - 1
        lost["chars"] += result.removed_chars
        by_set: dict[str, list[Match]] = defaultdict(list)
        for m in matches:
            by_set[m.eval_set].append(m)
        action = "dropped" if not result.kept else f"cut {result.removed_chars} chars, {len(result.kept)} pieces kept"
        for name, found in by_set.items():
            item_ids = sorted({m.item_id for m in found})
            first = found[0]
            self.ledger.reject(source=doc["source"], doc_id=doc["id"], stage="decontaminate",
                               rule=f"contamination:{name}",
                               detail=f"{self.mode} mode: {action}; eval items {', '.join(item_ids[:10])}",
                               text=doc["text"][first.char_start:first.char_end])


def write_train(data_dir: Path, out: Path, stats: dict, removals: Removals) -> dict[str, list[str]]:
    """Hard-link every untouched training shard; rewrite the touched ones without the removed text. Returns the
    training files per source, as in stats.json."""
    (out / "train").mkdir(parents=True, exist_ok=True)
    train_files: dict[str, list[str]] = {}
    for source, files in stats["train_files"].items():
        train_files[source] = []
        for name in files:
            touched = removals.spans.get(name)
            if not touched:
                link_or_copy(data_dir / "train" / name, out / "train" / name)
                train_files[source].append(name)
                continue
            prefix = name.removesuffix(".jsonl.zst")
            with ShardWriter(out / "train", f"{prefix}.clean", per_shard=1 << 62) as writer:
                for doc in read_jsonl(data_dir / "train" / name):
                    if doc["id"] not in touched:
                        writer.write(doc)
                        continue
                    for k, piece in enumerate(_kept_pieces(doc["text"], touched[doc["id"]])):
                        writer.write({**doc, "id": f"{doc['id']}#{k}", "text": piece})
            train_files[source] += [p.name for p in writer.paths]
    return train_files


def stats_after(stats: dict, train_files: dict[str, list[str]], removals: Removals) -> dict:
    """The data stage's stats.json with the training files and the train counts after removal."""
    result = copy.deepcopy(stats)
    result["train_files"] = train_files
    for name, src in result["sources"].items():
        lost = removals.per_source.get(name)
        if lost and "train" in src:
            train = src["train"]
            if train.get("tokens_estimated") and train.get("chars"):  # the estimate is chars x a ratio
                train["tokens_estimated"] *= max(train["chars"] - lost["chars"], 0) / train["chars"]
            train["docs"] += lost["docs_delta"]
            train["chars"] -= lost["chars"]
    return result


def _kept_pieces(text: str, removed: list[tuple[int, int]]) -> list[str]:
    return [text[start:end] for start, end in gaps(removed, len(text))]


