"""Export: transformers reloads the model with the same logits; GGUF reads back within the quantization's
tolerance; int8 saves and reloads; architectures we cannot map are refused with the reason."""
import numpy as np
import pytest
import torch

from scratchlm.errors import UserError
from scratchlm.export.gguf_export import export_gguf, permute_for_llama_cpp
from scratchlm.export.hf import export_hf
from scratchlm.export.int8 import export_int8, load_int8
from scratchlm.export.mapping import gguf_name
from scratchlm.train.checkpoint import load_model, model_tensors
from ship_fixtures import make_checkpoint

VARIANTS = {"qwen3": {}, "llama": {"qk_norm": False, "n_kv_head": 2, "tie_embeddings": False}}


@pytest.mark.parametrize("arch", VARIANTS)
def test_hf_export_logits_match(tmp_path, arch):
    transformers = pytest.importorskip("transformers")
    ckpt = make_checkpoint(tmp_path / "ck", **VARIANTS[arch])
    out = export_hf(ckpt, tmp_path / "hf")
    hf = transformers.AutoModelForCausalLM.from_pretrained(str(out), dtype=torch.float32).eval()
    tok = transformers.AutoTokenizer.from_pretrained(str(out))
    assert hf.config.model_type == arch
    model, ours_tok, _ = load_model(ckpt)
    ids = torch.randint(0, model.vocab_size, (2, 48), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        diff = (model(ids)[0] - hf(ids).logits).abs().max().item()
    assert diff < 1e-4
    text = "def add(a, b):\n    return a + b"
    assert tok(text).input_ids == ours_tok.encode(text).ids
    chat = tok.apply_chat_template([{"role": "user", "content": "hi"}], add_generation_prompt=True, tokenize=False)
    assert chat == "<|bos|><|user|>hi<|end|><|assistant|>"


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
    assert bytes(reader.fields["general.architecture"].parts[-1]).decode() == arch
    model, tok, _ = load_model(ckpt)
    assert len(reader.fields["tokenizer.ggml.tokens"].data) == tok.get_vocab_size()
    assert bytes(reader.fields["tokenizer.ggml.model"].parts[-1]).decode() == "gpt2"
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


def test_int8_export_saves_and_reloads(tmp_path):
    ckpt = make_checkpoint(tmp_path / "ck")
    out = export_int8(ckpt, tmp_path / "int8")
    model, tok, meta = load_int8(out)
    ref, _, _ = load_model(ckpt)
    assert any("quantized" in type(m).__module__ for m in model.modules())
    ids = torch.randint(0, ref.vocab_size, (1, 32), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        a, b = model(ids)[0], ref(ids)[0]
    assert (a - b).abs().max() < 0.1 * b.abs().max()
