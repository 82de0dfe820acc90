"""Documents end the same way in training and in every export.

The shards close each document with <|eos|>; a micro model trained on short repeated documents learns to emit it;
`scratchlm generate`, transformers (the exported tokenizer and generation_config) and the GGUF metadata all
stop on it, and the exported tokenizer starts a prompt with <|bos|> as training did, so the greedy texts agree.
"""
from argparse import Namespace

import numpy as np
import pytest
import torch

from scratchlm.config import ModelConfig, config_from_dict
from scratchlm.data.jsonl import write_jsonl
from scratchlm.export.gguf_export import export_gguf
from scratchlm.export.hf import export_hf
from scratchlm.ids import write_json
from scratchlm.model import GPT
from scratchlm.model.checkpoint import load_model
from scratchlm.model.generate import generate
from scratchlm.model.stream import stream_to_stdout
from scratchlm.stages import plan_artifacts
from scratchlm.tokenizer import bpe
from scratchlm.tokenizer.bpe import BOS, EOS, prompt_ids, save_tokenizer, stop_ids, train_bpe
from scratchlm.tokenizer.shards import TokenShard
from scratchlm.tokenizer.stage import tokenize_corpus
from scratchlm.train.checkpoint import save_checkpoint
from scratchlm.train.loader import MixtureLoader

DOCS = ["the cat sat on the mat.", "a red fox ran home.", "we drink green tea.", "it rains in spring."]
PROMPT = "the cat"
SEQ_LEN, STEPS = 32, 150
SOURCES = [{"name": "docs", "domain": "prose", "path": "docs.txt"}]


def _tokenize(tmp, tok_dir):
    data = tmp / "data"
    (data / "train").mkdir(parents=True)
    (data / "val").mkdir()
    docs = [{"id": str(i), "text": t, "domain": "prose"} for i, t in enumerate(DOCS * 100)]
    write_jsonl(data / "train" / "docs.jsonl", docs)
    write_jsonl(data / "val" / "prose.jsonl", docs[:8])
    write_json(data / "stats.json", {"train_files": {"docs": ["docs.jsonl"]}})
    cfg = config_from_dict({"data": {"sources": SOURCES}, "shards": {"workers": 1}})
    tokenize_corpus(cfg, data, tok_dir, tmp / "shards")
    return tmp / "shards"


def _train(shards, vocab: int) -> tuple[GPT, torch.optim.Optimizer, ModelConfig]:
    torch.manual_seed(0)
    cfg = ModelConfig(n_layer=2, d_model=64, n_head=4, seq_len=SEQ_LEN)
    model = GPT(cfg, vocab)
    loader = MixtureLoader(shards, seq_len=SEQ_LEN, batch_size=16, seed=0)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    for step in range(STEPS):
        x, y, _ = loader.batch(step)
        _, loss = model(x, y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    return model, opt, cfg


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("ends")
    tok_dir = tmp / "tokenizer"
    tok_dir.mkdir()
    tok = train_bpe(DOCS * 20, vocab_size=300, min_frequency=1)
    save_tokenizer(tok, tok_dir)
    shards = _tokenize(tmp, tok_dir)
    model, opt, cfg = _train(shards, tok.get_vocab_size())
    meta = {"config": {"model": vars(cfg)}, "vocab_size": tok.get_vocab_size(), "ids": {}, "prompts": [PROMPT]}
    ckpt = save_checkpoint(tmp / "checkpoints", STEPS, model, opt, {}, meta, keep_last=1,
                           files=(tok_dir / "tokenizer.json",))
    return {"tmp": tmp, "shards": shards, "ckpt": ckpt}


def test_every_document_in_the_shards_ends_with_eos(trained):
    _, tok, _ = load_model(trained["ckpt"])
    shard = TokenShard(trained["shards"] / "train" / "docs.bin")
    starts = shard.docs[:, 0]
    ends = np.append(starts[1:], len(shard))
    assert len(starts) == len(DOCS) * 100
    assert (shard.tokens[starts] == tok.token_to_id(BOS)).all()
    assert (shard.tokens[ends - 1] == tok.token_to_id(EOS)).all()
    first = shard.tokens[starts[0]:ends[0]].tolist()
    assert first == [*prompt_ids(tok, DOCS[0]), tok.token_to_id(EOS)]


def _ours(ckpt):
    """scratchlm's greedy continuation of PROMPT, and the tokenizer."""
    model, tok, _ = load_model(ckpt)
    return list(generate(model, prompt_ids(tok, PROMPT), 24, temperature=0.0, stop_ids=stop_ids(tok))), tok


def test_scratchlm_generate_stops_at_the_end_of_the_document(trained, capsys):
    new, tok = _ours(trained["ckpt"])
    assert new[-1] == tok.token_to_id(EOS)  # learned from the shards, not BOS as before documents had an EOS
    assert tok.decode(new, skip_special_tokens=True) == DOCS[0][len(PROMPT):]
    args = Namespace(checkpoint=trained["ckpt"], prompt=PROMPT, max_new_tokens=24, temperature=0.0, top_k=0,
                     top_p=1.0, repetition_penalty=1.0, no_cache=False, seed=0)
    stream_to_stdout(args)
    assert capsys.readouterr().out == DOCS[0] + "\n"


def test_transformers_generates_and_stops_like_scratchlm(trained):
    transformers = pytest.importorskip("transformers")
    out = export_hf(trained["ckpt"], trained["tmp"] / "hf")
    hf = transformers.AutoModelForCausalLM.from_pretrained(str(out), dtype=torch.float32).eval()
    tok = transformers.AutoTokenizer.from_pretrained(str(out))
    ours, ours_tok = _ours(trained["ckpt"])
    enc = tok(PROMPT, return_tensors="pt")
    assert enc.input_ids[0].tolist() == prompt_ids(ours_tok, PROMPT)  # BOS first, as in training
    theirs = hf.generate(**enc, do_sample=False, max_new_tokens=24)[0, enc.input_ids.shape[1]:].tolist()
    assert theirs == ours  # the same tokens, ending on the same EOS: the generation_config stops on it
    pipe = transformers.pipeline("text-generation", model=hf, tokenizer=tok)
    assert pipe(PROMPT, do_sample=False, max_new_tokens=24)[0]["generated_text"] == DOCS[0]


def test_gguf_stops_on_the_token_the_model_ends_documents_with(trained):
    gguf = pytest.importorskip("gguf")
    path = export_gguf(trained["ckpt"], trained["tmp"] / "gguf", "f16")
    reader = gguf.GGUFReader(str(path))
    eos = int(reader.fields["tokenizer.ggml.eos_token_id"].parts[-1][0])
    assert eos == _ours(trained["ckpt"])[0][-1]
    assert bool(reader.fields["tokenizer.ggml.add_bos_token"].parts[-1][0])


def test_llama_cpp_stops_at_the_document_end_like_scratchlm(trained):
    """Only where llama-cpp-python is installed (it builds from source for half an hour: no test dependency)."""
    llama_cpp = pytest.importorskip("llama_cpp")
    path = export_gguf(trained["ckpt"], trained["tmp"] / "gguf-llama", "f16")
    llm = llama_cpp.Llama(model_path=str(path), n_ctx=SEQ_LEN, n_threads=1, verbose=False)
    done = llm.create_completion(PROMPT, max_tokens=24, temperature=0.0, top_k=1)["choices"][0]
    new, tok = _ours(trained["ckpt"])
    assert done["finish_reason"] == "stop"  # at the EOS the model emits, not at max_tokens
    assert done["text"] == tok.decode(new, skip_special_tokens=True) == DOCS[0][len(PROMPT):]


def test_shards_id_changes_with_the_document_wrapping(tmp_path, monkeypatch):
    (tmp_path / "docs.txt").write_text(DOCS[0])
    cfg = config_from_dict({"data": {"sources": SOURCES}})
    cfg.path = tmp_path / "scratchlm.toml"
    before = plan_artifacts(cfg)
    monkeypatch.setattr(bpe, "DOCUMENT_WRAP", (BOS,))  # the convention before documents had an EOS
    after = plan_artifacts(cfg)
    assert after["tokenizer"].id == before["tokenizer"].id
    assert after["shards"].id != before["shards"].id and after["train"].id != before["train"].id
