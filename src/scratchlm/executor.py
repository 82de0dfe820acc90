"""Where the data and tokenizer stages run their tasks: this machine's cores, or a Ray cluster.

An executor maps a module-level function over tasks and yields the results in submission order, with at most
`window` tasks in flight, so the driver holds a bounded number of tasks and results however large the corpus
is. Tasks read and write their inputs and outputs as files under the workdir, so the order of completion never
changes what is written, and the two executors give byte-identical outputs (tests/test_executor.py).

- LocalExecutor: a pool of spawned processes that die with this one (pool.py); one worker, or one task, runs
  in this process, without starting a pool.
- RayExecutor: one Ray task per work unit or chunk (`[data] executor = "ray"`). With `ray_address` empty it
  starts a Ray instance on this machine; with an address ("auto", "ray://head:10001") it joins that cluster,
  whose workers must see the workdir at the same path (a shared file system) and have scratchlm installed.

Cache, resume and accounting stay the driver's: a task's result directory appears whole or not at all
(data/step_cache.py), whichever machine wrote it.
"""
from __future__ import annotations

import os
from collections import deque
from itertools import chain, islice
from typing import TYPE_CHECKING, Any, Callable, Iterable, Iterator, Protocol

from .errors import UserError
from .pool import spawn_pool

if TYPE_CHECKING:
    from .config import Config

class Executor(Protocol):
    workers: int

    def imap(self, fn: Callable[[Any], Any], tasks: Iterable[Any], window: int | None = None) -> Iterator[Any]:
        """fn(task) for each task, in order; at most `window` (default 2 x workers) in flight."""
        ...

    def close(self) -> None: ...


class LocalExecutor:
    """inline=False: a pool even for one worker or one task (a benchmark measuring the pool's cost)."""

    def __init__(self, workers: int = 0, inline: bool = True):
        self.workers = workers or os.cpu_count() or 1
        self.inline = inline
        self._pool = None

    def imap(self, fn: Callable[[Any], Any], tasks: Iterable[Any], window: int | None = None) -> Iterator[Any]:
        tasks = iter(tasks)
        head = list(islice(tasks, 2))
        if self.inline and (self.workers == 1 or len(head) < 2):  # a pool for one task costs more than it saves
            yield from map(fn, chain(head, tasks))
            return
        if self._pool is None:
            self._pool = spawn_pool(self.workers)
        yield from _windowed(lambda t: self._pool.submit(_call, fn, t), lambda f: f.result(), chain(head, tasks),
                             window or 2 * self.workers)

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(cancel_futures=True)  # after a failure, the tasks not started yet are not run
            self._pool = None


class RayExecutor:
    def __init__(self, address: str = "", workers: int = 0):
        try:
            import ray
        except ImportError:
            raise UserError("data.executor = \"ray\" needs Ray: pip install 'scratchlm[ray]' (or pip install ray)") \
                from None
        self._ray = ray
        if not ray.is_initialized():
            # Workers find scratchlm as this process does: installed, or on the PYTHONPATH they inherit locally.
            kwargs: dict[str, Any] = {"address": address} if address else {"num_cpus": workers or os.cpu_count()}
            ray.init(**kwargs, include_dashboard=False, log_to_driver=False, logging_level="ERROR",
                     ignore_reinit_error=True)
        self.workers = workers or int(ray.cluster_resources().get("CPU", 1))
        self._call = ray.remote(num_cpus=1, max_retries=0)(_call)

    def imap(self, fn: Callable[[Any], Any], tasks: Iterable[Any], window: int | None = None) -> Iterator[Any]:
        yield from _windowed(lambda t: self._call.remote(fn, t), self._get, tasks, window or 2 * self.workers)

    def _get(self, ref) -> Any:
        try:
            return self._ray.get(ref)
        except self._ray.exceptions.RayTaskError as e:  # the task's own error (a UserError stays one line)
            raise e.as_instanceof_cause() from None

    def close(self) -> None:
        """Leaves Ray running: the tokenizer stage and the next prepare reuse it; it ends with this process."""


def make_executor(kind: str, workers: int = 0, ray_address: str = "") -> Executor:
    """kind: "local" or "ray" (config.validate checked it); workers 0: every core (of the cluster, on Ray)."""
    return RayExecutor(ray_address, workers) if kind == "ray" else LocalExecutor(workers)


def data_executor(cfg: Config, workers: int | None = None) -> Executor:
    """The executor `[data] executor` names, with `workers` processes (default: data.workers)."""
    d = cfg.data
    return make_executor(d.executor, d.workers if workers is None else workers, d.ray_address)


_in_worker = False


def in_worker() -> bool:
    """True in a pool process or a Ray worker running a task: the place for one thread per process."""
    return _in_worker


def _call(fn: Callable[[Any], Any], task: Any) -> Any:
    global _in_worker
    _in_worker = True
    return fn(task)


def _windowed(submit: Callable[[Any], Any], result: Callable[[Any], Any], tasks: Iterable[Any],
              window: int) -> Iterator[Any]:
    pending: deque = deque()
    for task in tasks:
        pending.append(submit(task))
        if len(pending) >= window:
            yield result(pending.popleft())
    while pending:
        yield result(pending.popleft())
