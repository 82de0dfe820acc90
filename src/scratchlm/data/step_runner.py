"""Runs the prepare stage's steps (step.py): document steps in parallel over work units (consecutive ones
together, a unit through all of them in one task), corpus steps once; all cached, resumable, fully accounted.

A document step's result on a unit is stored under `<workdir>/data/cache/<step>/<key>/`, where the key hashes
the unit's previous key, the step's settings for the unit and its state (its share of a corpus step's
decision); a corpus step's under `<workdir>/data/cache/<step>/<key>/` too, the key hashing its settings and the
keys of every unit it reads. So:
- a prepare that was killed reruns only what had not finished (a result directory appears by an atomic rename,
  with its stats.json or result.json, or not at all; the temp directories of a failed or killed run are
  removed);
- changing a late filter's settings changes the keys from that step on: earlier steps are read from cache.
"""
from __future__ import annotations

import ctypes
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Callable, Iterator

from .. import __version__
from ..executor import Executor
from ..ids import content_id, read_json, write_json
from ..progress import bar, log
from .step import Corpus, CorpusContext, CorpusStep, Decided, DocumentStep
from .step_cache import filling, remove_stale_temps
from .step_docs import read_docs
from .step_worker import STATS, LocalTask, StepTask, run_local_task
from .units import Unit

CACHE_VERSION = f"{__version__}/10"  # bump when a step's code changes what it produces: old results are not reused
RESULT = "result.json"  # a corpus step's decision, written last: a directory holding it is complete


def peak_rss_mib() -> float:
    """This process's peak resident memory so far (0 where the platform does not say)."""
    try:
        import resource
    except ImportError:  # Windows
        return 0.0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / (1 << 20 if sys.platform == "darwin" else 1 << 10)  # macOS counts bytes, Linux KiB


def release_free_memory() -> None:
    """Hand the heap's free pages back to the system. glibc keeps what a step freed (a corpus step's sort
    buckets, a run of the draw order) in this process, so every later step would start above it; measured after
    find_duplicates at 1M documents: 11 MiB. A no-op where the C library has no malloc_trim."""
    try:
        ctypes.CDLL(None).malloc_trim(0)
    except (AttributeError, OSError, TypeError):  # macOS, musl, Windows
        pass


class StepRunner:
    """Holds, per unit, the current documents and cache key, and the stats of every document step run so far."""

    def __init__(self, units: list[Unit], cache: Path, executor: Executor):
        self.units = units
        self.cache = cache
        self.executor = executor  # where document steps run: this machine's cores, or a Ray cluster
        self.workers = executor.workers
        if stale := remove_stale_temps(cache):
            log(f"data: removed {len(stale)} temp entries an interrupted run left in {cache}")
        self.keys = {u.name: u.key for u in units}
        self.docs: dict[str, Path | None] = {u.name: None for u in units}  # the result holding its documents
        self.stats: dict[str, dict[str, dict]] = {}  # step -> unit name -> stats
        self.outputs: dict[str, dict[str, Path]] = {}  # step -> unit name -> result directory
        self.steps: list[str] = []  # the document steps, in the order they ran
        self.observers: set[str] = set()  # steps that only look (write no documents)
        self.cached: dict[str, int] = {}  # step -> units answered from cache
        self.seconds: dict[str, float] = {}  # step -> wall time, corpus steps included
        # step -> this process's peak resident memory when it ended; "start": before the first
        self.peak_mib: dict[str, float] = {"start": peak_rss_mib()}

    def local(self, steps: list[DocumentStep], corpus: Corpus | None = None) -> None:
        """Run consecutive document steps over every document of every unit they run on, each unit through all
        of them in one task (step_worker.py); other units pass through. A step whose result is cached is read
        from cache, unless a step before it on the unit reruns: then it reruns too, in that unit's task."""
        t0 = time.time()
        for step in steps:
            self.outputs[step.name], self.stats[step.name], self.cached[step.name] = {}, {}, 0
        tasks = []
        for u in self.units:
            source, todo = self.docs[u.name], []
            for step in steps:
                if not step.runs_on(corpus, u):
                    continue
                settings = step.settings(corpus, u) if step.settings else None
                state = step.state(corpus, u) if step.state else None
                key = content_id(CACHE_VERSION, self.keys[u.name], step.name, settings, state, sorted(u.skip_rules))
                out = self.cache / step.name / key
                self.outputs[step.name][u.name] = out
                if todo or not (out / STATS).exists():
                    todo.append(StepTask(step.name, step.fn, step.finish, settings, state, out, step.writes_docs,
                                         step.whole))
                else:
                    self.stats[step.name][u.name] = read_json(out / STATS)
                    self.cached[step.name] += 1
                    source = out if step.writes_docs else source
                if step.writes_docs:
                    self.keys[u.name] = key
            if todo:
                tasks.append(LocalTask(u, source, todo))
        # The largest units first, all handed to the pool at once: a worker that finishes takes the next unit
        # instead of waiting for the one in front of it, and no large unit starts last (units are up to unit_mb,
        # a small source's one unit much less: 3-64 MB on the 326 MB corpus of bench/vs_datatrove.py).
        tasks.sort(key=lambda t: -t.unit.bytes)
        seconds = dict.fromkeys((s.name for s in steps), 0.0)
        for task, results in zip(tasks, self._map(tasks, "+".join(s.name for s in steps))):
            for spec, stats in zip(task.steps, results):
                seconds[spec.step] += stats.pop("seconds")
                self.stats[spec.step][task.unit.name] = stats
        for step in steps:
            if step.writes_docs:
                self.docs.update(self.outputs[step.name])
            else:
                self.observers.add(step.name)
            self.steps.append(step.name)
        self._measured([s.name for s in steps], t0, seconds)

    def decide(self, step: CorpusStep, corpus: Corpus) -> None:
        """Run `step` once on the units it reads (once per source, for a per-source step), unless cached."""
        t0 = time.time()
        read = self.outputs[step.reads.name] if step.reads else None
        settings = step.settings(corpus) if step.settings else None
        groups: dict[str | None, list[Unit]] = defaultdict(list) if step.per_source else {None: []}
        for u in self.units:
            if step.applies(corpus, u) and (read is None or u.name in read):
                groups[u.source if step.per_source else None].append(u)
        decided = {}
        for group, units in groups.items():
            # what it reads of each unit, by content ID: the observing step's output, or the current documents
            inputs = [read[u.name].name if read is not None else self.keys[u.name] for u in units]
            key = content_id(CACHE_VERSION, step.name, group, settings, inputs)
            out = self.cache / step.name / key
            if not (out / RESULT).exists():
                with filling(out) as tmp:
                    write_json(tmp / RESULT, step.decide(CorpusContext(self, corpus, settings, units, tmp)))
            decided[group] = Decided(read_json(out / RESULT), f"{step.name}/{key}")
        corpus.decided[step.name] = decided
        self._measured([step.name], t0)

    def timed(self, name: str, fn: Callable, *args):
        """Run one of the stage's last jobs (writing the outputs, ...) and record its wall time."""
        t0 = time.time()
        result = fn(*args)
        self._measured([name], t0)
        return result

    def _measured(self, names: list[str], t0: float, worked: dict[str, float] | None = None) -> None:
        """Wall time, and the driver's peak memory so far: the step that raised it is the one that holds the
        corpus-sized state (workers hold one unit each). Steps that ran together share the wall time in
        proportion to the seconds their functions took in the workers (`worked`), evenly if none did."""
        wall, total = time.time() - t0, sum((worked or {}).values())
        for name in names:
            self.seconds[name] = wall * (worked[name] / total if total else 1 / len(names))
            self.peak_mib[name] = peak_rss_mib()
        release_free_memory()

    def _map(self, tasks: list[LocalTask], desc: str) -> Iterator[list[dict]]:
        # a task is a few paths and settings, its result a unit's counts: nothing to hold back
        return bar(self.executor.imap(run_local_task, tasks, window=max(len(tasks), 1)), total=len(tasks),
                   desc=desc, unit="unit")

    def iter_docs(self, units: list[Unit] | None = None) -> Iterator[tuple[Unit, dict]]:
        """Every current document, unit by unit in input order (what a corpus step reads)."""
        for u in self.units if units is None else units:
            if self.docs[u.name] is not None:
                for doc in read_docs(self.docs[u.name]):
                    yield u, doc

    def ledgers(self) -> Iterator[Path]:
        for step in self.steps:
            for u in self.units:
                out = self.outputs[step].get(u.name)
                if out is not None:
                    yield from sorted(out.glob("rejected-*.jsonl.zst"))

    def close(self) -> None:
        self.executor.close()
