"""Validation loss after the same wall-clock training budget: baseline GPT-2 vs ours with AdamW, Muon, MuonH.

Data: the built-in corpus through the real pipeline (`scratchlm quickstart`'s config: data prepare, BPE 4096,
shards), batches from the trainer's MixtureLoader, validation loss from the trainer's `evaluate_domains` (mean
over the code/docs/web domains, the same windows for every contender).
Models: the quickstart shape (4 layers, d_model 192, 6 heads, seq 256) for both; the baseline is
bench/baseline_gpt2.py in fp32 (nanoGPT on CPU), ours runs at `train.precision = "auto"`.
Fairness on a shared machine: the contenders take training steps in turn (round robin), each charged only its
own step time, until each has spent `--budget` seconds; then each is evaluated. LR: linear warmup, then constant
(the budget fixes time, not steps, so a cosine has no known end); AdamW LR is the same for baseline and ours.

    PYTHONPATH=src python bench/quality.py --budget 150
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).parent))
from baseline_gpt2 import BaselineConfig, BaselineGPT  # noqa: E402

from scratchlm.stages import load_config  # noqa: E402
from scratchlm.eval.loss import evaluate_domains, mean_over_domains  # noqa: E402
from scratchlm.ids import read_json  # noqa: E402
from scratchlm.model import GPT  # noqa: E402
from scratchlm.stages import plan_artifacts  # noqa: E402
from scratchlm.quickstart import prepare_quickstart  # noqa: E402
from scratchlm.stages import stage_data, stage_shards, stage_tokenizer  # noqa: E402
from scratchlm.model.device import autocast, pick_precision  # noqa: E402
from scratchlm.train.loader import MixtureLoader  # noqa: E402
from scratchlm.train.optim import build_optimizer  # noqa: E402

CPU = torch.device("cpu")


class Contender:
    def __init__(self, name: str, model: torch.nn.Module, optimizer: str, precision: str, args):
        self.name, self.model, self.precision = name, model, precision
        self.opt = build_optimizer(model, optimizer, args.lr, 0.1, muon_lr=args.muon_lr)
        self.seconds, self.steps, self.warmup = 0.0, 0, args.warmup

    def step(self, loader: MixtureLoader) -> None:
        x, y, _ = loader.draw(self.steps)  # every contender sees the same batch at its step s
        t0 = time.perf_counter()
        for g in self.opt.param_groups:
            g["lr"] = g["initial_lr"] * min(1.0, (self.steps + 1) / self.warmup)
        with autocast(CPU, self.precision):
            _, loss = self.model(x, y)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(self.model.parameters(), 1.0)
        self.opt.step()
        self.opt.zero_grad(set_to_none=True)
        self.seconds += time.perf_counter() - t0
        self.steps += 1


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workdir", default="/tmp/scratchlm-bench-quality")
    ap.add_argument("--budget", type=float, default=150.0, help="training seconds per contender")
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--lr", type=float, default=3e-3, help="AdamW LR (all AdamW groups, every contender)")
    ap.add_argument("--muon-lr", type=float, default=None)
    ap.add_argument("--warmup", type=int, default=30)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--eval-batches", type=int, default=8)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    cfg = load_config(prepare_quickstart(Path(args.workdir)))
    art = plan_artifacts(cfg)
    for stage in (stage_data, stage_tokenizer, stage_shards):
        stage(cfg, art)
    shards = art["shards"].dir
    m = cfg.model
    loader = MixtureLoader(shards, m.seq_len, args.batch, seed=0)
    vocab = read_json(shards / "shards.json")["vocab_size"]
    ours_precision = pick_precision("auto", CPU)

    def ours() -> GPT:
        torch.manual_seed(0)
        return GPT(m, vocab)

    torch.manual_seed(0)
    base = BaselineGPT(BaselineConfig(vocab_size=vocab, n_layer=m.n_layer, n_head=m.n_head, d_model=m.d_model,
                                      seq_len=m.seq_len))
    field = [Contender("baseline GPT-2 + AdamW (fp32)", base, "adamw", "fp32", args),
             Contender(f"ours + AdamW ({ours_precision})", ours(), "adamw", ours_precision, args),
             Contender(f"ours + Muon ({ours_precision})", ours(), "muon", ours_precision, args),
             Contender(f"ours + MuonH ({ours_precision})", ours(), "muonh", ours_precision, args)]
    while any(c.seconds < args.budget for c in field):
        for c in field:
            if c.seconds < args.budget:
                c.step(loader)
        if field[0].steps % 20 == 0:
            print(" ".join(f"{c.steps}:{c.seconds:.0f}s" for c in field), file=sys.stderr, flush=True)
    print(f"| contender | params | steps in {args.budget:.0f} s | tokens | val loss (mean of domains) |")
    print("|---|---:|---:|---:|---:|")
    for c in field:
        ev = evaluate_domains(c.model, shards, args.batch, args.eval_batches, CPU, c.precision)
        n = sum(p.numel() for p in c.model.parameters())
        print(f"| {c.name} | {n:,} | {c.steps} | {c.steps * args.batch * m.seq_len:,} | "
              f"{mean_over_domains(ev):.3f} |", flush=True)


if __name__ == "__main__":
    main()
