"""Export: transformers reloads the model with the same logits; GGUF reads back within the quantization's
tolerance; architectures we cannot map are refused with the reason. int8 and quantization choices:
test_export_quant.py."""
import numpy as np
import pytest
import torch

from scratchlm.errors import UserError
from scratchlm.export.gguf_export import export_gguf, permute_for_llama_cpp
from scratchlm.export.hf import export_hf
from scratchlm.export.mapping import gguf_name
from scratchlm.model.checkpoint import load_model, model_tensors
from scratchlm.sft.template import chat_ids as sft_chat_ids
from scratchlm.tokenizer.bpe import BOS, END, EOS, prompt_ids, stop_ids
from ship_fixtures import make_checkpoint

# The HF model type each maps to, before the dash; "-head_dim": heads wider than d_model / n_head (64 / 4).
VARIANTS = {"qwen3": {}, "llama": {"qk_norm": False, "n_kv_head": 2, "tie_embeddings": False},
            "qwen3-head_dim": {"head_dim": 32}}


@pytest.mark.parametrize("arch", VARIANTS)
def test_hf_export_logits_match(tmp_path, arch):
    transformers = pytest.importorskip("transformers")
    ckpt = make_checkpoint(tmp_path / "ck", **VARIANTS[arch])
    out = export_hf(ckpt, tmp_path / "hf")
    hf = transformers.AutoModelForCausalLM.from_pretrained(str(out), dtype=torch.float32).eval()
    tok = transformers.AutoTokenizer.from_pretrained(str(out))
    assert hf.config.model_type == arch.split("-")[0]
    model, ours_tok, _ = load_model(ckpt)
    ids = torch.randint(0, model.vocab_size, (2, 48), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        diff = (model(ids)[0] - hf(ids).logits).abs().max().item()
    assert diff < 1e-4
    text = "def add(a, b):\n    return a + b"
    assert tok(text).input_ids == prompt_ids(ours_tok, text)  # BOS first, as every training document
    messages = [{"role": "user", "content": "hi"}]
    chat = tok.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
    assert chat == "<|bos|><|user|>hi<|end|><|assistant|>"
    chat_ids = tok.apply_chat_template(messages, add_generation_prompt=True, tokenize=True, return_dict=False)
    assert chat_ids == sft_chat_ids(ours_tok, messages, add_generation_prompt=True)[0]  # one BOS, not two
    messages.append({"role": "assistant", "content": "hello"})  # a whole conversation, as SFT trains on it
    assert tok.apply_chat_template(messages, tokenize=True, return_dict=False) == sft_chat_ids(ours_tok, messages)[0]
    assert tuple(hf.generation_config.eos_token_id) == stop_ids(ours_tok)
    assert ours_tok.encode(text).ids == prompt_ids(ours_tok, text)[1:]  # the training tokenizer adds nothing


@pytest.mark.parametrize("overrides, needle", [({"logit_softcap": 15.0}, "logit_softcap"), ({"mlp": "gelu"}, "mlp")])
def test_unmappable_models_are_refused(tmp_path, overrides, needle):
    ckpt = make_checkpoint(tmp_path / "ck", **overrides)
    for export in (lambda: export_hf(ckpt, tmp_path / "hf"), lambda: export_gguf(ckpt, tmp_path / "g", "f16")):
        with pytest.raises(UserError, match=needle):
            export()


# Worst-case error in one block of 32, from the block's largest magnitude: half a step for q8_0 (step amax/127),
# one step for q4_0 (levels -8..7 with step amax/8, so the side opposite the extreme clips), plus the fp16
# rounding of the stored scale (2^-11 relative).
TOLERANCE = {"f16": lambda amax: 1e-3 * amax + 1e-6, "q8_0": lambda amax: amax / 127 * 0.5 + 2e-3 * amax,
             "q4_0": lambda amax: amax / 8 + 2e-3 * amax}


@pytest.mark.parametrize("quant", ["f16", "q8_0", "q4_0"])
@pytest.mark.parametrize("arch", VARIANTS)
def test_gguf_reads_back_within_tolerance(tmp_path, quant, arch):
    gguf = pytest.importorskip("gguf")
    ckpt = make_checkpoint(tmp_path / "ck", **VARIANTS[arch])
    path = export_gguf(ckpt, tmp_path / "gguf", quant)
    reader = gguf.GGUFReader(str(path))
    arch = arch.split("-")[0]
    assert bytes(reader.fields["general.architecture"].parts[-1]).decode() == arch
    model, tok, _ = load_model(ckpt)
    for key in ("attention.key_length", "attention.value_length", "rope.dimension_count"):
        assert int(reader.fields[f"{arch}.{key}"].parts[-1][0]) == model.cfg.attn_head_dim, key
    assert len(reader.fields["tokenizer.ggml.tokens"].data) == tok.get_vocab_size()
    assert bytes(reader.fields["tokenizer.ggml.model"].parts[-1]).decode() == "gpt2"
    special = {key: int(reader.fields[f"tokenizer.ggml.{key}"].parts[-1][0])
               for key in ("bos_token_id", "eos_token_id", "eot_token_id")}
    assert special == {"bos_token_id": tok.token_to_id(BOS), "eos_token_id": tok.token_to_id(EOS),
                       "eot_token_id": tok.token_to_id(END)}
    assert {special["eos_token_id"], special["eot_token_id"]} <= set(stop_ids(tok))
    assert bool(reader.fields["tokenizer.ggml.add_bos_token"].parts[-1][0])  # as the HF tokenizer and training
    tensors = {t.name: t for t in reader.tensors}
    expected = model_tensors(model)
    assert set(tensors) == {gguf_name(n) for n in expected}
    for name, w in expected.items():
        w = w.float().numpy()
        if arch == "llama" and "q_proj" in name:
            w = permute_for_llama_cpp(w, model.cfg.n_head)
        elif arch == "llama" and "k_proj" in name:
            w = permute_for_llama_cpp(w, model.cfg.n_kv_head)
        t = tensors[gguf_name(name)]
        got = gguf.quants.dequantize(t.data, t.tensor_type).reshape(w.shape)
        if w.ndim == 1:
            assert t.tensor_type == gguf.GGMLQuantizationType.F32 and np.array_equal(got, w)
            continue
        blocks = np.abs(w).reshape(-1, 32).max(axis=1)
        err = np.abs(got - w).reshape(-1, 32).max(axis=1)
        assert (err <= TOLERANCE[quant](blocks)).all(), name
        if quant != "f16":
            assert err.max() > 0  # really quantized, not stored as floats


def test_llama_cpp_permutation_is_the_converters():
    # convert_hf_to_gguf.py: for each head, rows [0..d/2) and [d/2..d) are interleaved into pairs.
    w = np.arange(8 * 2).reshape(8, 2)  # 2 heads of head_dim 4
    p = permute_for_llama_cpp(w, 2)
    assert p[:, 0].tolist() == [0, 4, 2, 6, 8, 12, 10, 14]
