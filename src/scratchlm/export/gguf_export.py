"""`scratchlm export --format gguf --quant f16|q8_0|q4_0`: one file llama.cpp loads, tokenizer included.

Architecture `llama`, or `qwen3` when the model has qk_norm (llama.cpp's `llama` has no q/k norms). Metadata
and tensor names follow what llama.cpp's convert_hf_to_gguf.py writes for those architectures:
- `llama` uses interleaved-pair RoPE, so q/k rows are permuted from our halves layout exactly as the converter
  permutes a transformers Llama checkpoint; `qwen3` uses halves (NeoX) RoPE and takes them as they are.
- tokenizer: `gpt2` (byte-level BPE) tokens, merges and token types, pre-tokenizer `llama-bpe` (the Llama-3
  split regex, which is our GPT-4-style pattern with digit groups of at most three).
- 1-D tensors (norms) stay F32, as llama.cpp expects; a 2-D tensor whose rows are not a multiple of the
  32-element quantization block falls back to F16.
- K-quants (q4_K, q5_K, q6_K...): gguf-py can read them but not write them (its quantize raises
  NotImplementedError), so they are refused with the way to get them: llama.cpp's llama-quantize on the f16 file.
Checked here by reading the file back with gguf.GGUFReader; not run through llama.cpp itself in the tests.
"""
from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np

from ..errors import UserError
from ..model.checkpoint import load_model, model_tensors
from ..sampling import for_checkpoint
from ..sft.template import JINJA_TEMPLATE
from ..tokenizer.bpe import BOS, END, EOS, PAD, SPECIAL_TOKENS
from .mapping import check_exportable, gguf_name, intermediate_size, norm_eps

QUANTS = ("f16", "q8_0", "q4_0")
K_QUANT = re.compile(r"q[2-6]_k(_[sml])?", re.IGNORECASE)  # llama-quantize's names: Q4_K, Q4_K_M, Q6_K...


def permute_for_llama_cpp(w: np.ndarray, n_head: int) -> np.ndarray:
    """Halves-layout RoPE rows -> interleaved pairs (the permutation convert_hf_to_gguf.py applies)."""
    return w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def gguf_tensors(model, arch: str) -> dict[str, np.ndarray]:
    c = model.cfg
    out = {}
    for name, t in model_tensors(model).items():
        w = t.float().numpy()
        if arch == "llama" and name.endswith("attn.q_proj.weight"):
            w = permute_for_llama_cpp(w, c.n_head)
        elif arch == "llama" and name.endswith("attn.k_proj.weight"):
            w = permute_for_llama_cpp(w, c.n_kv_head or c.n_head)
        out[gguf_name(name)] = np.ascontiguousarray(w)
    return out


def tokenizer_vocab(tokenizer) -> tuple[list[str], list[int], list[str]]:
    import gguf

    vocab = tokenizer.get_vocab(with_added_tokens=True)
    tokens = [""] * len(vocab)
    for tok, i in vocab.items():
        tokens[i] = tok
    types = [int(gguf.TokenType.CONTROL if t in SPECIAL_TOKENS else gguf.TokenType.NORMAL) for t in tokens]
    merges = json.loads(tokenizer.to_str())["model"]["merges"]
    merges = [m if isinstance(m, str) else " ".join(m) for m in merges]
    return tokens, types, merges


def qtype_for(name: str, w: np.ndarray, quant: str, tied: bool):
    import gguf

    Q = gguf.GGMLQuantizationType
    if w.ndim == 1:
        return Q.F32
    if quant == "f16" or w.shape[-1] % 32:
        return Q.F16
    if quant == "q4_0" and name == ("token_embd.weight" if tied else "output.weight"):
        # The output layer (a tied token_embd is it) decides every logit: llama.cpp's own quantizer gives it Q6_K
        # in a q4_0 file (Q8_0 when rows are not a multiple of 256). gguf-py cannot write Q6_K, so Q8_0: a few
        # hundred KB more for the agreement with f16 in docs/benchmarks.md (Quantized exports).
        return Q.Q8_0
    return Q.Q8_0 if quant == "q8_0" else Q.Q4_0


def refuse_k_quant(quant: str, flag: str) -> None:
    if K_QUANT.fullmatch(quant):
        raise UserError(f"{flag} {quant}: gguf-py cannot write K-quants; export --format gguf --quant f16, then run "
                        f"llama.cpp's `llama-quantize model-f16.gguf model-{quant}.gguf {quant.upper()}`")


def check_quant(quant: str) -> None:
    refuse_k_quant(quant, "--quant")
    if quant not in QUANTS:
        raise UserError(f"--quant must be one of {', '.join(QUANTS)}, got {quant}")


def add_sampling(w, meta: dict) -> None:
    """The sampling `scratchlm generate` (base) or `chat` (fine-tuned) uses, as llama.cpp reads its defaults from
    the file (general.sampling.*). The repetition penalty covers the whole context (last_n -1), as ours does."""
    import gguf

    s, key = for_checkpoint(meta), gguf.Keys.General
    w.add_float32(key.SAMPLING_TEMP, s.temperature)
    w.add_int32(key.SAMPLING_TOP_K, s.top_k)
    w.add_float32(key.SAMPLING_TOP_P, s.top_p)
    w.add_float32(key.SAMPLING_PENALTY_REPEAT, s.repetition_penalty)
    w.add_int32(key.SAMPLING_PENALTY_LAST_N, -1)


def export_gguf(checkpoint: Path, out: Path, quant: str = "f16") -> Path:
    try:
        import gguf
    except ImportError:
        raise UserError("GGUF export needs the `gguf` package (pip install gguf)") from None
    check_quant(quant)
    model, tokenizer, meta = load_model(checkpoint)
    arch = check_exportable(model.cfg, "gguf")
    c = model.cfg
    if out.suffix != ".gguf":
        out = out / f"model-{quant}.gguf"
    out.parent.mkdir(parents=True, exist_ok=True)
    w = gguf.GGUFWriter(str(out), arch)
    w.add_name(f"scratchlm-step{meta['step']}")
    w.add_context_length(c.seq_len)
    w.add_embedding_length(c.d_model)
    w.add_block_count(c.n_layer)
    w.add_feed_forward_length(intermediate_size(model))
    w.add_head_count(c.n_head)
    w.add_head_count_kv(c.n_kv_head or c.n_head)
    w.add_key_length(c.attn_head_dim)
    w.add_value_length(c.attn_head_dim)
    w.add_rope_dimension_count(c.attn_head_dim)
    w.add_rope_freq_base(c.rope_theta)
    w.add_layer_norm_rms_eps(norm_eps())
    w.add_vocab_size(model.vocab_size)
    ftype = {"f16": gguf.LlamaFileType.MOSTLY_F16, "q8_0": gguf.LlamaFileType.MOSTLY_Q8_0,
             "q4_0": gguf.LlamaFileType.MOSTLY_Q4_0}[quant]
    w.add_file_type(int(ftype))
    tokens, types, merges = tokenizer_vocab(tokenizer)
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("llama-bpe")
    w.add_token_list(tokens)
    w.add_token_types(types)
    w.add_token_merges(merges)
    w.add_bos_token_id(tokenizer.token_to_id(BOS))
    # llama.cpp stops on eos (closes every training document) and eot (closes a chat turn): bpe.STOP_TOKENS but
    # BOS, which only checkpoints trained before documents had an EOS end with.
    w.add_eos_token_id(tokenizer.token_to_id(EOS))
    w.add_eot_token_id(tokenizer.token_to_id(END))
    w.add_pad_token_id(tokenizer.token_to_id(PAD))
    w.add_add_bos_token(True)
    w.add_chat_template(JINJA_TEMPLATE)
    add_sampling(w, meta)
    for name, arr in gguf_tensors(model, arch).items():
        qtype = qtype_for(name, arr, quant, c.tie_embeddings)
        if qtype == gguf.GGMLQuantizationType.F32:
            w.add_tensor(name, arr.astype(np.float32))
        elif qtype == gguf.GGMLQuantizationType.F16:
            w.add_tensor(name, arr.astype(np.float16))
        else:
            w.add_tensor(name, gguf.quants.quantize(arr, qtype), raw_dtype=qtype)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return out
