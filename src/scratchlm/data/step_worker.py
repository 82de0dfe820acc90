"""A run of document steps on one work unit, in a worker process: each document goes through every step of the
run in turn, so a step reads what the one before it made without a trip through the disk, and the text is parsed
once for all of them (structure.parse keeps the last text's lines). Each step still has its own result
directory, counts and ledger: every document in is accounted for, kept, dropped or diverted, and each result
appears whole or not at all."""
from __future__ import annotations

import time
from contextlib import ExitStack
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
from .step_docs import DOCS, ChangeWriter, input_chain, read_docs, relative, whole_size
from .units import Unit

STATS = "stats.json"  # written last: a result directory holding it is complete


@dataclass
class StepTask:
    """One step of a run, as its worker needs it."""
    step: str
    fn: Callable[[Any, StepContext], "dict | None"]
    finish: Callable[[StepContext], None] | None
    settings: Any
    state: Any
    out: Path
    writes_docs: bool
    whole: bool  # store the documents whole, not as changes to the input (step_docs.py)


@dataclass
class LocalTask:
    """A unit through a run of steps: `steps` in order, none of them cached, or every one after the first that
    is not (what a step reads must be what the step before it made in this task)."""
    unit: Unit
    source: Path | None  # the result directory the run reads; None: read the unit's input files
    steps: list[StepTask]


def _input(task: LocalTask) -> Iterator[Any]:
    if task.source is not None:
        yield from read_docs(task.source)
        return
    from .readers import read_file

    max_chars = getattr(task.steps[0].settings, "max_chars", 0)  # the reading step's bound: a huge file is not read
    for f in task.unit.files:
        yield from read_file(Path(f.path), f.doc_id, f.format, task.unit.text_field, f.start, f.end, f.first_line,
                             max_chars, HtmlReading.of(task.unit.html_extract, task.unit.skip_rules))


def _input_bytes(task: LocalTask) -> int | None:
    try:  # a step storing changes needs a few percent of the whole documents
        return task.unit.bytes if task.source is None else whole_size(task.source)
    except OSError:
        return None


def run_local_task(task: LocalTask) -> list[dict]:
    """Each step's stats, with the seconds its function took (`seconds`: how the run's time is shared out)."""
    needed = _input_bytes(task)
    with ExitStack() as stack:
        # Entered last to first, so the results appear (renamed into place) in step order: a run killed in
        # between leaves a finished step's inputs in place.
        tmps = [stack.enter_context(filling(step.out, needed)) for step in reversed(task.steps)][::-1]
        outs = [_Output(task, step, tmp, chain) for step, tmp, chain in zip(task.steps, tmps, _chains(task))]
        for item in _input(task):
            for out in outs:
                item = out.take(item)
                if item is None:
                    break
        return [out.close() for out in outs]


def _chains(task: LocalTask) -> Iterator[list[str] | None]:
    """What each step of the run reads, as step_docs names it: the run's source, then the results of the steps
    before it that write documents (still being written, so named here, not read from their input.json).
    None: the unit's input files."""
    chain = input_chain(task.source) if task.source is not None else None
    for step in task.steps:
        yield chain
        if step.writes_docs:
            stored_whole = step.whole or chain is None
            chain = [relative(step.out)] if stored_whole else chain + [relative(step.out)]


class _Output:
    """One step's share of the run: its function, its counts, its ledger and what it stores."""

    def __init__(self, task: LocalTask, step: StepTask, tmp: Path, chain: list[str] | None):
        self.step, self.unit = step, task.unit
        self.ledger = Ledger(tmp)
        self.ctx = StepContext(step.step, task.unit, step.settings, step.state, self.ledger, tmp,
                               cache=step.out.parent.parent)
        self.tmp = tmp
        whole = step.writes_docs and (step.whole or chain is None)
        self.writer = ShardWriter(tmp, "docs", per_shard=1 << 62, level=1) if whole else None
        self.changes = ChangeWriter(tmp, chain) if step.writes_docs and not whole else None
        self.seconds = 0.0

    def take(self, item: Any) -> dict | None:
        st = self.ctx.stats
        st["docs_in"] += 1
        if isinstance(item, dict):
            chars, nbytes = read_size(item) or text_size(item["text"])  # an HTML page: its text before extraction
            st["chars_in"] += chars
            st["bytes_in"] += nbytes
        before = dict(item) if self.changes else None  # a step may edit the document in place
        t0 = time.perf_counter()
        doc = self.step.fn(item, self.ctx)
        self.seconds += time.perf_counter() - t0
        if self.changes:
            self.changes.write(before, doc)
        if doc is None:
            return None
        chars, nbytes = text_size(doc["text"])
        st["docs_out"] += 1
        st["chars_out"] += chars
        st["bytes_out"] += nbytes
        if self.writer:
            self.writer.write(doc)
        return doc

    def close(self) -> dict:
        st, tmp = self.ctx.stats, self.tmp
        if self.writer and not self.writer.close():  # nothing survived: an empty file, the next step reads nothing
            (tmp / DOCS).write_bytes(zstandard.ZstdCompressor().compress(b""))
        if self.changes:
            self.changes.close()
        self.ctx.close_writers()
        t0 = time.perf_counter()
        if self.step.finish:
            self.step.finish(self.ctx)
        for name, array in self.ctx.sides.items():
            np.save(tmp / f"{name}.npy", array)
        self.seconds += time.perf_counter() - t0
        self.ledger.close()
        accounted = st["docs_out"] + sum(st["dropped"].values()) + sum(st["diverted"].values())
        assert st["docs_in"] == accounted, f"step {self.step.step} lost documents on {self.unit.name}"
        stats = {**st, "dropped": dict(st["dropped"]), "diverted": dict(st["diverted"]),
                 "removed": {k: {"pieces": v[0], "chars": v[1]} for k, v in st["removed"].items()},
                 "notes": {k: dict(v) for k, v in st["notes"].items()}}
        write_json(tmp / STATS, stats)
        return {**stats, "seconds": self.seconds}
