"""Memory of one training step, estimated from shapes: weights, gradients, optimizer states, activations.

The activation term counts, tensor by tensor, what autograd saves in `scratchlm.model.gpt` for the backward
pass (a test checks the count against `torch.autograd.graph.saved_tensors_hooks` exactly). Under bf16/fp16
autocast the weights stay fp32 (they are the master weights) and each matmul saves its own half-precision copy
of its input, while the norms and QK-norm compute and save in fp32; the formulas follow that.

The peak of a step is reached either at the end of the forward pass (every activation saved, the head weight's
gradient and one chunk of logits: model/head_loss.py computes the loss's gradients there, a chunk of tokens at a
time), at the optimizer step (every gradient, the optimizer's temporaries and, at log steps, the monitor's copy of
the weights where it shares the device's memory), or in an evaluation batch between steps (its forward pass without
autograd and one chunk of logits with its statistics: eval/chunked_head.py), whichever is largest.
"""
from __future__ import annotations

import bisect
import math
from collections.abc import Callable
from dataclasses import dataclass

from ..config import ModelConfig
from ..model.head_loss import CHUNK_TOKENS
from ..train.optim import adamw_implementation
from .arithmetic import Shapes, count_params

FP32 = 4
INDEX = 8  # int64 token ids
HALF_PRECISIONS = ("bf16", "fp16")
GiB = 1024 ** 3


def optimizer_state_bytes(optimizer: str, n_params: int, n_matrices: int) -> int:
    """AdamW keeps two fp32 moments per parameter; Muon one momentum buffer for the hidden matrices it updates
    (the embeddings, head and 1-D parameters stay on AdamW). MuonH adds one scalar per matrix: negligible."""
    if optimizer in ("muon", "muonh"):
        return FP32 * n_matrices + 2 * FP32 * (n_params - n_matrices)
    return 2 * FP32 * n_params


def layer_activation_bytes(m: ModelConfig, s: Shapes, precision: str) -> int:
    """Bytes autograd saves per token in one transformer block."""
    a = 2 if precision in HALF_PRECISIONS else FP32  # what autocast's matmuls and SDPA produce
    half = precision in HALF_PRECISIONS
    norm = 2 * FP32 * s.d_model + FP32  # RMSNorm (fp32): its input, the normalized input, 1/rms
    # fp32: q, k and v read one saved input; autocast: each projection saves its own half-precision cast
    qkv_inputs = 3 * a * s.d_model if half else FP32 * s.d_model
    qk_norm = (2 * FP32 * (s.d_q + s.d_kv) + FP32 * (s.n_head + s.n_kv_head)) if m.qk_norm else 0
    sdpa = a * (2 * s.d_q + 2 * s.d_kv) + FP32 * s.n_head  # q, k, v, output (o_proj reads it), logsumexp
    n_in = 2 if m.mlp == "swiglu" else 1
    mlp_inputs = n_in * a * s.d_model if half else FP32 * s.d_model
    # swiglu: gate output, silu(gate), up output, their product; gelu/relu2: pre- and post-activation
    mlp_hidden = (4 if m.mlp == "swiglu" else 2) * a * s.hidden
    return norm + qkv_inputs + qk_norm + sdpa + norm + mlp_inputs + mlp_hidden


def head_activation_bytes(s: Shapes) -> int:
    """Bytes saved per token outside the blocks: final norm, the head input's gradient (fp32, made in the forward
    pass by the chunked loss), token ids (the embedding's backward)."""
    norm = 2 * FP32 * s.d_model + FP32
    return norm + FP32 * s.d_model + INDEX


def eval_activation_bytes(m: ModelConfig, s: Shapes, precision: str) -> int:
    """Bytes per token alive at once inside a block of a forward pass without autograd (an evaluation): the
    residual stream before and after the block, and the larger of the attention's and the MLP's temporaries."""
    a = 2 if precision in HALF_PRECISIONS else FP32
    residual = 2 * FP32 * s.d_model
    normed = FP32 * s.d_model  # the sublayer's input, alive through it
    # q, k and v; then, while k is rotated, the rotated q and RoPE's temporaries of k: its rotated halves, x * cos,
    # rotated * sin and their sum, in fp32 (the cos/sin tables are)
    attention = normed + a * (2 * s.d_q + 2 * s.d_kv) + (a + 3 * FP32) * s.d_kv
    # swiglu: silu(gate), up and their product at once; relu2: the pre-activation, its relu and their square
    mlp = normed + (2 if m.mlp == "gelu" else 3) * a * s.hidden
    return residual + max(attention, mlp)


def eval_batch_bytes(m: ModelConfig, vocab: int, micro_batch: int, precision: str) -> int:
    """What one evaluation batch adds to the training state kept between steps (weights, optimizer state; the
    gradients are freed): the trainer evaluates at the micro-batch, eval mode, no autograd. The larger of a block's
    temporaries and, at the head, the residual stream and the final norm's output with one chunk of fp32 logits and
    the one temporary of its statistics (three while a softcap is applied); under autocast, the cached
    half-precision casts of the weights (the blocks' matrices and the head's) for the whole pass."""
    s = Shapes.of(m, vocab)
    tokens = micro_batch * s.seq_len
    chunk = min(CHUNK_TOKENS, tokens)
    logits = FP32 * s.vocab * chunk * (3 if m.logit_softcap > 0 else 2)
    head = 2 * FP32 * s.d_model * tokens + logits
    copies = 2 * (count_params(m, vocab).matrices + s.vocab * s.d_model) if precision in HALF_PRECISIONS else 0
    ids = 2 * INDEX * tokens  # the windows and the targets flattened for the head
    return copies + ids + max(eval_activation_bytes(m, s, precision) * tokens, head)


def update_snapshot_bytes(n_params: int, device_type: str) -> int:
    """The monitor's copy of the weights for the update ratio, alive at log steps from before the optimizer step to
    the log row (monitor/norms.py). It is kept in host memory: on a CPU (or the unified memory of Apple silicon)
    that is the device's own; on CUDA it takes none of the device's."""
    return 0 if device_type == "cuda" else FP32 * n_params


@dataclass
class MemoryEstimate:
    weights: int
    gradients: int
    optimizer: int
    weight_copies: int  # half-precision weight casts autocast keeps for the backward pass
    activations: int  # saved for backward, at the configured checkpointing setting
    activations_no_ckpt: int
    activations_ckpt: int
    logits_chunk: int  # one chunk of tokens' fp32 logits (and half-precision casts) while the loss is made
    head_weight_grad: int  # fp32 gradient of the head weight, made in the forward pass, held into backward
    optimizer_temp: int  # per-tensor temporaries of a non-fused optimizer step
    update_snapshot: int  # the monitor's copy of the weights at log steps, where it takes the device's memory
    eval_batch: int  # what one evaluation batch adds to the weights and optimizer state
    peak: int  # estimated peak of the step (what the probe measures)
    peak_phase: str  # "backward", "optimizer step" or "evaluation"
    overhead: int  # framework: CUDA context / allocator reserve, or the process's RSS before the model
    overhead_note: str
    micro_batch: int
    grad_accum: int
    activation_checkpointing: bool

    @property
    def total(self) -> int:
        return self.peak + self.overhead

    def as_dict(self) -> dict:
        return {**vars(self), "total": self.total}


def estimate_memory(m: ModelConfig, vocab: int, micro_batch: int, grad_accum: int, precision: str,
                    optimizer: str, device_type: str, activation_checkpointing: bool = False,
                    overhead: int = 0, overhead_note: str = "", update_ratio: bool = True) -> MemoryEstimate:
    """update_ratio: the monitor's [monitor] update_ratio (on by default), which copies the weights at log steps."""
    s = Shapes.of(m, vocab)
    p = count_params(m, vocab)
    tokens = micro_batch * s.seq_len
    half = precision in HALF_PRECISIONS
    weights = gradients = FP32 * p.total
    opt = optimizer_state_bytes(optimizer, p.total, p.matrices)
    layer = layer_activation_bytes(m, s, precision) * tokens
    head = head_activation_bytes(s) * tokens
    no_ckpt = s.n_layer * layer + head
    # Checkpointing keeps each block's fp32 input and recomputes one block at a time during backward.
    ckpt = s.n_layer * FP32 * s.d_model * tokens + layer + head
    activations = ckpt if activation_checkpointing else no_ckpt
    if not half:
        copies = 0
    elif activation_checkpointing:  # only the block being recomputed has its casts alive
        copies = 2 * (p.matrices // max(1, s.n_layer))
    else:
        copies = 2 * p.matrices
    chunk = min(CHUNK_TOKENS, tokens)
    # the chunk's logits, made into their gradient in place; autocast: its cast, and the head weight's
    logits_chunk = FP32 * s.vocab * chunk + (2 * s.vocab * (chunk + s.d_model) if half else 0)
    head_weight_grad = FP32 * s.vocab * s.d_model
    # A fused AdamW updates in place; other optimizer steps make ~2 temporaries of each tensor in turn
    fused = optimizer == "adamw" and adamw_implementation(device_type).get("fused", False)
    opt_temp = 0 if fused else 2 * FP32 * p.largest
    # With accumulation, gradients from the earlier micro-batches are alive during each later backward.
    backward = copies + activations + logits_chunk + head_weight_grad + (gradients if grad_accum > 1 else 0)
    snapshot = update_snapshot_bytes(p.total, device_type) if update_ratio else 0
    evaluation = eval_batch_bytes(m, vocab, micro_batch, precision)
    phases = {"backward": backward, "optimizer step": gradients + opt_temp + snapshot, "evaluation": evaluation}
    phase = max(phases, key=phases.get)  # the first of equals: backward
    return MemoryEstimate(weights=weights, gradients=gradients, optimizer=opt, weight_copies=copies,
                          activations=activations, activations_no_ckpt=no_ckpt, activations_ckpt=ckpt,
                          logits_chunk=logits_chunk, head_weight_grad=head_weight_grad, optimizer_temp=opt_temp,
                          update_snapshot=snapshot, eval_batch=evaluation, peak=weights + opt + phases[phase],
                          peak_phase=phase, overhead=overhead,
                          overhead_note=overhead_note, micro_batch=micro_batch, grad_accum=grad_accum,
                          activation_checkpointing=activation_checkpointing)


def divisors(n: int) -> list[int]:
    """n's divisors, ascending, by trial division up to sqrt(n): a batch of 10^9 has 100 of them."""
    small = [d for d in range(1, math.isqrt(n) + 1) if n % d == 0]
    return small + [n // d for d in reversed(small) if d * d != n]


def largest_fitting_divisor(n: int, fits: Callable[[int], bool]) -> int | None:
    """The largest divisor b of the global batch n whose step fits(b), with a few estimates, not one per divisor.
    Below n the step's memory grows with b (gradient accumulation holds the gradients at every b < n), so those
    divisors are bisected; n itself, with no accumulation and so no such gradients, may fit where n / 2 does not,
    and is tried first."""
    *below, whole = divisors(n)
    if fits(whole):
        return whole
    n_fitting = bisect.bisect_left(below, True, key=lambda b: not fits(b))
    return below[n_fitting - 1] if n_fitting else None


def recommend_batch(m: ModelConfig, vocab: int, global_batch: int, precision: str, optimizer: str,
                    device_type: str, memory: int, overhead: int, activation_checkpointing: bool,
                    headroom: float = 0.9, update_ratio: bool = True) -> dict:
    """The largest micro-batch dividing the global batch whose step fits in `headroom` x memory; if none
    fits, the same search with activation checkpointing on. Larger micro-batches keep the device busier."""
    def estimate(b: int, ckpt: bool) -> MemoryEstimate:
        return estimate_memory(m, vocab, b, global_batch // b, precision, optimizer, device_type, ckpt, overhead,
                               update_ratio=update_ratio)

    for ckpt in dict.fromkeys((activation_checkpointing, True)):
        b = largest_fitting_divisor(global_batch, lambda micro: estimate(micro, ckpt).total <= headroom * memory)
        if b is not None:
            return {"fits": True, "micro_batch": b, "grad_accum": global_batch // b,
                    "activation_checkpointing": ckpt, "total": estimate(b, ckpt).total}
    return {"fits": False, "micro_batch": 1, "grad_accum": global_batch, "activation_checkpointing": True,
            "total": estimate(1, True).total}
