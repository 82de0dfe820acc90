"""First run on a rented GPU: the project's own loop, checked and timed, sized for 8 minutes on one H100.

It runs the real commands in this process (`scratchlm.cli.main`, exactly as the shell would), on a small prepared
workdir made from the built-in corpus (data, tokenizer and shards built first, on the CPU side, before anything is
timed; `--workdir DIR` reuses one already prepared), and records one check per line of a JSON and a Markdown table:

  prepare                       the data stages on the built-in corpus
  peaks                         the GPU's dense datasheet peak per precision (scratchlm.gpu_peaks, by exact SKU)
                                and the matmul peak the trainer measures and caches (monitor/throughput.py)
  kernels/<precision>           one training step of the 125m shape profiled (torch.profiler): whether SDPA ran a
                                flash kernel on the GPU (on a CPU: the attention ops, flash not applicable)
  loop/<precision>/<mode>/...   on the small shape, eager and compiled: `scratchlm plan`, `scratchlm train` (200
                                steps with checkpoints and evaluations: loss falls; tokens/s, MFU against both
                                peaks, peak allocated and reserved memory against the plan's estimate), the resume
                                test of `scratchlm check` (in fresh processes; within 1e-3), a short `scratchlm eval`
  loop/<precision>/head_loss    the chunked head loss (model/head_loss.py) against plain F.cross_entropy on the
                                same batch and weights, loss and gradients, in that precision
  loop/<precision>/compiled     the eager model against torch.compile of it on the same batch
  throughput/<preset>/<prec.>   `scratchlm plan`'s probe on the 125m and 350m presets: eager and compiled tokens/s,
                                MFU against both peaks, peak memory against the plan's estimate
  torchrun/<precision>          `scratchlm train` under torchrun --nproc_per_node 2 (skipped with fewer GPUs)

A check that raises is recorded with its error and the next one runs; the JSON is rewritten after every check, so
a run stopped by a time limit keeps what it measured; a check not started within --budget-s is recorded as
skipped (the default 420 s leaves the last check a minute; the order puts what matters least last). Exit status:
0 when every check that ran passed, 3 when one failed or raised. Not yet timed on a GPU: each check records its
seconds, to size the budget by.

    python bench/gpu_check.py                       # a GPU: gpu_check.json and gpu_check.md to $OUT, or .
    python bench/gpu_check.py --workdir /data/gc    # reuse (or keep) the prepared workdir
    python bench/gpu_check.py --dry --out /tmp/gc   # the same code path on CPU (a test): tiny shapes, 20 steps,
                                                    # the CPU's precision, eager loop; ~1 minute on 2 cores
    python bench/gpu_check.py --dry --precisions bf16 fp16 --modes eager compiled   # all of it on CPU: ~2 min
"""
from __future__ import annotations

import argparse
import contextlib
import gc
import io
import json
import math
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path

import torch
import torch.nn.functional as F

from scratchlm import gpu_peaks
from scratchlm.cli import main as scratchlm
from scratchlm.config import config_from_dict
from scratchlm.config_template import render_config
from scratchlm.data.builtin import build_builtin_corpus
from scratchlm.ids import read_json
from scratchlm.model import GPT
from scratchlm.model.checkpoint import list_checkpoints, load_model
from scratchlm.model.device import autocast, pick_precision, sync
from scratchlm.monitor.monitor import read_rows
from scratchlm.monitor.throughput import peak_flops
from scratchlm.plan.probe import Batches
from scratchlm.stages import load_config, plan_artifacts, stage_training_inputs

GiB = 1024 ** 3
PRECISIONS = ("bf16", "fp16")
MODES = ("eager", "compiled")
PRESETS = ("125m", "350m")
RESUME_CHECK = "resume verified on this exact config"  # the item of `scratchlm check` that is its resume test
# Tolerances, relative. The chunked head loss and plain cross-entropy do the same matmuls in the same dtype and
# the softmax in fp32, so only summation order differs: 1e-3 on the loss and 2e-2 on the gradients' norm of the
# difference in bf16/fp16 (8 and 11 mantissa bits; a gradient is a sum over the batch's tokens). A compiled model
# fuses ops and rounds in other places, so eager vs compiled gets 1e-2 and 5e-2. fp32 gets the half-precision
# figures / 100. Resume's 1e-3 is `scratchlm check`'s own (plan/resume.py).
TOLERANCE = {"head_loss": (1e-3, 2e-2), "compiled": (1e-2, 5e-2)}
# fp16 backpropagates a scaled loss, from torch.amp.GradScaler's initial 2**16 down where gradients overflow
GRAD_SCALES = {"fp16": (2.0 ** 16, 2.0 ** 12, 2.0 ** 8, 2.0 ** 4, 1.0)}


@dataclass
class Settings:
    """What differs between a GPU run and --dry: sizes, steps, probe seconds, threads."""

    dry: bool
    device: torch.device
    steps: int
    corpus_chars: int
    vocab: int  # the prepared tokenizer's
    loop_model: dict
    loop_batch: int
    throughput_vocab: int
    throughput_batch: int
    throughput_model: dict | None  # None: the preset itself; --dry replaces it with a tiny shape
    probe_seconds: float
    throughput_probe_seconds: float
    threads: int


def settings(args: argparse.Namespace) -> Settings:
    if args.dry:
        tiny = {"n_layer": 2, "d_model": 64, "n_head": 4, "seq_len": 64}
        # one torch thread: on 2 cores shared with other work, a second thread's spin-waits cost more than it
        # computes for a model this small (a 20-step training measured 1 s and 9-30 s, alone and beside tests)
        return Settings(dry=True, device=torch.device("cpu"), steps=args.steps or 20, corpus_chars=300_000,
                        vocab=512, loop_model=tiny, loop_batch=16, throughput_vocab=512, throughput_batch=4,
                        throughput_model=tiny, probe_seconds=0.3, throughput_probe_seconds=0.3, threads=1)
    # the loop: the quickstart's model (4 layers, seq_len 256) on a 4K vocabulary; throughput: the presets at the
    # default 32K vocabulary (a tokenizer of that size is not trained: the plan probes with random tokens)
    return Settings(dry=False, device=torch.device("cuda"), steps=args.steps or 200, corpus_chars=1_000_000,
                    vocab=4096, loop_model={"preset": "tiny"}, loop_batch=32, throughput_vocab=32768,
                    throughput_batch=args.batch, throughput_model=None, probe_seconds=2.0,
                    throughput_probe_seconds=3.0, threads=0)


# ---- the record: one JSON and one Markdown table, rewritten after every check ---------------------------------
@dataclass
class Record:
    out_dir: Path
    device: torch.device
    data: dict
    started: float = field(default_factory=time.perf_counter)

    def add(self, check: dict) -> None:
        self.data["checks"].append(check)
        self.data["elapsed_s"] = time.perf_counter() - self.started
        self.data["counts"] = {s: sum(c["status"] == s for c in self.data["checks"])
                               for s in ("pass", "fail", "error", "skipped")}
        self.write()

    def write(self) -> None:
        (self.out_dir / "gpu_check.json").write_text(json.dumps(self.data, indent=2, default=str) + "\n")
        (self.out_dir / "gpu_check.md").write_text(markdown(self.data))


def markdown(data: dict) -> str:
    lines = [f"# gpu_check: {data['device']}", "",
             f"torch {data['torch']}, {data['gpus']} GPU(s){', dry run on CPU' if data['dry'] else ''}; "
             f"workdir `{data['workdir']}`; {data.get('elapsed_s', 0):.0f} s; {data.get('counts', {})}", "",
             "| check | status | result | s |", "|---|---|---|---|"]
    for c in data["checks"]:
        text = (c.get("summary") or c.get("error") or c.get("reason") or "").replace("|", "/").replace("\n", " ")
        lines.append(f"| {c['name']} | {c['status']} | {text} | {c.get('seconds', 0):.1f} |")
    return "\n".join(lines) + "\n"


def run_check(record: Record, name: str, fn, budget_s: float) -> dict:
    """fn() -> a dict with status (pass|fail) and summary; an exception is recorded as an error, and the run
    goes on: one failing check (an OOM, a compile error) must not cost the others."""
    if time.perf_counter() - record.started > budget_s:
        check = {"name": name, "status": "skipped", "reason": f"--budget-s {budget_s:g} s spent before it started"}
    else:
        t0, cpu0 = time.perf_counter(), cpu_seconds()
        try:
            check = {"name": name, **fn()}
        except Exception as e:  # noqa: BLE001 - recorded, never fatal
            first = (str(e).strip().splitlines() or [""])[0]
            check = {"name": name, "status": "error", "error": f"{type(e).__name__}: {first}",
                     "traceback": traceback.format_exc()[-4000:]}
        check["seconds"], check["cpu_seconds"] = time.perf_counter() - t0, cpu_seconds() - cpu0
        release(record.device)
    print(f"gpu_check: {name}: {check['status']}: {check.get('summary') or check.get('error') or check.get('reason')}",
          file=sys.stderr, flush=True)
    record.add(check)
    return check


def cpu_seconds() -> float:
    """CPU time of this process and its finished children: on a shared machine, what a check costs."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def release(device: torch.device) -> None:
    """Between checks: drop compiled graphs and cached blocks, so each check's memory is its own."""
    torch._dynamo.reset()
    gc.collect()
    if device.type == "cuda":
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()


# ---- measurements -------------------------------------------------------------------------------------------
def mfu(tokens_per_s: float | None, flops_per_token: float, device: torch.device, precision: str) -> dict:
    """Achieved FLOP/s over the GPU's dense datasheet peak (gpu_peaks.datasheet_peak: None where unknown, e.g. a
    CPU) and over the matmul peak the trainer measured and cached (monitor/throughput.peak_flops)."""
    if not tokens_per_s:
        return {}
    achieved = tokens_per_s * flops_per_token
    datasheet = gpu_peaks.datasheet_peak(device, precision)
    measured = peak_flops(device, precision)
    return {"achieved_flops": achieved, "datasheet_peak_flops": datasheet, "measured_peak_flops": measured,
            "mfu_datasheet": achieved / datasheet if datasheet else None, "mfu_measured": achieved / measured}


def mfu_text(m: dict) -> str:
    if not m:
        return "MFU not measured"
    ds = f"{m['mfu_datasheet']:.1%} of datasheet" if m.get("mfu_datasheet") is not None else "no datasheet peak"
    return f"MFU {ds}, {m['mfu_measured']:.1%} of measured matmul"


class ReservedMemory:
    """Peak torch.cuda.memory_reserved over a block, sampled every 10 ms: the trainer's monitor resets the peak
    counters at each log row, so max_memory_reserved alone would only cover the last window. The caching
    allocator keeps what it reserved, so sampling misses nothing of consequence. None on a CPU."""

    def __init__(self, device: torch.device):
        self.device, self.peak, self._stop = device, None, threading.Event()

    def __enter__(self) -> "ReservedMemory":
        if self.device.type == "cuda":
            self.peak = torch.cuda.memory_reserved(self.device)
            self._thread = threading.Thread(target=self._sample, daemon=True)
            self._thread.start()
        return self

    def _sample(self) -> None:
        while not self._stop.wait(0.01):
            self.peak = max(self.peak, torch.cuda.memory_reserved(self.device))

    def __exit__(self, *exc) -> None:
        if self.device.type == "cuda":
            self._stop.set()
            self._thread.join()
            self.peak = max(self.peak, torch.cuda.max_memory_reserved(self.device))


def command(*argv: str) -> tuple[int, str]:
    """A scratchlm command in this process, as from the shell: (exit status, its stdout)."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        rc = scratchlm(list(argv))
    return rc, out.getvalue()


# ---- the workdir: configs written with the project's own template ---------------------------------------------
def write_config(workdir: Path, name: str, s: Settings, model: dict, train: dict, vocab: int) -> Path:
    sources = [{"name": d, "domain": d, "path": f"corpus/{d}.jsonl"} for d in ("code", "docs", "web")]
    preset = {"run": {"workdir": ".", "demo": True},  # a corpus this small is a demo: its verdicts do not stop it
              "data": {"min_chars": 100, "val_fraction": 0.1, "val_max_docs": 8},
              "tokenizer": {"vocab_size": vocab, "sample_chars": min(2_000_000, 2 * s.corpus_chars)},
              "model": model,
              "train": {"max_steps": s.steps, "batch_size": s.loop_batch, "learning_rate": 3e-3,
                        "warmup_steps": max(1, s.steps // 10), "checkpoint_every": max(1, s.steps // 2),
                        "eval_every": max(1, s.steps // 2), "log_every": max(5, s.steps // 20), "compile": False,
                        **({"threads": s.threads} if s.threads else {}), **train},
              "eval": {"max_batches": 2, "max_new_tokens": 8}}
    path = workdir / f"gpu-check-{name}.toml"
    path.write_text(render_config(sources, preset), encoding="utf-8")
    return path


def check_prepare(workdir: Path, s: Settings) -> dict:
    corpus = workdir / "corpus"
    if not (corpus / "code.jsonl").exists():
        build_builtin_corpus(corpus, code_max_chars=s.corpus_chars)
    cfg = load_config(write_config(workdir, "base", s, s.loop_model, {}, s.vocab))
    art = plan_artifacts(cfg)
    stage_training_inputs(cfg, art, allow_contaminated=True)
    shards = read_json(art["shards"].dir / "shards.json")
    tokens = sum(v["tokens"] for v in shards["train"].values())
    return {"status": "pass", "summary": f"{tokens:,} training tokens, vocabulary {shards['vocab_size']:,}",
            "train_tokens": tokens, "vocab_size": shards["vocab_size"], "shards": str(art["shards"].dir)}


def check_peaks(s: Settings, precisions: list[str]) -> dict:
    peaks = {p: {"datasheet": gpu_peaks.datasheet_peak(s.device, p), "measured_matmul": peak_flops(s.device, p)}
             for p in precisions}
    spec = gpu_peaks.spec_for(s.device)
    text = "; ".join(f"{p}: datasheet {v['datasheet'] / 1e12:,.0f} TFLOP/s" if v["datasheet"] else
                     f"{p}: no datasheet peak" for p, v in peaks.items())
    text += "; measured " + ", ".join(f"{p} {v['measured_matmul'] / 1e12:.3g}" for p, v in peaks.items())
    return {"status": "pass", "summary": f"{spec.name if spec else 'unknown SKU'}: {text} TFLOP/s",
            "sku": spec.key if spec else None, "peaks": peaks}


def check_kernels(s: Settings, precision: str) -> dict:
    """One training step of the 125m shape under torch.profiler: which attention kernels ran."""
    cfg = model_config(s.throughput_model or {"preset": "125m"})
    model = GPT(cfg, s.throughput_vocab).to(s.device).train()
    x = torch.randint(0, s.throughput_vocab, (2, cfg.seq_len), device=s.device)

    def step() -> None:
        with autocast(s.device, precision):
            _, loss = model(x, x)
        loss.backward()
        sync(s.device)

    step()  # kernel selection and lazy initialisation outside the profile
    activities = [torch.profiler.ProfilerActivity.CPU]
    if s.device.type == "cuda":
        activities.append(torch.profiler.ProfilerActivity.CUDA)
    with torch.profiler.profile(activities=activities) as prof:
        step()
    events = prof.events()
    sdpa = sorted({e.name for e in events if "scaled_dot_product" in e.name or "attention" in e.name.lower()})
    if s.device.type != "cuda":
        ops = sorted({e.name for e in events})
        return {"status": "pass", "flash": "not applicable (CPU)", "attention_ops": sdpa, "cpu_ops": ops[:80],
                "summary": f"CPU: flash not applicable; attention ops {', '.join(sdpa) or 'none'}"}
    kernels = sorted({e.name for e in events if e.device_type == torch.autograd.DeviceType.CUDA})
    flash = [k for k in kernels if "flash" in k.lower()]
    attention = [k for k in kernels if any(w in k.lower() for w in ("flash", "fmha", "attention", "sdpa"))]
    return {"status": "pass" if flash else "fail", "flash": bool(flash), "attention_kernels": attention,
            "attention_ops": sdpa, "cuda_kernels": kernels[:200],
            "summary": (f"flash kernels ran: {', '.join(k[:60] for k in flash[:2])}" if flash else
                        f"no flash kernel; attention ran {', '.join(k[:60] for k in attention[:3]) or '?'}")}


def model_config(model: dict):
    """The [model] section alone, with its preset applied (the config needs a source to load; it is not read)."""
    return config_from_dict({"data": {"sources": [{"name": "x", "domain": "x", "path": "x"}]}, "model": model}).model


# ---- the loop: plan -> train -> check's resume test -> eval, through the commands -------------------------------
def check_plan(cfg_path: Path, s: Settings, precision: str, probe_seconds: float) -> dict:
    with ReservedMemory(s.device) as reserved:
        rc, out = command("plan", "-c", str(cfg_path), "--json", "--remeasure", "--probe-seconds",
                          str(probe_seconds))
    if not out.strip():
        return {"status": "fail", "summary": f"`scratchlm plan` exited {rc} without a plan"}
    plan = json.loads(out)
    probe, comparison = plan.get("probe"), plan.get("memory_comparison") or {}
    result = {"exit_status": rc, "level": plan["level"], "not_probed": plan.get("not_probed"),
              "verdicts": {v["name"]: v["level"] for v in plan["verdicts"]},
              "estimate_peak_bytes": plan["memory"]["configured"]["peak"],
              "probe_peak_bytes": comparison.get("measured"), "estimate_over_measured": comparison.get("ratio"),
              "reserved_peak_bytes": reserved.peak, "flops_per_token": plan["arithmetic"]["flops_per_token"]}
    if probe is None:
        return {**result, "status": "fail", "summary": f"the step was not probed ({plan.get('not_probed')})"}
    result.update(tokens_per_s=probe["tokens_per_s"], probe=probe,
                  mfu=mfu(probe["tokens_per_s"], result["flops_per_token"], s.device, precision))
    return {**result, "status": "pass",
            "summary": f"{probe['tokens_per_s']:,.0f} tokens/s, {mfu_text(result['mfu'])}; memory estimate "
                       f"{comparison.get('ratio', 0):.2f}x the probe's peak; plan {plan['level']}"}


def train_dir(cfg_path: Path) -> Path:
    return plan_artifacts(load_config(cfg_path))["train"].dir


def check_train(cfg_path: Path, s: Settings, plan: dict | None) -> dict:
    with ReservedMemory(s.device) as reserved:
        rc, _ = command("train", "-c", str(cfg_path), "--force")
    directory = train_dir(cfg_path)
    rows = read_rows(directory / "metrics.jsonl")
    train = [r for r in rows if "loss" in r]
    evals = [r for r in rows if "eval" in r]
    checkpoints = list_checkpoints(directory / "checkpoints")
    if rc != 0 or not train:
        return {"status": "fail", "summary": f"`scratchlm train` exited {rc} after {len(train)} log rows"}
    first, last = train[0]["loss"], train[-1]["loss"]
    speed = [r["tokens_per_s"] for r in train[1:]] or [train[0]["tokens_per_s"]]  # the first row holds warm-up
    allocated = max((r.get("memory_bytes", 0) for r in train), default=0)
    estimate = (plan or {}).get("estimate_peak_bytes")
    result = {"exit_status": rc, "loss_first": first, "loss_last": last, "log_rows": len(train),
              "evaluations": len(evals), "checkpoints": [c.name for c in checkpoints],
              "tokens_per_s": statistics.median(speed),
              "mfu_trainer_log": statistics.median(r["mfu"] for r in train if "mfu" in r),
              "mfu_datasheet_trainer_log": (statistics.median(r["mfu_datasheet"] for r in train)
                                            if all("mfu_datasheet" in r for r in train) else None),
              "memory_kind": train[-1].get("memory_kind"), "peak_allocated_bytes": allocated,
              "reserved_peak_bytes": reserved.peak, "estimate_peak_bytes": estimate,
              "estimate_over_allocated": estimate / allocated if estimate and allocated else None}
    # falls: by 3% from the first log row, and below ln(vocab), the loss of a uniform guess
    falls = last < first * 0.97 and last < math.log(s.vocab)
    ok = falls and evals and checkpoints
    mfu_log = (f"MFU {result['mfu_datasheet_trainer_log']:.1%} of datasheet, "
               if result["mfu_datasheet_trainer_log"] is not None else "MFU ")
    return {**result, "status": "pass" if ok else "fail",
            "summary": f"loss {first:.3f} -> {last:.3f}{'' if falls else ' (did not fall)'}, "
                       f"{len(evals)} evaluations, {len(checkpoints)} checkpoints; "
                       f"{result['tokens_per_s']:,.0f} tokens/s, {mfu_log}{result['mfu_trainer_log']:.1%} of "
                       f"measured (trainer log); peak {allocated / GiB:.2f} GiB ({result['memory_kind']}), "
                       f"reserved {(reserved.peak or 0) / GiB:.2f} GiB, plan estimate {(estimate or 0) / GiB:.2f} GiB"}


def check_resume(cfg_path: Path, s: Settings) -> dict:
    env = {"TORCH_COMPILE_DISABLE": "1"} if s.dry else {}  # --dry: no C++ compile in the fresh processes
    with patched_environ(env):
        rc, out = command("check", "-c", str(cfg_path), "--json")
    items = {v["name"]: v for v in json.loads(out)} if out.strip() else {}
    resume = items.get(RESUME_CHECK)
    if resume is None:
        return {"status": "fail", "summary": f"`scratchlm check` exited {rc} without its resume item"}
    diff = resume["evidence"].get("max_relative_difference")
    return {"status": "pass" if resume["level"] == "ok" else "fail", "level": resume["level"],
            "max_relative_difference": diff, "evidence": resume["evidence"],
            "summary": (f"{resume['level']}: losses after resuming in a fresh process differ by {diff:.1e} "
                        "relative (tolerance 1e-3)" if diff is not None else
                        f"{resume['level']}: {resume['summary'][-200:]}")}


@contextlib.contextmanager
def patched_environ(env: dict):
    before = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        yield
    finally:
        for k, v in before.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def check_eval(cfg_path: Path) -> dict:
    rc, _ = command("eval", "-c", str(cfg_path), "--force")
    if rc != 0:
        return {"status": "fail", "summary": f"`scratchlm eval` exited {rc}"}
    result = read_json(plan_artifacts(load_config(cfg_path))["eval"].dir / "eval.json")
    finite = math.isfinite(result["val_loss"])
    return {"status": "pass" if finite else "fail", "val_loss": result["val_loss"],
            "unigram_loss": result["unigram_loss"], "domains": result["domains"],
            "summary": f"validation loss {result['val_loss']:.3f} (unigram baseline {result['unigram_loss']:.3f}) "
                       f"over {', '.join(result['domains'])}"}


# ---- numerical comparisons on the trained model ------------------------------------------------------------------
def trained_batch(cfg_path: Path, s: Settings):
    """The last checkpoint of the variant's training, in train mode on the device, and one batch of its shards."""
    cfg = load_config(cfg_path)
    art = plan_artifacts(cfg)
    checkpoints = list_checkpoints(art["train"].dir / "checkpoints")
    if not checkpoints:
        raise RuntimeError(f"no checkpoint in {art['train'].dir}: the training check failed")
    model, _, meta = load_model(checkpoints[-1], s.device)
    batches = Batches(art["shards"].dir, meta["vocab_size"], model.cfg.seq_len, s.loop_batch, seed=1)
    x, y = (t.to(s.device) for t in batches.next())
    return model.train(), x, y


def loss_and_grads(model, x, y, s: Settings, precision: str, scale: float,
                   plain: bool = False) -> tuple[float, torch.Tensor]:
    """The loss and all gradients flattened, in fp32, backpropagated from loss x scale. plain: the full logits
    and F.cross_entropy instead of the model's chunked head loss."""
    model.zero_grad(set_to_none=True)
    with autocast(s.device, precision):
        if plain:
            logits, _ = model(x)
            loss = F.cross_entropy(logits.reshape(-1, logits.size(-1)).float(), y.reshape(-1))
        else:
            _, loss = model(x, y)
    (loss * scale).backward()
    grads = torch.cat([p.grad.float().reshape(-1) / scale for p in model.parameters() if p.grad is not None])
    return float(loss.detach()), grads


def finite(result: tuple[float, torch.Tensor]) -> bool:
    return math.isfinite(result[0]) and bool(torch.isfinite(result[1]).all())


def compare(first, second, precision: str, tolerances: tuple[float, float], names: tuple[str, str]) -> dict:
    """first(scale), second(scale) -> (loss, gradients). Both at the largest scale where either one's gradients
    are finite: fp16 training skips a step whose scaled gradients overflow and lowers the scale, as this does;
    one finite and the other not is a difference, and fails."""
    for scale in GRAD_SCALES.get(precision, (1.0,)):
        a, b = first(scale), second(scale)
        if finite(a) or finite(b):
            break
    loss_tol, grad_tol = (t / 100 for t in tolerances) if precision == "fp32" else tolerances
    (la, ga), (lb, gb) = a, b
    both = finite(a) and finite(b)
    loss_diff = abs(la - lb) / max(abs(la), 1e-12)
    grad_diff = float((ga - gb).norm() / ga.norm().clamp(min=1e-12)) if both else float("nan")
    ok = both and loss_diff <= loss_tol and grad_diff <= grad_tol
    return {"status": "pass" if ok else "fail", f"loss_{names[0]}": la, f"loss_{names[1]}": lb,
            "loss_relative_difference": loss_diff, "grad_relative_difference": grad_diff,
            f"finite_{names[0]}": finite(a), f"finite_{names[1]}": finite(b), "loss_scale": scale,
            "tolerance": {"loss": loss_tol, "grad": grad_tol},
            "summary": f"loss {la:.6f} vs {lb:.6f} ({loss_diff:.1e} relative, tolerance {loss_tol:.0e}); gradients "
                       f"{grad_diff:.1e} relative (tolerance {grad_tol:.0e})"
                       + (f", loss scale {scale:g}" if scale != 1 else "")
                       + ("" if both else f"; NOT FINITE: {names[0]} {finite(a)}, {names[1]} {finite(b)}")}


def check_head_loss(cfg_path: Path, s: Settings, precision: str) -> dict:
    model, x, y = trained_batch(cfg_path, s)
    return compare(lambda scale: loss_and_grads(model, x, y, s, precision, scale, plain=True),
                   lambda scale: loss_and_grads(model, x, y, s, precision, scale), precision,
                   TOLERANCE["head_loss"], ("cross_entropy", "head_loss"))


def check_compiled(cfg_path: Path, s: Settings, precision: str) -> dict:
    model, x, y = trained_batch(cfg_path, s)
    compiled = torch.compile(model)  # the trainer's call (train/compile_choice.py)
    return compare(lambda scale: loss_and_grads(model, x, y, s, precision, scale),
                   lambda scale: loss_and_grads(compiled, x, y, s, precision, scale), precision,
                   TOLERANCE["compiled"], ("eager", "compiled"))


# ---- throughput on the presets, by `scratchlm plan`'s probe -----------------------------------------------------
def check_throughput(cfg_path: Path, s: Settings, precision: str) -> dict:
    planned = check_plan(cfg_path, s, precision, s.throughput_probe_seconds)
    if planned["status"] != "pass":
        return planned
    probe = planned.pop("probe")
    compiled = probe.get("compile") or {}
    compiled_speed = (probe["tokens_per_step"] / compiled["compiled_step_seconds"]
                      if "compiled_step_seconds" in compiled else None)
    planned.update(eager={"tokens_per_s": probe["tokens_per_s"], **planned.pop("mfu")},
                   compiled={"tokens_per_s": compiled_speed,
                             **mfu(compiled_speed, planned["flops_per_token"], s.device, precision)},
                   compile_seconds=compiled.get("compile_seconds"), compile_error=compiled.get("error"),
                   micro_batch=probe["micro_batch"], peak_allocated_bytes=probe["peak_memory"],
                   peak_allocated_process_bytes=(torch.cuda.max_memory_allocated(s.device)
                                                 if s.device.type == "cuda" else None))
    e, c = planned["eager"], planned["compiled"]
    text = (f"eager {e['tokens_per_s']:,.0f} tokens/s ({mfu_text(e)}); "
            + (f"compiled {c['tokens_per_s']:,.0f} tokens/s ({mfu_text(c)}, compile {planned['compile_seconds']:.0f}"
               " s)" if compiled_speed else f"compiled: {compiled.get('error', 'not measured')}")
            + f"; peak {planned['peak_allocated_bytes'] / GiB:.2f} GiB, reserved "
              f"{(planned['reserved_peak_bytes'] or 0) / GiB:.2f} GiB, plan estimate "
              f"{planned['estimate_over_measured']:.2f}x the peak")
    return {**planned, "status": "pass" if compiled_speed else "fail", "summary": text}


# ---- torchrun ---------------------------------------------------------------------------------------------------
def check_torchrun(cfg_path: Path, s: Settings, gpus: int) -> dict:
    if gpus < 2:
        return {"status": "skipped", "reason": f"{gpus} GPU(s): torchrun --nproc_per_node 2 needs 2"}
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
           "-m", "scratchlm", "train", "-c", str(cfg_path), "--force"]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    rows = [r_ for r_ in read_rows(train_dir(cfg_path) / "metrics.jsonl") if "loss" in r_]
    if r.returncode != 0 or not rows:
        return {"status": "fail", "summary": f"torchrun exited {r.returncode}: "
                f"{(r.stderr.strip().splitlines() or ['?'])[-1][:200]}"}
    first, last = rows[0]["loss"], rows[-1]["loss"]
    speed = statistics.median(x["tokens_per_s"] for x in rows[1:] or rows)
    return {"status": "pass" if last < first * 0.97 else "fail", "loss_first": first, "loss_last": last,
            "tokens_per_s": speed, "summary": f"2 ranks: loss {first:.3f} -> {last:.3f}, {speed:,.0f} tokens/s"}


# ---- the order: what matters most first, so a budget cut leaves the least important undone -----------------------
def schedule(workdir: Path, s: Settings, args: argparse.Namespace, gpus: int) -> list[tuple[str, callable]]:
    """The loop eager in each precision, throughput in the first precision, the loop compiled, throughput in the
    other precisions, torchrun: what a budget cut leaves undone is what matters least."""
    first, *others = args.precisions
    checks = [("prepare", lambda: check_prepare(workdir, s)), ("peaks", lambda: check_peaks(s, args.precisions))]
    checks += [(f"kernels/{p}", lambda p=p: check_kernels(s, p)) for p in args.precisions]
    if "eager" in args.modes:
        checks += [c for p in args.precisions for c in loop_checks(workdir, s, p, "eager")]
    checks += [throughput_check(workdir, s, preset, first) for preset in args.presets]
    if "compiled" in args.modes:
        checks += [c for p in args.precisions for c in loop_checks(workdir, s, p, "compiled")]
    checks += [throughput_check(workdir, s, preset, p) for p in others for preset in args.presets]
    torchrun = write_config(workdir, "torchrun", s, s.loop_model, {"precision": first}, s.vocab)
    checks.append((f"torchrun/{first}", lambda: check_torchrun(torchrun, s, gpus)))
    return checks


def loop_checks(workdir: Path, s: Settings, precision: str, mode: str) -> list[tuple[str, callable]]:
    path = write_config(workdir, f"loop-{precision}-{mode}", s, s.loop_model,
                        {"precision": precision, "compile": mode == "compiled"}, s.vocab)
    name, plan = f"loop/{precision}/{mode}", {}

    def planned() -> dict:
        plan.update(check_plan(path, s, precision, s.probe_seconds))
        return plan

    checks = [(f"{name}/plan", planned), (f"{name}/train", lambda: check_train(path, s, plan)),
              (f"{name}/resume", lambda: check_resume(path, s)), (f"{name}/eval", lambda: check_eval(path))]
    if mode == "eager":  # on the eager run's checkpoint: the comparisons need a trained model, either will do
        checks += [(f"loop/{precision}/head_loss", lambda: check_head_loss(path, s, precision)),
                   (f"loop/{precision}/compiled", lambda: check_compiled(path, s, precision))]
    return checks


def throughput_check(workdir: Path, s: Settings, preset: str, precision: str) -> tuple[str, callable]:
    model = {"preset": preset} if s.throughput_model is None else dict(s.throughput_model)
    path = write_config(workdir, f"throughput-{preset}-{precision}", s, model,
                        {"precision": precision, "compile": True, "batch_size": s.throughput_batch}, s.throughput_vocab)
    return f"throughput/{preset}/{precision}", lambda: check_throughput(path, s, precision)


# ---- main ---------------------------------------------------------------------------------------------------------
def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dry", "--dry-run-cpu", dest="dry", action="store_true",
                    help="the same code path on CPU: tiny shapes, 20 steps (no GPU needed; numbers mean nothing)")
    ap.add_argument("--workdir", type=Path, default=None,
                    help="the prepared workdir to use or make (default: a new temporary directory, kept)")
    ap.add_argument("--out", type=Path, default=None, help="where gpu_check.json and .md go (default: $OUT, or .)")
    ap.add_argument("--steps", type=int, default=None, help="training steps of the loop (default 200; --dry 20)")
    ap.add_argument("--batch", type=int, default=32, help="micro-batch of the throughput presets (default 32)")
    ap.add_argument("--precisions", nargs="+", default=None, choices=["bf16", "fp16", "fp32"],
                    help="default bf16 fp16; --dry: the CPU's own (bf16 where native, else fp32)")
    ap.add_argument("--modes", nargs="+", default=None, choices=list(MODES),
                    help="the loop's modes (default eager compiled; --dry: eager, whose checks include one compile)")
    ap.add_argument("--presets", nargs="+", default=None, choices=["50m", "125m", "350m", "1b"],
                    help="throughput presets (default 125m 350m; --dry: one, in a tiny shape)")
    ap.add_argument("--budget-s", type=float, default=None,
                    help="start no check after this many seconds (default 420; --dry 600): the rest are skipped")
    args = ap.parse_args(argv)
    # --dry keeps to one precision, one mode and one preset: on 2 cores a loop costs ~40 s (its resume test alone
    # two fresh processes), and fp16 matmuls are emulated on a CPU. `--dry --precisions bf16 fp16 --modes eager
    # compiled` runs them all the same; the eager loop's compiled check calls torch.compile either way.
    defaults = {"precisions": [pick_precision("auto", torch.device("cpu"))], "modes": ["eager"],
                "presets": ["125m"], "budget_s": 600.0} if args.dry else \
        {"precisions": list(PRECISIONS), "modes": list(MODES), "presets": list(PRESETS), "budget_s": 420.0}
    for key, value in defaults.items():
        if getattr(args, key) is None:
            setattr(args, key, value)
    return args


def dry_compile() -> None:
    """--dry: torch.compile with the eager backend in this process (Inductor's C++ build takes minutes on 2
    cores); the resume test's fresh processes get TORCH_COMPILE_DISABLE=1. The calls are the same."""
    compile_ = torch.compile

    def eager_backend(model=None, **kwargs):
        return compile_(model, **{**kwargs, "backend": "eager"})

    torch.compile = eager_backend


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if not args.dry and not torch.cuda.is_available():
        sys.exit("gpu_check: no CUDA device visible; this script checks a GPU (--dry runs its code path on CPU "
                 "with a tiny shape)")
    s = settings(args)
    if s.dry:
        dry_compile()
    out_dir = args.out or Path(os.environ.get("OUT") or ".")
    out_dir.mkdir(parents=True, exist_ok=True)
    workdir = (args.workdir or Path(tempfile.mkdtemp(prefix="scratchlm-gpu-check-"))).resolve()
    workdir.mkdir(parents=True, exist_ok=True)
    gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
    name = torch.cuda.get_device_name(s.device) if s.device.type == "cuda" else f"CPU ({os.cpu_count()} cores)"
    record = Record(out_dir, s.device, {
        "device": name, "gpus": gpus, "torch": torch.__version__, "cuda": torch.version.cuda, "dry": s.dry,
        "workdir": str(workdir), "budget_s": args.budget_s, "precisions": args.precisions, "modes": args.modes,
        "presets": args.presets, "compile_backend": "eager (--dry)" if s.dry else "inductor", "checks": []})
    print(f"gpu_check: workdir {workdir} (--workdir {workdir} reuses it)", file=sys.stderr, flush=True)
    for check_name, fn in schedule(workdir, s, args, gpus):
        run_check(record, check_name, fn, args.budget_s)
    counts = record.data["counts"]
    print(f"gpu_check: {counts}; wrote {out_dir / 'gpu_check.json'} and {out_dir / 'gpu_check.md'}",
          file=sys.stderr)
    return 3 if counts["fail"] or counts["error"] else 0


if __name__ == "__main__":
    sys.exit(main())
