"""The one shape of a prepare step, per-document or corpus-wide; prepare.py lists the steps in order.

Every step has
- a name: its folder in the cache, its entry in the stats and the timings;
- settings: a frozen dataclass declared with the step, built by its `of` from the config (and from what earlier
  corpus steps resolved, such as a source's profile). They are all the step reads of the config, and they go
  into its cache key, so a setting the key does not see cannot change a result;
- a cache key: CACHE_VERSION, the step, its settings and its inputs. The result is stored under
  `<workdir>/data/cache/<name>/<key>/`, appears there atomically when complete, and is reused while the key
  holds (step_runner.py);
- a `run`, which answers from that cache or computes.

The two kinds differ in what they read:
- a DocumentStep maps each document of a work unit to the document (maybe edited) or to nothing (dropped, with
  the rule in the ledger), in worker processes. It may edit the document's fields in place, but sets a nested
  value anew rather than changing it: what it changed is found by comparing the fields (step_docs.py). Its
  input is the unit's current documents, so its key chains the unit's previous key, and its `state`: the unit's
  share of what a corpus step decided;
- a CorpusStep needs every document at once (or every one of a source, `per_source`): it reads its units'
  outputs, decides once, and stores result.json, with any files beside it, for a DocumentStep to apply. Its
  input is the keys of every unit it reads.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterator, Protocol

from ..config import Config, SourceConfig
from .units import Unit

if TYPE_CHECKING:
    from .step_context import StepContext
    from .step_runner import StepRunner


@dataclass(frozen=True)
class Decided:
    """What a corpus step decided, for the corpus or for one source."""
    result: Any  # as read back from its result.json, whether just computed or cached
    where: str  # its directory relative to the cache: states name it, and must still fit after the workdir moved

    def file(self, name: str) -> str:
        return f"{self.where}/{name}"


class Corpus:
    """What settings and states are built from: the config, and what the corpus steps decided so far."""

    def __init__(self, cfg: Config):
        self.cfg = cfg
        self.data = cfg.data
        self.sources = {s.name: s for s in cfg.data.sources}
        self.decided: dict[str, dict[str | None, Decided]] = {}  # step -> its source, None for the corpus -> result

    def source(self, unit: Unit) -> SourceConfig:
        return self.sources[unit.source]

    def prose(self, unit: Unit) -> bool:
        """Steps written for text (line rules, language, promotion) leave code files alone."""
        return self.source(unit).filter_profile != "code"

    def decision(self, step: CorpusStep, unit: Unit | None = None) -> Decided | None:
        """What `step` decided for the whole corpus, or for the unit's source (None if it read nothing there)."""
        return self.decided[step.name].get(unit.source if step.per_source else None)


def everywhere(corpus: Corpus, unit: Unit) -> bool:
    return True


@dataclass(frozen=True)
class DocumentStep:
    """Maps each document of a unit to the document, or to None after recording why (StepContext.drop)."""
    name: str
    fn: Callable[[Any, StepContext], dict | None]  # module-level: it is sent to a worker process
    settings: Callable[[Corpus, Unit], Any] | None = None  # a Settings.of: sources differ, so per unit
    state: Callable[[Corpus, Unit], Any] | None = None  # the unit's share of a corpus step's result
    applies: Callable[[Corpus, Unit], bool] = everywhere  # the other units pass through unchanged
    skip: str | None = None  # the `data.skip` entry that switches the step off
    finish: Callable[[StepContext], None] | None = None  # in the worker, after the unit's last document
    writes_docs: bool = True  # False: it only looks, and leaves arrays (StepContext.sides) for a corpus step
    whole: bool = False  # store its documents whole (the stage's output), not what it changed (step_docs.py)
    after: Callable[[StepRunner, Corpus], None] | None = None  # in this process, cached or not: a check, a log

    def runs_on(self, corpus: Corpus, unit: Unit) -> bool:
        return not (self.skip and self.skip in corpus.data.skip) and self.applies(corpus, unit)

    def run(self, runner: StepRunner, corpus: Corpus) -> None:
        DocumentRun((self,)).run(runner, corpus)


@dataclass(frozen=True)
class DocumentRun:
    """Document steps with no corpus step between them: each unit goes through all of them in one worker task,
    each document through every step in turn (step_worker.py). Their results, counts and keys are each step's
    own, as if they had run one by one."""
    steps: tuple[DocumentStep, ...]

    @property
    def name(self) -> str:
        return "+".join(s.name for s in self.steps)

    def run(self, runner: StepRunner, corpus: Corpus) -> None:
        runner.local(list(self.steps), corpus)
        for step in self.steps:
            if step.after:
                step.after(runner, corpus)


def in_runs(steps: tuple[Step, ...]) -> list[Step]:
    """`steps` with each stretch of consecutive document steps made one DocumentRun."""
    out: list[Step] = []
    for step in steps:
        if isinstance(step, DocumentStep) and out and isinstance(out[-1], DocumentRun):
            out[-1] = DocumentRun(out[-1].steps + (step,))
        else:
            out.append(DocumentRun((step,)) if isinstance(step, DocumentStep) else step)
    return out


@dataclass
class CorpusContext:
    """What a corpus step's `decide` sees besides its settings: its units, their documents, where to write."""
    runner: StepRunner
    corpus: Corpus
    settings: Any
    units: list[Unit]
    out: Path  # files written here are kept beside result.json

    def docs(self) -> Iterator[tuple[Unit, dict]]:
        return self.runner.iter_docs(self.units)

    def docs_total(self) -> int | None:
        """About how many documents docs() yields (those of the last step that ran on them), for a progress bar."""
        if not self.runner.steps:
            return None
        last = self.runner.stats[self.runner.steps[-1]]
        return sum(last.get(u.name, {}).get("docs_out", 0) for u in self.units) or None


@dataclass(frozen=True)
class CorpusStep:
    """Reads many units' outputs and decides once, for the steps after it: a DocumentStep that applies the
    decision (its `state`), or the settings it resolves (a source's profile)."""
    name: str
    decide: Callable[[CorpusContext], Any]  # -> a result for json
    settings: Callable[[Corpus], Any] | None = None  # a Settings.of
    applies: Callable[[Corpus, Unit], bool] = everywhere  # the units it reads
    reads: DocumentStep | None = None  # an observing step whose outputs it reads; None: the units' documents
    per_source: bool = False  # one decision per source instead of one for the whole corpus
    after: Callable[[StepRunner, Corpus], None] | None = None  # in this process, cached or not: a log line

    def run(self, runner: StepRunner, corpus: Corpus) -> None:
        runner.decide(self, corpus)
        if self.after:
            self.after(runner, corpus)


class Step(Protocol):
    """Either kind: what prepare.py runs in order."""
    @property
    def name(self) -> str: ...

    def run(self, runner: StepRunner, corpus: Corpus) -> None: ...
