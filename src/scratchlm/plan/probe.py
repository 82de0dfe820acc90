"""A few seconds of the real training step on this machine: real model, optimizer, precision and batch shape.

It builds the step from public pieces (the GPT, the trainer's optimizer builder, autocast) rather than calling
the training loop, so it can time the forward/backward of one micro-batch and the optimizer step separately:
a step with gradient accumulation k then costs k x micro + step, measured without running k micro-batches.
Two micro-batches per step are run when k > 1, because gradients kept alive across micro-batches change the peak.
The peak-memory window also holds what a run does at its log and evaluation steps: the monitor's copy of the
weights for the update ratio, and one evaluation batch through the trainer's own evaluation code.
With train.compile true or auto the same step is then timed compiled, for train/compile_choice.py.
"""
from __future__ import annotations

import statistics
import tempfile
import time
from pathlib import Path
from typing import NamedTuple

import numpy as np
import torch

from ..config import Config, ModelConfig
from ..eval.chunked_head import evaluate_batch
from ..model import GPT
from ..model.checkpoint import load_model_weights, verify_checkpoint
from ..model.device import autocast, sync
from ..model.generate import generate
from ..monitor.logits import LogitStats
from ..monitor.norms import UpdateRatio, grouped_parameters
from ..tokenizer.shards import TokenShard
from ..train.checkpoint import load_training_state, save_checkpoint
from .machine_load import OtherLoad
from .peakmem import PeakMemory, release_freed_memory
from .verdicts import busy_reasons as _busy

DECODE_TOKENS = 8
# Steps run in the peak-memory window: the first allocates the optimizer's state and picks kernels, the second
# holds that state and a step's activations at once (the peak), untimed.
MEMORY_STEPS = 2


def build_optimizer_for(model: torch.nn.Module, cfg: Config, device: torch.device) -> torch.optim.Optimizer:
    """The trainer's own optimizer for this config; the one place to change if its builder moves."""
    from ..train.loop import build_optimizer

    return build_optimizer(model, cfg, device)


def build_model(m: ModelConfig, vocab: int, device: torch.device, activation_checkpointing: bool) -> GPT:
    model = GPT(m, vocab).to(device)
    if hasattr(model, "activation_checkpointing"):  # the trainer's switch, where the model has one
        model.activation_checkpointing = activation_checkpointing
    return model


class Batches:
    """Training windows: sampled from the token shards when they exist, otherwise uniform random tokens
    (same shapes and the same cost; only the loss value differs)."""

    def __init__(self, shards_dir: Path | None, vocab: int, seq_len: int, batch: int, seed: int):
        self.vocab, self.seq_len, self.batch = vocab, seq_len, batch
        self.rng = np.random.default_rng(seed)
        self.shards = []
        if shards_dir is not None:
            self.shards = [s for p in sorted((shards_dir / "train").glob("*.bin"))
                           if len(s := TokenShard(p)) > seq_len + 1]
        self.source = "token shards" if self.shards else "random tokens"

    def next(self) -> tuple[torch.Tensor, torch.Tensor]:
        if not self.shards:
            t = torch.from_numpy(self.rng.integers(0, self.vocab, (self.batch, self.seq_len + 1)))
        else:
            rows = []
            for _ in range(self.batch):
                shard = self.shards[int(self.rng.integers(len(self.shards)))]
                start = int(self.rng.integers(0, len(shard) - self.seq_len - 1))
                rows.append(np.asarray(shard.tokens[start:start + self.seq_len + 1], dtype=np.int64))
            t = torch.from_numpy(np.stack(rows))
        return t[:, :-1], t[:, 1:]


def _warm_up_framework(cfg: Config, vocab: int, device: torch.device, precision: str) -> None:
    """Run one step of a tiny copy of the model first, so the kernels' code and thread pools are resident
    before the baseline is taken: the peak then measures this model's memory, not torch's first use."""
    m = ModelConfig(**{**vars(cfg.model), "n_layer": 1, "seq_len": min(cfg.model.seq_len, 32)})
    tiny = GPT(m, min(vocab, 512)).to(device)
    opt = build_optimizer_for(tiny, cfg, device)
    x = torch.randint(0, min(vocab, 512), (2, m.seq_len), device=device)
    for _ in range(2):
        with autocast(device, precision):
            _, loss = tiny(x, x)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
    del tiny, opt, x, loss
    release_freed_memory()


def run_probe(cfg: Config, vocab: int, device: torch.device, precision: str, micro_batch: int, grad_accum: int,
              activation_checkpointing: bool, shards_dir: Path | None, seconds: float = 3.0,
              min_steps: int = 3) -> dict:
    """The eager step, and with train.compile true or auto also the compiled step and the compile time
    (result["compile"], for train/compile_choice.py). Memory, evaluation and checkpoints are measured eager:
    the trainer evaluates and saves the plain module either way."""
    t, m = cfg.train, cfg.model
    if t.threads and device.type == "cpu":
        torch.set_num_threads(t.threads)
    torch.manual_seed(t.seed)
    _warm_up_framework(cfg, vocab, device, precision)
    micro_per_step = min(grad_accum, 2)
    batches = Batches(shards_dir, vocab, m.seq_len, micro_batch, t.seed)
    t_build = time.perf_counter()
    with PeakMemory(device) as mem:
        model = build_model(m, vocab, device, activation_checkpointing)
        optimizer = build_optimizer_for(model, cfg, device)
        scaler = torch.amp.GradScaler(device.type, enabled=precision == "fp16")
        build_seconds = time.perf_counter() - t_build
        model.train()
        # every memory step a log step, as the monitor sees it: its update-ratio copy of the weights included
        groups = grouped_parameters(model) if cfg.monitor.update_ratio else None
        first_losses = [_step(model, optimizer, scaler, batches, device, precision, grad_accum, micro_per_step,
                              t.grad_clip, groups).losses[0] for _ in range(MEMORY_STEPS)]
        _eval_batch(model, batches, device, precision)
    # Timed outside the window: inside it every allocation above 128 KiB is a fresh mapping (plan/peakmem.py),
    # which made the CPU step 1.6-1.9x slower than the same step in training and the time plan that much too long.
    with OtherLoad() as load:
        run = _timed_steps(model, optimizer, scaler, batches, device, precision, grad_accum, micro_per_step,
                           t.grad_clip, seconds, min_steps, load)
    tokens_per_micro = micro_batch * m.seq_len
    step_seconds = grad_accum * run.micro + run.optimizer_step
    result = {
        "device": str(device), "precision": precision, "micro_batch": micro_batch, "grad_accum": grad_accum,
        "activation_checkpointing": activation_checkpointing,
        "batches": batches.source, "steps_timed": run.steps, "micro_batches_timed": run.micro_batches,
        "micro_seconds": run.micro, "optimizer_step_seconds": run.optimizer_step, "step_seconds": step_seconds,
        "window_micro_seconds": run.window_micro, "spread": run.spread, "median_micro_seconds": run.median_micro,
        "timed_seconds": run.seconds, "other_load": load.share,
        "tokens_per_step": tokens_per_micro * grad_accum,
        "tokens_per_s": tokens_per_micro * grad_accum / step_seconds,
        "peak_memory": mem.peak, "memory_method": mem.method, "memory_baseline": mem.baseline,
        "build_seconds": build_seconds, "loss_first": first_losses[0], "loss_last": run.losses[-1],
        "torch_threads": torch.get_num_threads(),
    }
    if t.compile is not False:
        result["compile"] = _measure_compile(model, optimizer, scaler, batches, device, precision, grad_accum,
                                             micro_per_step, t.grad_clip, seconds, min_steps, run)
    result.update(_time_eval_and_samples(model, batches, device, precision))
    result.update(_time_checkpoint(model, optimizer, scaler, m, vocab, device))
    del model, optimizer, run
    release_freed_memory()
    return result


# The timed steps are cut into this many consecutive windows. A machine shared with other work (a workstation, a
# shared CPU server) slows some windows and not others: a fast window is the step's own cost, the same from one
# plan to the next, where a median over all steps moved with the load (1.47 h, then 0.10 h, for one config).
WINDOWS = 5
EXTEND = 4  # windows further apart than verdicts.BUSY_SPREAD: time up to this many times the probe's seconds


def window_medians(times: list[float], windows: int = WINDOWS) -> list[float]:
    """The median of each of up to `windows` consecutive, equal runs of `times` (in order of measurement)."""
    n = min(windows, len(times))
    bounds = [round(i * len(times) / n) for i in range(n + 1)]
    return [statistics.median(times[a:b]) for a, b in zip(bounds, bounds[1:])]


def low_window(medians: list[float]) -> float:
    """The second fastest of 4 or more windows (else the fastest): as far from the busy ones as the fastest, when
    up to 3 of 5 were slowed, and not one lucky window's (one spinning process on 2 cores: 0.82 s fastest window,
    1.38 s median in one plan; 1.18-1.36 s in the next four)."""
    return sorted(medians)[len(medians) // 4]


class _Run:
    """The timed steps (after the peak-memory window's steps, which allocated the optimizer state and picked the
    kernels): each time is a fast window's median (low_window), and `spread` how much slower the slowest window
    was than the fastest."""

    def __init__(self, step_micro_times: list[list[float]], step_times: list[float], losses: list[float],
                 last_x: torch.Tensor, seconds: float = 0.0):
        self.losses, self.last_x, self.seconds = losses, last_x, seconds
        # a window holds whole steps, so a step's micro-batches and its optimizer step share the window's load
        per_step = [statistics.median(times) for times in step_micro_times]
        self.window_micro = window_medians(per_step)
        self.micro, self.optimizer_step = low_window(self.window_micro), low_window(window_medians(step_times))
        self.spread = max(self.window_micro) / min(self.window_micro) - 1
        self.median_micro = statistics.median(t for times in step_micro_times for t in times)  # the old estimate
        self.steps, self.micro_batches = len(step_times), sum(map(len, step_micro_times))


def _micro(model, batches: Batches, device: torch.device, precision: str, scaler, grad_accum: int) -> tuple:
    """One micro-batch forward + backward: (seconds, loss, the input)."""
    x, y = (b.to(device) for b in batches.next())
    t0 = time.perf_counter()
    with autocast(device, precision):
        _, loss = model(x, y)  # the loop holds the logits in `_` while backward runs, as here
    scaler.scale(loss / grad_accum).backward()
    sync(device)
    return time.perf_counter() - t0, float(loss.detach()), x


def _optimizer_step(model, optimizer, scaler, device: torch.device, grad_clip: float,
                    groups: dict | None = None) -> float:
    """groups: a log step's, the monitor's copy of the weights for the update ratio taken and measured around the
    update, where the trainer takes it (train/loop.py: before_update, on_log)."""
    t0 = time.perf_counter()
    scaler.unscale_(optimizer)
    update = UpdateRatio() if groups else None
    if update is not None:
        update.snapshot(groups)
    torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip if grad_clip > 0 else float("inf"))
    scaler.step(optimizer)
    scaler.update()
    optimizer.zero_grad(set_to_none=True)
    if update is not None:
        update.measure(groups)
    sync(device)
    return time.perf_counter() - t0


@torch.no_grad()
def _eval_batch(model, batches: Batches, device: torch.device, precision: str) -> float:
    """One evaluation batch at the micro-batch, as the trainer's evaluation runs it (eval/loss.py): seconds."""
    x, y = (b.to(device) for b in batches.next())
    model.eval()
    t0 = time.perf_counter()
    with autocast(device, precision):
        evaluate_batch(model, x, y, LogitStats())
    sync(device)
    seconds = time.perf_counter() - t0
    model.train()
    return seconds


class _Step(NamedTuple):
    micro_times: list[float]  # seconds of each micro-batch's forward + backward
    optimizer_seconds: float
    losses: list[float]
    last_x: torch.Tensor


def _step(model, optimizer, scaler, batches: Batches, device: torch.device, precision: str, grad_accum: int,
          micro_per_step: int, grad_clip: float, groups: dict | None = None) -> _Step:
    """One optimizer step of micro_per_step micro-batches (a log step's with `groups`: _optimizer_step)."""
    micro_times, losses = [], []
    for _ in range(micro_per_step):
        seconds_micro, loss, x = _micro(model, batches, device, precision, scaler, grad_accum)
        micro_times.append(seconds_micro)
        losses.append(loss)
    return _Step(micro_times, _optimizer_step(model, optimizer, scaler, device, grad_clip, groups), losses, x)


def _timed_steps(model, optimizer, scaler, batches: Batches, device: torch.device, precision: str, grad_accum: int,
                 micro_per_step: int, grad_clip: float, seconds: float, min_steps: int, load: OtherLoad) -> _Run:
    """Steps for `seconds` (at least min_steps); while the windows disagree or other processes load the CPUs, up
    to EXTEND x as long: on a busy machine more windows find a fast one, where a few guess."""
    micro_times: list[list[float]] = []
    step_times: list[float] = []
    losses: list[float] = []
    start = time.perf_counter()
    while True:
        step = _step(model, optimizer, scaler, batches, device, precision, grad_accum, micro_per_step, grad_clip)
        micro_times.append(step.micro_times)
        step_times.append(step.optimizer_seconds)
        losses += step.losses
        run = _Run(micro_times, step_times, losses, step.last_x, time.perf_counter() - start)
        if len(step_times) >= min_steps and run.seconds >= seconds and (
                run.seconds >= EXTEND * seconds or not _busy(run.spread, load.so_far())):
            return run


def _measure_compile(model, optimizer, scaler, batches: Batches, device: torch.device, precision: str,
                     grad_accum: int, micro_per_step: int, grad_clip: float, seconds: float, min_steps: int,
                     eager: _Run) -> dict:
    """The compile time: the first compiled step less an eager step of the same shape (its micro-batches and one
    optimizer step). Then eager and compiled micro-batches alternate, and each side's fastest counts: on shared
    cores a busy spell then slows both alike instead of deciding the comparison (medians of separate runs
    measured 6.7 s eager vs 1.1 s compiled in one plan and 1.1 s vs 3.7 s in the next, on the same model).
    The optimizer step is not compiled, so the saving per step is grad_accum x the saving per micro-batch.
    A failing torch.compile (no C++ compiler, an unsupported device) is recorded as the reason to stay eager."""
    t0 = time.perf_counter()
    try:
        compiled = torch.compile(model)
        t_first = time.perf_counter()
        for _ in range(micro_per_step):
            _micro(compiled, batches, device, precision, scaler, grad_accum)
        _optimizer_step(compiled, optimizer, scaler, device, grad_clip)
        first_step = time.perf_counter() - t_first
        best = {"eager": float("inf"), "compiled": float("inf")}
        rounds, deadline = 0, time.perf_counter() + seconds
        while time.perf_counter() < deadline or rounds < min_steps + 1:
            for name, m in (("eager", model), ("compiled", compiled)):
                best[name] = min(best[name], _micro(m, batches, device, precision, scaler, grad_accum)[0])
                optimizer.zero_grad(set_to_none=True)  # timing only: each micro-batch starts a step
            rounds += 1
    except Exception as e:  # noqa: BLE001 - whatever breaks the compile, the answer is "stay eager, because"
        optimizer.zero_grad(set_to_none=True)
        return {"error": f"{type(e).__name__}: {(str(e).strip().splitlines() or [''])[0]}"}
    opt = eager.optimizer_step
    return {"eager_step_seconds": grad_accum * best["eager"] + opt,
            "compiled_step_seconds": grad_accum * best["compiled"] + opt,
            "compile_seconds": max(0.0, first_step - (micro_per_step * best["eager"] + opt)),
            "eager_micro_seconds": best["eager"], "compiled_micro_seconds": best["compiled"], "rounds": rounds,
            "probe_seconds": time.perf_counter() - t0}


@torch.no_grad()
def _time_eval_and_samples(model, batches: Batches, device: torch.device, precision: str) -> dict:
    times = [_eval_batch(model, batches, device, precision) for _ in range(3)]
    model.eval()
    decode = []
    for _ in range(3):  # the fastest, as for the step: a busy spell should not lengthen the forecast
        t0 = time.perf_counter()
        list(generate(model, [0], DECODE_TOKENS, temperature=0.0))
        decode.append((time.perf_counter() - t0) / DECODE_TOKENS)
    model.train()
    return {"eval_batch_seconds": min(times[1:]), "decode_token_seconds": min(decode)}


def _time_checkpoint(model, optimizer, scaler, m: ModelConfig, vocab: int, device: torch.device) -> dict:
    """Write and read back one real checkpoint (model, optimizer state, RNG) with the trainer's own code."""
    with tempfile.TemporaryDirectory(prefix="scratchlm-probe-") as tmp:
        t0 = time.perf_counter()
        path = save_checkpoint(Path(tmp), 1, model, optimizer, {"scaler": scaler.state_dict()}, {}, keep_last=1)
        save = time.perf_counter() - t0
        size = sum(f.stat().st_size for f in path.iterdir())
        t0 = time.perf_counter()
        verify_checkpoint(path)
        fresh = build_model(m, vocab, device, False)
        load_model_weights(fresh, path)
        load_training_state(path)
        load = time.perf_counter() - t0
    return {"checkpoint_seconds": save, "checkpoint_bytes": size, "restore_seconds": load}
