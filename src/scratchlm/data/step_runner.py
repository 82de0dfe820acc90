"""Runs the prepare stage's per-shard steps: in parallel over work units, cached, resumable, fully accounted.

A local step maps one document to the document (maybe edited) or to nothing (dropped, with the rule in the
ledger). Each (step, unit) result is stored under `<workdir>/data/cache/<step>/<key>/`, where the key hashes
the unit's previous key, the step's settings and any corpus-wide state the step consumes. So:
- a prepare that was killed reruns only the (step, unit) pairs that had not finished (a result directory
  appears by an atomic rename, with its stats.json, or not at all; the temp directories of a failed or killed
  run are removed);
- changing a late filter's settings changes the keys from that step on: earlier steps are read from cache.

Global steps (repeated lines, dedup, the validation draw) live in prepare.py; they read the units' outputs
between two runs of local steps and hand each unit the part of their result it needs.
"""
from __future__ import annotations

import errno
import os
import re
import shutil
import time
from collections import Counter, defaultdict
from concurrent.futures import ProcessPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator

import numpy as np
import zstandard

from .. import __version__
from .. import disk
from ..errors import UserError
from ..ids import content_id, read_json, write_json
from ..pool import spawn_pool
from ..progress import bar, log
from .jsonl import ShardWriter, read_jsonl
from .clean.structure import piece_contexts
from .ledger import Ledger
from .units import Unit

CACHE_VERSION = f"{__version__}/5"  # bump when a step's code changes what it produces: old results are not reused
DOCS = "docs-00000.jsonl.zst"
STATS = "stats.json"


def new_stats() -> dict:
    return {"docs_in": 0, "chars_in": 0, "bytes_in": 0, "docs_out": 0, "chars_out": 0, "bytes_out": 0,
            "dropped": Counter(), "diverted": Counter(), "removed": defaultdict(lambda: [0, 0]), "notes": defaultdict(Counter)}


def text_size(text: str) -> tuple[int, int]:
    return len(text), len(text.encode("utf-8", "surrogatepass"))


def disk_full(path: Path, needed: int | None = None) -> UserError:
    return UserError(f"{disk.disk_full(path, needed, 'the size of its input')}; free some space or point "
                     "run.workdir at a larger disk, then run again (finished steps are kept)")


_TEMP_NAME = re.compile(r"^\..+\.tmp(\d+)(\.npy)?$")  # what temp_beside and the global steps name their temps


@contextmanager
def temp_beside(out: Path, needed: int | None = None) -> Iterator[Path]:
    """A fresh temp directory next to `out`, to be renamed into place when complete; removed if anything fails
    (a full disk then says so in one line)."""
    tmp = out.with_name(f".{out.name}.tmp{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    try:
        tmp.mkdir(parents=True)
        yield tmp
    except OSError as e:
        if e.errno == errno.ENOSPC:
            raise disk_full(Path(e.filename or tmp), needed) from None
        raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)  # after a success it was renamed: nothing left to remove


def _alive(pid: int) -> bool:
    if pid == os.getpid():
        return False  # an earlier process that had our number
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        pass
    return True


def remove_stale_temps(cache: Path) -> list[Path]:
    """Remove the temp directories and files a killed or crashed run left in the cache. A finished entry is never
    named like one, and one whose process still runs is left alone."""
    removed = []
    for entry in cache.glob("*/.*"):
        match = _TEMP_NAME.match(entry.name)
        if match and not _alive(int(match.group(1))):
            shutil.rmtree(entry) if entry.is_dir() else entry.unlink(missing_ok=True)
            removed.append(entry)
    return removed


class StepContext:
    """What a step function sees besides the document: its unit, settings and state, and the ledger."""

    def __init__(self, step: str, unit: Unit, settings: Any, state: Any, ledger: Ledger, directory: Path,
                 cache: Path):
        self.step, self.unit, self.settings, self.state, self.ledger = step, unit, settings, state, ledger
        self.directory = directory
        self.cache = cache  # a state naming a cached file names it relative to this, so a moved workdir fits
        self.stats = new_stats()
        self.sides: dict[str, np.ndarray] = {}  # extra arrays a step leaves for a later global step
        self.memo: dict[str, Any] = {}  # per-task scratch space (a set built once from the state, ...)
        self._writers: dict[str, ShardWriter] = {}

    def divert(self, name: str, doc: dict) -> None:
        """Send a document to another output (`<name>-00000.jsonl.zst`), e.g. the validation split."""
        self._writer(name).write(doc)
        self.stats["diverted"][name] += 1

    def divert_piece(self, name: str, piece: dict) -> None:
        """Send a piece of a document whose rest the step returns (the held-out tail of a long document). It is
        counted in the notes, not as a document, so every document in is still one document out."""
        self._writer(name).write(piece)
        self.note(f"{name}_piece", "docs")
        self.note(f"{name}_piece", "chars", len(piece["text"]))

    def _writer(self, name: str) -> ShardWriter:
        if name not in self._writers:
            self._writers[name] = ShardWriter(self.directory, name, per_shard=1 << 62, level=1)
        return self._writers[name]

    def close_writers(self) -> None:
        for w in self._writers.values():
            w.close()

    def drop(self, doc_id: str, rule: str, detail: str = "", text: str = "", score: float | None = None) -> None:
        self.stats["dropped"][rule] += 1
        self.ledger.reject(source=self.unit.source, doc_id=doc_id, stage=self.step, rule=rule, detail=detail,
                           text=text, score=score)

    def removed(self, doc_id: str, rule: str, pieces: list[str], level: str, detail: str = "",
                original: str | None = None) -> None:
        """Record the lines or paragraphs a step cut out of a kept document; with the `original` text, each
        record also gets the piece's neighbouring lines (what an auditor needs to judge the cut)."""
        if not pieces:
            return
        entry = self.stats["removed"][rule]
        entry[0] += len(pieces)
        entry[1] += sum(len(p) for p in pieces)
        contexts = piece_contexts(original, pieces) if original is not None else [""] * len(pieces)
        for piece, around in zip(pieces, contexts):
            self.ledger.reject(source=self.unit.source, doc_id=doc_id, stage=self.step, rule=rule, detail=detail,
                               text=piece, level=level, context=around)

    def skips(self, rule: str) -> bool:
        """The unit's source switched this rule off (`skip_rules` on the source)."""
        return rule in self.unit.skip_rules

    def note(self, key: str, value: str, n: int = 1) -> None:
        self.stats["notes"][key][value] += n


StepFn = Callable[[Any, StepContext], "dict | None"]
FinishFn = Callable[[StepContext], None]


@dataclass
class LocalTask:
    step: str
    unit: Unit
    fn: StepFn
    finish: FinishFn | None
    settings: Any
    state: Any
    source: Path | None  # the previous step's documents; None: read the unit's input files
    out: Path
    writes_docs: bool


def _input(task: LocalTask) -> Iterator[Any]:
    if task.source is not None:
        yield from read_jsonl(task.source)
        return
    from .readers import read_file

    max_chars = getattr(task.settings, "max_chars", 0)  # the reading step's bound: a huge file is not read
    for f in task.unit.files:
        yield from read_file(Path(f.path), f.doc_id, f.format, task.unit.text_field, f.start, f.end, f.first_line,
                             max_chars)


def _input_bytes(task: LocalTask) -> int | None:
    try:
        return task.unit.bytes if task.source is None else task.source.stat().st_size
    except OSError:
        return None


def run_local_task(task: LocalTask) -> dict:
    """One step on one unit, in a worker process. The result directory appears atomically when complete."""
    with temp_beside(task.out, _input_bytes(task)) as tmp:
        stats = _run_into(task, tmp)
        shutil.rmtree(task.out, ignore_errors=True)
        os.replace(tmp, task.out)
    return stats


def _run_into(task: LocalTask, tmp: Path) -> dict:
    ledger = Ledger(tmp)
    ctx = StepContext(task.step, task.unit, task.settings, task.state, ledger, tmp, cache=task.out.parent.parent)
    st = ctx.stats
    writer = ShardWriter(tmp, "docs", per_shard=1 << 62, level=1) if task.writes_docs else None
    for item in _input(task):
        st["docs_in"] += 1
        if isinstance(item, dict):
            chars, nbytes = text_size(item["text"])
            st["chars_in"] += chars
            st["bytes_in"] += nbytes
        doc = task.fn(item, ctx)
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
    ctx.close_writers()
    if task.finish:
        task.finish(ctx)
    for name, array in ctx.sides.items():
        np.save(tmp / f"{name}.npy", array)
    ledger.close()
    accounted = st["docs_out"] + sum(st["dropped"].values()) + sum(st["diverted"].values())
    assert st["docs_in"] == accounted, f"step {task.step} lost documents on {task.unit.name}"
    stats = {**st, "dropped": dict(st["dropped"]), "diverted": dict(st["diverted"]), "removed": {k: {"pieces": v[0], "chars": v[1]}
                                                              for k, v in st["removed"].items()},
             "notes": {k: dict(v) for k, v in st["notes"].items()}}
    write_json(tmp / STATS, stats)
    return stats


class StepRunner:
    """Holds, per unit, the current documents and cache key, and the stats of every step run so far."""

    def __init__(self, units: list[Unit], cache: Path, workers: int):
        self.units = units
        self.cache = cache
        self.workers = workers or os.cpu_count() or 1
        if stale := remove_stale_temps(cache):
            log(f"data: removed {len(stale)} temp entries an interrupted run left in {cache}")
        self.keys = {u.name: u.key for u in units}
        self.docs: dict[str, Path | None] = {u.name: None for u in units}
        self.stats: dict[str, dict[str, dict]] = {}  # step -> unit name -> stats
        self.outputs: dict[str, dict[str, Path]] = {}  # step -> unit name -> result directory
        self.steps: list[str] = []
        self.observers: set[str] = set()  # steps that only look (write no documents)
        self.cached: dict[str, int] = {}  # step -> units answered from cache
        self.seconds: dict[str, float] = {}  # step -> wall time, global steps included (see timed)
        self._pool: ProcessPoolExecutor | None = None

    def local(self, step: str, fn: StepFn, settings: Any = None, state: Callable[[Unit], Any] | None = None,
              applies: Callable[[Unit], bool] = lambda unit: True, finish: FinishFn | None = None,
              writes_docs: bool = True) -> None:
        """Run `fn` over every document of every unit where `applies(unit)`; other units pass through."""
        t0 = time.time()
        tasks, self.outputs[step], self.stats[step] = [], {}, {}
        self.cached[step] = 0
        for u in self.units:
            if not applies(u):
                continue
            unit_state = state(u) if state else None
            key = content_id(CACHE_VERSION, self.keys[u.name], step, settings, unit_state, sorted(u.skip_rules))
            out = self.cache / step / key
            self.outputs[step][u.name] = out
            if (out / STATS).exists():
                self.stats[step][u.name] = read_json(out / STATS)
                self.cached[step] += 1
            else:
                tasks.append(LocalTask(step, u, fn, finish, settings, unit_state, self.docs[u.name], out,
                                       writes_docs))
            if writes_docs:
                self.keys[u.name] = key
        for task, stats in zip(tasks, self._map(tasks, step)):
            self.stats[step][task.unit.name] = stats
        if writes_docs:
            for name, out in self.outputs[step].items():
                self.docs[name] = out / DOCS
        self.steps.append(step)
        self.seconds[step] = time.time() - t0
        if not writes_docs:
            self.observers.add(step)

    def timed(self, name: str, fn: Callable, *args):
        """Run a global step and record its wall time."""
        t0 = time.time()
        result = fn(*args)
        self.seconds[name] = time.time() - t0
        return result

    def _map(self, tasks: list[LocalTask], step: str) -> Iterator[dict]:
        if not tasks:
            return iter(())
        if self.workers == 1 or len(tasks) == 1:
            return (run_local_task(t) for t in bar(tasks, desc=step, unit="unit"))
        if self._pool is None:
            self._pool = spawn_pool(self.workers)  # spawned, and its workers die with this process
        return bar(self._pool.map(run_local_task, tasks), total=len(tasks), desc=step, unit="unit")

    def iter_docs(self, units: list[Unit] | None = None) -> Iterator[tuple[Unit, dict]]:
        """Every current document, unit by unit in input order (what a global step reads)."""
        for u in units or self.units:
            if self.docs[u.name] is not None:
                for doc in read_jsonl(self.docs[u.name]):
                    yield u, doc

    def ledgers(self) -> Iterator[Path]:
        for step in self.steps:
            for u in self.units:
                out = self.outputs[step].get(u.name)
                if out is not None:
                    yield from sorted(out.glob("rejected-*.jsonl.zst"))

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(cancel_futures=True)  # after a failure, the units not started yet are not run
            self._pool = None
