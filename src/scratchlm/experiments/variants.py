"""A config changed in a few keys (`--set train.learning_rate=1e-3`), and training + evaluating it in the base
config's workdir, so that every stage its change does not touch is shared with the base."""
from __future__ import annotations

import copy
import os
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import UserError
from ..progress import log


@dataclass(frozen=True)
class Override:
    key: str  # dotted: "train.learning_rate", "data.quality.prose.min_words"
    value: Any

    def __str__(self) -> str:
        """The shortest `KEY=VALUE` that parse_set reads back as this override: `train.optimizer=muon`, not
        `train.optimizer="muon"` (a string that TOML would read as something else keeps its quotes)."""
        from ..toml_text import toml_value

        bare = f"{self.key}={self.value}"
        if isinstance(self.value, str) and self.value == self.value.strip() and parse_set(bare).value == self.value:
            return bare
        return f"{self.key}={toml_value(self.value)}"


def parse_set(text: str) -> Override:
    """`KEY=VALUE`, the value read as TOML (`3e-4`, `true`, `[1, 2]`), else taken as a string (`muon`)."""
    key, sep, value = text.partition("=")
    key, value = key.strip(), value.strip()
    if not sep or not key or "." not in key:
        raise UserError(f"--set {text!r}: expected SECTION.KEY=VALUE, e.g. --set train.learning_rate=1e-3")
    try:
        parsed = tomllib.loads(f"v = {value}")["v"]
    except tomllib.TOMLDecodeError:
        parsed = value
    return Override(key, parsed)


def apply_overrides(raw: dict, overrides: list[Override] | tuple[Override, ...]) -> dict:
    """A copy of the parsed TOML with each override written in; the config parser then checks the keys.
    `sources[web]` selects the element named `web` of a list of tables (`scratchlm compare` prints that form)."""
    out = copy.deepcopy(raw)
    for o in overrides:
        *tables, last = o.key.split(".")
        node = out
        for i, name in enumerate(tables):
            node = _select(node, name, o.key) if name.endswith("]") else node.setdefault(name, {})
            if not isinstance(node, dict):  # e.g. data.sources, a list of tables
                raise UserError(f"--set {o.key}: `{'.'.join(tables[:i + 1])}` is not a table; select one element "
                                f"by name (`{name}[NAME]`) or change it in the config file")
        node[last] = o.value
    return out


def _select(node: dict, part: str, key: str) -> dict:
    """`sources[web]`: the table in node["sources"] whose name is "web"."""
    name, _, sel = part[:-1].partition("[")
    items = node.get(name)
    if not isinstance(items, list) or not all(isinstance(t, dict) for t in items):
        raise UserError(f"--set {key}: `{name}` is not a list of tables; `[...]` selects one of those by name")
    for table in items:
        if table.get("name") == sel:
            return table
    names = ", ".join(str(t.get("name")) for t in items) or "none"
    raise UserError(f"--set {key}: no `{name}` named {sel!r}; the names are: {names}")


def variant_config(base: Path, overrides: list[Override] | tuple[Override, ...] = ()):
    """The base config with the overrides, checked like a config file, with the base's path: relative paths and
    the workdir resolve as the base's do."""
    from ..config import config_from_dict, read_config_file
    from ..stages import check_config

    base = Path(base)
    raw = read_config_file(base)
    where = f"{base}" + (f" with --set {' --set '.join(map(str, overrides))}" if overrides else "")
    cfg = config_from_dict(apply_overrides(raw, overrides), where=where)
    cfg.path = base.resolve()
    check_config(cfg, where)
    return cfg


@dataclass(frozen=True)
class TrainedRun:
    ids: dict[str, str]  # stage -> artifact ID
    train_dir: Path
    eval: dict | None  # eval/<id>/eval.json: the final checkpoint's per-domain metrics; None when it diverged
    halted: str | None = None  # why training stopped on a non-finite loss (train/<id>/diagnosis.json)


def train_and_evaluate(cfg, threads: int | None = None, diverged_ok: bool = False) -> TrainedRun:
    """Every stage up to the shards (each skipped when up to date), then train (a run killed half-way continues
    from its last checkpoint) and the eval stage. No plan gate: an experiment's runs are small on purpose.
    diverged_ok: a run that diverges (or diverged before: its diagnosis.json) is returned as such, not retrained
    (the same config and seed diverge again), so that one such run does not stop the other runs of an ablation;
    otherwise its TrainingHalted is raised, as `scratchlm run` does."""
    from ..model.checkpoint import list_checkpoints
    from ..stages import plan_artifacts, stage_eval, stage_train, stage_training_inputs
    from ..train.loop import TrainingHalted

    if threads:
        cfg.train.threads = threads  # operational: not part of the run's ID
    art = plan_artifacts(cfg)
    ids, train_dir = {s: a.id for s, a in art.items()}, art["train"].dir
    if diverged_ok and not art["train"].done and halted_before(train_dir):
        log(f"experiments: {train_dir} diverged before ({train_dir / 'diagnosis.json'}): not retrained (delete "
            "that directory to train it again)")
        return TrainedRun(ids, train_dir, None, f"diverged before: {train_dir / 'diagnosis.json'}")
    stage_training_inputs(cfg, art)
    partial = not art["train"].done and bool(list_checkpoints(train_dir / "checkpoints"))
    try:
        stage_train(cfg, art, resume=partial)
    except TrainingHalted as e:
        if not diverged_ok:
            raise
        log(f"experiments: {e}")
        return TrainedRun(ids, train_dir, None, str(e))
    return TrainedRun(ids, train_dir, stage_eval(cfg, art))


def halted_before(train_dir: Path) -> bool:
    """train.loop._halt writes diagnosis.json into the run's directory when it stops on a non-finite loss."""
    return (Path(train_dir) / "diagnosis.json").is_file()


def _train_one(base: str, overrides: tuple[Override, ...], threads: int) -> dict:
    """Worker-process entry: train_and_evaluate, returned as plain data. The thread count is set here too, not
    only by the training loop: the eval stage runs in this process with it."""
    import torch

    cfg = variant_config(Path(base), overrides)
    threads = min(threads, cfg.train.threads) if cfg.train.threads else threads  # a smaller user setting stays
    torch.set_num_threads(threads)
    run = train_and_evaluate(cfg, threads, diverged_ok=True)
    return {"ids": run.ids, "train_dir": str(run.train_dir), "eval": run.eval, "halted": run.halted}


def describe_variant(overrides) -> str:
    return " ".join(map(str, overrides)) or "the base config"


def available_cpus() -> int:
    """The cores this process may run on (a container's or taskset's share), not the machine's."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def run_variants(base: Path, variants: list[tuple[Override, ...]], jobs: int = 1) -> list[TrainedRun]:
    """Train and evaluate each variant (a tuple of overrides), `jobs` at a time; a run that diverges is returned
    with its halt message (TrainedRun.halted) and no eval. The stages before training run
    first, one variant at a time, so that parallel trainings never race to build the same shards."""
    configs = [variant_config(base, v) for v in variants]
    n = len(variants)
    if jobs <= 1 or n <= 1:
        runs = []
        for i, (v, cfg) in enumerate(zip(variants, configs), 1):  # a line per run: which one a stage log is of
            log(f"experiments: run {i}/{n}: {describe_variant(v)}")
            runs.append(train_and_evaluate(cfg, diverged_ok=True))
        return runs
    from ..stages import plan_artifacts, stage_training_inputs

    for cfg in configs:
        stage_training_inputs(cfg, plan_artifacts(cfg))
    import concurrent.futures
    import multiprocessing

    threads = max(1, available_cpus() // jobs)
    log(f"experiments: {n} runs, {jobs} at a time (at most {threads} CPU thread(s) each)")
    done: dict[int, dict] = {}
    failed: list[tuple[str, BaseException]] = []
    with concurrent.futures.ProcessPoolExecutor(jobs, mp_context=multiprocessing.get_context("spawn")) as pool:
        futures = {}
        for i, v in enumerate(variants, 1):  # worker logs interleave: these lines say which run is which
            log(f"experiments: run {i}/{n} submitted: {describe_variant(v)}")
            futures[pool.submit(_train_one, str(base), tuple(v), threads)] = i
        for future in concurrent.futures.as_completed(futures):
            i = futures[future]
            try:
                done[i] = future.result()
            except Exception as e:  # noqa: BLE001 - collected: the other runs finish, every failure is reported
                failed.append((f"run {i}/{n} ({describe_variant(variants[i - 1])}): {e}", e))
                log(f"experiments: run {i}/{n} failed: {describe_variant(variants[i - 1])}: {e}")
                continue
            state = "diverged" if done[i]["halted"] else "finished"
            log(f"experiments: run {i}/{n} {state}: {describe_variant(variants[i - 1])}")
    if failed:
        bugs = [e for _, e in failed if not isinstance(e, UserError)]
        if bugs:  # not a user mistake: its traceback, once the other runs are done
            raise bugs[0]
        raise UserError(f"{len(failed)} of {n} runs failed: " + "; ".join(text for text, _ in failed))
    return [TrainedRun(d["ids"], Path(d["train_dir"]), d["eval"], d["halted"])
            for d in (done[i] for i in range(1, n + 1))]
