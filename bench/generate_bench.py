"""Generation tokens/s on CPU: ours with KV cache vs transformers' generate on the exported model vs ours
without cache, side by side in one process, same weights, same sampling settings (temperature 0.8, top-k 50).

    PYTHONPATH=src python bench/generate_bench.py [--checkpoint PATH] [--new-tokens 256] [--threads 1] [--repeats 3]

Without --checkpoint it builds a random-weight model of the quickstart's shape (4 layers, d_model 192, 6 heads,
vocabulary 4096 trained on stdlib sources) with seq_len 512, so 256 new tokens never hit the context limit.
Speed does not depend on the weights' values.
"""
from __future__ import annotations

import argparse
import sysconfig
import tempfile
import time
from pathlib import Path

import torch

from scratchlm.config import ModelConfig
from scratchlm.export.hf import export_hf
from scratchlm.model import GPT
from scratchlm.model.generate import generate
from scratchlm.tokenizer.bpe import prompt_ids, train_bpe
from scratchlm.model.checkpoint import load_model
from scratchlm.train.checkpoint import save_checkpoint


def random_checkpoint(directory: Path) -> Path:
    files = sorted(Path(sysconfig.get_paths()["stdlib"]).glob("*.py"))[:80]
    tok = train_bpe((f.read_text(errors="replace") for f in files), vocab_size=4096)
    tok.save(str(directory / "tokenizer.json"))
    cfg = ModelConfig(n_layer=4, d_model=192, n_head=6, seq_len=512)
    model = GPT(cfg, tok.get_vocab_size())
    meta = {"config": {"model": vars(cfg)}, "vocab_size": tok.get_vocab_size(), "ids": {}}
    return save_checkpoint(directory / "ck", 0, model, torch.optim.SGD(model.parameters(), lr=0.1), {}, meta, 1,
                           files=(directory / "tokenizer.json",))


def timed(fn, new_tokens: int, repeats: int) -> float:
    fn(8)  # warm-up: first calls allocate and pick kernels
    best = 0.0
    for _ in range(repeats):
        t0 = time.perf_counter()
        n = fn(new_tokens)
        best = max(best, n / (time.perf_counter() - t0))
    return best


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--checkpoint")
    ap.add_argument("--new-tokens", type=int, default=256)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        ckpt = Path(args.checkpoint) if args.checkpoint else random_checkpoint(tmp)
        model, tok, _ = load_model(ckpt)
        model.eval()
        prompt = prompt_ids(tok, "def fibonacci(n):\n    ")

        def ours(cache: bool):
            return lambda n: len(list(generate(model, prompt, n, temperature=0.8, top_k=50, seed=0,
                                               use_cache=cache)))

        from transformers import AutoModelForCausalLM

        hf = AutoModelForCausalLM.from_pretrained(str(export_hf(ckpt, tmp / "hf")), dtype=torch.float32).eval()
        x = torch.tensor([prompt])

        def theirs(n):
            with torch.no_grad():
                out = hf.generate(x, max_new_tokens=n, min_new_tokens=n, do_sample=True, temperature=0.8, top_k=50,
                                  pad_token_id=0)
            return out.shape[1] - x.shape[1]

        rows = [("scratchlm, KV cache", timed(ours(True), args.new_tokens, args.repeats)),
                ("transformers generate (exported)", timed(theirs, args.new_tokens, args.repeats)),
                ("scratchlm, no cache", timed(ours(False), args.new_tokens, args.repeats))]
    print(f"{args.new_tokens} new tokens, {args.threads} thread(s), best of {args.repeats}, "
          f"{model.num_params():,} parameters")
    for name, tps in rows:
        print(f"{name:36s} {tps:8.1f} tokens/s  ({tps / rows[1][1]:.2f}x transformers)")


if __name__ == "__main__":
    main()
