"""Plan arithmetic and the memory estimate, against what torch really builds, saves and allocates."""
import itertools

import pytest
import torch

from scratchlm.config import ModelConfig, config_from_dict
from scratchlm.errors import UserError
from scratchlm.model import GPT
from scratchlm.model.device import autocast
from scratchlm.plan.arithmetic import Shapes, count_params, flops_per_token, model_arithmetic
from scratchlm.plan.hardware import PRESETS, resolve_target
from scratchlm.plan.memory import (estimate_memory, head_activation_bytes, layer_activation_bytes,
                                   optimizer_state_bytes, recommend_batch)
from scratchlm.plan.probe import run_probe
from scratchlm.plan.shrink import config_diff, family

VARIANTS = list(itertools.product(["swiglu", "gelu", "relu2"], [True, False], [None, 2], [True, False]))


@pytest.mark.parametrize("mlp,qk_norm,n_kv_head,tie,head_dim", [(*v, None) for v in VARIANTS]
                         + [("swiglu", True, None, True, 16), ("gelu", False, 2, False, 40)])
def test_param_count_equals_numel(mlp, qk_norm, n_kv_head, tie, head_dim):
    """head_dim: an explicit head width that is not d_model / n_head, which the model honours."""
    m = ModelConfig(n_layer=3, d_model=96, n_head=4, n_kv_head=n_kv_head, mlp=mlp, qk_norm=qk_norm,
                    tie_embeddings=tie, seq_len=32, mlp_ratio=3.5, head_dim=head_dim)
    with torch.device("meta"):
        model = GPT(m, 1000)
    p = count_params(m, 1000)
    assert p.total == model.num_params() == sum(t.numel() for t in model.parameters())
    assert p.non_embedding == model.num_params(embeddings=False)
    assert p.matrices == sum(t.numel() for n, t in model.named_parameters() if t.dim() == 2 and "blocks" in n)


def _saved_bytes(m: ModelConfig, vocab: int, batch: int, precision: str) -> int:
    model = GPT(m, vocab)
    own = {t.untyped_storage().data_ptr() for t in [*model.parameters(), *model.buffers()]}
    seen = {}

    def pack(t):
        ptr = t.untyped_storage().data_ptr()
        if ptr not in own:
            seen[ptr] = t.untyped_storage().nbytes()
        return t

    x = torch.randint(0, vocab, (batch, m.seq_len))
    y = torch.randint(0, vocab, (batch, m.seq_len))
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t), autocast(torch.device("cpu"), precision):
        model(x, y)
    return sum(seen.values())


@pytest.mark.parametrize("precision", ["fp32", "bf16"])
@pytest.mark.parametrize("mlp,qk_norm,n_kv_head", [("swiglu", True, None), ("gelu", False, 2), ("relu2", True, 2)])
def test_activation_count_matches_what_autograd_saves(precision, mlp, qk_norm, n_kv_head):
    m = ModelConfig(n_layer=2, d_model=64, n_head=4, n_kv_head=n_kv_head, mlp=mlp, qk_norm=qk_norm, seq_len=32)
    vocab, batch = 512, 2
    s = Shapes.of(m, vocab)
    est = (m.n_layer * layer_activation_bytes(m, s, precision) + head_activation_bytes(s)) * batch * 32
    est += 4 * vocab * m.d_model  # the head weight's gradient, made in the forward pass
    if precision == "bf16":  # autocast's weight casts are saved too (the chunked head casts its own, unsaved)
        est += 2 * count_params(m, vocab).matrices
    assert est == _saved_bytes(m, vocab, batch, precision)


def test_flops_and_tokens():
    m = ModelConfig(n_layer=2, d_model=64, n_head=4, seq_len=128)
    p = count_params(m, 1000)
    f = flops_per_token(m, 1000)
    assert f["dense"] == 6 * (p.non_embedding + 1000 * 64)  # the tied head does a matmul, the lookup does not
    assert f["attention"] == 12 * 2 * 64 * 128
    a = model_arithmetic(m, 1000, tokens_per_step=4096, max_steps=10)
    assert a["tokens_needed"] == 20 * p.total and a["tokens_needed_range"] == [20 * p.total, 100 * p.total]
    assert a["planned_flops"] == f["total"] * 40960


def test_optimizer_states():
    assert optimizer_state_bytes("adamw", 100, 60) == 800
    assert optimizer_state_bytes("muon", 100, 60) == 4 * 60 + 8 * 40  # one momentum for Muon's matrices


def _cfg(**train):
    return config_from_dict({"data": {"sources": [{"name": "a", "domain": "a", "path": "x"}]},
                             "model": {"n_layer": 2, "d_model": 128, "n_head": 4, "seq_len": 128},
                             "train": {"batch_size": 16, **train}})


@pytest.mark.parametrize("shape,precision,accum", [((2, 128, 4, 16, 2048), "fp32", 1),
                                                   ((3, 192, 6, 8, 4096), "bf16", 2)])
def test_estimate_within_25_percent_of_measured_peak(shape, precision, accum):
    n_layer, d, heads, batch, vocab = shape
    cfg = config_from_dict({"data": {"sources": [{"name": "a", "domain": "a", "path": "x"}]},
                            "model": {"n_layer": n_layer, "d_model": d, "n_head": heads, "seq_len": 128},
                            "train": {"batch_size": batch, "grad_accum": accum, "precision": precision,
                                      "compile": False}})
    probe = run_probe(cfg, vocab, torch.device("cpu"), precision, batch, accum, False, None, seconds=0.1,
                      min_steps=1)
    est = estimate_memory(cfg.model, vocab, batch, accum, precision, "adamw", "cpu")
    assert 0.75 <= est.peak / probe["peak_memory"] <= 1.25, (est.peak, probe["peak_memory"])
    assert probe["tokens_per_s"] > 0 and probe["checkpoint_bytes"] > 4 * count_params(cfg.model, vocab).total


def test_checkpointing_and_recommendation():
    m = _cfg().model
    plain = estimate_memory(m, 2048, 16, 1, "fp32", "adamw", "cpu")
    ckpt = estimate_memory(m, 2048, 16, 1, "fp32", "adamw", "cpu", activation_checkpointing=True)
    assert ckpt.activations < plain.activations and ckpt.peak < plain.peak
    rec = recommend_batch(m, 2048, 16, "fp32", "adamw", "cpu", memory=plain.total // 3, overhead=0,
                          activation_checkpointing=False)
    assert rec["fits"] and rec["micro_batch"] * rec["grad_accum"] == 16 and rec["micro_batch"] < 16
    assert not recommend_batch(m, 2048, 16, "fp32", "adamw", "cpu", memory=10 ** 6, overhead=0,
                               activation_checkpointing=False)["fits"]


def test_unknown_gpu_lists_presets():
    with pytest.raises(UserError) as e:
        resolve_target("a800", torch.device("cpu"))
    assert all(k in str(e.value) for k in PRESETS)
    t = resolve_target("H100", torch.device("cpu"))
    assert not t.local and t.memory == 80 * 1024 ** 3 and t.datasheet_peak["bf16"] > 9e14


def test_family_shrinks_and_diffs():
    m = ModelConfig(n_layer=12, d_model=768, n_head=12, n_kv_head=4)
    members = family(m)
    assert members and all(c.d_model // c.n_head == 64 and c.n_head // c.n_kv_head == 3 for c in members)
    assert [c.n_layer for c in members] == sorted((c.n_layer for c in members), reverse=True)
    diff = config_diff(m, members[3], {"batch_size": (16, 4)})
    assert "-n_layer = 12" in diff and f"+n_layer = {members[3].n_layer}" in diff and "+batch_size = 4" in diff


@pytest.mark.parametrize("head_dim", [32, 128, None])
@pytest.mark.parametrize("n_kv_head", [None, 4])
def test_family_keeps_heads_per_width_with_an_explicit_head_dim(head_dim, n_kv_head):
    # 12 heads of 32 on d_model 768: the attention is half as wide as d_model, and every member keeps that share
    m = ModelConfig(n_layer=12, d_model=768, n_head=12, n_kv_head=n_kv_head, head_dim=head_dim)
    members = family(m)
    assert all(c.n_head * 768 == 12 * c.d_model and c.head_dim == head_dim for c in members)
    sizes = [count_params(c, 32000).total for c in [m, *members]]
    assert all(a > b for a, b in itertools.pairwise(sizes))  # each member is smaller than the one above it


def test_family_of_a_single_head_group_model_shrinks_by_depth():
    """MQA (one KV head) or one head: no narrower member at the same depth, but every shallower depth has one."""
    for m in (ModelConfig(n_layer=12, d_model=768, n_head=12, n_kv_head=1), ModelConfig(n_layer=4, d_model=64, n_head=1)):
        members = family(m)
        assert [f.n_layer for f in members] == list(range(m.n_layer - 1, 0, -1))
        assert all(f.n_head == m.n_head and f.n_kv_head == m.n_kv_head for f in members)
