"""What to write when the loss or a gradient is not finite: enough to find the cause without rerunning.

The batch is named down to documents: the loader's batch is a pure function of (seed, step, micro-step), so
`loader.positions` replays which source and token offset each row came from, and the shard's document index
turns an offset into document numbers (the order of documents in the source's shard).
"""
from __future__ import annotations

import numpy as np

from .norms import grad_norms, grouped_parameters, nonfinite_gradients

MAX_DOCS_PER_ROW = 32  # a row of very short documents spans many; the first ones are enough to look at


def batch_documents(loader, step: int, grad_accum: int) -> list[dict] | None:
    positions = getattr(loader, "positions", None)
    if positions is None:
        return None
    rows = []
    seq_len = loader.seq_len
    for micro in range(grad_accum):
        which, starts = positions(step, micro)
        for r, (s, start) in enumerate(zip(which, starts)):
            shard = loader.shards[int(s)]
            doc_starts = shard.docs[:, 0] if len(shard.docs) else np.zeros(1, dtype=np.int64)
            first = int(np.searchsorted(doc_starts, start, side="right") - 1)
            last = int(np.searchsorted(doc_starts, start + seq_len, side="right") - 1)
            docs = list(range(max(first, 0), last + 1))
            rows.append({"micro": micro, "row": r, "source": loader.sources[int(s)], "token_offset": int(start),
                         "tokens": seq_len + 1, "doc_ids": [f"{loader.sources[int(s)]}:{d}"
                                                            for d in docs[:MAX_DOCS_PER_ROW]],
                         "offset_in_first_doc": int(start - doc_starts[max(first, 0)])})
    return rows


def _number(x: float | None) -> float | str | None:
    """Non-finite values as strings ("nan", "inf"): diagnosis.json stays strict JSON for any reader."""
    return x if x is None or np.isfinite(x) else str(x)


def diagnose(step: int, loss: float, grad_norm: float, model, loader, grad_accum: int, last_metrics: dict | None,
             lr: float | None) -> dict:
    bad = nonfinite_gradients(model)
    groups = grouped_parameters(model)
    batch = batch_documents(loader, step, grad_accum)
    what = "loss" if not np.isfinite(loss) else "gradient norm"
    return {
        "step": step,
        "explanation": f"{what} became non-finite at step {step} (loss {loss}, grad norm {grad_norm}); "
                       f"{len(bad)} parameters have non-finite gradients",
        "loss": _number(loss), "grad_norm": _number(grad_norm), "lr": lr,
        "nonfinite_grads": bad,
        "grad_norm_groups": {g: _number(v) for g, v in grad_norms(groups).items()},
        "batch": batch,
        "batch_note": None if batch is not None else "the loader cannot replay its positions; batch unknown",
        "last_metrics": last_metrics,
        "next": "look at the batch's documents and the last metrics (a rising grad norm or lr points at the "
                "learning rate, one bad batch at the data); fix the cause, then `scratchlm train --resume` "
                "continues from the last checkpoint",
    }
