"""One training run as `scratchlm compare` reads it: its metrics rows, its recorded config and IDs, its samples.

A run is named by its train/<id> directory, by a workdir (its newest training, finished or still running) or by
a config (the training that config makes). Everything is read from the training directory, so a run still in
progress compares as well as a finished one.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import UserError
from ..ids import read_json
from ..model.checkpoint import list_checkpoints
from ..monitor.dashboard import resolve_train_dir
from ..monitor.monitor import SUMMARY, read_rows
from ..monitor.sample_diff import load_samples, sample_files


@dataclass
class Run:
    number: int  # 1-based position on the command line; run 1 is the reference
    arg: str  # what the user typed
    train_dir: Path
    chosen: str  # how the argument led to this directory, said in the report
    train_rows: list[dict]  # metrics.jsonl rows with a training loss, in step order
    eval_rows: list[dict]  # metrics.jsonl rows with an evaluation, in step order
    config: dict  # the newest checkpoint's meta.json "config" (or, before the first checkpoint, the config given)
    ids: dict[str, str]  # stage -> artifact ID: data, tokenizer, shards, train
    state: str  # finished | halted | in progress
    meta: dict = field(default_factory=dict)  # the newest checkpoint's meta.json, less its config

    @property
    def id(self) -> str:
        return self.train_dir.name

    @property
    def label(self) -> str:
        return f"#{self.number} {self.id}"

    def samples(self) -> dict[int, list[dict]]:
        """step -> [{"prompt", "completion"}] of every saved generation set."""
        return {step: load_samples(path) for step, path in sample_files(self.train_dir / "samples")}

    def eval_stage(self) -> dict | None:
        """The eval stage's eval.json on this training, in the workdir it lives in (the newest, when several
        [eval] configs scored it); None when the stage has not run on it."""
        found = [m.parent / "eval.json" for m in (self.train_dir.parent.parent / "eval").glob("*/manifest.json")
                 if (m.parent / "eval.json").exists() and read_json(m).get("inputs", {}).get("train") == self.id]
        return read_json(max(found, key=lambda p: p.stat().st_mtime)) if found else None


def _newest_checkpoint_meta(train_dir: Path) -> dict | None:
    found = list_checkpoints(train_dir / "checkpoints")  # oldest first, as resume sees them
    if not found:
        return None
    return read_json(found[-1] / "meta.json")


def _state(train_dir: Path) -> str:
    if (train_dir / SUMMARY).exists():
        return "finished"
    if (train_dir / "diagnosis.json").exists():
        return "halted"
    return "in progress"  # running, or killed: both continue with --resume


def _from_workdir(path: Path) -> tuple[Path, str]:
    # The same rule as `scratchlm report WORKDIR`, so report and compare never pick different trainings.
    chosen = resolve_train_dir(path)
    lineage = path / "lineage.json"
    train = read_json(lineage).get("artifacts", {}).get("train") if lineage.exists() else None
    if train and (path / train["dir"]).resolve() == chosen.resolve():
        return chosen, f"the training of workdir {path}'s last run (its lineage.json)"
    n = len(list((path / "train").glob("*/metrics.jsonl")))
    return chosen, f"the newest of {n} training(s) in workdir {path}: its metrics.jsonl changed last"


def _from_config(path: Path) -> tuple[Path, str, object]:
    from ..stages import load_config, plan_artifacts

    cfg = load_config(path)
    train_dir = plan_artifacts(cfg)["train"].dir
    if not (train_dir / "metrics.jsonl").exists():
        raise UserError(f"{path}: its training {train_dir} has not started; run `scratchlm train -c {path}` first")
    return train_dir, f"the training of config {path}", cfg


def resolve_run(arg: str, number: int) -> Run:
    """The run an argument names; a UserError in one line when it names none."""
    path = Path(arg)
    cfg = None
    if (path / "metrics.jsonl").is_file():
        train_dir, chosen = path, "given as a training directory"
    elif (path / "train").is_dir():
        train_dir, chosen = _from_workdir(path)
    elif path.is_file():
        train_dir, chosen, cfg = _from_config(path)
    else:
        raise UserError(f"{arg}: not a training directory (train/<id>/ with metrics.jsonl), a workdir or a config "
                        "file")
    rows = read_rows(train_dir / "metrics.jsonl")
    meta = _newest_checkpoint_meta(train_dir)
    if meta is None and cfg is None:
        raise UserError(f"{train_dir} has no checkpoint yet, so its config is unknown (each checkpoint's meta.json "
                        "holds it); compare it after its first checkpoint, or name its config file instead")
    if meta is not None and "config" not in meta:  # written before checkpoints recorded their config
        if cfg is None:
            raise UserError(f"{train_dir}: its newest checkpoint's meta.json records no config (an older "
                            "checkpoint); name this run's config file instead")
        meta = None  # the config given says what the run is
    if meta is not None:
        config, ids = meta.pop("config"), meta.get("ids", {})
    else:  # a config given, no checkpoint yet: the config says what the run is
        from ..stages import plan_artifacts

        config, ids = cfg.to_dict(), {s: a.id for s, a in plan_artifacts(cfg).items()}
    config = json.loads(json.dumps(config, default=str))  # tuples and paths as meta.json would hold them
    return Run(number, arg, train_dir.resolve(), chosen,
               sorted((r for r in rows if "loss" in r), key=lambda r: r["step"]),
               sorted((r for r in rows if "eval" in r), key=lambda r: r["step"]),
               config, dict(ids), _state(train_dir), meta or {})


def load_runs(args: list[str]) -> list[Run]:
    if len(args) < 2:
        raise UserError("scratchlm compare needs at least two runs (train/<id> directories, workdirs or configs)")
    runs = [resolve_run(a, i + 1) for i, a in enumerate(args)]
    seen: dict[Path, Run] = {}
    for run in runs:
        if run.train_dir in seen:
            raise UserError(f"{seen[run.train_dir].arg} and {run.arg} are the same training ({run.train_dir})")
        seen[run.train_dir] = run
    return runs
