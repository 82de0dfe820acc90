"""`python count_readbacks.py OUT.json scratchlm-args...`: runs the CLI with every tensor read-back of the training
thread counted per training step, and writes {rank: {step: [conversions]}} to OUT.json (one file per rank, the
rank appended). Each read-back of a device tensor is a host sync on CUDA; on CPU this count stands in for it."""
import json
import os
import sys
import threading
from collections import defaultdict

import torch

from scratchlm.cli import main
from scratchlm.train.loader import Prefetcher

READBACKS = ("item", "tolist", "__float__", "__int__", "__bool__", "__index__")


def count(out: str, argv: list[str]) -> int:
    running, calls = {"step": None}, defaultdict(list)
    get = Prefetcher.get

    def get_and_note(self, step, micro):  # the step whose micro-batches are drawn is the step running
        running["step"] = step
        return get(self, step, micro)

    Prefetcher.get = get_and_note
    for name in READBACKS:
        def counted(self, *args, _name=name, _original=getattr(torch.Tensor, name), **kwargs):
            if running["step"] is not None and threading.current_thread() is threading.main_thread():
                calls[running["step"]].append(_name)
            return _original(self, *args, **kwargs)

        setattr(torch.Tensor, name, counted)
    try:
        return main(argv)
    finally:
        with open(f"{out}.{os.environ.get('RANK', '0')}", "w") as f:
            json.dump(calls, f)


if __name__ == "__main__":
    sys.exit(count(sys.argv[1], sys.argv[2:]))
