"""The update ratio's copy of the weights: kept in host memory whatever the device, and compared back a slice at a
time, so that a log step on a GPU adds no weight-sized tensor to the device (issue 39)."""
import pytest
import torch
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.utils._python_dispatch import TorchDispatchMode

from scratchlm.config import ModelConfig
from scratchlm.model import GPT
from scratchlm.monitor import norms
from scratchlm.monitor.norms import UpdateRatio, grouped_parameters


def test_the_copy_is_kept_off_the_device():
    """A model's parameters as fake CUDA tensors (FakeTensorMode: shapes and devices, no GPU, no memory)."""
    shapes = grouped_parameters(GPT(ModelConfig(n_layer=1, d_model=32, n_head=4, seq_len=16), 64))
    with FakeTensorMode():
        groups = {g: [torch.nn.Parameter(torch.empty(p.shape, device="cuda")) for p in ps]
                  for g, ps in shapes.items()}
        ratio = UpdateRatio()
        ratio.snapshot(groups)
    assert {p.device.type for ps in groups.values() for p in ps} == {"cuda"}
    assert {b.device.type for bs in ratio.before.values() for b in bs} == {"cpu"}


class _LargestAllocation(TorchDispatchMode):
    """The largest tensor any operation allocates, in elements (views and in-place results allocate nothing)."""

    def __init__(self):
        super().__init__()
        self.largest = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        inputs = {t.untyped_storage().data_ptr() for t in torch.utils._pytree.tree_leaves((args, kwargs))
                  if isinstance(t, torch.Tensor)}
        for t in torch.utils._pytree.tree_leaves(out):
            if isinstance(t, torch.Tensor) and t.untyped_storage().data_ptr() not in inputs:
                self.largest = max(self.largest, t.untyped_storage().nbytes() // t.element_size())
        return out


def test_the_difference_is_taken_a_slice_at_a_time(monkeypatch):
    monkeypatch.setattr(norms, "SLICE", 1000)
    torch.manual_seed(0)
    model = GPT(ModelConfig(n_layer=2, d_model=32, n_head=4, seq_len=16), 300)
    groups = grouped_parameters(model)
    before = {g: [p.detach().clone() for p in ps] for g, ps in groups.items()}
    ratio = UpdateRatio()
    ratio.snapshot(groups)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn_like(p), alpha=1e-3)
    with _LargestAllocation() as ops:
        measured = ratio.measure(groups)
    assert max(p.numel() for p in model.parameters()) > 1000
    assert 0 < ops.largest <= 1000  # on a GPU, a slice brought back to the device is the largest
    for g, ps in groups.items():
        delta = torch.linalg.vector_norm(torch.cat([(p.detach() - b).reshape(-1) for p, b in zip(ps, before[g])]))
        weight = torch.linalg.vector_norm(torch.cat([p.detach().reshape(-1) for p in ps]))
        assert measured[g] == pytest.approx(float(delta / weight), rel=1e-5)
    assert ratio.before is None  # the copy is freed until the next log step
