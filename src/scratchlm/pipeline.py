"""The stage graph: which stage consumes which artifact, how each artifact's ID is derived, and skipping.

An artifact's ID hashes the IDs of its inputs and its own config section. A stage whose output directory
`<workdir>/<stage>/<id>/` holds a finished manifest is skipped, with the reason printed; changing one config
value changes the IDs of exactly the stages downstream of it, so exactly those rerun.
"""
from __future__ import annotations

import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from .config import Config
from .errors import UserError
from .ids import DigestCache, content_id, files_id, read_json, write_json
from .progress import duration, log

STAGES = ("data", "decontaminate", "tokenizer", "shards", "train", "eval", "report")
COMMAND = {"data": "scratchlm data prepare", "decontaminate": "scratchlm data decontaminate", "tokenizer": "scratchlm tokenizer train",
           "shards": "scratchlm tokenizer encode", "train": "scratchlm train", "eval": "scratchlm eval",
           "report": "scratchlm report"}
MANIFEST = "manifest.json"
NOT_SEMANTIC = {"train": {"threads", "log_every", "prefetch", "checkpoint_minutes"},
                "data": {"workers"}, "shards": {"workers"},
                # used by `scratchlm eval --checkpoint` / `eval human`, not by the pipeline's eval stage
                "eval": {"diversity_samples", "humaneval", "humaneval_problems", "humaneval_samples",
                         "humaneval_max_new_tokens", "humaneval_temperature", "sandbox_timeout_s",
                         "sandbox_memory_mb", "tasks", "human_criteria", "human_scale",
                         "sets"},  # [[eval.sets]] belong to the decontaminate stage's ID
                "decontaminate": {"workers"}}  # keys that cannot change what a stage produces


@dataclass
class Artifact:
    stage: str
    id: str
    dir: Path
    inputs: dict[str, str] = field(default_factory=dict)

    @property
    def done(self) -> bool:
        return (self.dir / MANIFEST).exists()

    def manifest(self) -> dict:
        return read_json(self.dir / MANIFEST)


def _section(cfg: Config, name: str) -> dict:
    sec = cfg.section(name)
    for key in NOT_SEMANTIC.get(name, ()):
        sec.pop(key, None)
    return sec


def plan_artifacts(cfg: Config) -> dict[str, Artifact]:
    from .data.decontaminate import eval_set_inputs
    from .data.readers import source_files
    from .tokenizer.bpe import DOCUMENT_WRAP

    work = cfg.workdir
    cache = DigestCache(work / ".digests.json")
    sources = []
    for src in cfg.data.sources:
        files = source_files(src, cfg.base_dir)
        sources.append({"source": vars(src), "files": files_id(files, cache, cfg.base_dir)})
    eval_sets = eval_set_inputs(cfg, cache)
    cache.save()
    data_cfg = {k: v for k, v in _section(cfg, "data").items() if k != "sources"}
    ids: dict[str, str] = {}
    inputs: dict[str, dict[str, str]] = {}

    def make(stage: str, deps: list[str], *config) -> None:
        inputs[stage] = {d: ids[d] for d in deps}
        ids[stage] = content_id(stage, inputs[stage], *config)

    make("data", [], sources, data_cfg)
    make("decontaminate", ["data"], _section(cfg, "decontaminate"), eval_sets)
    make("tokenizer", ["decontaminate"], _section(cfg, "tokenizer"))
    # How a document is wrapped is part of what the shards are: hashing it makes a workdir tokenized under an
    # older convention (BOS-only documents) re-encode, instead of training on shards that never show an EOS.
    make("shards", ["decontaminate", "tokenizer"], _section(cfg, "shards"), {"document": DOCUMENT_WRAP})
    make("train", ["shards", "tokenizer"], _section(cfg, "model"), _section(cfg, "train"), cfg.eval.prompts)
    make("eval", ["train", "shards"], _section(cfg, "eval"))
    make("report", ["eval", "train", "shards", "tokenizer", "data"])
    return {s: Artifact(s, ids[s], work / s / ids[s], inputs[s]) for s in STAGES}


def require(art: dict[str, Artifact], stage: str) -> Artifact:
    a = art[stage]
    if not a.done:
        raise UserError(f"the {stage} stage for this config (id {a.id}) has not run yet: run `{COMMAND[stage]} -c "
                        f"CONFIG` or `scratchlm run -c CONFIG`")
    return a


def run_stage(cfg: Config, art: dict[str, Artifact], stage: str, work: Callable[[Path], dict],
              force: bool = False, keep_partial: bool = False) -> dict:
    """Run `work(out_dir)` unless the artifact exists; record the manifest and the lineage."""
    a = art[stage]
    for dep in a.inputs:
        require(art, dep)
    if a.done and not force:
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
                                  "created": time.strftime("%Y-%m-%dT%H:%M:%S"), "result": result})
    _write_lineage(cfg, art)
    log(f"{stage}: done in {duration(seconds)}")
    return result


def _write_lineage(cfg: Config, art: dict[str, Artifact]) -> None:
    path = cfg.workdir / "lineage.json"
    lineage = {"config": str(cfg.path) if cfg.path else None, "artifacts": {}}
    for s, a in art.items():
        if a.done:
            lineage["artifacts"][s] = {"id": a.id, "dir": str(a.dir.relative_to(cfg.workdir)), "inputs": a.inputs}
    guard = art.get("decontaminate")
    if guard is not None and guard.done:  # eval sets, each with an ID that depends only on its own items
        lineage["eval_sets"] = read_json(guard.dir / "eval_sets.json")
    write_json(path, lineage)
