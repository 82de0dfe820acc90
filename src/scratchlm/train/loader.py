"""Training batches from memory-mapped shards, mixed by source weight, in an order fixed by the seed.

Each batch is a pure function of (seed, step, micro-step, rank), so the data position in a checkpoint is just
the step, and a resumed run sees exactly the batches the uninterrupted run would have seen.
Each source is drawn with probability equal to its normalized weight: the weight is its share of training
tokens, whatever its size on disk (a small source is repeated, a large one down-sampled).
"""
from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import numpy as np
import torch

from ..errors import UserError
from ..ids import read_json
from ..tokenizer.shards import TokenShard, source_files


class MixtureLoader:
    def __init__(self, shards_dir: Path, seq_len: int, batch_size: int, seed: int, rank: int = 0):
        summary = read_json(shards_dir / "shards.json")
        self.seq_len, self.batch_size, self.seed, self.rank = seq_len, batch_size, seed, rank
        self.sources, self.shards, weights, self.skipped = [], [], [], []
        for name, info in summary["train"].items():
            for file in source_files(name, info):  # a large source is split into several shards
                path = shards_dir / "train" / file
                if not path.exists():
                    raise UserError(f"token shard {path} is missing; rerun `scratchlm tokenizer encode`")
                shard = TokenShard(path)
                if len(shard) <= seq_len + 1:
                    self.skipped.append(file)  # too small to cut one training window from
                    continue
                self.sources.append(name)
                self.shards.append(shard)
                weights.append(info["weight"] * len(shard) / max(info["tokens"], 1))  # the source's share, by size
        if not self.shards:
            raise UserError(f"no source has more than seq_len+1 = {seq_len + 1} training tokens")
        self.probs = np.asarray(weights, dtype=np.float64) / sum(weights)
        self.position = 0  # optimizer steps consumed; restored from checkpoints
        self.tokens_drawn = np.zeros(len(self.shards), dtype=np.int64)

    def batch(self, step: int, micro: int = 0) -> tuple[torch.Tensor, torch.Tensor, np.ndarray]:
        rng = np.random.default_rng([self.seed, step, micro, self.rank])
        which = rng.choice(len(self.shards), size=self.batch_size, p=self.probs)
        rows = np.empty((self.batch_size, self.seq_len + 1), dtype=np.int64)
        for i, s in enumerate(which):
            n = len(self.shards[s])
            start = int(rng.integers(0, n - self.seq_len - 1))
            rows[i] = self.shards[s].tokens[start:start + self.seq_len + 1]
        np.add.at(self.tokens_drawn, which, self.seq_len)
        t = torch.from_numpy(rows)
        return t[:, :-1], t[:, 1:], which

    def epochs(self) -> dict[str, float]:
        drawn, size = defaultdict(int), defaultdict(int)
        for name, n, shard in zip(self.sources, self.tokens_drawn, self.shards):
            drawn[name] += int(n)
            size[name] += len(shard)
        return {name: drawn[name] / size[name] for name in drawn}

    def state_dict(self) -> dict:
        return {"position": self.position, "tokens_drawn": self.tokens_drawn.tolist()}

    def load_state_dict(self, state: dict) -> None:
        self.position = state["position"]
        self.tokens_drawn = np.asarray(state["tokens_drawn"], dtype=np.int64)
