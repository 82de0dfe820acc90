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
from scratchlm.plan.peakmem import PeakMemory
from scratchlm.plan.probe import run_probe
from scratchlm.plan.shrink import config_diff, family

CPU = torch.device("cpu")
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


def _warmed_up(n_layer: int, d: int, seq_len: int, batch: int, vocab: int, precision: str):
    """The config, with the framework's kernels run once at a tiny size, as the probe does before it measures:
    a peak then measures this model's memory, not torch's first use."""
    from scratchlm.plan import probe

    cfg = config_from_dict({"data": {"sources": [{"name": "a", "domain": "a", "path": "x"}]},
                            "model": {"n_layer": n_layer, "d_model": d, "n_head": 4, "seq_len": seq_len},
                            "train": {"batch_size": batch, "precision": precision, "compile": False}})
    probe._warm_up_framework(cfg, vocab, CPU, precision)
    return cfg, probe.build_optimizer_for


@pytest.mark.parametrize("precision", ["fp32", "bf16"])
def test_an_evaluation_batch_stays_within_the_estimate(precision):
    """One evaluation batch at the training micro-batch (as the trainer evaluates) on top of the weights and the
    optimizer state: the plan's peak holds it, and its estimate matches what it measures. Through full logits it
    took 770 MiB here (16 x 128 tokens at a 32K vocabulary), 5x the estimate's whole room above the state."""
    from scratchlm.eval.chunked_head import evaluate_batch
    from scratchlm.monitor.logits import LogitStats

    batch, vocab = 16, 32768
    cfg, build_optimizer = _warmed_up(2, 128, 128, batch, vocab, precision)
    model = GPT(cfg.model, vocab)
    optimizer = build_optimizer(model, cfg, CPU)
    window = torch.randint(0, vocab, (batch, cfg.model.seq_len + 1))
    with autocast(CPU, precision):
        _, loss = model(window[:, :-1], window[:, 1:])
    loss.backward()
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    del loss
    model.eval()
    with torch.no_grad(), autocast(CPU, precision):
        evaluate_batch(model, window[:1, :-1], window[:1, 1:], LogitStats())  # its kernels' first use: not measured
        with PeakMemory(CPU) as mem:
            evaluate_batch(model, window[:, :-1], window[:, 1:], LogitStats())
    if not mem.exact_mappings:  # not glibc: the resident set does not follow live memory
        return
    est = estimate_memory(cfg.model, vocab, batch, 1, precision, "adamw", "cpu")
    assert est.weights + est.optimizer + mem.peak <= est.peak, (mem.peak, est.peak - est.weights - est.optimizer)
    assert 0.9 <= est.eval_batch / mem.peak <= 1.25, (est.eval_batch, mem.peak)


def test_a_log_step_with_the_update_ratio_stays_within_the_estimate():
    """At log steps the monitor copies the weights for the update ratio (monitor/norms.py); on a CPU that copy is in
    the device's own memory, alive through the optimizer step. In a model whose step peaks at the optimizer step
    (parameters, not activations, fill the memory) the estimate must count it: 20 bytes a parameter, not 16."""
    from scratchlm.monitor.norms import UpdateRatio, grouped_parameters

    cfg, build_optimizer = _warmed_up(6, 384, 32, 1, 512, "fp32")
    with PeakMemory(CPU) as mem:
        model = GPT(cfg.model, 512)
        optimizer = build_optimizer(model, cfg, CPU)
        groups = grouped_parameters(model)
        for _ in range(2):  # the first step allocates the optimizer's state, the second holds it
            window = torch.randint(0, 512, (1, 33))
            model(window[:, :-1], window[:, 1:])[1].backward()
            ratio = UpdateRatio()
            ratio.snapshot(groups)  # where the trainer's monitor takes it: after backward, before the update
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            ratio.measure(groups)
    if not mem.exact_mappings:
        return
    est = estimate_memory(cfg.model, 512, 1, 1, "fp32", "adamw", "cpu")
    assert 0.9 <= est.peak / mem.peak <= 1.25, (est.peak, mem.peak)
    assert est.peak_phase == "optimizer step" and est.update_snapshot == 4 * model.num_params()
    plain = estimate_memory(cfg.model, 512, 1, 1, "fp32", "adamw", "cpu", update_ratio=False)
    assert est.peak - plain.peak == est.update_snapshot
    on_gpu = estimate_memory(cfg.model, 512, 1, 1, "fp32", "adamw", "cuda")
    assert on_gpu.update_snapshot == 0  # kept in host memory there


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


# ---- absurd sizes answer at once (bug report item 5) ------------------------------------------------------------

def _linear_recommendation(m, vocab, global_batch, memory, precision, ckpt):
    """recommend_batch as it was: every divisor from the largest down, estimated one by one."""
    for c in dict.fromkeys((ckpt, True)):
        for b in (d for d in range(global_batch, 0, -1) if global_batch % d == 0):
            est = estimate_memory(m, vocab, b, global_batch // b, precision, "adamw", "cpu", c, 0)
            if est.total <= 0.9 * memory:
                return b, c
    return None


def test_divisors_by_trial_division():
    from scratchlm.plan.memory import divisors

    assert [divisors(n) for n in range(1, 400)] == [[d for d in range(1, n + 1) if n % d == 0] for n in range(1, 400)]
    assert divisors(10 ** 9) == sorted(2 ** i * 5 ** j for i in range(10) for j in range(10))


def test_batch_recommendation_bisects_to_the_linear_search_answer(monkeypatch):
    """Same answer as trying every divisor, for every memory size from nothing fitting to everything fitting, with
    the global batch itself fitting where its half does not (no accumulation: no gradients held in backward);
    and a bounded number of estimates: a batch of 10^9 has 100 divisors, 720720 has 240."""
    import math

    from scratchlm.plan import memory

    m = _cfg().model
    for global_batch, precision, ckpt in [(1, "fp32", False), (12, "fp32", False), (16, "bf16", True),
                                          (360, "bf16", False), (97, "fp32", False)]:
        totals = {estimate_memory(m, 2048, b, global_batch // b, precision, "adamw", "cpu", c, 0).total
                  for b in range(1, global_batch + 1) if global_batch % b == 0 for c in (False, True)}
        for limit in sorted(totals) + [min(totals) - 1]:
            memory_size = math.ceil(limit / 0.9)
            rec = recommend_batch(m, 2048, global_batch, precision, "adamw", "cpu", memory_size, 0, ckpt)
            expected = _linear_recommendation(m, 2048, global_batch, memory_size, precision, ckpt)
            got = (rec["micro_batch"], rec["activation_checkpointing"]) if rec["fits"] else None
            assert got == expected, (global_batch, precision, ckpt, limit)
    # wide and short: the gradients held while accumulating outweigh a few sequences' activations, so the whole
    # batch fits where its half does not, which a bisection over every divisor would miss (on CUDA: on a CPU the
    # monitor's copy of the weights joins the gradients at the optimizer step, and both peak there alike)
    wide = ModelConfig(n_layer=2, d_model=512, n_head=8, seq_len=8)
    whole = estimate_memory(wide, 2048, 4, 1, "fp32", "adamw", "cuda").total
    assert whole < estimate_memory(wide, 2048, 2, 2, "fp32", "adamw", "cuda").total
    rec = recommend_batch(wide, 2048, 4, "fp32", "adamw", "cuda", math.ceil(whole / 0.9), 0, False)
    assert (rec["micro_batch"], rec["grad_accum"]) == (4, 1)

    calls = []
    real = memory.estimate_memory
    monkeypatch.setattr(memory, "estimate_memory", lambda *a, **kw: calls.append(a[2]) or real(*a, **kw))
    for global_batch, n_divisors in ((10 ** 9, 100), (720720, 240)):
        for memory_size in (10 ** 6, 2 ** 40, 2 ** 60):  # nothing fits, some micro-batch fits, all fit
            calls.clear()
            recommend_batch(m, 2048, global_batch, "bf16", "adamw", "cpu", memory_size, 0, False)
            assert len(calls) <= 2 * (2 + math.ceil(math.log2(n_divisors))) + 1, (global_batch, memory_size, calls)


def test_probe_shape_lists_the_divisors_once(monkeypatch):
    """A micro-batch too slow to probe steps down divisor by divisor; the divisors of 10^9 are found once, not
    searched for over range(micro) at each step."""
    from types import SimpleNamespace

    from scratchlm.plan import make

    calls = []
    real = make.divisors
    monkeypatch.setattr(make, "divisors", lambda n: calls.append(n) or real(n))
    cfg = _cfg(batch_size=10 ** 9)
    too_big = SimpleNamespace(total=2, activation_checkpointing=False)
    rec = {"micro_batch": 5 * 10 ** 8, "grad_accum": 2, "activation_checkpointing": False}
    slow = {"flops_per_token": 1e30}
    assert make._probe_shape(cfg, None, too_big, rec, slow, 1e12, 1) == (1, 10 ** 9, False)
    fast = {"flops_per_token": 1e-30}
    assert make._probe_shape(cfg, None, too_big, rec, fast, 1e12, 1) == (5 * 10 ** 8, 2, False)
    # 1 s of compute per sequence: 10^9 / 2^i sequences until one is under PROBE_MAX_MICRO_SECONDS
    per_sequence = {"flops_per_token": 1e12 * make.PROBE_ASSUMED_MFU / cfg.model.seq_len}
    rec = {"micro_batch": 10 ** 9, "grad_accum": 1, "activation_checkpointing": True}
    assert make._probe_shape(cfg, None, too_big, rec, per_sequence, 1e12, 1) == (20, 5 * 10 ** 7, True)
    assert calls == [10 ** 9] * 3


def _model_of(**keys) -> ModelConfig:
    return ModelConfig(**{"n_layer": 2, "d_model": 64, "n_head": 4, "seq_len": 64, **keys})


def test_an_absurd_model_is_refused_by_its_parameter_count_before_anything_is_built(monkeypatch):
    from scratchlm.model import gpt
    from scratchlm.plan.arithmetic import MAX_PARAMS
    from scratchlm.plan.make import check_model_buildable

    def never(*a, **kw):
        raise AssertionError("a model was built")

    monkeypatch.setattr(gpt.GPT, "__init__", never)
    with pytest.raises(UserError) as e:
        check_model_buildable(ModelConfig(n_layer=100000), 32768, "c.toml")
    message = str(e.value)
    assert "\n" not in message and message.startswith("c.toml: the [model] keys (n_layer 100000, d_model 768")
    assert "708B parameters, over the limit of 100B" in message and MAX_PARAMS == 100 * 10 ** 9
    with pytest.raises(UserError, match="more than 1e308 parameters"):  # mlp_ratio x d_model overflows a float
        check_model_buildable(_model_of(mlp_ratio=1e308), 512, "c.toml")


def test_a_deep_model_under_the_limit_is_checked_by_building_one_block(monkeypatch):
    """Every block is built from the same keys: one finds what all would, and 100000 take minutes even on meta."""
    from scratchlm.model import gpt
    from scratchlm.plan.make import check_model_buildable

    built = []
    real = gpt.Block.__init__
    monkeypatch.setattr(gpt.Block, "__init__", lambda self, cfg: built.append(cfg) or real(self, cfg))
    check_model_buildable(_model_of(n_layer=100000, d_model=16, n_head=2), 512, "c.toml")
    assert len(built) == 1

    def broken(self, cfg):
        raise ValueError("some shape only building finds")

    monkeypatch.setattr(gpt.Block, "__init__", broken)
    with pytest.raises(UserError, match="cannot build a model: some shape only building finds"):
        check_model_buildable(_model_of(n_layer=100000, d_model=16, n_head=2), 512, "c.toml")
