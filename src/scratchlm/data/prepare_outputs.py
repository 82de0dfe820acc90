"""The stage's outputs, from the last step's results in the cache: train/<unit>.jsonl.zst (hard links),
val/<domain>.jsonl, and one ledger of every step's rejections."""
from __future__ import annotations

import shutil
from collections import Counter, defaultdict
from pathlib import Path

from ..disk import link_or_copy
from .jsonl import read_jsonl, write_jsonl
from .ledger import Ledger
from .split_step import SPLIT
from .step_runner import StepRunner
from .step_docs import DOCS
from .val_split import SPLIT_FROM


def write_outputs(run: StepRunner, out: Path) -> tuple[dict[str, list[str]], dict]:
    """(source -> its train files, domain -> validation docs, chars and pieces)."""
    for sub in ("train", "val"):
        shutil.rmtree(out / sub, ignore_errors=True)
        (out / sub).mkdir(parents=True)
    train_files: dict[str, list[str]] = defaultdict(list)
    val_docs: dict[str, list[dict]] = defaultdict(list)
    for unit in run.units:
        train_files.setdefault(unit.source, [])
        result = run.outputs[SPLIT.name][unit.name]
        if (result / DOCS).exists():
            link_or_copy(result / DOCS, out / "train" / f"{unit.name}.jsonl.zst")
            train_files[unit.source].append(f"{unit.name}.jsonl.zst")
        if (result / "val-00000.jsonl.zst").exists():
            val_docs[unit.domain] += read_jsonl(result / "val-00000.jsonl.zst")
    val_summary = {}
    for domain, docs in sorted(val_docs.items()):
        write_jsonl(out / "val" / f"{domain}.jsonl", docs)
        val_summary[domain] = {"docs": len(docs), "chars": sum(len(x["text"]) for x in docs),
                               "pieces": sum(SPLIT_FROM in x for x in docs)}
    return dict(train_files), val_summary


def merge_ledgers(run: StepRunner, out: Path) -> dict[str, Counter]:
    """Every step's rejections of every unit into the stage's ledger, in step order."""
    for old in out.glob("rejected-*.jsonl.zst"):
        old.unlink()
    ledger = Ledger(out)
    for path in run.ledgers():
        for record in read_jsonl(path):
            ledger.add(record)
    ledger.close()
    return ledger.counts
