"""The decontaminate stage: remove eval-set text from the training split, never from the eval sets.

It sits between `data` and `tokenizer`. The eval sets are fixed before it runs: the validation split drawn by the
data stage (data/<id>/val/<domain>.jsonl) and the user's `[[eval.sets]]`. Each gets a content ID that depends on
its items alone, so changing the training sources never changes a user eval set's ID. Every set is fingerprinted
(word n-grams, data/dedup/ngram_index.py), the training split is scanned on every core, and a training document
that holds an eval item is dropped (or, in span mode, has the match and a window around it cut out). Every
removal goes into this stage's rejection ledger with the rule `contamination:<eval set>`. The validation split
rarely loses anything here: the data stage draws it without documents near-copied in training, by the same
measure (data/val_guard.py).

The output has the layout of a data artifact, so the stages after it read it unchanged: `train/` (untouched
shards are hard links to the data stage's, rewritten ones hold what is left), `val/` (a byte-for-byte copy),
`stats.json` (the data stage's, with the train counts after removal), plus `contamination.md/.json`, the index of
fingerprints `contamination_index.npz` and `eval_sets.json` (the eval sets' IDs, recorded in lineage.json).
"""
from __future__ import annotations

import os
import shutil
from pathlib import Path

from ..config import Config
from ..data.dedup.ngram_index import ContaminationIndex
from ..data.dedup.ngram_scan import Match
from ..data.jsonl import read_jsonl
from ..data.ledger import Ledger
from ..data.val_split import HELD_OUT_PIECE
from ..errors import UserError
from ..ids import DigestCache, content_id, files_id, read_json, write_json
from ..progress import bar, log
from .corpus_scan import scan_corpus
from .files import load_eval_set
from .report import VALIDATION_PREFIX
from .train_split import Removals, stats_after, train_docs, write_train

EVAL_SETS = "eval_sets.json"
REPORT_MD, REPORT_JSON, INDEX = "contamination.md", "contamination.json", "contamination_index.npz"
# The share of an eval set's items found in training is no error here: they are removed from training, which
# leaves the set clean. What stops the run is a set whose copies are a large part of the training text.
ITEMS_ARE_REMOVED = 1.0


def eval_set_inputs(cfg: Config, cache: DigestCache) -> list[dict]:
    """What the decontaminate stage's ID hashes for the user eval sets: their config and file digests."""
    inputs = []
    for s in cfg.eval.sets:
        path = cfg.resolve(s.path)
        if not path.is_file():
            raise UserError(f"[[eval.sets]] `{s.name}`: {path} not found")
        inputs.append({"set": vars(s), "file": files_id([path], cache, cfg.base_dir)})
    return inputs


def load_eval_sets(cfg: Config, data_dir: Path | None) -> tuple[list[tuple[str, str, str]], dict[str, dict]]:
    """Items of every eval set the stage protects as (set name, item id, text), and a record per set for
    eval_sets.json. data_dir None: the user's sets only (no validation split to read)."""
    items: list[tuple[str, str, str]] = []
    records: dict[str, dict] = {}
    for s in cfg.eval.sets:
        path = cfg.resolve(s.path)
        mine = load_eval_set(s.name, path, s.fields or None)
        items += mine
        records[s.name] = {"kind": "user", "path": str(path), "domain": s.domain, "fields": s.fields,
                           "items": len(mine), "id": _items_id(mine)}
    if cfg.decontaminate.guard_validation and data_dir is not None:
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
    """Write the decontaminate artifact into `out` from the data artifact in `data_dir`; returns the stage's
    result (verdict, counts, per eval set its ID, counts and verdict, the report's path)."""
    c = cfg.decontaminate
    stats = read_json(data_dir / "stats.json")
    items, eval_sets = load_eval_sets(cfg, data_dir)
    write_json(out / EVAL_SETS, eval_sets)
    shutil.copytree(data_dir / "val", out / "val")
    index = ContaminationIndex.build(items, n=c.ngram, min_words=c.min_words)
    index.save(out / INDEX)
    log(f"decontaminate: {len(items):,} items of {len(eval_sets)} eval sets, {index.num_fingerprints:,} "
        f"{c.ngram}-gram fingerprints; scanning the training split")

    removals = Removals(Ledger(out), c.mode)
    coverage = {name: c.validation_min_coverage for name, r in eval_sets.items() if r["kind"] == "validation"}
    workers = c.workers or os.cpu_count() or 1
    report = scan_corpus(index, bar(train_docs(data_dir, stats), desc="decontaminate", unit="doc"),
                         mode=c.mode, workers=workers, span_window=c.span_window,
                         min_piece_chars=c.min_piece_chars, error_fraction=ITEMS_ARE_REMOVED,
                         error_train_share=c.error_train_share,
                         min_coverage=coverage, on_removal=removals.record, exempt=_own_piece)
    removals.ledger.close()
    result_stats = stats_after(stats, write_train(data_dir, out, stats, removals), removals)

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


def contamination_errors(result: dict) -> list[dict]:
    """The eval sets that are mostly a copy of the training data, as error verdicts (name, level, summary): what
    stops the pipeline, and what a run forced past it records (stages.forced_past)."""
    return [{"name": "contamination", "level": "error", "summary": r["message"].removeprefix("ERROR: ")}
            for r in result["eval_sets"].values() if r["verdict"] == "error"]


def check_verdict(result: dict, allow_contaminated: bool) -> None:
    """Stop the pipeline when an eval set is mostly a copy of the training data: its scores would mean nothing.
    allow_contaminated (--force) goes on, saying so."""
    bad = [e["summary"] for e in contamination_errors(result)]
    if bad and not allow_contaminated:
        raise UserError(f"decontaminate: {bad[0]} (report: {result['report']}; "
                        f"pass --force to continue anyway)")
    for line in bad:
        log(f"decontaminate: continuing despite --force: {line}")
