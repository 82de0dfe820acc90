"""Real training runs that provoke each monitor detector, next to a healthy control that must stay silent.

Each failure is made the way it happens to a user, not by writing metrics rows by hand:
  weight_growth  AdamW without weight decay at a long constant LR (control: weight decay 0.1, same LR)
  loss_spike     a batch of uniformly random tokens (junk) at one known step, or the LR jumping 20x for a few steps
  loader_stall   a data source that takes longer per batch than the model's step
  domain_degradation, overconfidence  one source no longer drawn from a third of the way in
  repetition     every batch one boilerplate line repeated (a footer or log line that is the whole source), with
                 64-token samples (control: the normal corpus, the same 64-token samples)
and every run's verdicts come from the monitor inside `scratchlm train` (stage_train), read from its summary.
tests/test_monitor_detector_runs.py runs the same pairs at micro scale; this prints the table for
docs/benchmarks.md at a larger one. Usage:
    python bench/detector_runs.py [--workdir /tmp/detector_runs] [--steps 1500] [--d-model 64]

--spikes prints what train.on_spike does instead: a run with junk batches at a few steps trained under each of
warn, skip, rollback and stop (resumed after each stop), beside a healthy run under warn and skip, with the final
validation loss of each (tests/test_spike_runs.py runs the same at micro scale):
    python bench/detector_runs.py --spikes [--spike-steps 400]
"""
from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from unittest import mock

import numpy as np
import torch

from scratchlm import stages
from scratchlm.monitor.detectors import DETECTORS as STREAMING
from scratchlm.train.loader import MixtureLoader
from scratchlm.train.loop import TrainingHalted

DETECTORS = tuple(d.name for d in STREAMING)


@contextmanager
def junk_batches(at_steps: set[int], vocab_size: int, seed: int = 0):
    """The batches trained at `at_steps` (1-based, as logged) are uniformly random tokens: a shard of garbage."""
    original = MixtureLoader.draw_rows

    def draw_rows(self, step, micro=0, pin=False):
        rows, which = original(self, step, micro, pin)
        if step + 1 in at_steps:  # draw_rows() takes the 0-based step about to run; the log names it step + 1
            g = torch.Generator().manual_seed(seed + step)
            token_ids(self, rows)[:] = torch.randint(0, vocab_size, tuple(rows.shape), generator=g).numpy()
        return rows, which

    with mock.patch.object(MixtureLoader, "draw_rows", draw_rows):
        yield


def token_ids(loader: MixtureLoader, rows: torch.Tensor) -> np.ndarray:
    """A writable view of a micro-batch's token ids, in the shards' own (unsigned) width."""
    return rows.numpy().view(loader.token_dtype)


@contextmanager
def lr_jump(start: int, steps: int, factor: float):
    """The learning rate is `factor` times the schedule's for `steps` steps from (1-based) step `start`."""
    from scratchlm.train import loop

    original = loop.lr_factor

    def jumped(step, *args):
        return original(step, *args) * (factor if start <= step + 1 < start + steps else 1.0)

    with mock.patch.object(loop, "lr_factor", jumped):
        yield


@contextmanager
def slow_loader(seconds: float):
    """Every batch takes `seconds` longer to read: a slow disk or network file system under a fast step."""
    original = MixtureLoader.draw_rows

    def draw_rows(self, step, micro=0, pin=False):
        time.sleep(seconds)
        return original(self, step, micro, pin)

    with mock.patch.object(MixtureLoader, "draw_rows", draw_rows):
        yield


@contextmanager
def source_dropped(source: str, from_step: int):
    """From (1-based) step `from_step` on, the mix draws nothing from `source`: a source that stopped being read
    mid-run (a mix edited on resume, a shard gone). Its domain is still evaluated."""
    original = MixtureLoader.positions

    def positions(self, step, micro=0):
        if step + 1 < from_step:
            return original(self, step, micro)
        kept = self.probs * np.array([name != source for name in self.sources])
        full, self.probs = self.probs, kept / kept.sum()  # only the prefetch thread draws while training
        try:
            return original(self, step, micro)
        finally:
            self.probs = full

    with mock.patch.object(MixtureLoader, "positions", positions):
        yield


@contextmanager
def boilerplate(line_ids: list[int], share: float):
    """The first `share` of every batch's rows is one boilerplate line repeated end to end: a source that is a
    scraped page footer or a log line thousands of times over (nothing dedups within a document), drawn in that
    share of the mix. `line_ids`: the line as the run's tokenizer encodes it (line_ids())."""
    original = MixtureLoader.draw_rows

    def draw_rows(self, step, micro=0, pin=False):
        rows, which = original(self, step, micro, pin)
        n, width = round(share * rows.shape[0]), rows.shape[1]
        stream = np.array(line_ids * (-(-width // len(line_ids)) + 1))
        ids = token_ids(self, rows)
        for r, o in enumerate((np.arange(n) * 7) % len(line_ids)):
            ids[r] = stream[o:o + width]
        return rows, which

    with mock.patch.object(MixtureLoader, "draw_rows", draw_rows):
        yield


BOILERPLATE = "Go to the top of the page.\n"  # a page footer


def line_ids(cfg_path: Path, text: str = BOILERPLATE) -> list[int]:
    """`text` in the tokens of the config's trained tokenizer (prepare() built it)."""
    from scratchlm.tokenizer.bpe import load_tokenizer

    art = stages.plan_artifacts(stages.load_config(cfg_path))
    return load_tokenizer(art["tokenizer"].dir / "tokenizer.json").encode(text, add_special_tokens=False).ids


@contextmanager
def untouched():
    yield


@dataclass
class Run:
    name: str
    detector: str  # the detector this run is about
    expect: bool  # must it fire?
    train: dict = field(default_factory=dict)  # [train] keys that differ from the base config
    inject: object = untouched  # a context manager factory: the failure
    monitor: dict = field(default_factory=dict)
    eval: dict = field(default_factory=dict)  # [eval] keys that differ from the base config


def variant_config(cfg_path: Path, run: Run):
    """The config with the run's [train], [monitor] and [eval] keys set."""
    cfg = stages.load_config(cfg_path)
    for section, keys in (("train", run.train), ("monitor", run.monitor), ("eval", run.eval)):
        for key, value in keys.items():
            setattr(getattr(cfg, section), key, value)
    return cfg


def train_run(cfg_path: Path, run: Run, resume: bool = False) -> dict:
    """Train one variant of the config from scratch (resume: continue its run where it stopped); the monitor's
    verdicts, the logged rows, the alerts, the run's summary and its directory."""
    cfg = variant_config(cfg_path, run)
    art = stages.plan_artifacts(cfg)
    if not resume:
        shutil.rmtree(art["train"].dir, ignore_errors=True)  # an injected run shares its config ID with its control
    with run.inject():
        summary = stages.stage_train(cfg, art, resume=resume)
    rows = [json.loads(line) for line in (art["train"].dir / "metrics.jsonl").read_text().splitlines()]
    alerts_file = art["train"].dir / "alerts.jsonl"
    alerts = [json.loads(line) for line in alerts_file.read_text().splitlines()] if alerts_file.exists() else []
    return {"monitor": summary["monitor"], "rows": rows, "alerts": alerts, "cfg": cfg, "summary": summary,
            "dir": art["train"].dir}


def train_through_stops(cfg_path: Path, run: Run) -> tuple[dict, list[str]]:
    """train_run, resumed after each halt (train.on_spike = "stop") until the run completes; and each halt's
    message."""
    halts = []
    while True:
        try:
            return train_run(cfg_path, run, resume=bool(halts)), halts
        except TrainingHalted as e:
            halts.append(str(e))


def runs(steps: int, vocab_size: int, log_every: int, footer: list[int]) -> list[Run]:
    """The failure runs and their controls. Steps are multiples of log_every so a junk batch is a logged one.
    footer: BOILERPLATE's tokens (line_ids)."""
    spike_at = (steps // 2) // log_every * log_every
    long_constant = {"schedule": "constant", "max_steps": steps}
    evaluated = {"max_steps": steps, "eval_every": steps // 6}  # the domain detectors compare evaluations
    return [
        Run(f"healthy (cosine, wd 0.1, evaluated every {steps // 6})", "all", False, evaluated),
        Run("AdamW wd 0, constant LR", "weight_growth", True, {**long_constant, "weight_decay": 0.0}),
        Run("AdamW wd 0.1, constant LR", "weight_growth", False, {**long_constant, "weight_decay": 0.1}),
        Run(f"junk batch at step {spike_at}", "loss_spike", True, {"max_steps": steps},
            lambda: junk_batches({spike_at}, vocab_size)),
        Run(f"LR x20 for 5 steps from {spike_at}", "loss_spike", True, {"max_steps": steps},
            lambda: lr_jump(spike_at - 2, 5, 20.0)),
        Run("data source 0.25 s per batch", "loader_stall", True, {"max_steps": min(steps, 6 * log_every)},
            lambda: slow_loader(0.25)),
        Run(f"source `docs` dropped from step {steps // 3}", "domain_degradation", True, evaluated,
            lambda: source_dropped("docs", steps // 3)),
        Run("every batch one boilerplate line, 64-token samples", "repetition", True, evaluated,
            lambda: boilerplate(footer, 1.0), eval={"max_new_tokens": 64}),
        Run("normal corpus, 64-token samples", "repetition", False, evaluated, eval={"max_new_tokens": 64}),
    ]


SPIKE_MODES = ("warn", "skip", "rollback", "stop")


def spike_runs(steps: int, vocab_size: int, junk_at: list[int], checkpoint_every: int) -> list[Run]:
    """A healthy run under warn and skip, and the run with junk batches at `junk_at` under each train.on_spike."""
    base = {"max_steps": steps, "checkpoint_every": checkpoint_every}
    healthy = [Run(f"healthy, on_spike = {mode}", "on_spike", False, {**base, "on_spike": mode})
               for mode in ("warn", "skip")]
    junk = [Run(f"junk at steps {', '.join(map(str, junk_at))}, on_spike = {mode}", "on_spike", True,
                {**base, "on_spike": mode}, lambda: junk_batches(set(junk_at), vocab_size)) for mode in SPIKE_MODES]
    return healthy + junk


def spike_table(results: list[tuple[Run, dict, list[str]]]) -> str:
    lines = ["| run | updates skipped (steps) | rollbacks | stops, each resumed | grad_norm_spike alerts | "
             "final validation loss | mean of the last 5 logged losses |", "|---|---|---|---|---|---|---|"]
    for run, r, halts in results:
        done = r["summary"]["on_spike"]
        skipped = ", ".join(map(str, done["skipped_steps"])) or "none"
        losses = [row["loss"] for row in r["rows"] if "loss" in row]
        val = [row["val_loss"] for row in r["rows"] if "val_loss" in row][-1]
        lines.append(f"| {run.name} | {len(done['skipped_steps'])} ({skipped}) | {done['rollbacks']} | {len(halts)} | "
                     f"{r['monitor']['grad_norm_spike']['fired']} | {val:.4f} | {sum(losses[-5:]) / 5:.4f} |")
    return "\n".join(lines)


def table(results: list[tuple[Run, dict]]) -> str:
    lines = ["| run | about | fired (first step) | silent | numbers |", "|---|---|---|---|---|"]
    for run, r in results:
        fired = {d: s for d, s in r["monitor"].items() if s["fired"]}
        shown = ", ".join(f"{d} ({s['first_step']})" for d, s in fired.items()) or "none"
        silent = ", ".join(d for d in DETECTORS if d not in fired)
        lines.append(f"| {run.name} | {run.detector} | {shown} | {silent} | {numbers(run, r)} |")
    return "\n".join(lines)


def numbers(run: Run, r: dict) -> str:
    """The evidence the detector read: the alert's message, or for a silent run the quantity it judged."""
    about = [a for a in r["alerts"] if a["detector"] == run.detector]
    if about:
        return about[0]["message"].replace("|", "\\|")
    logged = [row for row in r["rows"] if "loss" in row]
    first, last = logged[0]["weight_norm"], logged[-1]["weight_norm"]
    norms = "weight norm step %d -> %d: " % (logged[0]["step"], logged[-1]["step"]) + ", ".join(
        f"{g} {first[g]:.1f}->{last[g]:.1f}" for g in first)
    wait = max(row["data_wait_share"] for row in logged)
    rates = [rate or 0.0 for row in r["rows"] if "eval" in row for rate in row["repetition"]]
    repeats = f"; samples' repeated word 4-grams at most {max(rates):.0%}" if run.detector == "repetition" else ""
    return f"{norms}; data wait at most {wait:.1%} of a log interval{repeats}"


def prepare(workdir: Path, corpus: dict[str, Path], d_model: int, log_every: int, lr: float) -> tuple[Path, int]:
    """The micro config of the tests (tests/conftest.py) at this width, LR and log interval, with its data, tokenizer
    and shards built; and the tokenizer's vocabulary size (what a junk batch draws from)."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
    from conftest import write_micro_config

    path = write_micro_config(workdir, corpus, steps=100, ckpt=100_000,
                              extra="[monitor]\npeak_flops = 1e12\ntensorboard = false\n")
    text = path.read_text()
    for key, value in (("d_model", 64), ("log_every", 5), ("learning_rate", 0.005)):
        assert f"\n{key} = {value}\n" in text, key  # the micro config changed: update these defaults
    path.write_text(text.replace("\nd_model = 64\n", f"\nd_model = {d_model}\n")
                    .replace("\nlog_every = 5\n", f"\nlog_every = {log_every}\n")
                    .replace("\nlearning_rate = 0.005\n", f"\nlearning_rate = {lr}\n")
                    # fp32 everywhere: precision auto measures bf16 against fp32 and picks by CPU, and a healthy
                    # 300-step run under bf16 autocast was seen to set off weight_growth (calibrated on fp32 runs)
                    .replace("[train]\n", '[train]\nprecision = "fp32"\n', 1))
    cfg = stages.load_config(path)
    art = stages.plan_artifacts(cfg)
    stages.stage_training_inputs(cfg, art)
    return path, json.loads((art["shards"].dir / "shards.json").read_text())["vocab_size"]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--workdir", type=Path, default=Path("/tmp/detector_runs"))
    ap.add_argument("--steps", type=int, default=1500)
    ap.add_argument("--d-model", type=int, default=64)
    ap.add_argument("--log-every", type=int, default=10)
    ap.add_argument("--lr", type=float, default=0.005)
    ap.add_argument("--only", default="", help="comma-separated substrings of run names")
    ap.add_argument("--norms", type=Path, help="also write each run's logged weight norms here (JSON)")
    ap.add_argument("--spikes", action="store_true", help="what train.on_spike does about junk batches, instead")
    ap.add_argument("--spike-steps", type=int, default=400)
    args = ap.parse_args()
    args.workdir.mkdir(parents=True, exist_ok=True)
    from scratchlm.data.builtin import build_builtin_corpus

    corpus = build_builtin_corpus(args.workdir / "corpus", code_max_chars=1_000_000)
    path, vocab = prepare(args.workdir, corpus, args.d_model, args.log_every, args.lr)
    if args.spikes:
        print(spike_bench(path, vocab, args.spike_steps))
        return
    chosen = [r for r in runs(args.steps, vocab, args.log_every, line_ids(path))
              if not args.only or any(s in r.name for s in args.only.split(","))]
    results = []
    for run in chosen:
        t0 = time.perf_counter()
        r = train_run(path, run)
        results.append((run, r))
        fired = sorted(d for d, s in r["monitor"].items() if s["fired"])
        print(f"{run.name}: fired {fired or 'none'} ({time.perf_counter() - t0:.0f} s)", flush=True)
    if args.norms:
        args.norms.write_text(json.dumps({run.name: [{"step": row["step"], "loss": row["loss"],
                                                      "weight_norm": row["weight_norm"]}
                                                     for row in r["rows"] if "loss" in row]
                                          for run, r in results}))
    print(table(results))


def spike_bench(path: Path, vocab: int, steps: int) -> str:
    """Junk batches at 3/8, 5/8 and 7/8 of the run and two steps before its end, the last leaving the run no time to
    recover. Each but the first has the one before it in its window (128 steps), widened by it: at 400 steps their
    losses were still 10.6 to 11.5 standard deviations above. A checkpoint every 50 steps is where rollbacks go."""
    junk_at = [3 * steps // 8, 5 * steps // 8, 7 * steps // 8, steps - 2]
    results = []
    for run in spike_runs(steps, vocab, junk_at, checkpoint_every=50):
        t0 = time.perf_counter()
        r, halts = train_through_stops(path, run)
        results.append((run, r, halts))
        print(f"{run.name}: skipped {r['summary']['on_spike']['skipped_steps']} ({time.perf_counter() - t0:.0f} s)",
              flush=True)
    return spike_table(results)


if __name__ == "__main__":
    main()
