"""A deliberately plain GPT-2 (the classic nanoGPT recipe) to benchmark scratchlm's model against.

Learned positional embeddings, LayerNorm with biases, GELU MLP at 4x width, attention as an explicit masked softmax
(nanoGPT's slow path: no SDPA, no flash kernels), weights tied between the token embedding and the head, N(0, 0.02)
init with residual projections scaled by 1/sqrt(2 * n_layer), AdamW, no torch.compile. Nothing here is tuned.

Import it:    sys.path.insert(0, "bench"); from baseline_gpt2 import BaselineConfig, BaselineGPT
Run it:       python bench/baseline_gpt2.py   (trains a tiny one on CPU with AdamW, Muon and MuonH side by side)
"""

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn


@dataclass
class BaselineConfig:
    vocab_size: int
    n_layer: int
    n_head: int
    d_model: int
    seq_len: int
    dropout: float = 0.0
    bias: bool = True  # GPT-2 has biases in every Linear and LayerNorm


class CausalSelfAttention(nn.Module):
    def __init__(self, cfg: BaselineConfig):
        super().__init__()
        if cfg.d_model % cfg.n_head != 0:
            raise ValueError(f"d_model {cfg.d_model} is not divisible by n_head {cfg.n_head}")
        self.n_head = cfg.n_head
        self.c_attn = nn.Linear(cfg.d_model, 3 * cfg.d_model, bias=cfg.bias)
        self.c_proj = nn.Linear(cfg.d_model, cfg.d_model, bias=cfg.bias)
        self.attn_dropout = nn.Dropout(cfg.dropout)
        self.resid_dropout = nn.Dropout(cfg.dropout)
        # Lower-triangular mask: position t may look at positions <= t. Not persistent: it is not a weight.
        mask = torch.tril(torch.ones(cfg.seq_len, cfg.seq_len, dtype=torch.bool))
        self.register_buffer("mask", mask.view(1, 1, cfg.seq_len, cfg.seq_len), persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, T, C = x.shape
        q, k, v = self.c_attn(x).split(C, dim=2)
        q, k, v = (t.view(B, T, self.n_head, C // self.n_head).transpose(1, 2) for t in (q, k, v))  # (B, nh, T, hs)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        att = att.masked_fill(~self.mask[:, :, :T, :T], float("-inf"))
        att = self.attn_dropout(F.softmax(att, dim=-1))
        y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)
        return self.resid_dropout(self.c_proj(y))


class MLP(nn.Module):
    def __init__(self, cfg: BaselineConfig):
        super().__init__()
        self.c_fc = nn.Linear(cfg.d_model, 4 * cfg.d_model, bias=cfg.bias)
        self.gelu = nn.GELU()
        self.c_proj = nn.Linear(4 * cfg.d_model, cfg.d_model, bias=cfg.bias)
        self.dropout = nn.Dropout(cfg.dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.dropout(self.c_proj(self.gelu(self.c_fc(x))))


class Block(nn.Module):
    def __init__(self, cfg: BaselineConfig):
        super().__init__()
        self.ln_1 = nn.LayerNorm(cfg.d_model, bias=cfg.bias)
        self.attn = CausalSelfAttention(cfg)
        self.ln_2 = nn.LayerNorm(cfg.d_model, bias=cfg.bias)
        self.mlp = MLP(cfg)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class BaselineGPT(nn.Module):
    def __init__(self, cfg: BaselineConfig):
        super().__init__()
        self.cfg = cfg
        self.transformer = nn.ModuleDict(dict(
            wte=nn.Embedding(cfg.vocab_size, cfg.d_model),
            wpe=nn.Embedding(cfg.seq_len, cfg.d_model),
            drop=nn.Dropout(cfg.dropout),
            h=nn.ModuleList([Block(cfg) for _ in range(cfg.n_layer)]),
            ln_f=nn.LayerNorm(cfg.d_model, bias=cfg.bias),
        ))
        self.lm_head = nn.Linear(cfg.d_model, cfg.vocab_size, bias=False)
        self.transformer.wte.weight = self.lm_head.weight  # weight tying, as in GPT-2
        self.apply(self._init_weights)
        for name, p in self.named_parameters():
            if name.endswith("c_proj.weight"):  # GPT-2: residual projections shrink with depth
                nn.init.normal_(p, mean=0.0, std=0.02 / math.sqrt(2 * cfg.n_layer))

    @staticmethod
    def _init_weights(module: nn.Module) -> None:
        if isinstance(module, nn.Linear):
            nn.init.normal_(module.weight, mean=0.0, std=0.02)
            if module.bias is not None:
                nn.init.zeros_(module.bias)
        elif isinstance(module, nn.Embedding):
            nn.init.normal_(module.weight, mean=0.0, std=0.02)

    def num_params(self, non_embedding: bool = False) -> int:
        """Unique parameters (the tied embedding/head counted once); non_embedding drops the position table, as
        nanoGPT's get_num_params does, since it does not cost FLOPs."""
        n = sum(p.numel() for p in self.parameters())
        return n - self.transformer.wpe.weight.numel() if non_embedding else n

    def forward(self, idx: torch.Tensor, targets: torch.Tensor | None = None, head=None
                ) -> tuple[torch.Tensor | None, torch.Tensor | None]:
        """head: scratchlm's evaluation hook (eval/chunked_head.py, as GPT.forward has it), so that both contenders
        of bench/vs_simple_trainer.py are scored by the same code."""
        B, T = idx.shape
        if T > self.cfg.seq_len:
            raise ValueError(f"sequence of length {T} is longer than seq_len {self.cfg.seq_len}")
        pos = torch.arange(T, device=idx.device)
        x = self.transformer.drop(self.transformer.wte(idx) + self.transformer.wpe(pos))
        for block in self.transformer.h:
            x = block(x)
        h = self.transformer.ln_f(x)
        if head is not None:
            return None, head(h.reshape(B * T, -1), self.lm_head.weight, 0.0)
        logits = self.lm_head(h)
        loss = None
        if targets is not None:
            loss = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.reshape(-1), ignore_index=-1)
        return logits, loss

    def configure_optimizers(self, weight_decay: float, learning_rate: float, betas: tuple[float, float],
                             device_type: str) -> torch.optim.AdamW:
        """nanoGPT's AdamW: decay every >=2-D tensor (matrices, embeddings), not biases or LayerNorm gains."""
        params = [p for p in self.parameters() if p.requires_grad]
        groups = [{"params": [p for p in params if p.dim() >= 2], "weight_decay": weight_decay},
                  {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0}]
        return torch.optim.AdamW(groups, lr=learning_rate, betas=betas, fused=device_type == "cuda")


def _stdlib_bytes() -> torch.Tensor:
    """Real text with no download: the Python docs' topic help shipped with the standard library, as bytes."""
    from pydoc_data.topics import topics
    return torch.frombuffer(bytearray("\n".join(topics.values()).encode("utf-8")), dtype=torch.uint8).long()


def _main() -> None:
    """Train one tiny byte-level baseline per optimizer, same seed, same batches, and print held-out loss."""
    import argparse
    import time

    from scratchlm.train.optim import ADAMW_DEFAULT_LR, build_optimizer

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=500)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--seq-len", type=int, default=64)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--d-model", type=int, default=64)
    ap.add_argument("--optimizers", default="adamw,muon,muonh")
    ap.add_argument("--muon-lr", type=float, default=None, help="hidden-matrix LR for muon/muonh (default: theirs)")
    args = ap.parse_args()
    torch.set_num_threads(1)  # tiny model on a shared CPU: extra threads only spin-wait

    data = _stdlib_bytes()
    split = int(0.9 * len(data))
    train_data, val_data = data[:split], data[split:]
    cfg = BaselineConfig(vocab_size=256, n_layer=args.layers, n_head=4, d_model=args.d_model, seq_len=args.seq_len)

    def batch(source: torch.Tensor, gen: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
        starts = torch.randint(len(source) - cfg.seq_len - 1, (args.batch,), generator=gen)
        x = torch.stack([source[s:s + cfg.seq_len] for s in starts])
        y = torch.stack([source[s + 1:s + 1 + cfg.seq_len] for s in starts])
        return x, y

    print(f"baseline GPT-2: {cfg}, {args.steps} steps of {args.batch}x{cfg.seq_len} bytes, "
          f"{len(train_data):,} train / {len(val_data):,} val bytes of pydoc_data.topics")
    for name in args.optimizers.split(","):
        torch.manual_seed(0)
        model = BaselineGPT(cfg)
        opt = build_optimizer(model, name, lr=ADAMW_DEFAULT_LR, weight_decay=0.1, muon_lr=args.muon_lr)
        gen = torch.Generator().manual_seed(1)
        start, recent = time.perf_counter(), []
        for step in range(args.steps):
            factor = min(1.0, (step + 1) / 20)  # short linear warmup, then constant
            for g in opt.param_groups:
                g["lr"] = g["initial_lr"] * factor
            _, loss = model(*batch(train_data, gen))
            opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            recent = (recent + [loss.item()])[-20:]
        seconds = time.perf_counter() - start
        model.eval()
        val_gen = torch.Generator().manual_seed(2)
        with torch.no_grad():
            val = sum(model(*batch(val_data, val_gen))[1].item() for _ in range(20)) / 20
        model.train()
        print(f"{name:6s} params {model.num_params():,}  train loss (last 20 steps) {sum(recent) / len(recent):.3f}  "
              f"val loss {val:.3f}  {args.steps * args.batch * cfg.seq_len / seconds:,.0f} tokens/s")


if __name__ == "__main__":
    _main()
