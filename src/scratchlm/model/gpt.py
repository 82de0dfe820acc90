"""A modern GPT-style decoder, readable top to bottom.

Token embedding -> n_layer x [RMSNorm -> causal self-attention (RoPE, optional QK-norm and GQA) -> residual,
RMSNorm -> MLP (SwiGLU / GELU / ReLU^2) -> residual] -> RMSNorm -> LM head (optionally tied to the embedding).

The RoPE layout (rotate the two halves of each head) and the norm placement match Llama, so a checkpoint maps
onto `transformers` Llama/Qwen3 weights without permutation.
"""
from __future__ import annotations

import math

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint

from ..config import ModelConfig
from .head_loss import cap_logits, head_loss

NORM_EPS = 1e-5


class RMSNorm(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # Normalize in fp32 (as Llama does): bf16 sums of squares lose too much precision.
        return F.rms_norm(x.float(), (x.size(-1),), self.weight.float(), NORM_EPS).type_as(x)


def rope_tables(seq_len: int, head_dim: int, theta: float) -> tuple[torch.Tensor, torch.Tensor]:
    inv_freq = 1.0 / (theta ** (torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim))
    freqs = torch.outer(torch.arange(seq_len, dtype=torch.float32), inv_freq)
    emb = torch.cat([freqs, freqs], dim=-1)  # [T, head_dim], halves layout
    return emb.cos(), emb.sin()


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    # x: [B, H, T, D]; cos/sin: [T, D]
    # chunk, not slicing: the backward of a slice allocates and fills a zero tensor per half, chunk's is one cat.
    x1, x2 = x.chunk(2, dim=-1)
    rotated = torch.cat([-x2, x1], dim=-1)
    return (x * cos + rotated * sin).to(x.dtype)


class Attention(nn.Module):
    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.n_head = cfg.n_head
        self.n_kv_head = cfg.n_kv_head or cfg.n_head
        self.head_dim = cfg.attn_head_dim
        self.q_proj = nn.Linear(cfg.d_model, self.n_head * self.head_dim, bias=False)
        self.k_proj = nn.Linear(cfg.d_model, self.n_kv_head * self.head_dim, bias=False)
        self.v_proj = nn.Linear(cfg.d_model, self.n_kv_head * self.head_dim, bias=False)
        self.o_proj = nn.Linear(self.n_head * self.head_dim, cfg.d_model, bias=False)
        # QK-norm bounds the attention logits, the most common source of loss spikes in small-batch training.
        self.q_norm = RMSNorm(self.head_dim) if cfg.qk_norm else None
        self.k_norm = RMSNorm(self.head_dim) if cfg.qk_norm else None
        self.dropout = cfg.dropout

    def forward(self, x, cos, sin, kv_cache=None):
        B, T, _ = x.shape
        q = self.q_proj(x).view(B, T, self.n_head, self.head_dim)
        k = self.k_proj(x).view(B, T, self.n_kv_head, self.head_dim)
        v = self.v_proj(x).view(B, T, self.n_kv_head, self.head_dim)
        if self.q_norm is not None:
            q, k = self.q_norm(q), self.k_norm(k)
        q, k, v = (t.transpose(1, 2) for t in (q, k, v))  # [B, H, T, D]
        q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)
        if kv_cache is not None:
            k, v = kv_cache.update(k, v)
        causal = kv_cache is None or T > 1
        if kv_cache is not None and T > 1 and k.size(2) > T:
            raise ValueError("prefill must start from an empty cache")
        y = F.scaled_dot_product_attention(
            q, k, v, is_causal=causal, dropout_p=self.dropout if self.training else 0.0,
            enable_gqa=self.n_kv_head != self.n_head)
        return self.o_proj(y.transpose(1, 2).reshape(B, T, -1))


class MLP(nn.Module):
    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.kind = cfg.mlp
        hidden = int(cfg.mlp_ratio * cfg.d_model)
        if self.kind == "swiglu":
            hidden = int(2 * hidden / 3)  # three matrices instead of two: same parameter count as the plain MLP
            hidden = 64 * math.ceil(hidden / 64)
            self.gate_proj = nn.Linear(cfg.d_model, hidden, bias=False)
        self.up_proj = nn.Linear(cfg.d_model, hidden, bias=False)
        self.down_proj = nn.Linear(hidden, cfg.d_model, bias=False)

    def forward(self, x):
        if self.kind == "swiglu":
            return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))
        h = self.up_proj(x)
        h = F.gelu(h, approximate="tanh") if self.kind == "gelu" else F.relu(h).square()
        return self.down_proj(h)


class Block(nn.Module):
    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.attn_norm = RMSNorm(cfg.d_model)
        self.attn = Attention(cfg)
        self.mlp_norm = RMSNorm(cfg.d_model)
        self.mlp = MLP(cfg)

    def forward(self, x, cos, sin, kv_cache=None):
        x = x + self.attn(self.attn_norm(x), cos, sin, kv_cache)
        return x + self.mlp(self.mlp_norm(x))


class GPT(nn.Module):
    def __init__(self, cfg: ModelConfig, vocab_size: int):
        super().__init__()
        self.cfg, self.vocab_size = cfg, vocab_size
        self.tok_emb = nn.Embedding(vocab_size, cfg.d_model)
        self.blocks = nn.ModuleList(Block(cfg) for _ in range(cfg.n_layer))
        self.norm_f = RMSNorm(cfg.d_model)
        self.lm_head = nn.Linear(cfg.d_model, vocab_size, bias=False)
        if cfg.tie_embeddings:
            self.lm_head.weight = self.tok_emb.weight
        cos, sin = rope_tables(cfg.seq_len, cfg.attn_head_dim, cfg.rope_theta)
        self.register_buffer("rope_cos", cos, persistent=False)
        self.register_buffer("rope_sin", sin, persistent=False)
        # Set by the trainer: recompute each block during backward instead of storing its activations.
        self.activation_checkpointing = False
        self.reset_parameters()

    def reset_parameters(self) -> None:
        std = self.cfg.init_std
        for name, p in self.named_parameters():
            if p.dim() < 2:
                continue
            # Residual projections are scaled down with depth so the residual stream's variance stays O(1).
            scale = 1 / math.sqrt(2 * self.cfg.n_layer) if name.endswith(("o_proj.weight", "down_proj.weight")) else 1
            nn.init.normal_(p, mean=0.0, std=std * scale)

    def num_params(self, embeddings: bool = True) -> int:
        n = sum(p.numel() for p in self.parameters())  # parameters() yields a tied weight once
        if not embeddings:
            n -= self.tok_emb.weight.numel()
            if not self.cfg.tie_embeddings:
                n -= self.lm_head.weight.numel()
        return n

    def forward(self, idx: torch.Tensor, targets: torch.Tensor | None = None, kv_cache=None,
                loss_mask: torch.Tensor | None = None, head=None):
        """Without targets: (logits, None). With targets: (None, the mean cross-entropy over the tokens, or over
        those loss_mask keeps). With head: (None, head(h [B*T, d], the head weight, the softcap)), an evaluation's
        own use of the head (eval/chunked_head.py), made here where FSDP has gathered the weights."""
        B, T = idx.shape
        start = kv_cache.pos if kv_cache is not None else 0
        if start + T > self.cfg.seq_len:
            raise ValueError(f"sequence of {start + T} tokens exceeds the model's seq_len {self.cfg.seq_len}")
        cos, sin = self.rope_cos[start:start + T], self.rope_sin[start:start + T]
        x = self.tok_emb(idx)
        for i, block in enumerate(self.blocks):
            if self.activation_checkpointing and self.training and kv_cache is None:
                x = checkpoint(block, x, cos, sin, use_reentrant=False)
            else:
                x = block(x, cos, sin, kv_cache.layer(i) if kv_cache is not None else None)
        if kv_cache is not None:
            kv_cache.advance(T)
        h = self.norm_f(x)
        if head is not None:
            return None, head(h.reshape(B * T, -1), self.lm_head.weight, self.cfg.logit_softcap)
        if targets is not None:  # training: the logits are never made whole (model/head_loss.py)
            n = targets.numel()
            weights = (loss_mask.reshape(-1).float() / loss_mask.sum().clamp(min=1) if loss_mask is not None
                       else torch.full((n,), 1.0 / n, device=h.device))
            return None, head_loss(h.reshape(n, -1), self.lm_head.weight, targets.reshape(-1), weights,
                                   self.cfg.logit_softcap)
        return cap_logits(self.lm_head(h).float(), self.cfg.logit_softcap), None
