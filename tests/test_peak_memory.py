"""PeakMemory on CPU measures the peak of live memory, also in a process whose heap earlier work left fragmented."""
import torch

from scratchlm.plan import peakmem
from scratchlm.plan.peakmem import PeakMemory

MB = 1024 * 1024
CPU = torch.device("cpu")


def _touched(n_bytes: int) -> torch.Tensor:
    return torch.empty(n_bytes // 4, dtype=torch.float32).fill_(1.0)


def _fragment_heap() -> list[torch.Tensor]:
    """At the steady thresholds (where a PeakMemory leaves the allocator, as training runs), 8 MiB tensors land in
    the heap; freeing every other one, with small tensors kept between, leaves 8 MiB holes that cannot merge."""
    peakmem._mallopt(peakmem.STEADY_THRESHOLD, 2 * peakmem.STEADY_THRESHOLD)
    kept, holes = [], []
    for _ in range(12):
        holes.append(_touched(8 * MB))
        kept.append(_touched(64 * 1024))
    del holes
    return kept


def _two_then_one_bigger() -> None:
    """Live memory peaks at 12 MiB: two 6 MiB tensors at once, then, both freed, one of 12 MiB."""
    a, b = _touched(6 * MB), _touched(6 * MB)
    del a, b
    c = _touched(12 * MB)
    del c


def test_fragmented_heap_does_not_inflate_the_peak():
    kept = _fragment_heap()
    with PeakMemory(CPU) as mem:
        _two_then_one_bigger()
    del kept
    if not mem.exact_mappings:  # not glibc: the resident set cannot be made to follow live memory
        return
    # Served from the heap's holes, the two freed 6 MiB tensors would stay resident beside the 12 MiB one: 24 MiB.
    assert 11 * MB <= mem.peak <= 16 * MB, mem.peak / MB
