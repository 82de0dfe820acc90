"""Datasheet peaks of the GPUs this project knows, by exact SKU: the one table, and the one function MFU uses.

Every figure is dense: NVIDIA's datasheets print the tensor-core rates "with sparsity" (2:4 structured) and note
that dense is half, so the H100 SXM's 1,979 bf16 TFLOP/s is 989.4 dense, and a training step's matmuls are dense.
bf16/fp16 are the tensor-core rates with fp32 accumulation (what torch's matmuls use: the GeForce cards' fp16
accumulate rates are twice as high and never reached by training); fp32 is the non-tensor rate, which is what
torch runs an fp32 matmul at unless TF32 is enabled (tf32 is the tensor-core TF32 rate). Memory is the nominal
capacity; the driver reports a little less, which is why the plan's memory verdict keeps 10% headroom.

Sources (all NVIDIA): A100 datasheet (nvidia-a100-datasheet-us-nvidia-1758950-r4); H100 datasheet (H100 SXM,
H100 NVL; per GPU for the NVL) and the H100 PCIe product brief PB-11133-001; H200 datasheet (H200 SXM); L4 and
L40S datasheets; Ada Lovelace architecture whitepaper v2.1, appendix (GeForce RTX 4090); Ampere GA102
architecture whitepaper v2.0, appendix A (GeForce RTX 3090).

Names are torch.cuda.get_device_properties(dev).name as the driver reports them, matched exactly: "H100" alone
also matches the PCIe card (756 TFLOP/s) and the NVL card (835), and a MIG slice of an H100 ("NVIDIA H100 80GB
HBM3 MIG 1g.10gb") has a fraction of its SMs. An unknown name gets no datasheet peak, never a guess: MFU against
the measured matmul peak still stands beside it.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import torch

GiB = 1024 ** 3
PRECISIONS = ("bf16", "fp16", "fp32", "tf32")


@dataclass(frozen=True)
class GPUSpec:
    key: str  # what `scratchlm plan --gpu` takes
    name: str  # for people
    device_names: tuple[str, ...]  # exact names the driver reports for this SKU
    memory: int  # bytes, nominal
    tflops: dict  # precision -> dense TFLOP/s from the datasheet
    sms: int  # streaming multiprocessors, to tell SKUs that share a name apart
    aliases: tuple[str, ...] = field(default=())  # older --gpu keys


def _tflops(bf16: float, fp32: float, tf32: float) -> dict:
    return {"bf16": bf16, "fp16": bf16, "fp32": fp32, "tf32": tf32}


SPECS: tuple[GPUSpec, ...] = (
    GPUSpec("a100-sxm4-40gb", "NVIDIA A100 SXM4 (40 GB)", ("NVIDIA A100-SXM4-40GB",), 40 * GiB,
            _tflops(312.0, 19.5, 156.0), 108, ("a100-40gb",)),
    GPUSpec("a100-pcie-40gb", "NVIDIA A100 PCIe (40 GB)", ("NVIDIA A100-PCIE-40GB",), 40 * GiB,
            _tflops(312.0, 19.5, 156.0), 108),
    GPUSpec("a100-sxm4-80gb", "NVIDIA A100 SXM4 (80 GB)", ("NVIDIA A100-SXM4-80GB",), 80 * GiB,
            _tflops(312.0, 19.5, 156.0), 108, ("a100-80gb",)),
    GPUSpec("a100-pcie-80gb", "NVIDIA A100 PCIe (80 GB)", ("NVIDIA A100 80GB PCIe",), 80 * GiB,
            _tflops(312.0, 19.5, 156.0), 108),
    GPUSpec("h100", "NVIDIA H100 SXM (80 GB)", ("NVIDIA H100 80GB HBM3",), 80 * GiB,
            _tflops(989.4, 66.9, 494.7), 132, ("h100-sxm",)),
    GPUSpec("h100-pcie", "NVIDIA H100 PCIe (80 GB)", ("NVIDIA H100 PCIe",), 80 * GiB,
            _tflops(756.0, 51.2, 378.0), 114),
    GPUSpec("h100-nvl", "NVIDIA H100 NVL (94 GB)", ("NVIDIA H100 NVL",), 94 * 10 ** 9,
            _tflops(835.5, 60.0, 417.5), 132),
    GPUSpec("h200", "NVIDIA H200 SXM (141 GB)", ("NVIDIA H200",), 141 * 10 ** 9,
            _tflops(989.4, 66.9, 494.7), 132),
    GPUSpec("l4", "NVIDIA L4 (24 GB)", ("NVIDIA L4",), 24 * GiB, _tflops(121.0, 30.3, 60.0), 58),
    GPUSpec("l40s", "NVIDIA L40S (48 GB)", ("NVIDIA L40S",), 48 * GiB, _tflops(362.05, 91.6, 183.0), 142),
    GPUSpec("rtx4090", "NVIDIA GeForce RTX 4090 (24 GB)", ("NVIDIA GeForce RTX 4090",), 24 * GiB,
            _tflops(165.2, 82.6, 82.6), 128),
    GPUSpec("rtx3090", "NVIDIA GeForce RTX 3090 (24 GB)", ("NVIDIA GeForce RTX 3090",), 24 * GiB,
            _tflops(71.0, 35.6, 35.6), 82),
)
BY_NAME = {n: s for s in SPECS for n in s.device_names}
BY_KEY = {k: s for s in SPECS for k in (s.key, *s.aliases)}


def spec_by_key(key: str) -> GPUSpec | None:
    """The row `--gpu KEY` names (case and spaces ignored)."""
    return BY_KEY.get(key.strip().lower().replace(" ", ""))


def _h100_by_shape(sms: int, memory: int) -> GPUSpec | None:
    """An "H100" name the table does not hold (a driver or vGPU that reports plain "NVIDIA H100"): the SKU from
    the SM count and memory. The PCIe card alone has 114 SMs; SXM and NVL both have 132 and differ in memory
    (80 GB, reported ~79.6 GiB, vs 94 GB, reported ~93.6 GiB). Other sizes (a 96 GB SXM part, a MIG slice with
    fewer SMs) are left unknown rather than given a neighbour's peak."""
    if sms == 114:
        return BY_KEY["h100-pcie"]
    if sms == 132 and 75 * GiB <= memory < 82 * GiB:
        return BY_KEY["h100"]
    if sms == 132 and 92 * GiB <= memory < 95 * GiB:
        return BY_KEY["h100-nvl"]
    return None


def spec_for(device_or_name) -> GPUSpec | None:
    """The table's row for a torch.device, a device's properties (torch.cuda.get_device_properties: .name, and
    for an H100 name the table lacks also .multi_processor_count and .total_memory), or a device name; None for
    anything else (a CPU, MPS, an unknown GPU, a MIG slice)."""
    if isinstance(device_or_name, torch.device):
        if device_or_name.type != "cuda":
            return None
        device_or_name = torch.cuda.get_device_properties(device_or_name)
    name = device_or_name if isinstance(device_or_name, str) else device_or_name.name
    if name in BY_NAME:
        return BY_NAME[name]
    if isinstance(device_or_name, str) or "H100" not in name or "MIG" in name:
        return None
    return _h100_by_shape(device_or_name.multi_processor_count, device_or_name.total_memory)


def datasheet_peak(device_or_name, precision: str) -> float | None:
    """Dense datasheet FLOP/s of this GPU at `precision` (bf16, fp16, fp32, tf32), or None where unknown: every
    MFU "against the datasheet" in the project (trainer log, plan, report, bench/gpu_check.py) divides by this."""
    spec = spec_for(device_or_name)
    if spec is None or precision not in spec.tflops:
        return None
    return spec.tflops[precision] * 1e12


def datasheet_peaks(device_or_name) -> dict:
    """precision -> datasheet_peak, for the precisions the table knows; {} for an unknown device."""
    peaks = {p: datasheet_peak(device_or_name, p) for p in PRECISIONS}
    return {p: v for p, v in peaks.items() if v is not None}
