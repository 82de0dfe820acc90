"""Training batches from memory-mapped shards, mixed by source weight, in an order fixed by the seed.

The global batch of an optimizer step (batch_size x grad_accum x world_size sequences) is a pure function of
(seed, step); micro-step `micro` on rank `rank` takes its own slice of it. So the data position in a checkpoint
is just the step, a resumed run sees exactly the batches the uninterrupted run would have seen, and 2 ranks x 1
micro-batch see the same sequences as 1 rank x 2 micro-batches.
Each source is drawn with probability equal to its normalized weight: the weight is its share of training
tokens, whatever its size on disk (a small source is repeated, a large one down-sampled).

Packing is document-aware: a sequence starts at a document boundary, or for a document longer than seq_len at
one of its seq_len-aligned chunks, so the model rarely starts reading mid-sentence and every token is reachable.
A short document is followed by the next ones in the same sequence (packing). Each document is stored as
<|bos|> text <|eos|>, so the model learns to emit EOS where a document ends; boundaries come from the shard
index, never from scanning for a special token.
"""
from __future__ import annotations

import queue
import threading
import time
from collections import defaultdict
from pathlib import Path

import numpy as np
import torch

from ..errors import UserError
from ..ids import read_json
from ..tokenizer.shards import TokenShard, source_files


def window_starts(shard: TokenShard, seq_len: int) -> np.ndarray:
    """Offsets where a training window may start: each document start, then every seq_len tokens within it."""
    last = len(shard) - seq_len - 1  # a window needs seq_len + 1 tokens
    starts = shard.docs[:, 0] if len(shard.docs) else np.zeros(1, dtype=np.int64)
    ends = np.append(starts[1:], len(shard))
    chunks = np.maximum(1, -(-(ends - starts) // seq_len))
    first = np.repeat(np.cumsum(chunks) - chunks, chunks)
    offsets = np.repeat(starts, chunks) + (np.arange(int(chunks.sum())) - first) * seq_len
    offsets = offsets[offsets <= last]
    return offsets if len(offsets) else np.zeros(1, dtype=np.int64)


class MixtureLoader:
    def __init__(self, shards_dir: Path, seq_len: int, batch_size: int, seed: int, rank: int = 0,
                 world_size: int = 1, grad_accum: int = 1):
        summary = read_json(shards_dir / "shards.json")
        self.seq_len, self.batch_size, self.seed, self.rank = seq_len, batch_size, seed, rank
        self.world_size, self.grad_accum = world_size, grad_accum
        self.sources, self.shards, self.starts, weights, self.skipped = [], [], [], [], []
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
                self.starts.append(window_starts(shard, seq_len))
                weights.append(info["weight"] * len(shard) / max(info["tokens"], 1))  # the source's share, by size
        if not self.shards:
            raise UserError(f"no source has more than seq_len+1 = {seq_len + 1} training tokens")
        self.probs = np.asarray(weights, dtype=np.float64) / sum(weights)
        widths = {shard.tokens.dtype.itemsize for shard in self.shards}
        if len(widths) > 1:
            raise UserError(f"token shards in {shards_dir / 'train'} mix 2- and 4-byte token ids; rerun "
                            f"`scratchlm tokenizer encode --force`")
        self.token_dtype = self.shards[0].tokens.dtype
        self.wire_dtype = WIRE_DTYPES[self.token_dtype.itemsize]
        self.tokens_drawn = np.zeros(len(self.shards), dtype=np.int64)

    def positions(self, step: int, micro: int = 0) -> tuple[np.ndarray, np.ndarray]:
        """(source index, start token offset) of each row of this rank's micro-batch of `step`.

        Pure in (seed, step): the global batch of a step is the same whatever the world size or accumulation,
        it may be drawn ahead in another thread, and a diagnosis can replay it.
        """
        rng = np.random.default_rng([self.seed, step])
        n_global = self.batch_size * self.grad_accum * self.world_size
        which = rng.choice(len(self.shards), size=n_global, p=self.probs)
        where = rng.random(n_global)
        lo = (micro * self.world_size + self.rank) * self.batch_size
        which, where = which[lo:lo + self.batch_size], where[lo:lo + self.batch_size]
        starts = np.array([int(self.starts[s][int(u * len(self.starts[s]))]) for s, u in zip(which, where)],
                          dtype=np.int64)
        return which, starts

    def draw_rows(self, step: int, micro: int = 0, pin: bool = False) -> tuple[torch.Tensor, np.ndarray]:
        """This rank's micro-batch of `step` as one contiguous [batch, seq_len + 1] buffer of token ids in the
        shards' own width (2 bytes up to a 65,536 vocabulary), read straight from the shards into it.

        The width travels as the signed type of the same size (torch's unsigned 16/32-bit types support few
        operations); `on_device` widens it back after the copy, so a batch crosses to the GPU at a quarter of
        int64's bytes. With `pin`, the buffer is page-locked, from torch's caching host allocator, which keeps
        it from reuse until the asynchronous copy that reads it has finished."""
        which, starts = self.positions(step, micro)
        rows = torch.empty((self.batch_size, self.seq_len + 1), dtype=self.wire_dtype, pin_memory=pin)
        view = rows.numpy().view(self.token_dtype)
        for i, (s, start) in enumerate(zip(which, starts)):
            view[i] = self.shards[s].tokens[start:start + self.seq_len + 1]
        return rows, which

    def draw(self, step: int, micro: int = 0) -> tuple[torch.Tensor, torch.Tensor, np.ndarray]:
        """(inputs, targets, sources) as int64 on the CPU: for replays, benches and tests; training uses
        `draw_rows` and `on_device`."""
        rows, which = self.draw_rows(step, micro)
        x, y = on_device(rows, torch.device("cpu"))
        return x, y, which

    def batch(self, step: int, micro: int = 0) -> tuple[torch.Tensor, torch.Tensor, np.ndarray]:
        x, y, which = self.draw(step, micro)
        self.consumed(which)
        return x, y, which

    def consumed(self, which: np.ndarray) -> None:
        np.add.at(self.tokens_drawn, which, self.seq_len)

    def epochs(self) -> dict[str, float]:
        drawn, size = defaultdict(int), defaultdict(int)
        for name, n, shard in zip(self.sources, self.tokens_drawn, self.shards):
            drawn[name] += int(n)
            size[name] += len(shard)
        return {name: drawn[name] / size[name] for name in drawn}

    def state_dict(self) -> dict:
        # No position: what a step draws is a function of (seed, step), and the checkpoint holds the step.
        return {"tokens_drawn": self.tokens_drawn.tolist()}

    def load_state_dict(self, state: dict) -> None:
        # Older checkpoints also hold a "position"; nothing ever used it, so it is skipped.
        self.tokens_drawn = np.asarray(state["tokens_drawn"], dtype=np.int64)


# Token ids cross to the device as the signed integer of their stored width; on_device masks the sign back off.
WIRE_DTYPES = {2: torch.int16, 4: torch.int32}
_WIRE_MASKS = {torch.int16: 0xFFFF, torch.int32: 0xFFFFFFFF}


def on_device(rows: torch.Tensor, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """(inputs, targets) as int64 on `device`, from a `draw_rows` buffer: one copy of the narrow buffer,
    asynchronous from pinned memory, then widened where it lands."""
    ids = rows.to(device, non_blocking=True).to(torch.int64).bitwise_and_(_WIRE_MASKS[rows.dtype])
    return ids[:, :-1], ids[:, 1:]


def pins_batches(device: torch.device) -> bool:
    """Page-locked batches make a host-to-device copy asynchronous; only CUDA has such copies to gain."""
    return device.type == "cuda"


class Prefetcher:
    """Draws the next `depth` micro-batches in a background thread, in training order.

    `wait_seconds` accumulates the time the training thread spent waiting for data (with depth 0, drawing the
    batch itself): a loader that cannot keep up shows there, instead of as an unexplained drop in tokens/s. It
    is the one data-wait timer; the monitor's data-wait share is read from it.

    pin_memory (for a CUDA training device): the thread reads each batch straight into page-locked memory, without
    which the loop's `.to(device, non_blocking=True)` is a synchronous copy staged through pageable memory. Not
    with depth 0: in the training thread an asynchronous copy gains nothing.
    """

    def __init__(self, loader: MixtureLoader, start_step: int, max_steps: int, depth: int, pin_memory: bool = False):
        self.loader, self.depth, self.wait_seconds = loader, depth, 0.0
        self.pin_memory = pin_memory and depth > 0
        self._order = ((s, m) for s in range(start_step, max_steps) for m in range(loader.grad_accum))
        self._queue: queue.Queue = queue.Queue(maxsize=max(1, depth))
        self._stop = threading.Event()
        if depth > 0:
            self._thread = threading.Thread(target=self._run, name="scratchlm-prefetch", daemon=True)
            self._thread.start()

    def _run(self) -> None:
        try:
            for key in self._order:
                item = (key, self.loader.draw_rows(*key, pin=self.pin_memory))
                while not self._stop.is_set():
                    try:
                        self._queue.put(item, timeout=0.1)
                        break
                    except queue.Full:
                        continue
                if self._stop.is_set():
                    return
        except BaseException as e:  # surfaced in the training thread, not lost in this one
            self._queue.put((None, e))

    def get(self, step: int, micro: int) -> tuple[torch.Tensor, np.ndarray]:
        """(rows, sources) of the micro-batch: `on_device(rows, device)` gives its inputs and targets."""
        t0 = time.perf_counter()
        batch = self._draw_here(step, micro) if self.depth == 0 else self._take(step, micro)
        self.wait_seconds += time.perf_counter() - t0
        return batch

    def _draw_here(self, step: int, micro: int) -> tuple[torch.Tensor, np.ndarray]:
        rows, which = self.loader.draw_rows(step, micro)
        self.loader.consumed(which)
        return rows, which

    def _take(self, step: int, micro: int) -> tuple[torch.Tensor, np.ndarray]:
        key, item = self._queue.get()
        if key is None:
            raise item
        if key != (step, micro):
            raise RuntimeError(f"prefetcher out of order: expected {(step, micro)}, got {key}")
        self.loader.consumed(item[1])
        return item

    def close(self) -> None:
        self._stop.set()
        if self.depth > 0:
            # Wait for the thread's last draw (a few ms): a daemon thread still inside torch when the interpreter
            # exits aborts the process ("terminate called without an active exception"), e.g. after a SIGTERM.
            self._thread.join(timeout=30)
