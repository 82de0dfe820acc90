"""`scratchlm export --format hf`: a directory transformers loads with AutoModelForCausalLM / AutoTokenizer.

config.json (LlamaForCausalLM, or Qwen3ForCausalLM when the model has qk_norm), model.safetensors with
transformers' parameter names, tokenizer.json plus tokenizer_config.json (special tokens and the chat template),
generation_config.json. No transformers import: writing the files needs only what scratchlm already has.
The export behaves like `scratchlm generate`: its tokenizer puts BOS before a text (every training document
starts with it) and generation stops on the same tokens (bpe.stop_ids; EOS closes every training document).
"""
from __future__ import annotations

import json
from pathlib import Path

from ..model.checkpoint import load_model, model_tensors
from ..sampling import for_checkpoint
from ..sft.template import JINJA_TEMPLATE
from ..tokenizer.bpe import BOS, DOCUMENT_WRAP, EOS, PAD, SPECIAL_TOKENS, stop_ids
from ..train.checkpoint import save_tensors
from .mapping import check_exportable, hf_name, intermediate_size, norm_eps

ARCH = {"llama": "LlamaForCausalLM", "qwen3": "Qwen3ForCausalLM"}


def hf_config(model, arch: str, tokenizer) -> dict:
    c = model.cfg
    cfg = {"architectures": [ARCH[arch]], "model_type": arch, "vocab_size": model.vocab_size,
           "hidden_size": c.d_model, "intermediate_size": intermediate_size(model),
           "num_hidden_layers": c.n_layer, "num_attention_heads": c.n_head,
           "num_key_value_heads": c.n_kv_head or c.n_head, "head_dim": c.attn_head_dim,
           "hidden_act": "silu", "max_position_embeddings": c.seq_len, "rms_norm_eps": norm_eps(),
           # both spellings: transformers 5 reads rope_parameters, 4.x reads rope_theta
           "rope_theta": c.rope_theta, "rope_parameters": {"rope_type": "default", "rope_theta": c.rope_theta},
           "tie_word_embeddings": c.tie_embeddings, "attention_bias": False, "attention_dropout": 0.0,
           "mlp_bias": False, "initializer_range": c.init_std, "use_cache": True, "torch_dtype": "float32",
           "bos_token_id": tokenizer.token_to_id(BOS), "eos_token_id": tokenizer.token_to_id(EOS),
           "pad_token_id": tokenizer.token_to_id(PAD)}
    if arch == "qwen3":
        cfg.update({"use_sliding_window": False, "sliding_window": None, "max_window_layers": c.n_layer})
    return cfg


def bos_adding(tokenizer):
    """A copy of the tokenizer whose encode puts BOS first, as training did, so `tok(prompt)` in transformers gives
    the ids `scratchlm generate` feeds the model. Only the exported copy: scratchlm's own encode calls add BOS and
    EOS themselves (bpe.prompt_ids, bpe.DOCUMENT_WRAP). apply_chat_template encodes with add_special_tokens=False,
    so the BOS its template starts with is not doubled."""
    from tokenizers import Tokenizer, processors

    opening = DOCUMENT_WRAP[0]
    tok = Tokenizer.from_str(tokenizer.to_str())
    tok.post_processor = processors.TemplateProcessing(
        single=f"{opening}:0 $A:0", pair=f"{opening}:0 $A:0 {opening}:1 $B:1",
        special_tokens=[(opening, tokenizer.token_to_id(opening))])
    return tok


def generation_defaults(meta: dict) -> dict:
    """The sampling `scratchlm generate` (base) or `chat` (fine-tuned) uses, as transformers names it: without it
    transformers decodes greedily, and the exported model answers a prompt unlike the command."""
    s = for_checkpoint(meta)
    return {"do_sample": s.temperature > 0, "temperature": s.temperature, "top_k": s.top_k, "top_p": s.top_p,
            "repetition_penalty": s.repetition_penalty, "max_new_tokens": s.max_new_tokens}


def export_hf(checkpoint: Path, out: Path) -> Path:
    model, tokenizer, meta = load_model(checkpoint)
    arch = check_exportable(model.cfg, "hf")
    out.mkdir(parents=True, exist_ok=True)
    tensors = {hf_name(k): v for k, v in model_tensors(model).items()}
    save_tensors(tensors, out / "model.safetensors", metadata={"format": "pt"})
    (out / "config.json").write_text(json.dumps(hf_config(model, arch, tokenizer), indent=2) + "\n")
    (out / "generation_config.json").write_text(json.dumps(
        {"bos_token_id": tokenizer.token_to_id(BOS),
         "eos_token_id": list(stop_ids(tokenizer)),
         "pad_token_id": tokenizer.token_to_id(PAD), **generation_defaults(meta)}, indent=2) + "\n")
    bos_adding(tokenizer).save(str(out / "tokenizer.json"))
    (out / "tokenizer_config.json").write_text(json.dumps(
        {"tokenizer_class": "PreTrainedTokenizerFast", "bos_token": BOS, "eos_token": EOS, "pad_token": PAD,
         "additional_special_tokens": [t for t in SPECIAL_TOKENS if t not in (BOS, EOS, PAD)],
         "add_bos_token": True, "add_eos_token": False, "clean_up_tokenization_spaces": False,
         "model_max_length": model.cfg.seq_len, "chat_template": JINJA_TEMPLATE}, indent=2) + "\n")
    (out / "scratchlm_meta.json").write_text(json.dumps(
        {"source_checkpoint": str(Path(checkpoint).resolve()), "step": meta["step"], "ids": meta.get("ids"),
         "architecture": ARCH[arch]}, indent=2) + "\n")
    return out
