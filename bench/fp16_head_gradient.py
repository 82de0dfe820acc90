"""The head's gradient under fp16 autocast against fp32, next to standard AMP, on CPU.

The chunked head (model/head_loss.py) makes the logits' gradient in the forward pass, before GradScaler's scale
exists; unscaled, a non-target entry is about 1/(vocab x tokens), below fp16's smallest subnormal. This counts the
vocabulary rows whose head gradient is all zero and the relative error of both gradients against fp32, for the
chunked head and for the plain head with the loss scaled before backward (standard AMP).

    python bench/fp16_head_gradient.py                  # 4096 tokens, vocabulary 16384: about 15 s on 2 cores
    python bench/fp16_head_gradient.py --tokens 8192 --vocab 32768
"""
from __future__ import annotations

import argparse
import json

import torch
import torch.nn.functional as F

from scratchlm.model.head_loss import head_loss

LOSS_SCALE = 2.0 ** 16  # GradScaler's initial scale


def plain(h, w, targets, weights):
    return (F.cross_entropy((h @ w.t()).float(), targets, reduction="none") * weights).sum()


def chunked(h, w, targets, weights):
    return head_loss(h, w, targets, weights)


def gradients(fn, h, w, targets, weights, dtype):
    h, w = h.clone().requires_grad_(), w.clone().requires_grad_()
    with torch.autocast("cpu", dtype=dtype or torch.float32, enabled=dtype is not None):
        loss = fn(h, w, targets, weights)
    (loss * LOSS_SCALE).backward()
    return h.grad / LOSS_SCALE, w.grad / LOSS_SCALE


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tokens", type=int, default=4096)
    ap.add_argument("--vocab", type=int, default=16384)
    ap.add_argument("--dim", type=int, default=64)
    args = ap.parse_args()
    torch.manual_seed(0)
    h, w = torch.randn(args.tokens, args.dim), torch.randn(args.vocab, args.dim) * 0.02
    targets, weights = torch.randint(0, args.vocab, (args.tokens,)), torch.full((args.tokens,), 1 / args.tokens)
    exact = gradients(plain, h, w, targets, weights, None)
    result = {"tokens": args.tokens, "vocab": args.vocab, "dim": args.dim}
    for name, fn in (("standard_amp", plain), ("chunked_head", chunked)):
        gh, gw = gradients(fn, h, w, targets, weights, torch.float16)
        result[name] = {"zero_vocab_rows": int((gw.abs().sum(dim=1) == 0).sum()),
                        "error_h": float((gh - exact[0]).norm() / exact[0].norm()),
                        "error_w": float((gw - exact[1]).norm() / exact[1].norm())}
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
