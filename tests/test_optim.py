import copy
import io
import math

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from scratchlm.errors import UserError
from scratchlm.train.optim import (ADAMW_DEFAULT_LR, MUON_DEFAULT_LR, CombinedOptimizer, Muon, MuonH,
                                   build_optimizer, orthogonalize, split_parameters)

VOCAB = 16
OPTIMIZERS = ["adamw", "muon", "muonh"]


@pytest.fixture(autouse=True, scope="module")
def one_thread():
    # These models are tiny; on a shared, busy machine torch's intra-op threads spin-wait on each other and a 0.4 s
    # test takes a minute. One thread is as fast when idle and stays fast when not.
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(previous)


class TinyLM(nn.Module):
    """Predicts the next token of x[t] = (x[t-2] + x[t-1]) mod VOCAB from the previous two tokens. One token alone
    says nothing about the sum, so the hidden matrices (the ones Muon trains) must do real work."""

    def __init__(self, d: int = 32, hidden: int = 128):
        super().__init__()
        self.tok_emb = nn.Embedding(VOCAB, d)
        self.norm_in = nn.LayerNorm(2 * d)
        self.fc_in = nn.Linear(2 * d, hidden)  # tall (128 x 64): exercises the transpose in orthogonalize
        self.fc_out = nn.Linear(hidden, d)  # wide (32 x 128)
        self.norm_out = nn.LayerNorm(d)
        self.lm_head = nn.Linear(d, VOCAB, bias=False)

    def forward(self, pairs: torch.Tensor) -> torch.Tensor:
        x = self.tok_emb(pairs).flatten(1)
        x = self.fc_out(F.gelu(self.fc_in(self.norm_in(x))))
        return self.lm_head(self.norm_out(x))


def task() -> tuple[torch.Tensor, torch.Tensor]:
    a, b = torch.meshgrid(torch.arange(VOCAB), torch.arange(VOCAB), indexing="ij")
    pairs = torch.stack([a.flatten(), b.flatten()], dim=1)
    return pairs, (pairs[:, 0] + pairs[:, 1]) % VOCAB


def make(name: str, seed: int = 0, lr_scale: float = 1.0, weight_decay: float = 0.1):
    torch.manual_seed(seed)
    model = TinyLM()
    opt = build_optimizer(model, name, lr=ADAMW_DEFAULT_LR * lr_scale, weight_decay=weight_decay,
                          muon_lr=MUON_DEFAULT_LR * lr_scale)
    return model, opt


def train(model, opt, steps: int, start: int = 0, total: int | None = None) -> float:
    """Full-batch steps with a cosine-like LR factor applied the way the trainer does (via initial_lr)."""
    pairs, targets = task()
    total = total or steps
    for step in range(start, start + steps):
        for g in opt.param_groups:
            g["lr"] = g["initial_lr"] * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * step / total)))
        loss = F.cross_entropy(model(pairs), targets)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
    with torch.no_grad():
        return F.cross_entropy(model(pairs), targets).item()


def hidden_matrices(model: nn.Module) -> dict[str, torch.Tensor]:
    return {name: p for name, p in model.named_parameters() if name in ("fc_in.weight", "fc_out.weight")}


# ---- convergence at the documented default learning rates ----

CONVERGED = 0.05  # ln(16) = 2.77 at chance; measured 0.008-0.011 for all three at the defaults after 300 steps
STEPS = 300


@pytest.mark.parametrize("name", OPTIMIZERS)
def test_converges_at_default_lr(name):
    model, opt = make(name)
    assert train(model, opt, STEPS) < CONVERGED


@pytest.mark.parametrize("name", OPTIMIZERS)
def test_task_is_not_trivial_at_a_tenth_of_the_default_lr(name):
    # Guards the bound above: if the task were too easy, a badly scaled optimizer would pass it too (measured 1.7-2.2).
    model, opt = make(name, lr_scale=0.1)
    assert train(model, opt, STEPS) > 10 * CONVERGED


# ---- orthogonalization ----

@pytest.mark.parametrize("method", ["newton_schulz", "polar_express"])
@pytest.mark.parametrize("shape", [(64, 128), (128, 64), (48, 200)])
def test_orthogonalize_sets_singular_values_near_one(method, shape):
    torch.manual_seed(1)
    U, _, Vh = torch.linalg.svd(torch.randn(*shape), full_matrices=False)
    spread = torch.logspace(0, -2, min(shape))  # condition number 100, like a real gradient's top directions
    for G in (torch.randn(*shape), 7.0 * U @ torch.diag(spread) @ Vh):
        out = orthogonalize(G, method)
        assert out.shape == G.shape
        sv = torch.linalg.svdvals(out)
        assert 0.5 < sv.min() and sv.max() < 1.5, (sv.min(), sv.max())
        # it keeps the singular vectors: out ~ U' V'^T of G, so <out, G> = sum of |sv(G)| * ~1 > 0.5 * nuclear norm
        assert (out * G).sum() > 0.5 * torch.linalg.svdvals(G).sum()


def test_newton_schulz_matches_torch_reference():
    reference = pytest.importorskip("torch.optim._muon")._zeropower_via_newtonschulz  # torch >= 2.9, runs in bf16
    torch.manual_seed(2)
    for shape in [(64, 128), (128, 64)]:
        G = torch.randn(*shape)
        ours = orthogonalize(G)  # fp32 on CPU
        theirs = reference(G, (3.4445, -4.7750, 2.0315), 5, 1e-7).float()
        assert (ours - theirs).abs().max() < 0.03 * theirs.abs().max()  # bf16 rounding only


def test_muon_step_matches_torch_muon():
    if not hasattr(torch.optim, "Muon"):
        pytest.skip("torch.optim.Muon needs torch >= 2.9")
    torch.manual_seed(3)
    start = torch.randn(96, 48)
    ours, theirs = nn.Parameter(start.clone()), nn.Parameter(start.clone())
    opt_ours = Muon([ours], lr=0.02, momentum=0.95, weight_decay=0.1)
    opt_theirs = torch.optim.Muon([theirs], lr=0.02, momentum=0.95, weight_decay=0.1)
    for _ in range(3):
        grad = torch.randn(96, 48)
        ours.grad, theirs.grad = grad.clone(), grad.clone()
        opt_ours.step()
        opt_theirs.step()
    moved = (theirs - start).norm()
    assert moved > 0.01
    assert (ours - theirs).norm() < 0.03 * moved  # same momentum, scale and decay; only bf16 vs fp32 differs


def test_orthogonalize_rejects_bad_input():
    with pytest.raises(ValueError):
        orthogonalize(torch.randn(4, 4, 4))
    with pytest.raises(ValueError):
        orthogonalize(torch.randn(4, 4), "svd")
    with pytest.raises(ValueError):
        Muon([nn.Parameter(torch.randn(8))])


# ---- MuonH ----

def test_muonh_keeps_every_matrix_at_its_initial_norm():
    model, opt = make("muonh")
    initial = {name: p.detach().norm().item() for name, p in hidden_matrices(model).items()}
    pairs, targets = task()
    for _ in range(50):
        loss = F.cross_entropy(model(pairs), targets)
        opt.zero_grad()
        loss.backward()
        opt.step()
        for name, p in hidden_matrices(model).items():
            assert abs(p.detach().norm().item() - initial[name]) <= 1e-4 * initial[name], name
    # The same run under plain Muon (without decay) lets the norms drift, so the check above can fail.
    model, opt = make("muon", weight_decay=0.0)
    train(model, opt, 50)
    drift = max(abs(p.detach().norm().item() / initial[n] - 1) for n, p in hidden_matrices(model).items())
    assert drift > 0.01


def test_muonh_never_decays_its_matrices_and_refuses_zero_init():
    _, opt = make("muonh", weight_decay=0.5)
    assert all(g["weight_decay"] == 0.0 for g in opt.param_groups if g["name"] == "muonh")
    model = TinyLM()
    nn.init.zeros_(model.fc_out.weight)
    with pytest.raises(UserError, match="fc_out.weight"):
        build_optimizer(model, "muonh", lr=1e-3, weight_decay=0.0)
    with pytest.raises(ValueError):
        MuonH([nn.Parameter(torch.zeros(4, 4))])


# ---- parameter grouping ----

def names_by_group(opt) -> dict[str, set[str]]:
    return {g["name"]: set(g["param_names"]) for g in opt.param_groups}


def test_grouping_sends_embeddings_head_and_1d_params_to_adamw():
    model, opt = make("muon")
    assert isinstance(opt, CombinedOptimizer)
    assert names_by_group(opt) == {
        "muon": {"fc_in.weight", "fc_out.weight"},
        "adamw_decay": {"tok_emb.weight", "lm_head.weight"},
        "adamw_no_decay": {"norm_in.weight", "norm_in.bias", "fc_in.bias", "fc_out.bias", "norm_out.weight",
                           "norm_out.bias"},
    }
    assert opt.param_groups[0]["name"].startswith("adamw")  # the trainer logs param_groups[0]["lr"]
    wd = {g["name"]: g["weight_decay"] for g in opt.param_groups}
    assert wd == {"muon": 0.1, "adamw_decay": 0.1, "adamw_no_decay": 0.0}
    every = [p for g in opt.param_groups for p in g["params"]]
    assert len(every) == len(set(every)) == len(list(model.parameters()))


def test_grouping_for_adamw_decays_only_multidimensional_params():
    model, opt = make("adamw")
    assert isinstance(opt, torch.optim.AdamW)
    groups = names_by_group(opt)
    assert groups["adamw_decay"] == {"tok_emb.weight", "lm_head.weight", "fc_in.weight", "fc_out.weight"}
    assert all(model.get_parameter(n).ndim == 1 for n in groups["adamw_no_decay"])
    assert {g["name"]: g["weight_decay"] for g in opt.param_groups} == {"adamw_decay": 0.1, "adamw_no_decay": 0.0}


def test_grouping_handles_tied_head_and_higher_rank_params():
    class Tied(nn.Module):
        def __init__(self):
            super().__init__()
            self.wte = nn.Embedding(10, 8)
            self.proj = nn.Linear(8, 8, bias=False)
            self.kernel = nn.Parameter(torch.randn(2, 8, 8))
            self.lm_head = nn.Linear(8, 10, bias=False)
            self.lm_head.weight = self.wte.weight

    split = split_parameters(Tied())
    assert [n for n, _ in split["matrix"]] == ["proj.weight"]
    assert sorted(n for n, _ in split["decay"]) == ["kernel", "wte.weight"]  # the tied head appears once
    assert split["no_decay"] == []
    opt = build_optimizer(Tied(), "muon", lr=1e-3, weight_decay=0.0)
    assert len(opt.optimizers) == 2  # empty AdamW groups are dropped, not passed to torch


def test_every_group_has_initial_lr_and_lr_changes_reach_the_inner_optimizers():
    for name in OPTIMIZERS:
        model, opt = make(name)
        assert all(g["initial_lr"] == g["lr"] for g in opt.param_groups)
        assert {g["initial_lr"] for g in opt.param_groups} <= {ADAMW_DEFAULT_LR, MUON_DEFAULT_LR}
        for g in opt.param_groups:
            g["lr"] = 0.0
        before = copy.deepcopy(model.state_dict())
        train_one_step_at_current_lr(model, opt)
        for key, value in model.state_dict().items():
            torch.testing.assert_close(value, before[key], rtol=1e-6, atol=1e-7)


def train_one_step_at_current_lr(model, opt):
    pairs, targets = task()
    loss = F.cross_entropy(model(pairs), targets)
    opt.zero_grad()
    loss.backward()
    opt.step()


def test_bad_names_are_user_errors():
    with pytest.raises(UserError, match="unknown optimizer"):
        build_optimizer(TinyLM(), "sgd", lr=1e-3, weight_decay=0.0)
    with pytest.raises(UserError, match="no 2-D hidden matrices"):
        build_optimizer(nn.ModuleDict({"tok_emb": nn.Embedding(4, 4), "norm": nn.LayerNorm(4)}), "muon", lr=1e-3,
                        weight_decay=0.0)


# ---- checkpoint round trip ----

@pytest.mark.parametrize("name", OPTIMIZERS)
def test_state_dict_round_trip_continues_bit_identically(name):
    model, opt = make(name)
    train(model, opt, 5, start=0, total=12)
    buffer = io.BytesIO()  # through torch.save/torch.load as a checkpoint would go, with the safe loader
    torch.save({"model": model.state_dict(), "optimizer": opt.state_dict()}, buffer)
    train(model, opt, 7, start=5, total=12)

    resumed, fresh_opt = make(name, seed=123)  # different weights, so anything not restored shows up
    buffer.seek(0)
    saved = torch.load(buffer, weights_only=True)
    resumed.load_state_dict(saved["model"])
    fresh_opt.load_state_dict(saved["optimizer"])
    train(resumed, fresh_opt, 7, start=5, total=12)

    for (key, a), b in zip(model.state_dict().items(), resumed.state_dict().values()):
        assert torch.equal(a, b), key
    # after loading, the flat param_groups must be the inner optimizers' live dicts (else the schedule is lost)
    if isinstance(fresh_opt, CombinedOptimizer):
        live = [g for o in fresh_opt.optimizers for g in o.param_groups]
        assert all(a is b for a, b in zip(fresh_opt.param_groups, live))
        assert len(fresh_opt.state) == sum(len(o.state) for o in fresh_opt.optimizers)


def test_muonh_radii_are_restored_from_the_checkpoint():
    model, opt = make("muonh")
    radii = {n: p.detach().norm().item() for n, p in hidden_matrices(model).items()}
    sd = opt.state_dict()
    other, other_opt = make("muonh", seed=7)
    other.load_state_dict(model.state_dict())
    for p in hidden_matrices(other).values():
        with torch.no_grad():
            p.mul_(3.0)  # if the saved radii were ignored, the norms would stay 3x
    other_opt.load_state_dict(sd)
    train(other, other_opt, 1)
    for n, p in hidden_matrices(other).items():
        assert abs(p.detach().norm().item() / radii[n] - 1) < 1e-4


def test_load_state_dict_rejects_a_different_optimizer():
    _, muon = make("muon")
    _, adamw = make("adamw")
    with pytest.raises(ValueError, match="inner optimizers"):
        muon.load_state_dict(adamw.state_dict())


def test_combined_optimizer_works_with_grad_scaler_and_deepcopy():
    model, opt = make("muon")
    scaler = torch.amp.GradScaler("cpu", init_scale=1024.0)
    pairs, targets = task()
    before = copy.deepcopy(model.state_dict())
    loss = F.cross_entropy(model(pairs), targets)
    scaler.scale(loss).backward()
    scaler.unscale_(opt)
    scaler.step(opt)
    scaler.update()
    assert all(not torch.equal(v, model.state_dict()[k]) for k, v in before.items() if k.endswith("weight"))
    clone = copy.deepcopy(opt)
    assert len(clone.param_groups) == len(opt.param_groups) and len(clone.optimizers) == 2
