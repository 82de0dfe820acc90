"""The LM head and the cross-entropy loss, computed a chunk of tokens at a time.

The plain way, `F.cross_entropy(lm_head(h), targets)`, materializes fp32 logits for every token of the batch and
keeps them, with two gradients of the same size, alive into the backward pass: tokens x vocab x 12 bytes, the
largest tensors of a small model's step (16 x 1024 tokens at a 32K vocabulary: 6 GiB). Here each chunk's logits
live only while that chunk's loss and its gradients are computed, in the forward pass; backward then only scales
the two gradients it saved (the head input's and the head weight's) by the incoming gradient. The math is the
same cross-entropy; the result matches the plain path to float rounding (tests/test_head_loss.py).

It is also faster on CPU, most at a small vocabulary: a chunk's logits stay in cache and no big buffer is
page-faulted in each step (docs/benchmarks.md, "The head and the loss in chunks"). Liger-Kernel's fused linear
cross-entropy does the same on GPU with Triton; this is plain PyTorch, untested on a GPU so far.
"""
from __future__ import annotations

import torch

# Tokens per chunk. Measured on an AVX2 CPU (bench/head_loss.py: forward and backward of 4096 tokens, 1 and 2
# threads, chunks of 128..2048): within 8% of the fastest chunk at vocabularies of 4K, 32K and 50K, and 1.43-1.48x
# the plain path's speed at 4K, 1.08-1.12x at 32K, 1.22-1.27x at 50K. A chunk's fp32 logits take 512 x vocab x 4
# bytes (8 MiB at 4K, 100 MiB at 50K).
CHUNK_TOKENS = 512


def cap_logits(logits: torch.Tensor, softcap: float) -> torch.Tensor:
    """c * tanh(logits / c): logits bounded to (-c, c), smoothly (Gemma-2, nanochat); 0 leaves them as they are."""
    return softcap * torch.tanh(logits / softcap) if softcap > 0 else logits


@torch.compiler.disable  # a Python loop over chunks: a compiled model's graph ends before it, and it runs eagerly
def head_loss(h: torch.Tensor, weight: torch.Tensor, targets: torch.Tensor, token_weights: torch.Tensor,
              softcap: float = 0.0, chunk_tokens: int = CHUNK_TOKENS) -> torch.Tensor:
    """sum_i token_weights[i] * cross_entropy(h[i] @ weight.T, targets[i]), for h [N, d], weight [V, d].

    token_weights [N] carries the reduction: 1/N for the mean, mask / mask.sum() for a masked mean. softcap > 0
    caps the logits as c * tanh(logits / c) first. Under autocast the matmuls run in autocast's dtype, as the
    plain head's would; the logits, the softmax and the weight's gradient accumulate in fp32."""
    if not torch.is_grad_enabled():  # an evaluation: no gradients made along the way
        h, weight = h.detach(), weight.detach()
    return _HeadLoss.apply(h, weight, targets, token_weights, softcap, chunk_tokens)


def _matmul_dtype(device_type: str, dtype: torch.dtype) -> torch.dtype:
    if torch.is_autocast_enabled(device_type):
        return torch.get_autocast_dtype(device_type)
    return dtype


class _HeadLoss(torch.autograd.Function):
    @staticmethod
    def forward(ctx, h, weight, targets, token_weights, softcap, chunk_tokens):
        mm_dtype = _matmul_dtype(h.device.type, h.dtype)
        want_h, want_w = ctx.needs_input_grad[:2]
        # fp32 whatever h's dtype: these gradients are not yet multiplied by a loss scaler's scale (that comes in
        # backward), and 1/N-sized entries do not survive a half-precision buffer
        grad_h = torch.empty(h.shape, dtype=torch.float32, device=h.device) if want_h else None
        grad_w = torch.zeros(weight.shape, dtype=torch.float32, device=weight.device) if want_w else None
        total = torch.zeros((), dtype=torch.float32, device=h.device)
        with torch.autocast(h.device.type, enabled=False):  # the casts below are explicit
            w = weight.to(mm_dtype)
            w_max = w.abs().amax().float() if mm_dtype == torch.float16 else None  # for the fp16 scale, once
            for start in range(0, h.size(0), chunk_tokens):
                end = start + chunk_tokens
                hc, tc, wc = h[start:end].to(mm_dtype), targets[start:end, None], token_weights[start:end]
                logits = cap_logits((hc @ w.t()).float(), softcap)
                tanh = logits / softcap if softcap > 0 else None  # kept for the cap's derivative, 1 - tanh^2
                # log-sum-exp by hand, in the logits' own buffer: logsumexp() and then the softmax would each
                # read and write the chunk again
                picked = logits.gather(1, tc)
                top = logits.amax(dim=-1, keepdim=True)
                exp = logits.sub_(top).exp_()
                sum_exp = exp.sum(dim=-1, keepdim=True)
                total += ((top + sum_exp.log() - picked).squeeze(1) * wc).sum()
                if not (want_h or want_w):
                    del logits, exp, tanh
                    continue
                # d loss / d logits = weight * (softmax - onehot)
                g = exp.mul_(wc[:, None] / sum_exp)
                g.scatter_add_(1, tc, -wc[:, None].to(g.dtype))
                if tanh is not None:
                    g.mul_(1 - tanh * tanh)
                scale = _fp16_scale(g, hc, w_max) if mm_dtype == torch.float16 else None
                if scale is not None:
                    g.mul_(scale)
                g = g.to(mm_dtype)
                if want_h:
                    grad_h[start:end] = _unscaled(g @ w, scale)
                if want_w and mm_dtype == torch.float32:
                    grad_w.addmm_(g.t(), hc)
                elif want_w:  # a half-precision matmul, as autocast's head would run; summed in fp32
                    grad_w += _unscaled(g.t() @ hc, scale)
                # The next chunk's logits are made before the loop variables let go of these: without this, two
                # chunks' buffers are alive at once and the step's peak is one chunk above the plan's estimate.
                del logits, exp, g, tanh
        ctx.save_for_backward(grad_h, grad_w)
        ctx.h_dtype, ctx.weight_dtype = h.dtype, weight.dtype
        return total

    @staticmethod
    def backward(ctx, grad_out):
        grad_h, grad_w = ctx.saved_tensors
        return ((grad_h * grad_out).to(ctx.h_dtype) if grad_h is not None else None,
                (grad_w * grad_out).to(ctx.weight_dtype) if grad_w is not None else None,
                None, None, None, None)


# The largest magnitude a scaled fp16 product may reach: half of fp16's largest finite value (65,504).
FP16_REACH = 2.0 ** 15


def _fp16_scale(g: torch.Tensor, hc: torch.Tensor, w_max: torch.Tensor) -> torch.Tensor:
    """A power of two that lifts the chunk's logit gradient into fp16's range before the cast.

    Standard AMP multiplies the loss by GradScaler's scale before backward, so the logit gradient it casts to
    fp16 is already large. Here that gradient is made in the forward pass, before any scale exists: unscaled,
    its entries are about 1/(vocab x tokens), below fp16's smallest subnormal (6e-8), and a whole vocabulary
    row's gradient flushes to zero (tests/test_head_loss.py). The scale is as large as the two products allow
    without overflow: a row of g sums to at most 2 max|g| in absolute value (softmax minus one-hot), so
    |g @ w| <= 2 max|g| max|w|; and |g.T @ hc| <= rows x max|g| x max|hc|. A power of two makes scaling and
    unscaling exact. Computed on the device, with no host sync."""
    bound = g.abs().amax() * torch.maximum(2 * w_max, hc.size(0) * hc.abs().amax().float())
    return torch.exp2(torch.floor(torch.log2(FP16_REACH / bound.clamp(min=torch.finfo(torch.float32).tiny))))


def _unscaled(product: torch.Tensor, scale: torch.Tensor | None) -> torch.Tensor:
    return product.float() if scale is None else product.float() / scale
