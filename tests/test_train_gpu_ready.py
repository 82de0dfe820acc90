"""What makes the trainer fast on a GPU, checked on CPU: no host-device synchronisation per micro-batch or per step
(the loss and the gradient norm stay device tensors, read back and checked for finiteness only where a log row, a
checkpoint or an evaluation follows), page-locked batches for CUDA, and bench/gpu_check.py's code path."""
import importlib.util
import json
import os
import subprocess
import sys
import threading
from collections import defaultdict
from pathlib import Path

import pytest
import torch

from scratchlm import stages
from scratchlm.stages import load_config, plan_artifacts
from scratchlm.train import loop
from scratchlm.train.loader import MixtureLoader, Prefetcher, on_device, pins_batches

# Every way a tensor's value reaches Python; each one waits for the device on CUDA.
READBACKS = ("item", "tolist", "__float__", "__int__", "__bool__", "__index__")


@pytest.fixture(scope="module")
def prepared(builtin_corpus, micro_config, tmp_path_factory):
    d = tmp_path_factory.mktemp("sync")
    path = micro_config(d, builtin_corpus, steps=9, ckpt=9, extra="[monitor]\npeak_flops = 1e12\n")
    cfg = load_config(path)
    stages.stage_training_inputs(cfg, plan_artifacts(cfg))
    return path


def _config(path, **train):
    text = path.read_text()
    for key, value in train.items():
        text = text.replace(f"\n{key} = ", f"\n# {key} = ")  # the template's value, if any, gives way
        text = text.replace("[train]\n", f"[train]\n{key} = {value}\n", 1)
    variant = path.with_name("variant.toml")
    variant.write_text(text)
    return load_config(variant)


def test_the_loop_reads_tensors_back_only_where_a_log_row_checkpoint_or_evaluation_follows(prepared, monkeypatch):
    cfg = _config(prepared, grad_accum=2, log_every=4, checkpoint_every=6, eval_every=9, max_steps=9)
    running = {"step": None}
    calls: dict = defaultdict(list)  # training step (0-based, as the loop counts) -> conversions made during it

    get = Prefetcher.get

    def get_and_note(self, step, micro):  # the step whose micro-batches are being drawn is the step running
        running["step"] = step
        return get(self, step, micro)

    monkeypatch.setattr(Prefetcher, "get", get_and_note)
    for name in READBACKS:
        original = getattr(torch.Tensor, name)

        def counted(self, *args, _name=name, _original=original, **kwargs):
            if running["step"] is not None and threading.current_thread() is threading.main_thread():
                calls[running["step"]].append(_name)
            return _original(self, *args, **kwargs)

        monkeypatch.setattr(torch.Tensor, name, counted)
    stages.stage_train(cfg, plan_artifacts(cfg))
    t = cfg.train
    due = {s for s in range(t.max_steps) if loop.readback_due(s + 1, t, None)}
    assert due == {3, 5, 7, 8}  # steps 4 and 8 log, 6 and 9 checkpoint, 9 evaluates (counted from 1)
    assert all(calls[s] for s in due)  # the count sees the read-backs that happen
    assert {s for s in calls if calls[s]} <= due, dict(calls)


def _tiny_loader(tmp_path):
    from test_train_core import _shards

    return MixtureLoader(_shards(tmp_path, [40] * 20), 16, 4, seed=3, grad_accum=2)


def test_batches_are_pinned_for_cuda_only():
    assert pins_batches(torch.device("cuda")) and pins_batches(torch.device("cuda", 1))
    assert not pins_batches(torch.device("cpu")) and not pins_batches(torch.device("mps"))


@pytest.mark.parametrize("pin, depth, pinned", [(True, 2, True), (False, 2, False), (True, 0, False)])
def test_the_prefetch_thread_reads_each_batch_into_one_pinned_buffer_when_asked(tmp_path, monkeypatch, pin, depth,
                                                                                pinned):
    """Pinning needs CUDA; on CPU the request is recorded instead. One contiguous buffer per micro-batch, in the
    shards' 2-byte width, allocated page-locked in the prefetch thread: not two strided int64 slices pinned by a
    copy each. With depth 0 there is no thread to pin in."""
    allocations = []
    empty = torch.empty

    def recording_empty(*shape, pin_memory=False, **kwargs):
        allocations.append((threading.current_thread().name, pin_memory))
        return empty(*shape, **kwargs)

    loader = _tiny_loader(tmp_path)
    expected = {(step, micro): loader.draw(step, micro) for step in range(2) for micro in range(2)}
    monkeypatch.setattr(torch, "empty", recording_empty)
    batches = Prefetcher(loader, start_step=0, max_steps=2, depth=depth, pin_memory=pin)
    for (step, micro), (x_expected, y_expected, _) in expected.items():
        rows, _ = batches.get(step, micro)
        assert rows.is_contiguous() and rows.dtype == torch.int16
        x, y = on_device(rows, torch.device("cpu"))
        assert torch.equal(x, x_expected) and torch.equal(y, y_expected)
    batches.close()
    thread = "scratchlm-prefetch" if depth else "MainThread"
    assert allocations == [(thread, pinned)] * 4  # 2 steps x 2 micro-batches, one buffer each


GPU_CHECK = Path(__file__).resolve().parents[1] / "bench" / "gpu_check.py"


def test_gpu_check_runs_its_whole_code_path_on_cpu(tmp_path):
    """--dry-run-cpu: every preset x mode through the same functions as on a GPU, so the script cannot rot unseen."""
    r = subprocess.run([sys.executable, str(GPU_CHECK), "--dry-run-cpu", "--out", str(tmp_path)],
                       capture_output=True, text=True, timeout=300, env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert r.returncode == 0, r.stderr[-3000:]
    result = json.loads((tmp_path / "gpu_check.json").read_text())
    variants = {(v["preset"], v["mode"]): v for v in result["variants"]}
    assert set(variants) == {(p, m) for p in ("125m", "350m") for m in ("eager", "compiled", "checkpointing")}
    for v in variants.values():
        assert v["status"] == "ok", v
        assert v["tokens_per_s"] > 0 and v["mfu_measured_matmul"] > 0 and v["peak_memory_bytes"] >= 0
        assert v["estimate_peak_bytes"] > 0 and v["activation_checkpointing"] == (v["mode"] == "checkpointing")


def test_gpu_check_records_a_failing_variant_and_goes_on(tmp_path, monkeypatch):
    spec = importlib.util.spec_from_file_location("gpu_check", GPU_CHECK)
    gpu_check = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gpu_check)

    def no_compiler(*args, **kwargs):
        raise RuntimeError("no compiler here\nsecond line")

    monkeypatch.setattr(torch, "compile", no_compiler)
    result = gpu_check.main(["--dry-run-cpu", "--presets", "125m", "--out", str(tmp_path)])
    status = {v["mode"]: v["status"] for v in result["variants"]}
    assert status == {"eager": "ok", "compiled": "error", "checkpointing": "ok"}
    failed = next(v for v in result["variants"] if v["status"] == "error")
    assert failed["error"] == "RuntimeError: no compiler here" and "no_compiler" in failed["traceback"]
    assert json.loads((tmp_path / "gpu_check.json").read_text()) == json.loads(json.dumps(result))


@pytest.mark.skipif(torch.cuda.is_available(), reason="the refusal is for machines without CUDA")
def test_gpu_check_refuses_without_cuda_in_one_line_and_has_help():
    r = subprocess.run([sys.executable, str(GPU_CHECK)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 1 and r.stderr.strip().splitlines() == [
        "gpu_check: no CUDA device visible; this script measures a GPU (--dry-run-cpu runs its code path on CPU "
        "with a tiny shape)"]
    assert "--dry-run-cpu" in subprocess.run([sys.executable, str(GPU_CHECK), "--help"], capture_output=True,
                                             text=True, timeout=120).stdout


def test_adamw_is_fused_where_measured_faster_and_left_to_torch_elsewhere():
    from scratchlm.train.optim import adamw_implementation, build_optimizer

    model = torch.nn.ModuleDict({"tok_emb": torch.nn.Embedding(8, 4), "proj": torch.nn.Linear(4, 4)})
    assert build_optimizer(model, "adamw", 1e-3, 0.1, device_type="cpu").defaults["fused"] is True
    assert adamw_implementation("cuda") == {"fused": True} and adamw_implementation("mps") == {}
