"""Optimizers for the trainer: AdamW, Muon and MuonH (Muon on a hyperball).

`build_optimizer(model, name, ...)` is the single entry point. It sorts parameters by name and shape only, so it works
with any nn.Module:

  - 2-D "hidden" matrices (attention/MLP projections)         -> Muon (muon, muonh) or decayed AdamW (adamw)
  - embeddings and the output head (names in EMBED_OR_HEAD_NAMES) -> AdamW with weight decay
  - 1-D parameters (norm gains, biases) and scalars             -> AdamW without weight decay
  - parameters with more than two dimensions                     -> AdamW with weight decay (Muon is 2-D only)

Muon and MuonH come wrapped with their AdamW in one `CombinedOptimizer`, so the trainer sees a single optimizer with
one flat `param_groups` list (AdamW groups first, so `param_groups[0]["lr"]` is the `lr` the trainer was given). Every
group carries `initial_lr`; the trainer's schedule sets `group["lr"] = group["initial_lr"] * factor` each step.
Gradient clipping belongs to the trainer, not here.

Muon (Keller Jordan, https://kellerjordan.github.io/posts/muon/): Nesterov momentum, then replace the update matrix by
its nearest semi-orthogonal matrix (U V^T of its SVD, approximated by five steps of a quintic Newton-Schulz iteration),
then scale by max(1, rows/cols)**0.5. That scale (Keller's "original", also torch.optim.Muon's default) keeps the
update's spectral norm at ~lr whatever the width, so one learning rate (MUON_DEFAULT_LR) serves every matrix. We did
not pick Moonshot's 0.2*sqrt(max(rows, cols)) AdamW-RMS-matching scale; with it, Muon's LR would be ~AdamW's instead.
"""

from collections import ChainMap
from collections.abc import Iterable, Sequence

import torch
from torch import Tensor, nn

from scratchlm.config import ORTHOGONALIZERS  # declared with the config key that chooses one
from scratchlm.errors import UserError

# Default learning rates. Both are checked at micro scale by tests/test_optim.py::test_converges_at_default_lr (a tiny
# embedding -> MLP -> head model must learn a modular-addition sequence to a stated loss in a few hundred steps).
# AdamW: 1e-3 is nanoGPT's setting for its small "baby GPT" (config/train_shakespeare_char.py); GPT-2-small-sized
# models usually want ~6e-4, which the user sets in the config.
ADAMW_DEFAULT_LR = 1e-3
# Muon: 0.02 with momentum 0.95 is the reference setting of Keller Jordan's Muon (README of KellerJordan/Muon) for the
# max(1, rows/cols)**0.5 update scale used here. It is an absolute step in spectral norm, not relative to AdamW's LR.
MUON_DEFAULT_LR = 0.02
MUON_DEFAULT_MOMENTUM = 0.95

# Quintic Newton-Schulz coefficients from Keller Jordan's Muon: they maximise the slope at zero, so five steps push
# every singular value into roughly [0.7, 1.2] rather than exactly to 1; that is enough for training and cheap.
NEWTON_SCHULZ_COEFFS = (3.4445, -4.7750, 2.0315)
# Polar Express (Amsel, Persson, Musco, Malik 2025, arXiv:2505.16932): a different, minimax-optimal polynomial per
# step, as used in modded-nanogpt; it lands much closer to 1 in the same five steps. The input is shrunk by a 2%
# safety factor because the coefficients were derived assuming the spectral norm is strictly below 1.
POLAR_EXPRESS_COEFFS = (
    (8.156554524902461, -22.48329292557795, 15.878769915207462),
    (4.042929935166739, -2.808917465908714, 0.5000178451051316),
    (3.8916678022926607, -2.772484153217685, 0.5060648178503393),
    (3.285753657755655, -2.3681294933425376, 0.46449024233003106),
    (2.3465413258596377, -1.7097828382687081, 0.42323551169305323),
)
NS_STEPS = 5

# A 2-D parameter whose name contains one of these is an embedding table or the output head: Muon's "hidden matrix"
# geometry does not apply to them (their rows are looked up one at a time), so they go to AdamW.
EMBED_OR_HEAD_NAMES = ("embed", "wte", "wpe", "tok_emb", "pos_emb", "lm_head")
OPTIMIZER_NAMES = ("adamw", "muon", "muonh")


def orthogonalize(G: Tensor, method: str = "newton_schulz", steps: int = NS_STEPS) -> Tensor:
    """Approximate U V^T for G = U S V^T, i.e. set every singular value of the 2-D matrix G to ~1.

    Runs in bf16 on CUDA (fast and good enough: the iteration is self-correcting) and in fp32 elsewhere, where bf16
    matmuls are slow. Returns a tensor of that compute dtype with G's shape.
    """
    if G.ndim != 2:
        raise ValueError(f"orthogonalize needs a 2-D matrix, got shape {tuple(G.shape)}")
    X = G.to(torch.bfloat16 if G.device.type == "cuda" else torch.float32)
    tall = X.size(0) > X.size(1)
    if tall:  # iterate on the wide orientation so X @ X.T is the smaller Gram matrix
        X = X.T
    if method == "newton_schulz":
        coeffs = [NEWTON_SCHULZ_COEFFS] * steps
        X = X / (X.norm() + 1e-7)  # Frobenius norm >= spectral norm, so all singular values start in [0, 1]
    elif method == "polar_express":
        if not 1 <= steps <= len(POLAR_EXPRESS_COEFFS):
            raise ValueError(f"polar_express has coefficients for 1..{len(POLAR_EXPRESS_COEFFS)} steps, got {steps}")
        coeffs = POLAR_EXPRESS_COEFFS[:steps]
        X = X / (X.norm() * 1.02 + 1e-6)
    else:
        raise ValueError(f"unknown orthogonalizer {method!r}; choose one of {', '.join(ORTHOGONALIZERS)}")
    for a, b, c in coeffs:  # X <- a X + b (X X^T) X + c (X X^T)^2 X: an odd polynomial applied to each singular value
        A = X @ X.T
        X = a * X + (b * A + c * (A @ A)) @ X
    return X.T if tall else X


class Muon(torch.optim.Optimizer):
    """Muon for 2-D hidden matrices: Nesterov momentum, orthogonalize, scale by max(1, rows/cols)**0.5.

    Weight decay is decoupled and multiplied by the (unscaled) lr, as in AdamW and torch.optim.Muon.
    """

    def __init__(self, params: Iterable, lr: float = MUON_DEFAULT_LR, momentum: float = MUON_DEFAULT_MOMENTUM,
                 weight_decay: float = 0.0, nesterov: bool = True, method: str = "newton_schulz",
                 ns_steps: int = NS_STEPS):
        if method not in ORTHOGONALIZERS:
            raise ValueError(f"unknown orthogonalizer {method!r}; choose one of {', '.join(ORTHOGONALIZERS)}")
        defaults = dict(lr=lr, momentum=momentum, weight_decay=weight_decay, nesterov=nesterov, method=method,
                        ns_steps=ns_steps)
        super().__init__(params, defaults)
        for group in self.param_groups:
            for p in group["params"]:
                if p.ndim != 2:
                    raise ValueError(f"Muon only takes 2-D matrices, got a parameter of shape {tuple(p.shape)}")

    @torch.no_grad()
    def step(self, closure=None):
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for group in self.param_groups:
            lr, beta, wd = group["lr"], group["momentum"], group["weight_decay"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                state = self.state[p]
                if "momentum_buffer" not in state:
                    state["momentum_buffer"] = torch.zeros_like(p)
                buf = state["momentum_buffer"]
                buf.lerp_(p.grad, 1 - beta)  # EMA form of momentum; the scale is irrelevant after orthogonalizing
                update = p.grad.lerp(buf, beta) if group["nesterov"] else buf  # not in place: p.grad stays intact
                update = orthogonalize(update, group["method"], group["ns_steps"])
                if wd != 0:
                    p.mul_(1 - lr * wd)
                p.add_(update, alpha=-lr * max(1.0, p.size(0) / p.size(1)) ** 0.5)
                self._after_update(p, state)
        return loss

    def _after_update(self, p: Tensor, state: dict) -> None:
        """Hook for subclasses; plain Muon leaves the parameter as updated."""


class MuonH(Muon):
    """Muon on a hyperball: the Muon update without weight decay, after which each matrix is rescaled back to the
    Frobenius norm it had when the optimizer was built. Norms can then neither inflate nor collapse, so nothing needs
    weight decay to hold them in check. The radii live in optimizer state ("init_norm", a Python float so that
    load_state_dict cannot round it to a bf16 parameter's dtype) and travel with state_dict().
    """

    def __init__(self, params: Iterable, lr: float = MUON_DEFAULT_LR, momentum: float = MUON_DEFAULT_MOMENTUM,
                 nesterov: bool = True, method: str = "newton_schulz", ns_steps: int = NS_STEPS):
        super().__init__(params, lr=lr, momentum=momentum, weight_decay=0.0, nesterov=nesterov, method=method,
                         ns_steps=ns_steps)
        for group in self.param_groups:
            for p in group["params"]:
                norm = p.detach().float().norm().item()
                if norm == 0.0:
                    # A zero-initialised matrix would be pinned to zero forever.
                    raise ValueError(f"MuonH needs nonzero initial weights, got an all-zero {tuple(p.shape)} matrix")
                self.state[p]["init_norm"] = norm

    def _after_update(self, p: Tensor, state: dict) -> None:
        p.mul_(state["init_norm"] / p.float().norm().clamp_min(1e-12))


class CombinedOptimizer(torch.optim.Optimizer):
    """Several optimizers over disjoint parameters, presented to the trainer as one.

    `param_groups` is the concatenation of the inner optimizers' group dicts (the same dict objects, so setting
    group["lr"] here reaches the inner optimizer), `state` is a read-through view of their states, `step()` steps
    each, and `state_dict()` nests theirs. `load_state_dict` replaces the inner optimizers' group dicts, so the flat
    list is rebuilt afterwards; otherwise the trainer's LR schedule would write into stale dicts.
    """

    def __init__(self, optimizers: Sequence[torch.optim.Optimizer]):
        self.optimizers = list(optimizers)
        super().__init__([g for opt in self.optimizers for g in opt.param_groups], defaults={})
        self._link()

    def _link(self) -> None:
        self.param_groups = [g for opt in self.optimizers for g in opt.param_groups]
        self.state = ChainMap(*(opt.state for opt in self.optimizers))

    @torch.no_grad()
    def step(self, closure=None):
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for opt in self.optimizers:
            opt.step()
        return loss

    def state_dict(self) -> dict:
        return {"optimizers": [opt.state_dict() for opt in self.optimizers]}

    def load_state_dict(self, state_dict: dict) -> None:
        inner = state_dict.get("optimizers")
        if not isinstance(inner, list) or len(inner) != len(self.optimizers):
            raise ValueError(f"optimizer state holds {len(inner) if isinstance(inner, list) else 'no'} inner "
                             f"optimizers, this one has {len(self.optimizers)}; was it saved by a different optimizer?")
        for opt, sd in zip(self.optimizers, inner):
            opt.load_state_dict(sd)
        self._link()

    def __getstate__(self) -> dict:  # the base class would drop self.optimizers (breaks copy.deepcopy / pickle)
        return self.__dict__.copy()

    def __repr__(self) -> str:
        return "CombinedOptimizer(\n" + "\n".join(repr(opt) for opt in self.optimizers) + "\n)"


def is_embedding_or_head(name: str) -> bool:
    return any(key in name for key in EMBED_OR_HEAD_NAMES)


def split_parameters(model: nn.Module) -> dict[str, list[tuple[str, nn.Parameter]]]:
    """Sort trainable parameters into "matrix" (2-D hidden), "decay" (other >=2-D) and "no_decay" (<2-D) by name and
    shape. Tied weights appear once (named_parameters deduplicates them)."""
    groups: dict[str, list[tuple[str, nn.Parameter]]] = {"matrix": [], "decay": [], "no_decay": []}
    for name, p in model.named_parameters():
        if not p.requires_grad:
            continue
        if p.ndim == 2 and not is_embedding_or_head(name):
            groups["matrix"].append((name, p))
        elif p.ndim >= 2:
            groups["decay"].append((name, p))
        else:
            groups["no_decay"].append((name, p))
    return groups


def _group(name: str, named: list[tuple[str, nn.Parameter]], lr: float, **options) -> dict:
    return {"name": name, "params": [p for _, p in named], "param_names": [n for n, _ in named], "lr": lr,
            "initial_lr": lr, **options}


FUSED_ADAMW_DEVICES = ("cuda", "cpu")


def adamw_implementation(device_type: str) -> dict:
    """AdamW's kernel choice: fused (one kernel for every tensor, no per-tensor temporaries) where it was measured
    fastest. CUDA: torch's fastest path. CPU: fused took 1.7 ms per step against 5.7 for foreach and 9.0 for
    torch's CPU default, a per-tensor for-loop (torch 2.13, tiny preset, 1 thread; see
    docs/benchmarks.md). Other devices (mps): torch's own default, not measured."""
    return {"fused": True} if device_type in FUSED_ADAMW_DEVICES else {}


def build_optimizer(model: nn.Module, name: str, lr: float, weight_decay: float,
                    betas: tuple[float, float] = (0.9, 0.95), muon_lr: float | None = None,
                    muon_momentum: float = MUON_DEFAULT_MOMENTUM, device_type: str = "cpu",
                    orthogonalizer: str = "newton_schulz") -> torch.optim.Optimizer:
    """The trainer's optimizer. `lr` is AdamW's learning rate (for every parameter under "adamw"; for embeddings,
    head and 1-D parameters under "muon"/"muonh"); `muon_lr` (default MUON_DEFAULT_LR) is for the hidden matrices.
    `weight_decay` applies to AdamW's >=2-D parameters and, under "muon", to the hidden matrices; "muonh" never decays
    its matrices (their norm is fixed instead)."""
    if name not in OPTIMIZER_NAMES:
        raise UserError(f"unknown optimizer {name!r}; choose one of {', '.join(OPTIMIZER_NAMES)}")
    if orthogonalizer not in ORTHOGONALIZERS:
        raise UserError(f"unknown orthogonalizer {orthogonalizer!r}; choose one of {', '.join(ORTHOGONALIZERS)}")
    split = split_parameters(model)
    adamw_kwargs = dict(betas=betas, **adamw_implementation(device_type))

    def adamw(decay: list, no_decay: list) -> torch.optim.AdamW | None:
        groups = [_group("adamw_decay", decay, lr, weight_decay=weight_decay),
                  _group("adamw_no_decay", no_decay, lr, weight_decay=0.0)]
        groups = [g for g in groups if g["params"]]
        return torch.optim.AdamW(groups, lr=lr, **adamw_kwargs) if groups else None

    if name == "adamw":
        opt = adamw(split["matrix"] + split["decay"], split["no_decay"])
        if opt is None:
            raise UserError("the model has no trainable parameters to optimize")
        return opt

    if not split["matrix"]:
        raise UserError(f"optimizer {name!r} found no 2-D hidden matrices in the model (only embeddings, head and "
                        f"1-D parameters); use 'adamw'")
    muon_lr = MUON_DEFAULT_LR if muon_lr is None else muon_lr
    if name == "muonh":
        for pname, p in split["matrix"]:
            if not p.detach().any():
                raise UserError(f"optimizer 'muonh' pins each matrix to its initial norm, but {pname!r} is "
                                f"initialised to all zeros; use 'muon' or a nonzero init")
        matrices = MuonH([_group("muonh", split["matrix"], muon_lr)], lr=muon_lr, momentum=muon_momentum,
                         method=orthogonalizer)
    else:
        matrices = Muon([_group("muon", split["matrix"], muon_lr, weight_decay=weight_decay)], lr=muon_lr,
                        momentum=muon_momentum, method=orthogonalizer)
    rest = adamw(split["decay"], split["no_decay"])
    return CombinedOptimizer([rest, matrices] if rest is not None else [matrices])
