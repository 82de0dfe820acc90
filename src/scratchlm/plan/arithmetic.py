"""Model arithmetic from the config alone: parameters, FLOPs per token, tokens needed, total FLOPs.

The parameter count is computed from the shapes the GPT in `scratchlm.model.gpt` builds, and a test checks it
equals the model's `numel` for every MLP kind, with and without tied embeddings and GQA.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from ..config import ModelConfig
from ..errors import UserError

DEFAULT_TOKENS_PER_PARAM = 20.0  # Chinchilla's compute-optimal ratio (Hoffmann et al. 2022)
TOKENS_PER_PARAM_RANGE = (20.0, 100.0)  # past 100, small models still improve, but the ratio is a choice
# The largest model a config may ask for. The toolkit targets 1M-1.5B parameters; 100B is ~65x past that. Its
# training state (fp32 weights, gradients, AdamW's two moments: 16 bytes a parameter, 1.6 TB) outgrows a whole
# 8 x H200 node (1.1 TB), and each checkpoint gathers weights and moments (1.2 TB) into rank 0's CPU memory. A config
# above it is a typo (n_layer = 100000), refused from this arithmetic before a model is built, which takes minutes.
MAX_PARAMS = 100 * 10 ** 9


def mlp_hidden(m: ModelConfig) -> int:
    hidden = int(m.mlp_ratio * m.d_model)
    if m.mlp == "swiglu":
        hidden = 64 * math.ceil(int(2 * hidden / 3) / 64)  # as in model.gpt.MLP: 2/3 width, rounded up to 64
    return hidden


@dataclass
class Shapes:
    """The few numbers every formula below is written in."""

    n_layer: int
    d_model: int
    n_head: int
    n_kv_head: int
    head_dim: int
    hidden: int
    vocab: int
    seq_len: int

    @classmethod
    def of(cls, m: ModelConfig, vocab: int) -> "Shapes":
        return cls(m.n_layer, m.d_model, m.n_head, m.n_kv_head or m.n_head, m.attn_head_dim,
                   mlp_hidden(m), vocab, m.seq_len)

    @property
    def d_q(self) -> int:
        return self.n_head * self.head_dim

    @property
    def d_kv(self) -> int:
        return self.n_kv_head * self.head_dim


@dataclass
class ParamCount:
    total: int  # what `model.num_params()` returns (a tied weight counted once)
    non_embedding: int  # without the token embedding (and without the head when untied)
    matrices: int  # 2-D weights inside the blocks: what Muon updates
    embedding: int  # the token embedding table (shared with the head when tied)
    head: int  # the untied output head; 0 when tied
    largest: int  # numel of the largest single parameter (per-tensor optimizer temporaries scale with it)


def count_params(m: ModelConfig, vocab: int) -> ParamCount:
    s = Shapes.of(m, vocab)
    attn = s.d_model * s.d_q + 2 * s.d_model * s.d_kv + s.d_q * s.d_model
    mlp = (3 if m.mlp == "swiglu" else 2) * s.d_model * s.hidden
    norms = 2 * s.d_model + (2 * s.head_dim if m.qk_norm else 0)
    matrices = s.n_layer * (attn + mlp)
    block_total = s.n_layer * (attn + mlp + norms) + s.d_model  # + final norm
    embedding = vocab * s.d_model
    head = 0 if m.tie_embeddings else vocab * s.d_model
    largest = max(embedding, s.d_model * s.hidden, s.d_model * s.d_q)
    return ParamCount(total=block_total + embedding + head, non_embedding=block_total, matrices=matrices,
                      embedding=embedding, head=head, largest=largest)


def check_model_size(m: ModelConfig, vocab: int, where: str) -> None:
    """A one-line error for a [model] section whose parameter count is past MAX_PARAMS."""
    try:
        n = float(count_params(m, vocab).total)
    except OverflowError:  # a width or mlp_ratio so large that the count is past the largest float
        n = math.inf
    if n > MAX_PARAMS:
        shown = f"{n / 1e9:.3g}B" if math.isfinite(n) else "more than 1e308"
        raise UserError(f"{where}: the [model] keys (n_layer {m.n_layer}, d_model {m.d_model}, n_head {m.n_head}, "
                        f"head_dim {m.attn_head_dim}, mlp_ratio {m.mlp_ratio:g}) with vocab_size {vocab} make a "
                        f"model of {shown} parameters, over the limit of {MAX_PARAMS / 1e9:.3g}B (scratchlm targets "
                        "1M-1.5B); lower n_layer, d_model or mlp_ratio")


def flops_per_token(m: ModelConfig, vocab: int) -> dict[str, float]:
    """Model FLOPs of one training token (forward + backward), as in the PaLM paper's MFU appendix.

    6 per parameter that takes part in a matmul (the head does, the embedding lookup does not), plus the
    attention scores and the weighted sum: 2 matmuls of T x head_dim per head and layer, x2 for multiply-add,
    x3 for forward and backward. Recomputation under activation checkpointing is not model FLOPs, so it is
    excluded here and shows up as a lower measured MFU instead.
    """
    p = count_params(m, vocab)
    s = Shapes.of(m, vocab)
    matmul_params = p.non_embedding + vocab * s.d_model
    dense = 6.0 * matmul_params
    attention = 12.0 * s.n_layer * s.d_q * s.seq_len
    return {"dense": dense, "attention": attention, "total": dense + attention, "matmul_params": matmul_params}


def tokens_needed(n_params: int, tokens_per_param: float = DEFAULT_TOKENS_PER_PARAM) -> int:
    return int(round(n_params * tokens_per_param))


def model_arithmetic(m: ModelConfig, vocab: int, tokens_per_step: int, max_steps: int,
                     tokens_per_param: float = DEFAULT_TOKENS_PER_PARAM) -> dict:
    p = count_params(m, vocab)
    f = flops_per_token(m, vocab)
    planned_tokens = tokens_per_step * max_steps
    needed = tokens_needed(p.total, tokens_per_param)
    lo, hi = TOKENS_PER_PARAM_RANGE
    return {
        "vocab_size": vocab,
        "params": p.total, "params_non_embedding": p.non_embedding, "params_matrices": p.matrices,
        "params_embedding": p.embedding, "params_head": p.head, "params_largest": p.largest,
        "flops_per_token": f["total"], "flops_per_token_dense": f["dense"],
        "flops_per_token_attention": f["attention"],
        "tokens_per_param": tokens_per_param, "tokens_needed": needed,
        "tokens_needed_range": [tokens_needed(p.total, lo), tokens_needed(p.total, hi)],
        "tokens_per_step": tokens_per_step, "planned_tokens": planned_tokens,
        "planned_tokens_per_param": planned_tokens / p.total,
        "planned_flops": f["total"] * planned_tokens, "needed_flops": f["total"] * needed,
    }
