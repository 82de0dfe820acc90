"""The GGUF exports in llama.cpp itself, against scratchlm's own model, side by side in one process.

    python bench/llama_cpp_check.py --checkpoint RUN/train/ID/checkpoints/step_N [--docs F.jsonl] [--threads 1]

Needs `llama_cpp` (llama-cpp-python; it builds from source, about 35 minutes on 2 cores, so it is no test
dependency). For each quantization (f16, q8_0, q4_0) it exports the checkpoint and reports:
- tokenization: share of documents that llama.cpp tokenizes exactly as scratchlm does (BOS included);
- logits on real text (scratchlm's token ids fed to both): top-1 agreement with scratchlm's fp32 model at every
  position, and the largest absolute logit difference;
- greedy continuations of prompts cut from the documents' starts and from just before their ends: identical
  text, and for the second kind how many stop (llama.cpp's finish_reason "stop", scratchlm's stop tokens)
  rather than run to the length limit: a model that learned document ends stops there, in both;
- decode speed: new tokens/s of llama.cpp and of `scratchlm generate`'s loop (KV cache) on the same threads.
Without --docs it reads the built-in corpus (the one the quickstart trains on).
"""
from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

from scratchlm.export.gguf_export import QUANTS, export_gguf
from scratchlm.model.generate import generate
from scratchlm.tokenizer.bpe import prompt_ids, stop_ids
from scratchlm.model.checkpoint import load_model


def documents(path: str | None, n: int) -> list[str]:
    if path:
        lines = Path(path).read_text(encoding="utf-8").splitlines()
        return [json.loads(line)["text"] for line in lines[:n]]
    from scratchlm.data.builtin import build_builtin_corpus

    with tempfile.TemporaryDirectory() as tmp:
        files = build_builtin_corpus(Path(tmp), code_max_chars=300_000)
        per_domain = max(1, n // len(files))
        docs = []
        for f in files.values():  # the last documents of each domain: spread over the corpus, not its start
            lines = f.read_text(encoding="utf-8").splitlines()
            docs += [json.loads(line)["text"] for line in lines[-per_domain:]]
    return docs[:n]


def our_greedy(model, prompt: list[int], new_tokens: int, stops: set[int]) -> tuple[list[int], bool]:
    out = list(generate(model, prompt, new_tokens, temperature=0.0, stop_ids=stops))
    ended = bool(out) and out[-1] in stops
    return (out[:-1] if ended else out), ended


def check_one(gguf_path: Path, model, tok, docs: list[str], args) -> dict:
    from llama_cpp import Llama

    n_ctx = model.cfg.seq_len
    llm = Llama(model_path=str(gguf_path), n_ctx=n_ctx, logits_all=True, n_threads=args.threads, verbose=False)
    ours = [prompt_ids(tok, d) for d in docs]
    theirs = [llm.tokenize(d.encode("utf-8"), add_bos=True, special=False) for d in docs]
    same_tokens = sum(a == b for a, b in zip(ours, theirs))

    agree, positions, max_diff = 0, 0, 0.0
    for ids in ours:
        ids = ids[:n_ctx]
        llm.reset()
        llm.eval(ids)
        theirs_logits = np.asarray(llm.scores[:len(ids)], dtype=np.float32)
        with torch.no_grad():
            our_logits = model(torch.tensor([ids]))[0][0].float().numpy()
        agree += int((theirs_logits.argmax(-1) == our_logits.argmax(-1)).sum())
        positions += len(ids)
        max_diff = max(max_diff, float(np.abs(theirs_logits - our_logits).max()))

    # Prompts from each document's start (does the text match?) and from just before its end: the last
    # `tail` tokens cut off, so a model that learned where documents end should write them and stop there.
    stops = set(stop_ids(tok))
    room = n_ctx - args.new_tokens
    starts = [ids[:args.prompt_tokens] for ids in ours]
    ends = [ids[:-args.tail_tokens][-room:] for ids in ours if len(ids) > args.tail_tokens + 1]
    same_text = ended_ours = ended_theirs = 0
    for i, prompt in enumerate(starts + ends):
        mine, mine_ended = our_greedy(model, prompt, args.new_tokens, stops)
        llm.reset()
        done = llm.create_completion(prompt, max_tokens=args.new_tokens, temperature=0.0, top_k=1)["choices"][0]
        same_text += tok.decode(mine, skip_special_tokens=True) == done["text"]
        if i >= len(starts):
            ended_ours += mine_ended
            ended_theirs += done["finish_reason"] == "stop"

    prompt = ours[0][:args.prompt_tokens]
    llm.reset()
    t0 = time.perf_counter()
    for i, _ in enumerate(llm.generate(prompt, temp=0.0, top_k=1, reset=True)):
        if i + 1 == args.speed_tokens:
            break
    theirs_rate = args.speed_tokens / (time.perf_counter() - t0)
    t0 = time.perf_counter()
    n = sum(1 for _ in generate(model, prompt, args.speed_tokens, temperature=0.0))
    ours_rate = n / (time.perf_counter() - t0)
    return {"file": gguf_path.name, "mb": round(gguf_path.stat().st_size / 1e6, 2),
            "same_tokenization": f"{same_tokens}/{len(docs)}", "top1_agreement": round(agree / positions, 4),
            "max_logit_diff": round(max_diff, 4), "same_greedy_text": f"{same_text}/{len(starts) + len(ends)}",
            "stopped_near_document_end": {"scratchlm": f"{ended_ours}/{len(ends)}",
                                          "llama.cpp": f"{ended_theirs}/{len(ends)}"},
            "tokens_per_s": {"llama.cpp": round(theirs_rate, 1), "scratchlm": round(ours_rate, 1),
                             "ratio": round(theirs_rate / ours_rate, 2)}}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--checkpoint", required=True)
    ap.add_argument("--docs", help="JSONL with a `text` field; default: the built-in corpus")
    ap.add_argument("--n-docs", type=int, default=24)
    ap.add_argument("--prompt-tokens", type=int, default=24)
    ap.add_argument("--new-tokens", type=int, default=64)
    ap.add_argument("--tail-tokens", type=int, default=16, help="tokens cut from a document's end for its prompt")
    ap.add_argument("--speed-tokens", type=int, default=200)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--quants", default=",".join(QUANTS))
    args = ap.parse_args()
    try:
        import llama_cpp
    except ImportError:
        raise SystemExit("llama_cpp is not installed: pip install llama-cpp-python (builds from source)")
    torch.set_num_threads(args.threads)
    model, tok, meta = load_model(Path(args.checkpoint))
    docs = documents(args.docs, args.n_docs)
    results = {"checkpoint": str(args.checkpoint), "step": meta["step"], "llama_cpp": llama_cpp.__version__,
               "threads": args.threads, "docs": len(docs), "quants": []}
    with tempfile.TemporaryDirectory() as tmp:
        for quant in args.quants.split(","):
            path = export_gguf(Path(args.checkpoint), Path(tmp) / f"model-{quant}.gguf", quant)
            results["quants"].append({"quant": quant, **check_one(path, model, tok, docs, args)})
            print(json.dumps(results["quants"][-1]), flush=True)
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
