"""Validation loss, bits per byte and top-k accuracy per domain, and the unigram baseline to compare with."""
from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import torch

from ..ids import read_json
from ..model.device import autocast
from ..monitor.logits import LogitStats
from ..tokenizer.shards import TokenShard
from .chunked_head import evaluate_batch


def val_windows(tokens: np.ndarray, seq_len: int, max_windows: int) -> np.ndarray:
    """Non-overlapping windows from the start: the same tokens at every evaluation, so curves are comparable."""
    n = min(max_windows, (len(tokens) - 1) // seq_len)
    if n <= 0:
        return np.zeros((0, seq_len + 1), dtype=np.int64)
    idx = np.arange(n)[:, None] * seq_len + np.arange(seq_len + 1)[None, :]
    return np.asarray(tokens[idx], dtype=np.int64)


@torch.no_grad()
def evaluate_domains(model, shards_dir: Path, batch_size: int, max_batches: int, device, precision: str) -> dict:
    summary = read_json(shards_dir / "shards.json")
    seq_len = model.cfg.seq_len
    was_training = model.training
    model.eval()
    results = {}
    for domain, info in summary["val"].items():
        shard = TokenShard(shards_dir / "val" / f"{domain}.bin")
        windows = val_windows(shard.tokens, seq_len, batch_size * max_batches)
        if len(windows) == 0:
            continue
        total_loss = top1 = top10 = count = 0.0
        logit_stats = LogitStats()
        for i in range(0, len(windows), batch_size):
            chunk = torch.from_numpy(windows[i:i + batch_size]).to(device)
            with autocast(device, precision):  # the logits are never made whole (eval/chunked_head.py)
                totals = evaluate_batch(model, chunk[:, :-1], chunk[:, 1:], logit_stats)
            total_loss += totals.loss
            top1 += totals.top1
            top10 += totals.top10
            count += totals.tokens
        mean = total_loss / count
        # Bits per byte normalizes away the tokenizer: comparable across vocabularies and runs.
        bytes_per_token = info["bytes"] / max(1, info["tokens"])
        results[domain] = {"loss": mean, "bpb": mean / math.log(2) / bytes_per_token,
                           "top1": top1 / count, "top10": top10 / count, "tokens": int(count),
                           **logit_stats.result()}
    if was_training:
        model.train()
    return results


def unigram_baseline(shards_dir: Path, seq_len: int, max_windows: int) -> dict[str, float]:
    """Cross-entropy of the validation tokens under the training unigram distribution (add-one smoothed).

    A model that has learned nothing but token frequencies reaches this; anything useful must go well below.
    Measured on the same windows as `evaluate_domains` (minus the first token of each).
    """
    summary = read_json(shards_dir / "shards.json")
    counts = np.load(shards_dir / "unigram_counts.npy").astype(np.float64) + 1.0
    logp = np.log(counts / counts.sum())
    out = {}
    for domain in summary["val"]:
        shard = TokenShard(shards_dir / "val" / f"{domain}.bin")
        windows = val_windows(shard.tokens, seq_len, max_windows)
        if len(windows):
            out[domain] = float(-logp[windows[:, 1:]].mean())
    return out


def mean_over_domains(results: dict[str, dict], key: str = "loss") -> float:
    vals = [r[key] for r in results.values()]
    return float(sum(vals) / len(vals)) if vals else float("nan")
