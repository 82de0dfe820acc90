"""Key/value cache for generation: each new token attends to cached keys instead of recomputing the prefix."""
from __future__ import annotations

import torch


class KVCache:
    def __init__(self, n_layer: int, batch: int, n_kv_head: int, max_len: int, head_dim: int,
                 device: torch.device, dtype: torch.dtype):
        shape = (n_layer, batch, n_kv_head, max_len, head_dim)
        self.k = torch.zeros(shape, device=device, dtype=dtype)
        self.v = torch.zeros(shape, device=device, dtype=dtype)
        self.pos = 0

    @classmethod
    def for_model(cls, model, batch: int = 1) -> "KVCache":
        c = model.cfg
        p = model.tok_emb.weight
        return cls(c.n_layer, batch, c.n_kv_head or c.n_head, c.seq_len, c.attn_head_dim, p.device, p.dtype)

    def layer(self, i: int) -> "_LayerView":
        return _LayerView(self, i)

    def advance(self, n: int) -> None:
        self.pos += n

    def reset(self) -> None:
        self.pos = 0


class _LayerView:
    def __init__(self, cache: KVCache, i: int):
        self.cache, self.i = cache, i

    def update(self, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        c, p, t = self.cache, self.cache.pos, k.size(2)
        c.k[self.i, :, :, p:p + t] = k
        c.v[self.i, :, :, p:p + t] = v
        return c.k[self.i, :, :, :p + t], c.v[self.i, :, :, :p + t]
