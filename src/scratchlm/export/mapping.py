"""What of our model maps onto which `transformers` / llama.cpp architecture, and what cannot.

Mapped:  swiglu MLP, RoPE (halves layout), RMSNorm, GQA, tied or untied embeddings
         -> Llama (LlamaForCausalLM / llama.cpp `llama`); with qk_norm -> Qwen3 (Qwen3ForCausalLM / `qwen3`),
         whose q_norm/k_norm are the same per-head RMSNorm applied before RoPE.
Refused: logit_softcap > 0 (only Gemma-2 caps final logits, and Gemma-2 differs elsewhere: (1 + w) norms,
         scaled embeddings, extra norms), gelu / relu2 MLP (Llama and Qwen3 MLPs are always gated), because a
         silently different model is worse than no export.
"""
from __future__ import annotations

from ..config import ModelConfig
from ..errors import UserError
from ..model.gpt import NORM_EPS


def check_exportable(cfg: ModelConfig, fmt: str) -> str:
    """The target architecture name ("llama" or "qwen3"), or a UserError saying what cannot be mapped."""
    if cfg.logit_softcap > 0:
        raise UserError(f"cannot export to {fmt}: model.logit_softcap = {cfg.logit_softcap} has no equivalent in "
                        f"the Llama/Qwen3 architectures; retrain with logit_softcap = 0")
    if cfg.mlp != "swiglu":
        raise UserError(f"cannot export to {fmt}: model.mlp = {cfg.mlp} (Llama and Qwen3 only have the gated "
                        f"SwiGLU MLP); retrain with mlp = \"swiglu\"")
    return "qwen3" if cfg.qk_norm else "llama"


def hf_name(ours: str) -> str:
    """Our parameter name -> the transformers Llama/Qwen3 one."""
    if ours == "tok_emb.weight":
        return "model.embed_tokens.weight"
    if ours == "norm_f.weight":
        return "model.norm.weight"
    if ours == "lm_head.weight":
        return "lm_head.weight"
    _, i, rest = ours.split(".", 2)  # blocks.<i>.<rest>
    rest = (rest.replace("attn_norm.", "input_layernorm.").replace("mlp_norm.", "post_attention_layernorm.")
            .replace("attn.", "self_attn."))
    return f"model.layers.{i}.{rest}"


def gguf_name(ours: str) -> str:
    """Our parameter name -> llama.cpp's tensor name (llama / qwen3 share them)."""
    fixed = {"tok_emb.weight": "token_embd.weight", "norm_f.weight": "output_norm.weight",
             "lm_head.weight": "output.weight"}
    if ours in fixed:
        return fixed[ours]
    _, i, rest = ours.split(".", 2)
    table = {"attn_norm.weight": "attn_norm", "mlp_norm.weight": "ffn_norm", "attn.q_proj.weight": "attn_q",
             "attn.k_proj.weight": "attn_k", "attn.v_proj.weight": "attn_v", "attn.o_proj.weight": "attn_output",
             "attn.q_norm.weight": "attn_q_norm", "attn.k_norm.weight": "attn_k_norm",
             "mlp.gate_proj.weight": "ffn_gate", "mlp.up_proj.weight": "ffn_up", "mlp.down_proj.weight": "ffn_down"}
    return f"blk.{i}.{table[rest]}.weight"


def intermediate_size(model) -> int:
    return model.blocks[0].mlp.up_proj.out_features


def norm_eps() -> float:
    return NORM_EPS
