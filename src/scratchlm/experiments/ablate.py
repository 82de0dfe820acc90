"""`scratchlm ablate`: the base config and variants that each change one key, each trained over a few seeds;
then, per variant, how far its final validation loss is from the base's and whether seed noise explains it.

Every run is an ordinary training in the base's workdir, with `train.seed` (and `train.max_steps` under --steps)
set per run, so a run that already exists is reused by the stage cache, a killed one resumes from its
checkpoint, and the variants share every upstream artifact their key does not touch.
"""
from __future__ import annotations

import argparse
import math
import shlex
import time
from dataclasses import dataclass
from pathlib import Path

from ..errors import UserError
from ..ids import content_id
from ..progress import duration, log
from .stats import compare_arms, describe
from .variants import Override, halted_before, parse_set, run_variants, variant_config

# Stages a variant can change upstream of training; a difference there is reported (the runs then do not train on
# the same tokens, or not even measure loss in the same tokens).
UPSTREAM = ("data", "decontaminate", "tokenizer", "shards")
SEED_KEY, STEPS_KEY = "train.seed", "train.max_steps"
GPU_MEMORY_SHARE = 0.9  # of the free device memory that parallel runs may fill: the plan's headroom


@dataclass(frozen=True)
class Arm:
    """The base (no override) or one variant (one override)."""

    label: str
    overrides: tuple[Override, ...]


@dataclass(frozen=True)
class PlannedRun:
    arm: Arm
    seed: int
    overrides: tuple[Override, ...]  # the arm's, then the seed and the steps every run gets
    status: str  # "reused" (trained before), "resumed" (a checkpoint exists), "diverged" (before), "new"


def ablate_command(args: argparse.Namespace) -> int:
    base_path = Path(args.config)
    if args.seeds < 1:
        raise UserError(f"--seeds must be at least 1, got {args.seeds}")
    if args.steps is not None and args.steps < 1:
        raise UserError(f"--steps must be at least 1, got {args.steps}")
    jobs_asked = parse_jobs(args.jobs)
    base = variant_config(base_path)
    check_steps(args.steps, base.train.warmup_steps)
    arms = [Arm("base", ())] + [Arm(str(o), (o,)) for o in check_variants(base_path, base, args.sets, args.steps)]
    steps = args.steps or base.train.max_steps
    seeds = [base.train.seed + i for i in range(args.seeds)]
    from ..stages import plan_artifacts

    exp_id = content_id(plan_artifacts(base)["train"].id, [a.label for a in arms[1:]], seeds, steps)
    out = base.workdir / "experiments" / f"ablate-{exp_id}"
    runs = plan_runs(base_path, arms, seeds, args.steps)
    reused = sum(r.status in ("reused", "diverged") for r in runs)  # neither trains again
    resumed = sum(r.status == "resumed" for r in runs)
    log(f"ablate: {len(arms) - 1} variant(s) + base x {len(seeds)} seed(s) = {len(runs)} runs of {steps} steps: "
        f"{reused} reused (trained before), {resumed} resumed from a checkpoint, "
        f"{len(runs) - reused - resumed} new; results in {out}")
    jobs = resolve_jobs(jobs_asked, base_path, runs)
    t0 = time.time()
    trained = run_variants(base_path, [r.overrides for r in runs], jobs)
    seconds = time.time() - t0
    result = summarize(runs, trained, arms)
    result.update({"id": exp_id, "command": command_line(args), "config": str(base.path), "seeds": seeds,
                   "steps": steps, "jobs": jobs, "seconds": seconds,
                   "reused": reused, "resumed": resumed, "new": len(runs) - reused - resumed})
    from .ablate_report import write_outputs

    paths = write_outputs(result, out)
    print(paths["terminal"])
    print(f"\n{len(runs)} runs ({reused} reused, {resumed} resumed) in {duration(seconds)}; "
          f"{paths['json']}, {paths['md']}, {paths['png']}")
    return 0


def check_steps(steps: int | None, warmup_steps: int) -> None:
    """--steps must leave the warmup, or every run measures only the warmup. The warmup is not shortened here: it is
    the user's setting, and part of every run's ID."""
    if steps is None:
        return
    if steps <= warmup_steps:
        raise UserError(f"--steps {steps}: training would never leave the warmup (train.warmup_steps = "
                        f"{warmup_steps}); lower train.warmup_steps in the config or raise --steps")
    if warmup_steps > steps / 3:
        log(f"ablate: warning: --steps {steps} spends {warmup_steps} steps ({warmup_steps / steps:.0%}) in the "
            "learning-rate warmup (train.warmup_steps): the runs compare mostly warmup")


def check_variants(base_path: Path, base, sets: list[str], steps: int | None) -> list[Override]:
    """One override per --set; each must change the base, and change some artifact (not only operational keys)."""
    from ..stages import plan_artifacts

    overrides = [parse_set(s) for s in sets]
    base_ids = {s: a.id for s, a in plan_artifacts(base).items()}
    seen = set()
    for o in overrides:
        if o.key == SEED_KEY:
            raise UserError(f"--set {o}: the seed is what --seeds varies (train.seed, train.seed + 1, ...); "
                            "set it in the config file to move the range")
        if o.key == STEPS_KEY and steps is not None:
            raise UserError(f"--set {o} with --steps {steps}: --steps sets train.max_steps of every run; drop one")
        if str(o) in seen:
            raise UserError(f"--set {o} is given twice: each --set is one variant")
        seen.add(str(o))
        cfg = variant_config(base_path, (o,))
        if cfg.to_dict() == base.to_dict():
            raise UserError(f"--set {o}: that is the base config's value ({base_path}); a variant must change it")
        if {s: a.id for s, a in plan_artifacts(cfg).items()} == base_ids:
            raise UserError(f"--set {o}: the key changes no artifact ID (it is operational, or read by no stage "
                            "before the report): its runs would be the base's")
    return overrides


def plan_runs(base_path: Path, arms: list[Arm], seeds: list[int], steps: int | None) -> list[PlannedRun]:
    """Every (arm, seed) run with its overrides, and whether the stage cache already holds it."""
    from ..model.checkpoint import list_checkpoints
    from ..stages import plan_artifacts

    runs = []
    for arm in arms:
        for seed in seeds:
            overrides = arm.overrides + (Override(SEED_KEY, seed),)
            if steps is not None:
                overrides += (Override(STEPS_KEY, steps),)
            art = plan_artifacts(variant_config(base_path, overrides))
            train = art["train"]
            status = ("reused" if train.done else "diverged" if halted_before(train.dir) else
                      "resumed" if train.dir.is_dir() and list_checkpoints(train.dir / "checkpoints") else "new")
            runs.append(PlannedRun(arm, seed, overrides, status))
    return runs


def parse_jobs(spec: str) -> int | None:
    """--jobs: a number, or None for auto."""
    if spec == "auto":
        return None
    try:
        jobs = int(spec)
    except ValueError:
        raise UserError(f"--jobs {spec!r}: expected a number or auto") from None
    if jobs < 1:
        raise UserError(f"--jobs must be at least 1, got {jobs}")
    return jobs


def resolve_jobs(jobs: int | None, base_path: Path, runs: list[PlannedRun]) -> int:
    """A number of jobs as asked (at most the runs to train); auto (None): 1 on CPU and MPS, on CUDA as many runs as
    the plan's memory estimate of the largest one fits in the free device memory."""
    from ..model.device import pick_device

    todo = max(1, sum(r.status not in ("reused", "diverged") for r in runs))
    device = pick_device(variant_config(base_path).train.device)
    shared = (f"on {device.type.upper()} parallel runs only split the same cores (or unified memory) between "
              "them: they finish no sooner than one at a time")
    if jobs is not None:
        if jobs > 1 and device.type != "cuda":
            log(f"ablate: --jobs {jobs}: {shared}")
        return min(jobs, todo)
    if device.type != "cuda":
        log(f"ablate: --jobs auto: one run at a time: {shared}")
        return 1
    import torch

    free = torch.cuda.mem_get_info(device)[0]
    per_run = max(run_memory(variant_config(base_path, r.overrides), device) for r in runs)
    jobs = max(1, min(todo, int(GPU_MEMORY_SHARE * free // per_run)))
    log(f"ablate: --jobs auto: {jobs} at a time: the plan estimates {per_run / 2 ** 30:.2f} GiB per run against "
        f"{free / 2 ** 30:.1f} GiB free on {torch.cuda.get_device_name(device)} (using {GPU_MEMORY_SHARE:.0%})")
    return jobs


def run_memory(cfg, device) -> int:
    """The plan's estimate of one run's peak device memory (src/scratchlm/plan/memory.py), with the CUDA context
    each process adds."""
    from ..model.device import pick_precision
    from ..plan.make import ASSUMED_CUDA_CONTEXT, vocab_size
    from ..plan.memory import estimate_memory
    from ..stages import plan_artifacts
    from ..train.batch import effective_batch

    t = cfg.train
    batch = effective_batch(cfg)
    vocab, _ = vocab_size(cfg, plan_artifacts(cfg))
    return estimate_memory(cfg.model, vocab, batch.micro_batch, batch.grad_accum, pick_precision(t.precision, device),
                           t.optimizer, device.type, t.activation_checkpointing, ASSUMED_CUDA_CONTEXT).total


def run_record(run: PlannedRun, trained) -> dict:
    """A run's row in ablation.json; a run that diverged has no loss (None) and the halt message."""
    record = {"variant": run.arm.label, "seed": run.seed, "overrides": [str(o) for o in run.overrides],
              "status": run.status, "ids": trained.ids, "train_dir": str(trained.train_dir)}
    if trained.halted:
        return record | {"status": "diverged", "step": None, "val_loss": None, "domains": None,
                         "halted": trained.halted}
    e = trained.eval
    return record | {"step": e["step"], "val_loss": e["val_loss"],
                     "domains": {d: m["loss"] for d, m in e["domains"].items()}}


def summarize(runs: list[PlannedRun], trained: list, arms: list[Arm]) -> dict:
    """ablation.json's content: every run, and per variant its statistics against the base, overall and per
    domain, and the upstream artifacts it does not share with the base."""
    records = [run_record(r, t) for r, t in zip(runs, trained)]
    by_arm = {a.label: [r for r in records if r["variant"] == a.label] for a in arms}
    base = by_arm["base"]
    measured = [set(r["domains"]) for r in records if r["domains"] is not None]
    domains = sorted(set.intersection(*measured)) if measured else []  # those every finished run measured

    def losses(rows: list[dict], domain: str | None) -> list[float]:
        """A diverged run's loss is NaN: compare_arms leaves it out and counts it in the verdict."""
        return [math.nan if r["val_loss"] is None else r["val_loss"] if domain is None else r["domains"][domain]
                for r in rows]

    variants = []
    for arm in arms[1:]:
        rows = by_arm[arm.label]
        differs = [{"stage": s, "base": base[0]["ids"][s], "variant": rows[0]["ids"][s]}
                   for s in UPSTREAM if rows[0]["ids"][s] != base[0]["ids"][s]]
        variants.append({"variant": arm.label, "key": arm.overrides[0].key, "value": arm.overrides[0].value,
                         "val_loss": compare_arms(losses(base, None), losses(rows, None)),
                         "domains": {d: compare_arms(losses(base, d), losses(rows, d)) for d in domains},
                         "upstream_differs": differs,
                         "compare": compare_hint(base[0]["train_dir"], rows[0]["train_dir"])})
    return {"base": {"val_loss": describe(losses(base, None)), "domains": {d: describe(losses(base, d))
                                                                         for d in domains}},
            "domains": domains, "variants": variants, "runs": records}


def compare_hint(base_dir: str, variant_dir: str) -> str:
    """The `scratchlm compare` command for the base and a variant; a variant read only after training (eval.*)
    shares the base's trainings, which compare would refuse as the same training."""
    if base_dir == variant_dir:
        return f"# same trainings as the base ({base_dir}): the variant changes only the evaluation"
    return shlex.join(["scratchlm", "compare", base_dir, variant_dir])


def command_line(args: argparse.Namespace) -> str:
    words = ["scratchlm", "ablate", "-c", args.config]
    for s in args.sets:
        words += ["--set", s]
    words += ["--seeds", str(args.seeds)] + (["--steps", str(args.steps)] if args.steps is not None else [])
    return shlex.join(words + (["--jobs", str(args.jobs)] if args.jobs != "auto" else []))
