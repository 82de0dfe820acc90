"""Memory estimate of `scratchlm plan` against the measured peak of the real training step, several shapes.

Run: OMP_NUM_THREADS=1 PYTHONPATH=src python bench/plan_memory.py
Prints, per shape, the estimated and the measured peak (CPU: VmHWM with exact mappings; CUDA:
max_memory_allocated) and their ratio, the phase the estimate puts the peak in, plus the probe's tokens/s. The
probe's memory window holds training steps that are log steps (the monitor's update-ratio copy) and one
evaluation batch, as a run has.
"""
import torch

from scratchlm.config import config_from_dict
from scratchlm.plan.memory import estimate_memory
from scratchlm.plan.probe import run_probe
from scratchlm.model.device import pick_device, pick_precision

SHAPES = [  # n_layer, d_model, n_head, seq_len, micro-batch, vocab, grad_accum
    (2, 64, 4, 64, 16, 512, 1), (2, 128, 4, 128, 16, 2048, 1), (4, 192, 6, 256, 16, 4096, 1),
    (4, 192, 6, 256, 8, 4096, 2), (6, 384, 6, 256, 8, 8192, 1),
    (2, 128, 4, 128, 16, 32768, 1),  # a large vocabulary: the evaluation batch is the peak
]

if __name__ == "__main__":
    device = pick_device()
    for precision in ("fp32", pick_precision("auto", device)):
        for L, d, H, T, B, V, acc in SHAPES:
            cfg = config_from_dict({"data": {"sources": [{"name": "a", "domain": "a", "path": "x"}]},
                                    "model": {"n_layer": L, "d_model": d, "n_head": H, "seq_len": T},
                                    "train": {"batch_size": B, "grad_accum": acc, "precision": precision,
                                              "compile": False}})  # memory is measured eager either way
            r = run_probe(cfg, V, device, precision, B, acc, False, None, seconds=1.0)
            e = estimate_memory(cfg.model, V, B, acc, precision, "adamw", device.type)
            print(f"{precision} L{L} d{d} T{T} B{B}x{acc} V{V}: estimated {e.peak / 2**20:7.1f} MiB, measured "
                  f"{r['peak_memory'] / 2**20:7.1f} MiB, ratio {e.peak / r['peak_memory']:.2f} (peak at the {e.peak_phase}), "
                  f"{r['tokens_per_s']:,.0f} tokens/s")
