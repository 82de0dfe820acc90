"""What makes the trainer fast on a GPU, checked on CPU: no host-device synchronisation per micro-batch or per step
(the loss and the gradient norm stay device tensors, read back and checked for finiteness only where a log row, a
checkpoint or an evaluation follows) and page-locked batches for CUDA (bench/gpu_check.py: test_gpu_check.py)."""
import threading
from collections import defaultdict

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


def test_adamw_is_fused_where_measured_faster_and_left_to_torch_elsewhere():
    from scratchlm.train.optim import adamw_implementation, build_optimizer

    model = torch.nn.ModuleDict({"tok_emb": torch.nn.Embedding(8, 4), "proj": torch.nn.Linear(4, 4)})
    assert build_optimizer(model, "adamw", 1e-3, 0.1, device_type="cpu").defaults["fused"] is True
    assert adamw_implementation("cuda") == {"fused": True} and adamw_implementation("mps") == {}
