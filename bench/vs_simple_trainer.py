"""`scratchlm train` against a nanoGPT-style trainer of the plain GPT-2 baseline, at equal wall-clock.

Contender 1 is `scratchlm train -c CONFIG`, run as the user runs it (a subprocess), in a scratch copy of the
config's folder without its train/eval/report artifacts: the user's workdir is only read. Its training seconds are
the sum of the windows its metrics.jsonl log rows measure (tokens in the window / tokens_per_s, as `scratchlm
compare` counts them): the steps, data waits and the monitor's in-step work included; startup, evaluations, the
checkpoints written with them and the log rows' own bookkeeping left out (the loop restarts its window after
each). The stage's own time (manifest) and the
subprocess's wall time are reported beside it.

Contender 2 is bench/baseline_gpt2.py's BaselineGPT at the config's shape (n_layer, d_model, n_head, seq_len,
vocabulary; plain multi-head attention whatever n_kv_head says), trained by a loop as simple as nanoGPT's train.py:
AdamW (betas 0.9/0.95, weight decay 0.1 on >=2-D tensors: BaselineGPT.configure_optimizers), nanoGPT's get_lr
(linear warmup, cosine to 10% of the peak at the planned step, flat after), grad clip 1.0, fp32, no extras. Its
batches are the scratchlm run's own: the trainer's MixtureLoader with the config's seed, batch size and gradient
accumulation, drawn in the loop and charged to it. Peak LR: the config's train.learning_rate (--lr for nanoGPT's
6e-4). Warmup: the same share of the planned steps as the scratchlm run's warmup_steps of its max_steps. Planned
steps: budget / the mean time of timed steps of a throwaway copy (not charged). It then trains until the budget
(contender 1's training seconds) is spent. Threads: train.threads, else torch's default, as `scratchlm train`.

Both final models are scored by scratchlm.eval.loss.evaluate_domains on the same validation windows (batch_size x
eval.max_batches per domain), scratchlm's in the precision it trained in, the baseline in fp32.

    PYTHONPATH=src python bench/vs_simple_trainer.py --config /tmp/qs13/scratchlm.toml --out /tmp/vs_simple.json
    ... --max-steps 100                 # smoke run: scratchlm trains 100 steps, the baseline gets that time
    ... --budget-seconds 60             # the baseline's budget, instead of the scratchlm run's training time
"""
from __future__ import annotations

import argparse
import copy
import json
import math
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).parent))
from baseline_gpt2 import BaselineConfig, BaselineGPT  # noqa: E402

from scratchlm.config import read_config_file  # noqa: E402
from scratchlm.errors import UserError  # noqa: E402
from scratchlm.eval.loss import evaluate_domains, mean_over_domains  # noqa: E402
from scratchlm.experiments.compare_match import training_seconds  # noqa: E402
from scratchlm.experiments.variants import apply_overrides, parse_set  # noqa: E402
from scratchlm.ids import read_json  # noqa: E402
from scratchlm.model.checkpoint import load_model  # noqa: E402
from scratchlm.plan.resume import _write_toml  # noqa: E402
from scratchlm.stages import load_config, plan_artifacts  # noqa: E402
from scratchlm.train.batch import effective_batch  # noqa: E402
from scratchlm.train.loader import MixtureLoader  # noqa: E402

CPU = torch.device("cpu")
NANOGPT_BETAS = (0.9, 0.95)
NANOGPT_WEIGHT_DECAY = 0.1
NANOGPT_GRAD_CLIP = 1.0
NANOGPT_MIN_LR_RATIO = 0.1  # nanoGPT: min_lr = learning_rate / 10
# Results of the upstream stages are copied; these are what `scratchlm train` (re)makes or what follows it.
NOT_COPIED = ("train", "eval", "report", ".lock")
PROBE_STEPS, PROBE_TIMED = 8, 5  # the first steps allocate and pick kernels: only the last ones are timed


# --- contender 1: scratchlm train -----------------------------------------------------------------------------

def scratch_copy(config: Path, into: Path, max_steps: int | None) -> Path:
    """The config's folder copied into `into`, without the artifacts of training and after; the copy's config.

    The copy must reproduce the workdir's shards (same IDs, already built), or the comparison would not be on the
    same data and `scratchlm train` would refuse to start: a workdir outside the config's folder, or a source
    given by a relative path that leaves it, does not travel."""
    cfg = load_config(config)
    base, workdir = cfg.base_dir.resolve(), cfg.workdir
    if not workdir.is_relative_to(base):
        raise UserError(f"workdir {workdir} is outside the config's folder {base}; copy both into one folder first")
    if into.resolve().is_relative_to(base):
        raise UserError(f"the copy {into} would be inside the folder it copies ({base}); choose another place")
    skipped = {workdir / name for name in NOT_COPIED}
    shutil.copytree(base, into, ignore=lambda d, names: [n for n in names if Path(d).resolve() / n in skipped])
    copied = into / config.name
    if max_steps is not None:
        _write_toml(apply_overrides(read_config_file(copied), [parse_set(f"train.max_steps={max_steps}")]), copied)
    ours, theirs = plan_artifacts(load_config(copied)), plan_artifacts(cfg)
    for stage in ("tokenizer", "shards"):
        if ours[stage].id != theirs[stage].id or not ours[stage].done:
            raise UserError(f"the copy in {into} does not reproduce {config}'s {stage} ({theirs[stage].id}); "
                            f"run `scratchlm run -c {config}` through the shards stage first")
    return copied


def run_scratchlm_train(config: Path) -> dict:
    """`scratchlm train -c config` in a subprocess; its steps, tokens, times and final checkpoint."""
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "scratchlm", "train", "-c", str(config)], check=False)
    wall = time.perf_counter() - start
    if done.returncode != 0:
        raise UserError(f"`scratchlm train -c {config}` exited with {done.returncode}")
    train = plan_artifacts(load_config(config))["train"]
    summary = read_json(train.dir / "summary.json")
    with open(train.dir / "metrics.jsonl", encoding="utf-8") as f:
        steps_rows = [row for row in map(json.loads, f) if "tokens_per_s" in row]  # not the evaluation rows
    return {"steps": summary["steps"], "tokens": summary["tokens"], "precision": summary["precision"],
            "checkpoint": summary["checkpoint"], "train_dir": str(train.dir),
            "train_s": training_seconds(steps_rows)[-1], "stage_s": train.manifest()["seconds"],
            "subprocess_s": wall}


# --- contender 2: the baseline under a nanoGPT-style loop -----------------------------------------------------

def baseline_for(cfg, vocab_size: int) -> BaselineGPT:
    m = cfg.model
    if m.head_dim is not None and m.head_dim * m.n_head != m.d_model:
        raise UserError(f"model.head_dim {m.head_dim} x n_head {m.n_head} != d_model {m.d_model}: the GPT-2 "
                        f"baseline has no such shape")
    torch.manual_seed(cfg.train.seed)
    return BaselineGPT(BaselineConfig(vocab_size=vocab_size, n_layer=m.n_layer, n_head=m.n_head, d_model=m.d_model,
                                      seq_len=m.seq_len))


def nanogpt_lr(it: int, peak: float, warmup: int, decay_iters: int) -> float:
    """nanoGPT train.py's get_lr: linear warmup, cosine down to min_lr at decay_iters, min_lr after."""
    min_lr = peak * NANOGPT_MIN_LR_RATIO
    if it < warmup:
        return peak * (it + 1) / (warmup + 1)
    if it > decay_iters:
        return min_lr
    ratio = (it - warmup) / max(1, decay_iters - warmup)
    return min_lr + 0.5 * (1.0 + math.cos(math.pi * ratio)) * (peak - min_lr)


class SimpleTrainer:
    """nanoGPT's inner loop on CPU: fp32 forward, backward per micro-batch, clip, AdamW step."""

    def __init__(self, model: BaselineGPT, loader: MixtureLoader, grad_accum: int, lr: float):
        self.model, self.loader, self.grad_accum = model, loader, grad_accum
        self.opt = model.configure_optimizers(NANOGPT_WEIGHT_DECAY, lr, NANOGPT_BETAS, "cpu")

    def step(self, it: int, lr: float) -> float:
        for g in self.opt.param_groups:
            g["lr"] = lr
        for micro in range(self.grad_accum):
            x, y, _ = self.loader.draw(it, micro)
            _, loss = self.model(x, y)
            (loss / self.grad_accum).backward()
        torch.nn.utils.clip_grad_norm_(self.model.parameters(), NANOGPT_GRAD_CLIP)
        self.opt.step()
        self.opt.zero_grad(set_to_none=True)
        return loss.item()


def seconds_per_step(model: BaselineGPT, loader: MixtureLoader, grad_accum: int, lr: float) -> float:
    """Mean time of the last PROBE_TIMED of PROBE_STEPS steps of a throwaway copy: how many steps fit a budget."""
    probe = SimpleTrainer(copy.deepcopy(model), loader, grad_accum, lr)
    times = []
    for it in range(PROBE_STEPS):
        t0 = time.perf_counter()
        probe.step(it, lr)
        times.append(time.perf_counter() - t0)
    return sum(times[-PROBE_TIMED:]) / PROBE_TIMED


def train_simple(cfg, model: BaselineGPT, shards_dir: Path, budget_s: float, lr: float,
                 warmup: int | None) -> dict:
    """Train until `budget_s` seconds of steps are spent; the cosine ends at the step the probe says fits."""
    t = cfg.train
    grad_accum = effective_batch(cfg).grad_accum
    loader = MixtureLoader(shards_dir, cfg.model.seq_len, t.batch_size, t.seed, grad_accum=grad_accum)
    planned = max(1, int(budget_s / seconds_per_step(model, loader, grad_accum, lr)))
    if warmup is None:  # the scratchlm run's warmup share of its steps
        warmup = round(planned * t.warmup_steps / t.max_steps)
    trainer = SimpleTrainer(model, loader, grad_accum, lr)
    model.train()
    it, loss, start = 0, float("nan"), time.perf_counter()
    while time.perf_counter() - start < budget_s:
        loss = trainer.step(it, nanogpt_lr(it, lr, warmup, planned))
        it += 1
        if it % 50 == 0:
            print(f"simple trainer: step {it}/{planned} planned, loss {loss:.3f}, "
                  f"{time.perf_counter() - start:.0f}/{budget_s:.0f} s", file=sys.stderr, flush=True)
    seconds = time.perf_counter() - start
    return {"steps": it, "planned_steps": planned, "warmup": warmup, "lr": lr, "train_s": seconds,
            "tokens": it * grad_accum * t.batch_size * cfg.model.seq_len, "last_train_loss": loss}


# --- the comparison -------------------------------------------------------------------------------------------

def evaluate(model, cfg, shards_dir: Path, precision: str) -> dict[str, float]:
    """Per-domain validation loss on the windows the trainer's own evaluations use, and their mean."""
    ev = evaluate_domains(model, shards_dir, cfg.train.batch_size, cfg.eval.max_batches, CPU, precision)
    return {**{d: r["loss"] for d, r in ev.items()}, "mean": mean_over_domains(ev)}


def markdown_table(results: list[dict]) -> str:
    domains = [d for d in results[0]["val_loss"] if d != "mean"]
    lines = ["| contender | steps | tokens | training s | " + " | ".join(domains) + " | mean |",
             "|---|---:|---:|---:|" + "---:|" * (len(domains) + 1)]
    for r in results:
        lines.append(f"| {r['name']} | {r['steps']} | {r['tokens']:,} | {r['train_s']:.0f} | "
                     + " | ".join(f"{r['val_loss'][d]:.3f}" for d in domains + ["mean"]) + " |")
    ours, base = results
    lines.append("| difference (baseline - scratchlm) | | | | "
                 + " | ".join(f"{base['val_loss'][d] - ours['val_loss'][d]:+.3f}" for d in domains + ["mean"])
                 + " |")
    return "\n".join(lines)


def compare(config: Path, scratch: Path, max_steps: int | None, budget_s: float | None, lr: float | None,
            warmup: int | None) -> dict:
    copied = scratch_copy(config, scratch, max_steps)
    cfg = load_config(copied)
    if cfg.train.threads:  # what `scratchlm train` does; otherwise both keep torch's default
        torch.set_num_threads(cfg.train.threads)
    shards_dir = plan_artifacts(cfg)["shards"].dir
    vocab = read_json(shards_dir / "shards.json")["vocab_size"]

    ours = run_scratchlm_train(copied)
    model, _, _ = load_model(Path(ours["checkpoint"]))
    ours.update(name=f"scratchlm train ({ours['precision']})", val_loss=evaluate(model, cfg, shards_dir,
                                                                                 ours["precision"]))
    budget = ours["train_s"] if budget_s is None else budget_s
    baseline = baseline_for(cfg, vocab)
    base = train_simple(cfg, baseline, shards_dir, budget, cfg.train.learning_rate if lr is None else lr, warmup)
    base.update(name="GPT-2 baseline, nanoGPT-style loop (fp32)", budget_s=budget,
                val_loss=evaluate(baseline, cfg, shards_dir, "fp32"))
    return {"config": str(config), "copy": str(copied), "threads": torch.get_num_threads(),
            "eval_windows_per_domain": cfg.train.batch_size * cfg.eval.max_batches, "contenders": [ours, base],
            "difference": {d: base["val_loss"][d] - ours["val_loss"][d] for d in ours["val_loss"]}}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", "-c", required=True, type=Path, help="a scratchlm.toml whose shards are built")
    ap.add_argument("--out", type=Path, help="write the results as JSON here")
    ap.add_argument("--scratch", type=Path, help="folder for the copy (default: a new temporary one, removed)")
    ap.add_argument("--max-steps", type=int, help="train.max_steps of the scratchlm run (default: the config's)")
    ap.add_argument("--budget-seconds", type=float,
                    help="the baseline's training seconds (default: those of the scratchlm run)")
    ap.add_argument("--lr", type=float, help="the baseline's peak LR (default: train.learning_rate; nanoGPT 6e-4)")
    ap.add_argument("--warmup", type=int, help="the baseline's warmup steps (default: the run's warmup share)")
    args = ap.parse_args(argv)
    try:
        if args.scratch is not None:
            if args.scratch.exists():
                raise UserError(f"--scratch {args.scratch} exists; name a new folder")
            result = compare(args.config, args.scratch, args.max_steps, args.budget_seconds, args.lr, args.warmup)
        else:
            with tempfile.TemporaryDirectory(prefix="vs_simple_") as tmp:
                result = compare(args.config, Path(tmp) / "copy", args.max_steps, args.budget_seconds, args.lr,
                                 args.warmup)
    except UserError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    ours, base = result["contenders"]
    print(markdown_table(result["contenders"]))
    print(f"\nscratchlm: {ours['train_s']:.0f} s of training steps (stage {ours['stage_s']:.0f} s, subprocess "
          f"{ours['subprocess_s']:.0f} s); baseline: budget {base['budget_s']:.0f} s, {base['steps']} steps "
          f"({base['planned_steps']} planned), peak LR {base['lr']:g}, warmup {base['warmup']}; "
          f"{result['threads']} thread(s)")
    if args.out:
        args.out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
