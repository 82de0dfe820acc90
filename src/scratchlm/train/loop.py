"""The pretraining loop: batches -> forward/backward (grad accumulation) -> clip -> step -> log/eval/checkpoint.

Order of events at a step boundary is deliberate: the checkpoint is written *before* evaluation, so a crash
while evaluating or sampling never costs training progress.
"""
from __future__ import annotations

import contextlib
import os
import shutil
import signal
import threading
import time
from pathlib import Path

import torch

from ..atomic import atomic_write_text
from ..config import Config
from ..errors import UserError
from ..eval.step_eval import evaluate_step, keep_evaluation
from ..eval.watch_state import awaiting_evaluation, eval_due, watch_share, write_trainer_info
from ..ids import read_json, write_json
from ..model import GPT
from ..model.best import best_checkpoint, rebuild_best
from ..model.checkpoint import (PREFIX, check_checkpoint, list_checkpoints, load_model_weights, step_dirs,
                                verify_checkpoint)
from ..model.device import autocast, decide_precision, pick_device, recorded_precision, sync
from ..monitor import Monitor, NullMonitor
from ..monitor.detectors import spike_text
from ..monitor.diagnosis import next_steps, nonfinite_text, spike_next_steps
from ..monitor.metrics_file import append_row, metrics_lock
from ..monitor.monitor import row_lines
from ..presets import describe_preset
from ..progress import bar, bars_on, duration, log
from ..tokenizer.bpe import load_tokenizer
from ..tokenizer.shards import check_tokenizer_matches
from . import optim
from .batch import effective_batch
from .checkpoint import load_training_state, save_checkpoint, set_rng_state
from .distributed import (World, any_rank, any_rank_of, barrier, close_world, full_state, init_world,
                          load_optimizer_state, mean_over_ranks, same_on_all_ranks, wrap_model)
from .loader import MixtureLoader, Prefetcher, on_device, pins_batches
from .schedule import lr_factor
from .spikes import APPLY, SPIKES_FILE, STOP, RollingBack, SpikeGuard, SpikeRecord
from .start_from import is_own_checkpoint, keep_hyperparameters, load_start, restore_hyperparameters


class TrainingHalted(UserError):
    """The run stopped on purpose (a non-finite loss; a spike under train.on_spike = "stop" or past
    monitor.spike_rollbacks); a diagnosis file or spikes.json says why."""


class TrainingInterrupted(UserError):
    """SIGINT/SIGTERM stopped the run after a checkpoint; the exit status is the shell's for that signal."""

    def __init__(self, message: str, signum: int):
        super().__init__(message)
        self.signum = signum
        self.exit_code = 128 + signum

    def __reduce__(self):  # pickling (a spawn worker's exception) calls __init__ with args only: add the signal
        return type(self), (str(self), self.signum)


class TrainingPaused(UserError):
    """--stop-at: the run stopped where asked, after a checkpoint; `--resume` continues the same schedule."""
    exit_code = 0
    label = "train"  # the CLI's prefix for it: this is no error


class StopOnSignal:
    """The first SIGINT/SIGTERM asks the loop to stop after the current step and a checkpoint (schedulers send
    SIGTERM some time before SIGKILL); the second gets the previous handler: Ctrl-C twice stops at once.

    repeat_after_s: a second signal sooner than this is the first one delivered twice, not a second request.
    Under torchrun a Ctrl-C reaches every rank from the terminal, then again from torchrun, which forwards it.
    """

    SIGNALS = (signal.SIGINT, signal.SIGTERM)

    def __init__(self, repeat_after_s: float = 0.0, at_step: int | None = None):
        self.signum: int | None = None
        self.at_step = at_step  # --stop-at: also stop, the same way, after this step (the schedule stays max_steps)
        self.previous: dict = {}
        self.repeat_after_s, self.first_at = repeat_after_s, 0.0

    def __enter__(self) -> "StopOnSignal":
        if threading.current_thread() is threading.main_thread():  # Python delivers signals to that thread only
            for s in self.SIGNALS:
                if signal.getsignal(s) is not signal.SIG_IGN:  # nohup and friends: ignored stays ignored
                    self.previous[s] = signal.signal(s, self._handle)
        return self

    def __exit__(self, *exc) -> None:
        self._restore()

    def _restore(self) -> None:
        for s, handler in self.previous.items():
            signal.signal(s, handler)

    def _handle(self, signum: int, frame) -> None:
        if self.signum is None:
            self.signum, self.first_at = signum, time.monotonic()
            # os.write, not print: the signal may land in the middle of a print to stderr.
            with contextlib.suppress(OSError):
                os.write(2, f"\ntrain: {signal.Signals(signum).name}: finishing this step and saving a "
                            f"checkpoint; send it again to stop at once\n".encode())
        elif time.monotonic() - self.first_at >= self.repeat_after_s:
            self._restore()
            signal.raise_signal(signum)  # as if we had never been here: KeyboardInterrupt, or death by SIGTERM


def build_optimizer(model: torch.nn.Module, cfg: Config, device: torch.device) -> torch.optim.Optimizer:
    """The optimizer named by `train.optimizer` (adamw | muon | muonh); switching is that one key."""
    t = cfg.train
    return optim.build_optimizer(model, t.optimizer, t.learning_rate, t.weight_decay, betas=(t.beta1, t.beta2),
                                 muon_lr=t.muon_lr, muon_momentum=t.muon_momentum, device_type=device.type,
                                 orthogonalizer=t.orthogonalizer)


def scheduled_factor(step: int, t) -> float:
    return lr_factor(step, t.max_steps, t.warmup_steps, t.schedule, t.min_lr_ratio)


def _set_lr(optimizer, factor: float) -> float:
    for g in optimizer.param_groups:
        g["lr"] = g["initial_lr"] * factor
    return optimizer.param_groups[0]["lr"]


def lr_at(optimizer, step: int, t) -> float:
    """The learning rate `_set_lr` gave (first group) at `step`: a step checked later than it ran."""
    return optimizer.param_groups[0]["initial_lr"] * scheduled_factor(step, t)


def loss_dtype(device: torch.device) -> torch.dtype:
    """The step's loss is summed in float64, as Python floats summed it before: logged losses stay bit-identical.
    MPS has no float64."""
    return torch.float32 if device.type == "mps" else torch.float64


class NonfiniteWatch:
    """The first step whose loss or gradient norm was not finite, with both values, kept on the device.

    Testing finiteness on the host every step would make the host wait for the device every step; `record` is
    device operations only, and `first` (which waits) is called where the loop syncs anyway.
    """

    def __init__(self, device: torch.device):
        self.step = torch.full((), -1, dtype=torch.int64, device=device)
        self.loss = torch.zeros((), dtype=loss_dtype(device), device=device)
        self.grad_norm = torch.zeros((), dtype=torch.float32, device=device)

    def record(self, step: int, loss: torch.Tensor, grad_norm: torch.Tensor) -> None:
        first = (self.step < 0) & ~(torch.isfinite(loss) & torch.isfinite(grad_norm))
        self.step = torch.where(first, step, self.step)
        self.loss = torch.where(first, loss.to(self.loss.dtype), self.loss)
        self.grad_norm = torch.where(first, grad_norm.to(self.grad_norm.dtype), self.grad_norm)

    def first(self) -> tuple[int, float, float] | None:
        """(step, loss, gradient norm) of the first non-finite step so far, or None. Waits for the device."""
        step = int(self.step)
        return None if step < 0 else (step, float(self.loss), float(self.grad_norm))


def train_model(cfg: Config, shards_dir: Path, tokenizer_dir: Path, out: Path, ids: dict,
                prompts: list[str], resume: bool = False, resume_from: Path | None = None,
                stop_at: int | None = None) -> dict:
    """resume_from: a checkpoint directory to resume from, instead of the newest that verifies: this run's, or
    another run's with the same model (a new run starting from it, see start_from.py). stop_at: stop after this
    step with a checkpoint, as on SIGTERM, without shortening the schedule (TrainingPaused)."""
    t = cfg.train
    if t.threads:
        torch.set_num_threads(t.threads)
    world, device = init_world(pick_device(t.device))
    resume, record = resume or resume_from is not None, None
    try:
        with StopOnSignal(repeat_after_s=1.0 if world.active else 0.0, at_step=stop_at) as stop:
            while True:  # one pass per rollback (train.on_spike = "rollback"), each from the last checkpoint
                try:
                    return _train(cfg, shards_dir, tokenizer_dir, out, ids, prompts, resume, resume_from, world,
                                  device, stop, record)
                except RollingBack as back:  # the attempt's model and optimizer go with its frames, here
                    resume, resume_from, record = back.resume, back.resume_from, back.record
    finally:
        close_world(world)


def _train(cfg: Config, shards_dir: Path, tokenizer_dir: Path, out: Path, ids: dict, prompts: list[str],
           resume: bool, resume_from: Path | None, world: World, device: torch.device, stop: StopOnSignal,
           spikes: SpikeRecord | None = None) -> dict:
    """spikes: the steps to skip, carried over from the attempt that rolled back to start this one."""
    t, m = cfg.train, cfg.model
    # Where a rollback goes: this attempt's start until it writes a checkpoint, then its last checkpoint.
    restart = {"resume": resume, "resume_from": resume_from, "step": None}
    external = t.eval == "external"  # evaluations are the eval watcher's, from the checkpoints of eval steps
    batch = effective_batch(cfg, world.size)
    grad_accum = batch.grad_accum
    torch.manual_seed(t.seed)
    shards = read_json(shards_dir / "shards.json")
    tokenizer = load_tokenizer(tokenizer_dir / "tokenizer.json")
    if tokenizer.get_vocab_size() != shards["vocab_size"]:
        raise UserError(f"tokenizer {tokenizer_dir} has {tokenizer.get_vocab_size()} tokens but the shards in "
                        f"{shards_dir} were made with {shards['vocab_size']}; retokenize")
    check_tokenizer_matches(shards, tokenizer_dir / "tokenizer.json", shards_dir)
    raw = GPT(m, shards["vocab_size"]).to(device)  # the plain module: weights in, weights out, evaluation
    raw.activation_checkpointing = t.activation_checkpointing
    loader = MixtureLoader(shards_dir, m.seq_len, t.batch_size, t.seed, world.rank, world.size, grad_accum)
    if loader.skipped and world.main:
        log(f"train: sources {loader.skipped} have fewer than seq_len+1 tokens and are not sampled")
    ckpt_dir = out / "checkpoints"
    if world.main:
        out.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(tokenizer_dir / "tokenizer.json", out / "tokenizer.json")
        (out / "summary.json").unlink(missing_ok=True)  # written again at the end: the watcher's "training is done"
        write_trainer_info(out, device, int(os.environ.get("LOCAL_WORLD_SIZE", "1")))
    meta = {"config": cfg.to_dict(), "seed": t.seed, "ids": ids, "vocab_size": shards["vocab_size"],
            "n_params": raw.num_params(), "device": str(device), "prompts": prompts,
            "world_size": world.size, "grad_accum": grad_accum}

    step = 0
    state = None
    existing = list_checkpoints(ckpt_dir)
    other_run = resume_from is not None and not is_own_checkpoint(Path(resume_from), ckpt_dir)
    if resume and not other_run:  # before wrapping the model: FSDP then shards the loaded weights
        candidates = [Path(resume_from)] if resume_from else step_dirs(ckpt_dir)[::-1]
        state = _load_resume_state(raw, candidates, ckpt_dir, world.main, resume_from is not None,
                                   cfg.path or "CONFIG")
        step = state["step"] if state else 0
        if state is not None:
            restart.update(resume_from=state["path"], step=step)
        if state is not None and state.get("started_from"):  # this run began from another's checkpoint
            meta["started_from"] = state["started_from"]
    elif other_run:
        state, meta["started_from"] = load_start(raw, Path(resume_from), cfg, shards["vocab_size"],
                                                 tokenizer_dir / "tokenizer.json", world.main)
        step = state["step"]
    if stop.at_step is not None and not step < stop.at_step < t.max_steps:
        raise UserError(f"--stop-at {stop.at_step} must be after the step training starts from ({step}) and before "
                        f"train.max_steps ({t.max_steps})")
    if existing and world.main and (other_run or not resume):
        log(f"train: found checkpoints up to {existing[-1].name} from an unfinished run; starting over "
            + (f"from {resume_from} " if other_run else "") + "(pass --resume to continue it instead)")
        shutil.rmtree(ckpt_dir)
    resumed = state if state is not None and not other_run else None
    precision, meta["precision_reason"] = run_precision(t.precision, device, resumed, world)
    meta["precision"] = precision
    scaler = torch.amp.GradScaler(device.type, enabled=precision == "fp16")
    barrier(world)
    model = wrap_model(raw, world, t.fsdp, device)
    optimizer = build_optimizer(raw, cfg, device)  # FSDP2 has already made raw's parameters DTensor shards
    if other_run:  # the other run's optimizer state only when it is the same optimizer; nothing else of it
        if state["optimizer"] is not None:
            kept = keep_hyperparameters(optimizer)
            try:
                load_optimizer_state(model, optimizer, state["optimizer"], t.fsdp)
            except (ValueError, KeyError, RuntimeError) as e:  # torch's words for "these groups do not match"
                raise UserError(f"--resume-from {resume_from}: its optimizer state does not fit this model's "
                                f"({str(e).splitlines()[0]})") from None
            restore_hyperparameters(optimizer, kept)
    elif state is not None:
        load_optimizer_state(model, optimizer, state["optimizer"], t.fsdp)
        scaler.load_state_dict(state["scaler"])
        loader.load_state_dict(state["loader"])
        set_rng_state(state["rng"])
    from .compile_choice import compile_as_decided

    model = compile_as_decided(model, cfg, ids.get("train"), device, precision, world.main)
    # A new run started from another's checkpoint owns nothing yet: rows of an earlier attempt at this config go too.
    kept_rows = _discard_after(out, 0 if other_run else step) if world.main else []
    if world.main and resume:
        rebuild_best(ckpt_dir, [(r["step"], r["val_loss"]) for r in kept_rows if "val_loss" in r])
    monitor = (Monitor(cfg, out, raw, device, precision, loader, start_step=step,
                       group_norms=not (t.fsdp and world.size > 1))
               if world.main else NullMonitor())

    if spikes is None:
        spikes = (SpikeRecord.resumed(out / SPIKES_FILE, step) if resume and not other_run
                  else SpikeRecord.fresh(out / SPIKES_FILE, world.main))
    guard = SpikeGuard(t.on_spike, cfg.monitor, device, t.log_every, spikes, monitor.batch_of, world.main)
    if resumed is not None:
        guard.windows.load_state_dict(resumed.get("spikes"))

    tokens_per_step = batch.tokens
    if world.main:
        shape = describe_preset(m)
        log(f"train: {raw.num_params():,} parameters{f' ({shape})' if shape else ''} on {device} ({precision}) "
            f"x {world.size} rank(s), {t.max_steps} steps x {tokens_per_step:,} tokens ({grad_accum} micro-batch(es) "
            f"per step)")
        if external:
            log(f"train: train.eval = external: no evaluation or sampling here, a checkpoint at every evaluation step "
                f"instead, for `scratchlm eval watch -c {cfg.path or 'CONFIG'}` beside this run (`scratchlm run "
                f"--eval-device DEVICE` starts it)")
    metrics = out / "metrics.jsonl"
    waiting_said = False  # the log line that checkpoints pile up for the watcher, said once

    def record(row: dict) -> None:
        if world.main:
            append_row(metrics, row)  # under the lock the eval watcher's rows take too
        monitor.publish(row)  # TensorBoard / W&B

    def unevaluated() -> tuple[Path, ...]:
        """External evaluation: the eval steps' checkpoints the watcher has not evaluated, kept from pruning."""
        nonlocal waiting_said
        if not external or not world.main:
            return ()
        waiting = awaiting_evaluation(ckpt_dir, [r for _, r in row_lines(metrics)[0]], lambda s: eval_due(s, t))
        if len(waiting) > t.keep_last and not waiting_said:
            waiting_said = True
            log(f"train: {len(waiting)} checkpoints wait for the eval watcher and stay on disk until it evaluates "
                f"them (train.eval = external); start it with `scratchlm eval watch -c {cfg.path or 'CONFIG'}`")
        return tuple(waiting)

    def checkpoint(at: int) -> Path | None:
        model_state, optimizer_state = full_state(model if t.fsdp else raw, optimizer, t.fsdp)
        saved = None
        if world.main:
            saved = save_checkpoint(ckpt_dir, at, raw, optimizer,
                                    {"scaler": scaler.state_dict(), "loader": loader.state_dict(),
                                     "spikes": guard.windows.state_dict()},
                                    meta, t.keep_last, files=(out / "tokenizer.json",),
                                    model_state=model_state, optimizer_state=optimizer_state, keep=unevaluated())
        # The other ranks wait for the write here, under the long timeout of a wait for rank 0's disk, and not in
        # the next step's gradient all-reduce, where a write slower than the collective timeout kills the job.
        barrier(world)
        restart.update(resume=True, resume_from=ckpt_dir / f"{PREFIX}{at:07d}", step=at)  # the same on every rank
        return saved

    def evaluate(at: int) -> None:
        row, samples = evaluate_step(raw, tokenizer, shards_dir, cfg, prompts, device, precision, at)
        row = monitor.on_eval(at, row, samples)
        if world.main:
            keep_evaluation(out, at, row["val_loss"], samples)
        record(row)  # last: a row in metrics.jsonl means this evaluation is complete, best.json and samples too

    # A kill during the evaluation that followed the checkpoint we resume from lost it; run it now, or that step
    # never gets its row, its samples or its chance at best.json. Rank 0 reads metrics.jsonl; all ranks evaluate.
    lost = world.main and step > 0 and not any(r["step"] == step and "eval" in r for r in kept_rows)
    if state is not None and not other_run and not external and eval_due(step, t) and any_rank(lost, world, device):
        if world.main:
            log(f"train: step {step} has a checkpoint but no evaluation (the run stopped during it); evaluating now")
        evaluate(step)

    nonfinite = NonfiniteWatch(device)

    def halt_if_nonfinite() -> None:
        """Waits for the device: called only where the loop syncs anyway."""
        if (bad := nonfinite.first()) is not None:
            bad_step, bad_loss, bad_norm = bad
            _halt(out if world.main else None, bad_step, bad_loss, bad_norm,
                  monitor.diagnose(bad_step, bad_loss, bad_norm, lr_at(optimizer, bad_step, t)), cfg)

    def close_attempt(quiet: bool = False) -> None:
        for closing in (batches, progress):
            closing.close()
        monitor.close(quiet=quiet)

    def roll_back_if_spiked() -> None:
        """Reads back and judges the steps since the last read-back (warn and rollback modes): called only where
        the loop syncs anyway. A spike under train.on_spike = "rollback" ends this attempt."""
        if found := guard.catch_up():
            _roll_back(found, step, restart, spikes, cfg, world.main, close_attempt)

    def stop_before_spike(spike: dict) -> None:
        """train.on_spike = "stop": a checkpoint of the state before the spiking step's update, diagnosis.json,
        and the halt; `--resume` continues from that checkpoint and skips the step (spikes.json)."""
        if restart["step"] != step:
            checkpoint(step)
        spikes.remember([spike])
        diagnosis = monitor.diagnose_spike(spike, lr)
        where = restart["resume_from"]
        if world.main:
            spikes.save()
            diagnosis["next"] = spike_next_steps(spike["step"], str(cfg.path or "CONFIG"), str(where))
            write_json(out / "diagnosis.json", diagnosis)
        close_attempt()
        raise TrainingHalted(f"training stopped at step {spike['step']}, before its update: its "
                             f"{spike_text(spike, cfg.monitor.grad_spike_z)} (train.on_spike = \"stop\"); "
                             f"{where} holds the state before it and {out / 'diagnosis.json'} names its batch's "
                             f"documents; `scratchlm train -c {cfg.path or 'CONFIG'} --resume` continues, skipping "
                             f"that step's update")

    batches = Prefetcher(loader, step, t.max_steps, t.prefetch, pin_memory=pins_batches(device))
    model.train()
    progress = bar(total=t.max_steps, initial=step, desc="train", unit="step", lines=False,
                   **({} if world.main else {"file": open(os.devnull, "w")}))
    plain = world.main and not bars_on()  # in a log: one line per log step instead of the bar, as nanoGPT does
    loop_start, loop_start_step = time.perf_counter(), step
    # The window a log row measures: throughput, and the share of it spent waiting for data.
    window_start, window_tokens, window_wait = time.perf_counter(), 0, batches.wait_seconds
    window_wall = time.time()  # the same window's start on the clock the watcher's busy times use
    last_checkpoint = time.monotonic()
    # No host sync in a step but at log steps and before checkpoints and evaluations: the loss and the gradient
    # norm stay device tensors until then (reading one makes the host wait for the device's queue to drain).
    while step < t.max_steps:
        lr = _set_lr(optimizer, scheduled_factor(step, t))
        loss_sum = torch.zeros((), dtype=loss_dtype(device), device=device)
        for micro in range(grad_accum):
            rows, _ = batches.get(step, micro)
            x, y = on_device(rows, device)
            with no_sync(model, micro < grad_accum - 1):  # DDP all-reduces on the last micro-batch only
                with autocast(device, precision):
                    _, loss = model(x, y)
                scaler.scale(loss / grad_accum).backward()
            loss_sum += loss.detach()
        loss_mean = mean_over_ranks(loss_sum / grad_accum, world, device)  # a tensor: queued, not waited for
        scaler.unscale_(optimizer)
        monitor.before_update(step + 1)  # per-group grad norms, weights before the update (log steps only)
        grad_norm = clip_gradients(model, t.grad_clip, t.fsdp)
        nonfinite.record(step, loss_mean, grad_norm)
        guard.observe(step + 1, loss_mean, grad_norm)
        if readback_due(step + 1, t, stop.at_step):
            # Checked before this step's update (its gradients are still there for the diagnosis) whenever a log
            # row, a checkpoint or an evaluation follows it: a checkpoint must never store weights updated from a
            # non-finite step (resuming from it would only fail again), nor an evaluation or best.json come from
            # them. Steps between checks are not lost: the watch names the first bad one and its batch. The same
            # holds for a spike the run is to roll back past.
            halt_if_nonfinite()
            roll_back_if_spiked()
        update, spike = guard.decide(step + 1)  # skip and stop: reads this step's values back (a host sync)
        if update == STOP:
            stop_before_spike(spike)
        if update == APPLY:
            scaler.step(optimizer)
        scaler.update()  # after a skip too: unscale_ recorded its inf checks, and the scale schedule goes on
        optimizer.zero_grad(set_to_none=True)
        step += 1
        window_tokens += tokens_per_step
        progress.update(1)
        if log_due(step, t):
            sync(device)
            elapsed = time.perf_counter() - window_start
            loss_value, grad_norm_value = float(loss_mean), float(grad_norm)
            row = {"step": step, "loss": loss_value, "lr": lr, "grad_norm": grad_norm_value,
                   "tokens_per_s": window_tokens / max(elapsed, 1e-9), "tokens": step * tokens_per_step,
                   "data_wait_s": batches.wait_seconds}
            if external and world.main and (share := watch_share(out, window_wall, time.time())) is not None:
                row["watch_share"] = share  # before on_log: the stall detector reads it
            if spiked := guard.take_row_spikes():
                row["spikes"] = spiked  # before on_log: the spike detectors read it
            monitor.on_log(step, row, elapsed, batches.wait_seconds - window_wait)  # norms, MFU, memory, detectors
            record(row)
            progress.set_postfix(loss=f"{loss_value:.3f}", tok_s=f"{row['tokens_per_s']:.0f}")
            if plain:
                log(step_line(step, t.max_steps, row, (time.perf_counter() - loop_start) / (step - loop_start_step)))
            window_start, window_tokens, window_wait = time.perf_counter(), 0, batches.wait_seconds
            window_wall = time.time()
        due_by_time = stopping = False
        if agreement_due(step, t, world):  # every rank must join a save: they decide it together
            due_by_time, stopping = any_rank_of(
                (bool(t.checkpoint_minutes) and time.monotonic() - last_checkpoint >= 60 * t.checkpoint_minutes,
                 stop.signum is not None), world, device)
        paused = step == stop.at_step  # the same on every rank
        if checkpoint_due(step, t) or (external and eval_due(step, t)) or due_by_time or stopping or paused:
            halt_if_nonfinite()  # a checkpoint asked for by time or a signal was not checked before the update
            roll_back_if_spiked()
            saved = checkpoint(step)
            last_checkpoint = time.monotonic()
        if stopping or paused:  # the evaluation due here, if any, runs on resume
            close_attempt()
            if not stopping:
                raise TrainingPaused(f"training paused at step {step}/{t.max_steps} as asked (--stop-at); checkpoint "
                                     f"{saved or ckpt_dir} saved: continue with `scratchlm train -c "
                                     f"{cfg.path or 'CONFIG'} --resume`")
            name = signal.Signals(stop.signum).name if stop.signum else "a signal on another rank"
            raise TrainingInterrupted(f"training stopped by {name} at step {step}/{t.max_steps}; checkpoint "
                                      f"{saved or ckpt_dir} saved: continue with `scratchlm train -c "
                                      f"{cfg.path or 'CONFIG'} --resume`", stop.signum or signal.SIGTERM)
        if eval_due(step, t) and not external:
            evaluate(step)
            # Evaluation time is neither training throughput nor data wait.
            window_start, window_wait, window_wall = time.perf_counter(), batches.wait_seconds, time.time()
    batches.close()
    progress.close()
    barrier(world)
    summary = {"steps": step, "tokens": step * tokens_per_step, "n_params": raw.num_params(),
               "n_params_non_embedding": raw.num_params(embeddings=False), "device": str(device),
               "precision": precision, "precision_reason": meta["precision_reason"], "world_size": world.size,
               "epochs_per_source": loader.epochs(),
               "monitor": monitor.close()["detectors"],  # verdict per detector
               "on_spike": {"mode": t.on_spike, "skipped_steps": sorted({a["step"] for a in spikes.actions}),
                            "rollbacks": len(spikes.rollbacks)},
               **({"started_from": meta["started_from"]} if meta.get("started_from") else {})}
    if world.main:
        best = best_checkpoint(ckpt_dir)  # external: as far as the watcher has got
        summary["checkpoint"] = str(list_checkpoints(ckpt_dir)[-1])
        summary["best_checkpoint"] = str(best) if best else None
        write_json(out / "summary.json", summary)
    return summary


def log_due(step: int, t) -> bool:
    return step % t.log_every == 0 or step == t.max_steps


# Under torchrun the ranks agree on a time-based checkpoint or a signal every this many steps (and at log steps):
# agreeing is an all-reduce the host must wait for, so doing it every step would stall the device queue once per
# step. 10 steps of a 1B model take seconds, well within the grace a scheduler gives a SIGTERM (30 s on SLURM).
AGREE_EVERY = 10


def agreement_due(step: int, t, world: World) -> bool:
    """Whether the ranks compare their stop and checkpoint-by-time flags after `step`; alone, a process decides
    at every step, for free."""
    return not world.active or step % AGREE_EVERY == 0 or log_due(step, t)


def checkpoint_due(step: int, t) -> bool:
    """By step count; time and signals can ask for one too."""
    return step % t.checkpoint_every == 0 or step == t.max_steps


def readback_due(step: int, t, stop_at: int | None) -> bool:
    """Whether the loop reads the step's loss and gradient norm back from the device (and checks them) before
    its update: a log row, a checkpoint or an evaluation follows `step` (the number it will have once applied)."""
    return log_due(step, t) or checkpoint_due(step, t) or eval_due(step, t) or step == stop_at


def _load_resume_state(raw: torch.nn.Module, candidates: list[Path], ckpt_dir: Path, main: bool,
                       explicit: bool, config: Path | str) -> dict | None:
    """Weights into `raw` and the training state of the first candidate that loads, newest first; each one
    skipped is said, with why (an `explicit` one is not skipped: its error is the answer, with the command that
    resumes from the previous good checkpoint of `config`'s run). None when there is no checkpoint at all: the
    run starts over."""
    say = log if main else (lambda _: None)
    if not candidates:
        say(f"train: --resume: no checkpoint in {ckpt_dir} yet (the run stopped before its first); "
            f"starting from step 0")
        return None
    problems = []
    for path in candidates:
        try:
            verify_checkpoint(path, config) if explicit else check_checkpoint(path)  # checksums read once
            load_model_weights(raw, path)
            state = load_training_state(path)
        except UserError as e:
            if explicit:
                raise
            problems.append(f"{path.name}: {e}")
            say(f"train: skipped checkpoint {path.name}: {e}")
            continue
        say(f"train: resumed from {path} (step {state['step']})")
        meta = read_json(path / "meta.json")
        return {**state, "started_from": meta.get("started_from"), "meta": meta, "path": path}
    raise UserError(f"--resume: no checkpoint in {ckpt_dir} can be loaded (newest {problems[0]}); "
                    f"run without --resume to start over")


def run_precision(requested: str, device: torch.device, resumed: dict | None, world: World) -> tuple[str, str]:
    """The run's precision and why: the one its checkpoint recorded when resuming (a machine that would decide
    differently now must not change a run's numerics halfway), else decided here; rank 0's on every rank."""
    if resumed is not None:
        precision, why = recorded_precision(requested, resumed["meta"], device)
    else:
        precision, why = decide_precision(requested, device)
    return same_on_all_ranks((precision, why), world)


def step_line(step: int, max_steps: int, row: dict, seconds_per_step: float) -> str:
    """The log line of a training step. The ETA counts evaluations and checkpoints: wall time per step so far."""
    return (f"train: step {step}/{max_steps} | loss {row['loss']:.4f} | lr {row['lr']:.2e} | "
            f"{row['tokens_per_s']:,.0f} tok/s | ETA {duration((max_steps - step) * seconds_per_step)}")


def no_sync(model: torch.nn.Module, skip: bool):
    """Skip DDP's gradient all-reduce on the micro-batches before the last (a no-op otherwise)."""
    return model.no_sync() if skip and hasattr(model, "no_sync") else contextlib.nullcontext()


def clip_gradients(model: torch.nn.Module, max_norm: float, fsdp: bool = False) -> torch.Tensor:
    """The total gradient norm before clipping, as a device tensor: reading it waits for the backward pass, so the
    loop reads it at log steps only. No clipping when max_norm <= 0."""
    if not fsdp:
        return torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm if max_norm > 0 else float("inf"))
    # FSDP2: gradients are DTensor shards. Reduce the norm to one replicated number first, then scale every shard
    # by the same coefficient, rather than leave torch to mix partial and replicated values. The coefficient stays
    # a tensor (min(1, max_norm / norm), as clip_grad_norm_ computes it): no host sync.
    grads = [p.grad for p in model.parameters() if p.grad is not None]
    norm = torch.nn.utils.get_total_norm(grads).full_tensor()
    if max_norm > 0:
        coefficient = torch.clamp(max_norm / (norm + 1e-6), max=1.0)
        torch._foreach_mul_([g.to_local() for g in grads], coefficient)
    return norm


def _discard_after(out: Path, step: int) -> list[dict]:
    """Drop what the run wrote after the checkpoint we resume from (it will be produced again, and the
    dashboard must not show a future that did not happen); returns the metrics rows kept."""
    for sample in (out / "samples").glob("step_*"):  # generations (.json) and their diffs (.diff)
        if sample.stem[len("step_"):].isdigit() and int(sample.stem[len("step_"):]) > step:
            sample.unlink()
    if not step:
        shutil.rmtree(out / "tensorboard", ignore_errors=True)  # purge_step cannot express "everything"
    return _truncate_metrics(out / "metrics.jsonl", step)


def _truncate_metrics(path: Path, step: int) -> list[dict]:
    """Drop rows logged after `step`, and a last line a kill tore in half; returns the rows kept."""
    with metrics_lock(path):  # a watcher's row appended meanwhile would go to the file being replaced
        return _rewrite_metrics(path, step)


def _rewrite_metrics(path: Path, step: int) -> list[dict]:
    rows, torn = row_lines(path)
    if torn is not None and step:
        log(f"train: dropped the torn last line of {path} (the run was killed while writing it): {torn[:60]}")
    keep = [(line, row) for line, row in rows if row["step"] <= step]
    if path.exists():
        atomic_write_text(path, "".join(line + "\n" for line, _ in keep))
    return [row for _, row in keep]


def _halt(out: Path | None, step: int, loss: float, grad_norm: float, diagnosis: dict, cfg: Config) -> None:
    """`out` is None on ranks other than 0: rank 0 writes the diagnosis, every rank stops."""
    if out is not None:
        rows = [row for _, row in row_lines(out / "metrics.jsonl")[0] if "loss" in row]
        saved = list_checkpoints(out / "checkpoints")
        diagnosis["next"] = next_steps(diagnosis, rows, cfg.train, str(cfg.path or "CONFIG"),
                                       str(saved[-1]) if saved else None)
        write_json(out / "diagnosis.json", diagnosis)  # made by monitor.diagnose
    where = (f"{out / 'diagnosis.json'} says what to change and how to restart" if out is not None
             else "rank 0 wrote diagnosis.json")
    raise TrainingHalted(f"training stopped at step {step}: {nonfinite_text(loss, grad_norm)} "
                         f"({len(diagnosis.get('nonfinite_grads', []))} parameters with non-finite gradients); "
                         f"{where}")


def _roll_back(found: list[dict], step: int, restart: dict, spikes: SpikeRecord, cfg: Config, main: bool,
               close_attempt) -> None:
    """Back to the last checkpoint (or the attempt's start), to train `found`'s steps again without their updates;
    past monitor.spike_rollbacks rollbacks, the run stops instead. `step`: the updates applied so far."""
    steps = [s["step"] for s in found]
    done, most = len(spikes.rollbacks), cfg.monitor.spike_rollbacks
    spikes.remember(found)  # a stop too: `--resume` then skips them
    where = restart["resume_from"] or ("the start" if restart["step"] is None else f"step {restart['step']}")
    what = f"step {steps[0]}'s {spike_text(found[0], cfg.monitor.grad_spike_z)}"
    if done >= most:
        if main:
            spikes.save()
        close_attempt()
        raise TrainingHalted(f"training stopped at step {step}: {what}, after {done} rollbacks "
                             f"(monitor.spike_rollbacks = {most}): spikes this frequent are the run's instability, "
                             f"not a few bad batches; lower train.learning_rate or lengthen train.warmup_steps "
                             f"({SPIKES_FILE} lists every spike and its batch's documents; `--resume` goes on from "
                             f"{where}, skipping them)")
    spikes.rollbacks.append({"to_step": restart["step"] or 0, "steps": steps})
    if main:
        spikes.save()
        log(f"train: {what}; going back to {where} to train again without the update of step(s) "
            f"{', '.join(map(str, steps))} (rollback {done + 1} of at most {most}, train.on_spike = \"rollback\")")
    close_attempt(quiet=True)
    raise RollingBack(restart["resume"], restart["resume_from"], spikes)
