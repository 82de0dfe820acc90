"""One document step on one work unit, in a worker process: every document in is accounted for, kept, dropped
or diverted, and the result directory appears whole or not at all."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator

import numpy as np
import zstandard

from ..ids import write_json
from .jsonl import ShardWriter
from .ledger import Ledger
from .readers import HtmlReading, read_size
from .step_cache import filling
from .step_context import StepContext, text_size
from .step_docs import DOCS, ChangeWriter, read_docs, whole_size
from .units import Unit

STATS = "stats.json"  # written last: a result directory holding it is complete


@dataclass
class LocalTask:
    step: str
    unit: Unit
    fn: Callable[[Any, StepContext], "dict | None"]
    finish: Callable[[StepContext], None] | None
    settings: Any
    state: Any
    source: Path | None  # the previous step's result directory; None: read the unit's input files
    out: Path
    writes_docs: bool
    whole: bool  # store the documents whole, not as changes to the input (step_docs.py)


def _input(task: LocalTask) -> Iterator[Any]:
    if task.source is not None:
        yield from read_docs(task.source)
        return
    from .readers import read_file

    max_chars = getattr(task.settings, "max_chars", 0)  # the reading step's bound: a huge file is not read
    for f in task.unit.files:
        yield from read_file(Path(f.path), f.doc_id, f.format, task.unit.text_field, f.start, f.end, f.first_line,
                             max_chars, HtmlReading.of(task.unit.html_extract, task.unit.skip_rules))


def _input_bytes(task: LocalTask) -> int | None:
    try:  # a step storing changes needs a few percent of the whole documents
        return task.unit.bytes if task.source is None else whole_size(task.source)
    except OSError:
        return None


def run_local_task(task: LocalTask) -> dict:
    with filling(task.out, _input_bytes(task)) as tmp:
        return _run_into(task, tmp)


def _run_into(task: LocalTask, tmp: Path) -> dict:
    ledger = Ledger(tmp)
    ctx = StepContext(task.step, task.unit, task.settings, task.state, ledger, tmp, cache=task.out.parent.parent)
    st = ctx.stats
    whole = task.writes_docs and (task.whole or task.source is None)
    writer = ShardWriter(tmp, "docs", per_shard=1 << 62, level=1) if whole else None
    changes = ChangeWriter(tmp, task.source) if task.writes_docs and not whole else None
    for item in _input(task):
        st["docs_in"] += 1
        if isinstance(item, dict):
            chars, nbytes = read_size(item) or text_size(item["text"])  # an HTML page: its text before extraction
            st["chars_in"] += chars
            st["bytes_in"] += nbytes
        before = dict(item) if changes else None  # a step may edit the document in place
        doc = task.fn(item, ctx)
        if changes:
            changes.write(before, doc)
        if doc is None:
            continue
        chars, nbytes = text_size(doc["text"])
        st["docs_out"] += 1
        st["chars_out"] += chars
        st["bytes_out"] += nbytes
        if writer:
            writer.write(doc)
    if writer and not writer.close():  # no document survived: an empty file, so the next step reads nothing
        (tmp / DOCS).write_bytes(zstandard.ZstdCompressor().compress(b""))
    if changes:
        changes.close()
    ctx.close_writers()
    if task.finish:
        task.finish(ctx)
    for name, array in ctx.sides.items():
        np.save(tmp / f"{name}.npy", array)
    ledger.close()
    accounted = st["docs_out"] + sum(st["dropped"].values()) + sum(st["diverted"].values())
    assert st["docs_in"] == accounted, f"step {task.step} lost documents on {task.unit.name}"
    stats = {**st, "dropped": dict(st["dropped"]), "diverted": dict(st["diverted"]),
             "removed": {k: {"pieces": v[0], "chars": v[1]} for k, v in st["removed"].items()},
             "notes": {k: dict(v) for k, v in st["notes"].items()}}
    write_json(tmp / STATS, stats)
    return stats
