"""`scratchlm eval watch -c F`: evaluate a training run's checkpoints beside it, on another device or process.

With `train.eval = "external"` the trainer neither evaluates nor samples; it writes a checkpoint at every
evaluation step instead, and keeps it until evaluated. The watcher follows the run's checkpoint directory and, for
each complete checkpoint it wants (a directory appears only once renamed into place whole, and its checksums are
verified before anything is read), computes the same evaluation the trainer would have (eval/step_eval.py), writes
the samples, their diff and best.json, and appends the row to metrics.jsonl last: a row there means the
evaluation is complete, and it is how a restarted watcher knows what it has already done.

It exits once training has finished (summary.json) and every wanted checkpoint is evaluated. A trainer that
stopped without finishing is waited for: `--resume` continues it and the watcher with it. Ctrl-C stops the
watcher; an evaluation it cut short runs again at the next start.
"""
from __future__ import annotations

import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import torch

from ..config import Config
from ..errors import UserError
from ..ids import read_json
from ..model.checkpoint import list_checkpoints, load_model
from ..model.device import pick_device, recorded_precision
from ..monitor.metrics_file import append_row
from ..monitor.monitor import read_rows
from ..monitor.sample_diff import (
    load_samples,
    repetition_rates,
    sample_files,
    write_sample_diff,
)
from ..monitor.verdicts import Verdicts, rejudge
from ..pipeline import Artifact, require
from ..progress import duration, log
from .step_eval import evaluate_step, keep_evaluation
from .store import check_same_tokenizer, id_from_meta
from .watch_state import (TRAINER, WatchFile, competition, cpu_set, device_name, eval_due, evaluated_steps,
                          read_state, step_of, trainer_running)


@dataclass
class WatchOptions:
    device: str = "auto"  # auto: the last CUDA device when there are several, else the CPU
    suite: str = "fast"  # fast: the trainer's evaluation; full: also `eval suite`'s
    every: int | None = None  # evaluate steps that are multiples of this (and the last); None: the config's eval steps
    every_checkpoint: bool = False  # evaluate every checkpoint the run writes
    threads: int = 0  # torch CPU threads; 0 leaves torch's default
    poll_seconds: float = 2.0


def watch_device(requested: str) -> torch.device:
    """auto keeps the watcher off the training device: a second GPU when there is one, else the CPU."""
    if requested != "auto":
        return pick_device(requested)
    if torch.cuda.is_available() and torch.cuda.device_count() > 1:
        return torch.device(f"cuda:{torch.cuda.device_count() - 1}")
    return torch.device("cpu")


def wants(step: int, cfg: Config, opts: WatchOptions) -> bool:
    if opts.every_checkpoint:
        return True
    if opts.every:
        return step % opts.every == 0 or step == cfg.train.max_steps
    return eval_due(step, cfg.train)


class Watcher:
    def __init__(self, cfg: Config, art: dict[str, Artifact], opts: WatchOptions):
        self.cfg, self.art, self.opts = cfg, art, opts
        self.train_dir = art["train"].dir
        self.checkpoints = self.train_dir / "checkpoints"
        self.metrics = self.train_dir / "metrics.jsonl"
        self.shards = require(art, "shards").dir
        self.tokenizer_json = require(art, "tokenizer").dir / "tokenizer.json"
        self.device = watch_device(opts.device)
        self.skipped: set[str] = set()  # checkpoints that cannot be evaluated (damaged, pruned): said once
        self.done: list[dict] = []  # this session's evaluation rows
        self.verdicts: Verdicts | None = None  # the evaluation detectors, for alerts in this log
        self.file: WatchFile | None = None

    def run(self) -> dict:
        if self.opts.threads:
            torch.set_num_threads(self.opts.threads)
        log(f"eval watch: following {self.train_dir} on {self.device} ({self.opts.suite} suite, "
            f"{self._which()}); exits when training has finished and its last checkpoint is evaluated")
        waiting_said = None
        while True:
            todo = self._todo()
            if todo:
                self._start()
                self._evaluate(todo[0])  # then look again: a newer one may have come, an older one gone
                waiting_said = None
                continue
            if (self.train_dir / "summary.json").exists():
                break
            state = self._waiting_for()
            if state != waiting_said:
                log(f"eval watch: {state}")
                waiting_said = state
            time.sleep(self.opts.poll_seconds)
        return self._finish()

    def _which(self) -> str:
        if self.opts.every_checkpoint:
            return "every checkpoint"
        if self.opts.every:
            return f"every {self.opts.every} steps"
        return f"every {self.cfg.train.eval_every} steps, as train.eval_every"

    def _todo(self) -> list[Path]:
        done = evaluated_steps(read_rows(self.metrics))
        return [p for p in list_checkpoints(self.checkpoints) if p.name not in self.skipped
                and step_of(p) not in done and wants(step_of(p), self.cfg, self.opts)]

    def _waiting_for(self) -> str:
        running = trainer_running(self.train_dir)
        if not (self.train_dir / TRAINER).exists():
            return "waiting for the training to start"
        if running is False:
            return ("the training is not running and has not finished (no summary.json): waiting for it to resume "
                    "(`scratchlm train -c CONFIG --resume`); Ctrl-C stops the watcher")
        return "waiting for the next checkpoint"

    def _start(self) -> None:
        """Once there is something to evaluate, the trainer has written trainer.json: judge the competition."""
        if self.file is not None:
            return
        competes = competition(str(self.device), cpu_set(), read_state(self.train_dir / TRAINER))
        if competes:
            log(f"eval watch: warning: {competes}: training slows while it evaluates, and its log rows record the "
                f"share of each window the watcher was busy (watch_share); --device cuda:N or `taskset` avoids it")
        self.file = WatchFile(self.train_dir, str(self.device), competes)
        self.verdicts = Verdicts(self.cfg, None, kinds=("eval",))
        self.verdicts.replay(sorted((r for r in read_rows(self.metrics) if "eval" in r), key=lambda r: r["step"]))

    def _evaluate(self, checkpoint: Path) -> None:
        step, began = step_of(checkpoint), time.time()
        trainer = read_state(self.train_dir / TRAINER)
        self.file.busy()
        try:
            saved = (checkpoint / "meta.json").stat().st_mtime  # when the trainer wrote it, for the latency
            checksums = read_json(checkpoint / "meta.json")["checksums"]
            row, samples, identity = self._evaluate_step(checkpoint, step)
        except (UserError, FileNotFoundError, ValueError, KeyError) as e:  # damaged, or pruned while we read it
            why = (str(e) if isinstance(e, UserError) else f"its meta.json cannot be read ({type(e).__name__}: {e})"
                   if isinstance(e, (ValueError, KeyError)) else "it was removed while being read (train.keep_last)")
            log(f"eval watch: skipped {checkpoint.name}: {why}")
            self.skipped.add(checkpoint.name)
            return
        finally:
            self.file.idle()
        if self._replaced(checkpoint, checksums, trainer):
            log(f"eval watch: dropped the evaluation of {checkpoint.name}: the training started over meanwhile and "
                f"that checkpoint is not the one evaluated")
            return
        self._keep_samples(step, row, samples)
        done = time.time()
        row["watch"] = {"device": device_name(self.device), "suite": self.opts.suite, "checkpoint": checkpoint.name,
                        "checkpoint_id": identity, "saved_at": saved, "done_at": done,
                        "latency_s": done - saved, "eval_s": done - began,
                        "shared": self.file.state["competes"] is not None}
        append_row(self.metrics, row)  # last: the row says the evaluation is complete
        self.done.append(row)
        self.verdicts.judge(row)
        log(f"eval watch: step {step}: val loss {row['val_loss']:.4f} ("
            + ", ".join(f"{d} {r['loss']:.4f}" for d, r in row["eval"].items())
            + f"); {duration(done - began)} to evaluate, {duration(done - saved)} after the checkpoint")

    def _replaced(self, checkpoint: Path, checksums: dict, trainer: dict | None) -> bool:
        """Whether the checkpoint evaluated is no longer the run's: a training started over (not resumed) while
        it was being evaluated deletes the run's checkpoints and rows, and may already have written new ones."""
        try:
            return read_json(checkpoint / "meta.json")["checksums"] != checksums
        except FileNotFoundError:  # pruned (--every-checkpoint), or deleted by a training that started over
            now = read_state(self.train_dir / TRAINER)
            return (now or {}).get("started") != (trainer or {}).get("started")

    def _evaluate_step(self, checkpoint: Path, step: int) -> tuple[dict, list[dict], str]:
        """The evaluation row of the checkpoint, its samples, and its ID (the store's: the weights' checksum)."""
        check_same_tokenizer(checkpoint, self.tokenizer_json)
        model, tokenizer, meta = load_model(checkpoint, self.device)  # verifies every checksum first
        identity = id_from_meta(meta)
        # The trainer's precision where the watcher runs on the same kind of device: the same numbers as inline.
        precision = recorded_precision(self.cfg.train.precision, meta, self.device)[0]
        row, samples = evaluate_step(model, tokenizer, self.shards, self.cfg, meta.get("prompts", []), self.device,
                                     precision, step)
        row["repetition"] = repetition_rates(samples, self.cfg.monitor.repetition_ngram)
        if self.opts.suite == "full":  # stored under the checkpoint's ID: right whatever happens to the run
            from .suite import evaluate_suite

            evaluate_suite(self.cfg, self.art, checkpoint, self.device)
        return row, samples, identity

    def _keep_samples(self, step: int, row: dict, samples: list[dict]) -> None:
        """The samples, their diff against the previous evaluation's, and best.json: as the trainer keeps them."""
        earlier = [(s, p) for s, p in sample_files(self.train_dir / "samples") if s < step]
        previous, previous_step = (load_samples(earlier[-1][1]), earlier[-1][0]) if earlier else (None, None)
        write_sample_diff(self.train_dir / "samples", step, samples, previous, previous_step)
        keep_evaluation(self.train_dir, step, row["val_loss"], samples)

    def _finish(self) -> dict:
        rows = read_rows(self.metrics)
        if self.done:  # the trainer judged its rows when it closed, before these existed: judge all rows again
            rejudge(self.cfg, self.train_dir, rows)
        latencies = [r["watch"]["latency_s"] for r in self.done]
        summary = {"evaluated": [r["step"] for r in self.done], "device": device_name(self.device),
                   "median_latency_s": statistics.median(latencies) if latencies else None}
        log(f"eval watch: training finished; {len(self.done)} checkpoint(s) evaluated by this watcher"
            + (f", median {duration(summary['median_latency_s'])} from checkpoint to result" if latencies else "")
            + f"; {len(evaluated_steps(rows))} evaluation rows in {self.metrics}")
        return summary


def watch(cfg: Config, art: dict[str, Artifact], opts: WatchOptions) -> dict:
    if cfg.train.eval != "external":
        log("eval watch: note: train.eval is inline, so the trainer evaluates its eval steps itself; the watcher "
            "evaluates only what has no evaluation row yet")
    if opts.suite == "full":  # refused now, not at the first checkpoint an hour into the training
        from .suite import humaneval_isolation

        humaneval_isolation(cfg)
    return Watcher(cfg, art, opts).run()


def watch_command(cfg_path: str, device: str) -> list[str]:
    return [sys.executable, "-m", "scratchlm", "eval", "watch", "-c", str(cfg_path), "--device", device]


def start_watcher(cfg: Config, device: str) -> subprocess.Popen:
    """`scratchlm run --eval-device D`: the watcher as a child process for the length of the training."""
    command = watch_command(cfg.path, device)
    log(f"run: evaluating beside the training on {device}: {' '.join(command[2:])}")
    return subprocess.Popen(command)


def stop_watcher(process: subprocess.Popen, training_finished: bool) -> None:
    """Wait for the watcher to evaluate the last checkpoint after a finished training; stop it after a failed one."""
    if training_finished:
        if process.wait() != 0:
            raise UserError(f"the eval watcher exited with status {process.returncode}; its log says why")
        return
    process.terminate()
    try:
        process.wait(timeout=60)
    except subprocess.TimeoutExpired:
        process.kill()
