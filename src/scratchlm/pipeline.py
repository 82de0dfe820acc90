"""Artifacts: where a stage's output lives, how its ID is derived, and skipping a stage that is up to date.

An artifact's ID hashes the IDs of its inputs and its own config (stages.py declares both, per stage). A stage whose
output directory `<workdir>/<stage>/<id>/` holds a finished manifest is skipped, with the reason printed; changing one
config value changes the IDs of exactly the stages downstream of it, so exactly those rerun.
"""
from __future__ import annotations

import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Iterable

from .artifact_files import MANIFEST, damage, every_file, record
from .errors import UserError
from .ids import read_json, write_json
from .progress import duration, log

if TYPE_CHECKING:
    from .config import Config


@dataclass
class Artifact:
    stage: str
    id: str
    dir: Path
    inputs: dict[str, str] = field(default_factory=dict)
    command: str = ""  # the command that makes it, for "run X first"
    lineage: tuple[str, ...] = ()  # JSON files of it copied into the workdir's lineage.json
    # The files later stages read, given the directory and the stage's result; every file when None.
    outputs: Callable[[Path, dict], Iterable[Path]] | None = None

    @property
    def done(self) -> bool:
        return (self.dir / MANIFEST).exists()

    def manifest(self) -> dict:
        try:
            return read_json(self.dir / MANIFEST)
        except ValueError as e:
            raise UserError(self.damaged(f"{self.dir / MANIFEST} is not valid JSON ({e})")) from None

    def damage(self, deep: bool = False) -> str | None:
        """What is wrong with the files the manifest lists, or None (also for a manifest from before the list)."""
        return damage(self.dir, self.manifest().get("files", {}), deep)

    def check_whole(self, deep: bool = False) -> None:
        """A UserError naming the first damaged file and the command that rebuilds the artifact."""
        problem = damage(self.dir, self.record_files(), deep)
        if problem:
            raise UserError(self.damaged(problem))

    def damaged(self, problem: str) -> str:
        """The line that says so, with the command that rebuilds it."""
        return f"{self.stage} (id {self.id}) is damaged: {problem}; rebuild it with `{self.command} -c CONFIG --force`"

    def files(self, result: dict) -> dict[str, dict]:
        """The record of its files for its manifest."""
        return record(self.dir, self.outputs(self.dir, result) if self.outputs else every_file(self.dir))

    def record_files(self) -> dict[str, dict]:
        """The files the manifest lists. A manifest written before manifests listed files gets the list, of the
        files as they are now."""
        manifest = self.manifest()
        if "files" not in manifest:
            manifest["files"] = self.files(manifest["result"])
            try:
                write_json(self.dir / MANIFEST, manifest)
            except OSError:  # a workdir read-only to this user: checked again, and recorded, by one that can write
                return manifest["files"]
            log(f"{self.stage}: its manifest predates file lists; {len(manifest['files'])} files recorded as they are")
        return manifest["files"]


def plan_path(workdir: Path, train_id: str) -> Path:
    """Where the plan of a training is saved: one file per train ID (the plan writes it, the trainer reads its
    compile decision)."""
    return Path(workdir) / "plan" / f"{train_id}.json"


def saved_plan(workdir: Path, train_id: str) -> dict:
    """The saved plan of a training, {} when there is none or it is damaged: whoever reads it (the budget, the
    reused timings, the trainer's compile decision) then decides without it, and the next plan overwrites it."""
    path = plan_path(workdir, train_id)
    try:
        return read_json(path) if path.exists() else {}
    except ValueError:
        return {}


def require(art: dict[str, Artifact], stage: str) -> Artifact:
    a = art[stage]
    if not a.done:
        raise UserError(f"the {stage} stage for this config (id {a.id}) has not run yet: run `{a.command} -c "
                        f"CONFIG` or `scratchlm run -c CONFIG`")
    a.check_whole()
    return a


def run_stage(cfg: Config, art: dict[str, Artifact], stage: str, work: Callable[[Path], dict],
              force: bool = False, keep_partial: bool = False) -> dict:
    """Run `work(out_dir)` unless the artifact exists; record the manifest and the lineage."""
    a = art[stage]
    for dep in a.inputs:
        require(art, dep)
    if a.done and not force:
        a.check_whole()
        log(f"{stage}: up to date, skipped (id {a.id}: same inputs and [{stage}] config as {a.dir})")
        _write_lineage(cfg, art)
        return a.manifest()["result"]
    if a.dir.exists() and not keep_partial:
        shutil.rmtree(a.dir)  # a half-finished attempt: its files cannot be trusted
    a.dir.mkdir(parents=True, exist_ok=True)
    log(f"{stage}: running (id {a.id})")
    t0 = time.time()
    result = work(a.dir)
    seconds = time.time() - t0
    write_json(a.dir / MANIFEST, {"stage": stage, "id": a.id, "inputs": a.inputs, "seconds": seconds,
                                  "created": time.strftime("%Y-%m-%dT%H:%M:%S"), "result": result,
                                  "files": a.files(result)})
    _write_lineage(cfg, art)
    log(f"{stage}: done in {duration(seconds)}")
    return result


def _write_lineage(cfg: Config, art: dict[str, Artifact]) -> None:
    path = cfg.workdir / "lineage.json"
    lineage = {"config": str(cfg.path) if cfg.path else None, "artifacts": {}}
    for s, a in art.items():
        if a.done:
            lineage["artifacts"][s] = {"id": a.id, "dir": str(a.dir.relative_to(cfg.workdir)), "inputs": a.inputs}
    for a in art.values():  # e.g. the eval sets, each with an ID that depends only on its own items
        for name in a.lineage if a.done else ():
            lineage[Path(name).stem] = read_json(a.dir / name)
    write_json(path, lineage)
