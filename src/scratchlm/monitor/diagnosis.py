"""What to write when the loss or a gradient is not finite: enough to find the cause without rerunning.

The batch is named down to documents: the loader's batch is a pure function of (seed, step, micro-step), so
`loader.positions` replays which source and token offset each row came from, and the shard's document index
turns an offset into document numbers (the order of documents in the source's shard).
"""
from __future__ import annotations

import numpy as np

from .detectors import spike_text
from .norms import grad_norms, grouped_parameters, nonfinite_gradients

MAX_DOCS_PER_ROW = 32  # a row of very short documents spans many; the first ones are enough to look at
DOCUMENTS_SHOWN = 8  # of a spiking step's batch, in its log row and alert; spikes.json and diagnosis.json have all


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


def batch_document_ids(batch: list[dict] | None) -> list[str]:
    """The `source:doc` IDs of a batch (batch_documents), each once, in batch order."""
    return list(dict.fromkeys(d for row in batch or [] for d in row["doc_ids"]))


def _number(x: float | None) -> float | str | None:
    """Non-finite values as strings ("nan", "inf"): diagnosis.json stays strict JSON for any reader."""
    return x if x is None or np.isfinite(x) else str(x)


def nonfinite_text(loss: float, grad_norm: float) -> str:
    """Which of the two is not finite, the other rounded: the one wording of the halt line and the diagnosis."""
    values = {"loss": loss, "grad norm": grad_norm}
    bad = [name for name, v in values.items() if not np.isfinite(v)]
    shown = ", ".join(f"{name} {v:.4g}" if np.isfinite(v) else f"{name} {v}" for name, v in values.items())
    return f"the {' and the '.join(bad)} {'is' if len(bad) == 1 else 'are'} not finite ({shown})"


def diagnose(step: int, loss: float, grad_norm: float, model, loader, grad_accum: int, last_metrics: dict | None,
             lr: float | None) -> dict:
    bad = nonfinite_gradients(model)
    groups = grouped_parameters(model)
    batch = batch_documents(loader, step, grad_accum)
    return {
        "step": step,
        "explanation": f"at step {step} {nonfinite_text(loss, grad_norm)}; {len(bad)} parameters have non-finite "
                       f"gradients",
        "loss": _number(loss), "grad_norm": _number(grad_norm), "lr": lr,
        "nonfinite_grads": bad,
        "grad_norm_groups": {g: _number(v) for g, v in grad_norms(groups).items()},
        "batch": batch,
        "batch_note": None if batch is not None else "the loader cannot replay its positions; batch unknown",
        "last_metrics": last_metrics,  # "next" is added by the trainer, which knows its checkpoints (next_steps)
    }


RISE = 2.0  # a logged grad norm this many times the lowest before it: training was diverging, not one bad batch


def next_steps(diagnosis: dict, rows: list[dict], train, config: str, checkpoint: str | None) -> str:
    """What to change, read from the evidence, and the command that restarts: the fixed config is a NEW run (its
    train ID changes), so `--resume` would find nothing. rows: the run's logged training rows (loss, grad_norm,
    lr); train: its [train] section; checkpoint: its newest checkpoint, None when it wrote none."""
    step, lr = diagnosis["step"], diagnosis.get("lr")
    at_lr = f" (learning rate {lr:.3g} at the halt)" if lr is not None else ""
    norms = [(r["step"], r["grad_norm"]) for r in rows if r.get("grad_norm") is not None
             and np.isfinite(r["grad_norm"])]
    warmup = (f"; it came during the warmup (step {step} of {train.warmup_steps}), while the learning rate was "
              f"still rising: a longer train.warmup_steps helps" if step < train.warmup_steps else "")
    clip = "; gradient clipping is off (train.grad_clip = 0): set it to 1.0" if not train.grad_clip else ""
    data = False
    if not norms:
        cause = (f"it failed before the first logged step{at_lr}: most often the learning rate is far too high for "
                 f"this model: lower train.learning_rate (e.g. 10x){warmup}{clip}")
    elif norms[-1][1] > RISE * min(v for _, v in norms):
        low = min(norms, key=lambda sv: sv[1])
        cause = (f"the gradient norm rose from {low[1]:.4g} (step {low[0]}) to {norms[-1][1]:.4g} (step "
                 f"{norms[-1][0]}) before the halt{at_lr}: the learning rate is too high: lower "
                 f"train.learning_rate (e.g. 3x){warmup}{clip}")
    else:
        data = True
        cause = (f"the logged steps were steady (gradient norm {norms[-1][1]:.4g} at step {norms[-1][0]}) and step "
                 f"{step} alone failed: look at that step's documents (`batch` in this file); a broken or degenerate "
                 f"document is the usual cause{clip}")
    start = f"`scratchlm train -c {config} --resume-from {checkpoint}`"
    if checkpoint is None:
        restart = (f"start over with `scratchlm train -c {config}`: this run stopped before its first "
                   f"checkpoint, so there is nothing to continue")
    elif data:
        restart = (f"remove that document from its source and rerun `scratchlm run -c {config}` (new data means a "
                   f"new tokenizer: training starts over); or keep the data, change train.seed so that other batches "
                   f"are drawn, and continue from this run's last checkpoint with {start}")
    else:
        restart = (f"the fixed config is a new run (a new train ID: `--resume` finds nothing); {start} starts it "
                   f"from this run's last checkpoint (its weights, optimizer state and step), or "
                   f"`scratchlm train -c {config}` starts over")
    return f"{cause}. Then: {restart}"


def spike_diagnosis(spike: dict, z: float, model, last_metrics: dict | None, lr: float | None,
                    grad_clip: float) -> dict:
    """diagnosis.json of a run stopped by train.on_spike = "stop", before the spiking step's update: its values
    against its windows, the per-group gradient norms of that step, its batch's documents (`spike["batch"]`,
    from batch_documents). "next" is added by the trainer, which knows its checkpoint."""
    step = spike["step"]
    # The gradients are clipped by now, all by one factor: undone, the groups' norms add up to the logged total.
    clipped = min(1.0, grad_clip / (spike["grad_norm"] + 1e-6)) if grad_clip > 0 else 1.0
    return {
        "step": step,
        "explanation": f"at step {step} the {spike_text(spike, z)}",
        **{k: spike.get(k) for k in ("loss", "grad_norm", "loss_z", "grad_norm_z", "loss_mean", "grad_norm_mean",
                                     "window")},
        "lr": lr,
        "grad_norm_groups": {g: _number(v / clipped) for g, v in grad_norms(grouped_parameters(model)).items()},
        "batch": spike.get("batch"),
        "batch_note": (None if spike.get("batch") is not None
                       else "the loader cannot replay its positions; batch unknown"),
        "last_metrics": last_metrics,
    }


def spike_next_steps(step: int, config: str, checkpoint: str) -> str:
    """What to do after a spike stopped the run: the batch first, then the command that continues past it."""
    return (f"look at the documents of step {step}'s batch (`batch` in this file): a broken, degenerate or "
            f"repeated document is the usual cause of a one-step spike; remove it from its source and rerun "
            f"`scratchlm run -c {config}` (new data: training starts over). Or continue: `scratchlm train -c {config} "
            f"--resume` goes on from {checkpoint}, the state before step {step}, and skips step {step}'s update "
            f"(spikes.json remembers it). With train.on_spike = \"skip\" or \"rollback\" a run trains past such "
            f"steps by itself")
