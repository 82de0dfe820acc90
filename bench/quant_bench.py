"""Quantized exports against the fp32 checkpoint, side by side in one process.

    PYTHONPATH=src python bench/quant_bench.py [--checkpoint STEP_DIR] [--threads 1] [--rounds 5]

int8 export (`scratchlm export --quantize int8`), what `scratchlm generate` gets from it:
- weights file size; load_model time (median of rounds, fp32 and int8 interleaved);
- generate tokens/s (KV cache, temperature 0.8, top-k 50; median of rounds, interleaved);
- top-1 agreement with the fp32 model at every position of text from the built-in corpus.
A third row is the option not taken: the same int8 weights kept in memory and multiplied by
torch._weight_int8pack_mm on bf16 activations (Linear layers swapped, embedding lookup dequantized).

GGUF q4_0's output layer: the checkpoint's matrices quantized and dequantized by gguf-py (weights only, in our
model, not llama.cpp), all Q4_0 against Q4_0 with the output layer (a tied token_embd) in Q8_0; top-1 agreement
with the f16 round trip, and the bytes of the output layer.

Without --checkpoint: a random-weight model of the quickstart's shape (generate_bench.py), where agreement says
little (flat logits); give a trained checkpoint for that.
"""
from __future__ import annotations

import argparse
import copy
import itertools
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

from generate_bench import random_checkpoint
from scratchlm.data.builtin import code_documents, docs_documents, web_documents
from scratchlm.export.int8 import WEIGHTS, export_int8, quantize_rows
from scratchlm.model.generate import generate
from scratchlm.tokenizer.bpe import BOS
from scratchlm.model.checkpoint import load_model, model_tensors, set_model_tensors


class Int8PackLinear(torch.nn.Module):
    """The option not taken: int8 weights in memory, torch._weight_int8pack_mm (bf16 activations)."""

    def __init__(self, weight: torch.Tensor):
        super().__init__()
        self.q, scale = quantize_rows(weight.detach())
        self.scale = scale.to(torch.bfloat16)

    def forward(self, x):
        y = torch._weight_int8pack_mm(x.reshape(-1, x.size(-1)).to(torch.bfloat16), self.q, self.scale)
        return y.float().view(*x.shape[:-1], -1)


def int8pack_model(model):
    """A copy of the dequantized int8 model whose Linear layers multiply int8 weights (the tie is broken)."""
    model = copy.deepcopy(model)
    for module in list(model.modules()):
        for name, child in list(module.named_children()):
            if isinstance(child, torch.nn.Linear):
                setattr(module, name, Int8PackLinear(child.weight))
    return model


def text_windows(tok, seq_len: int, per_domain: int) -> torch.Tensor:
    bos = tok.token_to_id(BOS)
    rows = []
    for docs in (code_documents(300_000), docs_documents(), web_documents()):
        for doc in itertools.islice(docs, per_domain):
            ids = [bos, *tok.encode(doc["text"]).ids][:seq_len]
            if len(ids) == seq_len:
                rows.append(ids)
    return torch.tensor(rows)


def agreement(model, ref_top1: torch.Tensor, windows: torch.Tensor) -> float:
    with torch.no_grad():
        top1 = torch.cat([model(w[None])[0][0].argmax(-1) for w in windows])
    return (top1 == ref_top1).float().mean().item()


def medians(fn, rounds: int) -> list[float]:
    return [statistics.median(t) for t in zip(*[fn() for _ in range(rounds)])]


def int8_rows(ckpt: Path, out: Path, args) -> None:
    export_int8(ckpt, out)
    fp32, tok, _ = load_model(ckpt)
    int8, _, _ = load_model(out)
    packed = int8pack_model(int8)
    models = {"fp32 checkpoint": fp32, "int8 export (dequantized at load)": int8,
              "int8 matmul, not used (_weight_int8pack_mm)": packed}
    loads = medians(lambda: [_timed(lambda: load_model(ckpt)), _timed(lambda: load_model(out))], args.rounds)
    prompt = [tok.token_to_id(BOS), *tok.encode("def fibonacci(n):\n    ").ids]

    def rates():
        return [args.new_tokens / _timed(lambda m=m: list(generate(m, prompt, args.new_tokens, temperature=0.8,
                                                                   top_k=50, seed=0)))
                for m in models.values()]

    rates()  # warm-up: first calls allocate and pick kernels
    tps = medians(rates, args.rounds)
    windows = text_windows(tok, fp32.cfg.seq_len, args.docs)
    with torch.no_grad():
        ref = torch.cat([fp32(w[None])[0][0].argmax(-1) for w in windows])
    sizes = [(ckpt / "model.safetensors").stat().st_size, (out / WEIGHTS).stat().st_size, None]
    print(f"int8: {args.threads} thread(s), median of {args.rounds}, {args.new_tokens} new tokens, "
          f"agreement over {windows.numel()} positions ({len(windows)} windows of {fp32.cfg.seq_len})")
    for (name, model), size, load, rate in zip(models.items(), sizes, loads + [None], tps):
        mb = f"{size / 1e6:6.2f} MB" if size else "    -    "
        sec = f"load {load:.3f} s" if load is not None else "load   -    "
        print(f"  {name:45s} {mb}  {sec}  {rate:7.1f} tokens/s  top-1 {agreement(model, ref, windows):.4f}")


def _timed(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def gguf_round_trip(tensors: dict[str, torch.Tensor], qtype_of) -> tuple[dict[str, torch.Tensor], int]:
    import gguf

    out, nbytes = {}, 0
    for name, t in tensors.items():
        if t.dim() == 1:
            out[name] = t
            continue
        q = gguf.quants.quantize(t.float().numpy(), qtype_of(name))
        out[name] = torch.from_numpy(np.asarray(gguf.quants.dequantize(q, qtype_of(name)), dtype=np.float32))
        nbytes += q.nbytes if name in ("tok_emb.weight", "lm_head.weight") else 0
    return out, nbytes


def gguf_rows(ckpt: Path, args) -> None:
    import gguf

    Q = gguf.GGMLQuantizationType
    model, tok, _ = load_model(ckpt)
    output = "tok_emb.weight" if model.cfg.tie_embeddings else "lm_head.weight"
    tensors = {k: v.clone() for k, v in model_tensors(model).items()}  # not views of what gets overwritten
    windows = text_windows(tok, model.cfg.seq_len, args.docs)
    f16, _ = gguf_round_trip(tensors, lambda name: Q.F16)
    set_model_tensors(model, ckpt, f16)
    with torch.no_grad():
        ref = torch.cat([model(w[None])[0][0].argmax(-1) for w in windows])
    print(f"GGUF q4_0 (weights through gguf-py, in our model), top-1 agreement with f16 over {windows.numel()} "
          f"positions; output layer = {output}")
    for label, qtype_of in (("all Q4_0", lambda name: Q.Q4_0),
                            ("output layer Q8_0", lambda name: Q.Q8_0 if name == output else Q.Q4_0)):
        weights, nbytes = gguf_round_trip(tensors, qtype_of)
        set_model_tensors(model, ckpt, weights)
        print(f"  {label:20s} output layer {nbytes / 1e6:5.2f} MB  top-1 {agreement(model, ref, windows):.4f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--checkpoint")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--new-tokens", type=int, default=128)
    ap.add_argument("--docs", type=int, default=40, help="documents per domain of the built-in corpus")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        ckpt = Path(args.checkpoint) if args.checkpoint else random_checkpoint(tmp)
        int8_rows(ckpt, tmp / "int8", args)
        gguf_rows(ckpt, args)


if __name__ == "__main__":
    main()
