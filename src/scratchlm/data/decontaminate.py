"""The decontaminate stage: remove eval-set text from the training split, never from the eval sets.

It sits between `data` and `tokenizer`. The eval sets are fixed before it runs: the validation split drawn by the
data stage (data/<id>/val/<domain>.jsonl) and the user's `[[eval.sets]]`. Each gets a content ID that depends on
its items alone, so changing the training sources never changes a user eval set's ID. Every set is fingerprinted
(word n-grams, data/contamination.py), the training split is scanned on every core, and a training document that
holds an eval item is dropped (or, in span mode, has the match and a window around it cut out). Every removal goes
into this stage's rejection ledger with the rule `contamination:<eval set>`.

The output has the layout of a data artifact, so the stages after it read it unchanged: `train/` (untouched
shards are hard links to the data stage's, rewritten ones hold what is left), `val/` (a byte-for-byte copy),
`stats.json` (the data stage's, with the train counts after removal), plus `contamination.md/.json`, the index of
fingerprints `contamination_index.npz` and `eval_sets.json` (the eval sets' IDs, recorded in lineage.json).
"""
from __future__ import annotations

import copy
import os
import shutil
from collections import defaultdict
from pathlib import Path
from typing import Iterator

from ..config import Config
from ..errors import UserError
from ..ids import DigestCache, content_id, files_id, read_json, write_json
from ..progress import bar, log
from .contamination import ContaminationIndex, Decontaminated, Match, load_eval_set, scan_corpus
from .jsonl import ShardWriter, read_jsonl
from .ledger import Ledger
from .val_split import HELD_OUT_PIECE

VALIDATION_PREFIX = "validation/"  # eval set names of the validation split: validation/<domain>
EVAL_SETS = "eval_sets.json"
REPORT_MD, REPORT_JSON, INDEX = "contamination.md", "contamination.json", "contamination_index.npz"
_FILE = "__train_file"
# The share of an eval set's items found in training is no error here: they are removed from training, which
# leaves the set clean. What stops the run is a set whose copies are a large part of the training text.
ITEMS_ARE_REMOVED = 1.0  # which data-stage file a document came from, while it passes through the scan


def eval_set_inputs(cfg: Config, cache: DigestCache) -> list[dict]:
    """What the decontaminate stage's ID hashes for the user eval sets: their config and file digests."""
    inputs = []
    for s in cfg.eval.sets:
        path = cfg.resolve(s.path)
        if not path.is_file():
            raise UserError(f"[[eval.sets]] `{s.name}`: {path} not found")
        inputs.append({"set": vars(s), "file": files_id([path], cache, cfg.base_dir)})
    return inputs


def load_eval_sets(cfg: Config, data_dir: Path) -> tuple[list[tuple[str, str, str]], dict[str, dict]]:
    """Items of every guarded set as (set name, item id, text), and a record per set for eval_sets.json."""
    items: list[tuple[str, str, str]] = []
    records: dict[str, dict] = {}
    for s in cfg.eval.sets:
        path = cfg.resolve(s.path)
        mine = load_eval_set(s.name, path, s.fields or None)
        items += mine
        records[s.name] = {"kind": "user", "path": str(path), "domain": s.domain, "fields": s.fields,
                           "items": len(mine), "id": _items_id(mine)}
    if cfg.decontaminate.guard_validation:
        for path in sorted((data_dir / "val").glob("*.jsonl")):
            name = VALIDATION_PREFIX + path.stem
            mine = [(name, doc["id"], doc["text"]) for doc in read_jsonl(path)]
            items += mine
            records[name] = {"kind": "validation", "path": str(path), "domain": path.stem, "items": len(mine),
                             "id": _items_id(mine)}
    return items, records


def _items_id(items: list[tuple[str, str, str]]) -> str:
    """Content ID of an eval set: its item IDs and texts only (not its name, path or format)."""
    return content_id("eval-set", [(item_id, text) for _, item_id, text in items])


def decontaminate_corpus(cfg: Config, data_dir: Path, out: Path) -> dict:
    c = cfg.decontaminate
    stats = read_json(data_dir / "stats.json")
    items, eval_sets = load_eval_sets(cfg, data_dir)
    write_json(out / EVAL_SETS, eval_sets)
    shutil.copytree(data_dir / "val", out / "val")
    index = ContaminationIndex.build(items, n=c.ngram, min_words=c.min_words)
    index.save(out / INDEX)
    log(f"decontaminate: {len(items):,} items of {len(eval_sets)} eval sets, {index.num_fingerprints:,} "
        f"{c.ngram}-gram fingerprints; scanning the training split")

    removals = _Removals(Ledger(out), c.mode)
    coverage = {name: c.validation_min_coverage for name, r in eval_sets.items() if r["kind"] == "validation"}
    workers = c.workers or os.cpu_count() or 1
    clean, report = scan_corpus(index, bar(_train_docs(data_dir, stats), desc="decontaminate", unit="doc"),
                                mode=c.mode, workers=workers, span_window=c.span_window,
                                min_piece_chars=c.min_piece_chars, error_fraction=ITEMS_ARE_REMOVED,
                                error_train_share=c.error_train_share,
                                min_coverage=coverage, on_removal=removals.record, exempt=_own_piece)
    for _ in clean:  # the scan only finds what to remove; the rewrite below touches only the files that lose text
        pass
    removals.ledger.close()
    train_files = _write_train(data_dir, out, stats, removals)

    result_stats = copy.deepcopy(stats)
    result_stats["train_files"] = train_files
    for name, src in result_stats["sources"].items():
        lost = removals.per_source.get(name)
        if lost and "train" in src:
            train = src["train"]
            if train.get("tokens_estimated") and train.get("chars"):  # the estimate is chars x a ratio
                train["tokens_estimated"] *= max(train["chars"] - lost["chars"], 0) / train["chars"]
            train["docs"] += lost["docs_delta"]
            train["chars"] -= lost["chars"]
    summary = report.to_dict()
    summary["removed_per_source"] = dict(removals.per_source)
    summary["ledger_rules"] = {src: dict(rules) for src, rules in removals.ledger.counts.items()}
    summary["eval_sets_ids"] = {name: r["id"] for name, r in eval_sets.items()}
    result_stats["decontaminated"] = {k: summary[k] for k in ("n", "mode", "docs_touched", "docs_dropped",
                                                               "chars_removed", "verdict")}
    write_json(out / "stats.json", result_stats)
    write_json(out / REPORT_JSON, summary)
    (out / REPORT_MD).write_text(report.to_markdown(), encoding="utf-8")
    log(f"decontaminate: {report.docs_scanned:,} training documents scanned, {report.docs_touched:,} touched, "
        f"{report.chars_removed:,} characters removed; verdict {report.verdict}")
    return {"verdict": report.verdict, "docs_scanned": report.docs_scanned, "docs_touched": report.docs_touched,
            "docs_dropped": report.docs_dropped, "chars_removed": report.chars_removed,
            "eval_sets": {name: {"id": r["id"], "kind": r["kind"], "items": r["items"],
                                 "contaminated_items": len(report.sets[name].contaminated_items),
                                 "verdict": report.sets[name].verdict, "message": report.sets[name].message}
                          for name, r in eval_sets.items() if name in report.sets},
            "report": str(out / REPORT_MD)}


def _own_piece(doc: dict, match: Match) -> bool:
    """The held-out tail of a long document shares words with the beginning left in training by design (the
    split cut it there, val_split.py); that is no copy of the eval item."""
    return match.eval_set.startswith(VALIDATION_PREFIX) and match.item_id == doc.get(HELD_OUT_PIECE)


def _train_docs(data_dir: Path, stats: dict) -> Iterator[dict]:
    for files in stats["train_files"].values():
        for name in files:
            for doc in read_jsonl(data_dir / "train" / name):
                doc[_FILE] = name
                yield doc


class _Removals:
    """What the scan removed, kept small: per touched document only the removed character ranges."""

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


def _write_train(data_dir: Path, out: Path, stats: dict, removals: _Removals) -> dict[str, list[str]]:
    """Hard-link every untouched training shard; rewrite the touched ones without the removed text."""
    (out / "train").mkdir(parents=True, exist_ok=True)
    train_files: dict[str, list[str]] = {}
    for source, files in stats["train_files"].items():
        train_files[source] = []
        for name in files:
            touched = removals.spans.get(name)
            if not touched:
                _link(data_dir / "train" / name, out / "train" / name)
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


def _kept_pieces(text: str, removed: list[tuple[int, int]]) -> list[str]:
    pieces, begin = [], 0
    for start, end in sorted(removed) + [(len(text), len(text))]:
        if start > begin:
            pieces.append(text[begin:start])
        begin = max(begin, end)
    return pieces


def _link(src: Path, dst: Path) -> None:
    try:
        os.link(src, dst)  # same bytes, no second copy on disk
    except OSError:
        shutil.copyfile(src, dst)


def check_verdict(result: dict, force: bool) -> None:
    """Stop the pipeline when an eval set is mostly a copy of the training data: its scores would mean nothing."""
    bad = [r["message"].removeprefix("ERROR: ") for r in result["eval_sets"].values() if r["verdict"] == "error"]
    if bad and not force:
        raise UserError(f"contamination guard: {bad[0]} (report: {result['report']}; "
                        f"pass --force to continue anyway)")
    for line in bad:
        log(f"decontaminate: continuing despite --force: {line}")
