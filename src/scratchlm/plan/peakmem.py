"""Peak memory of a block of work: torch's allocator statistics on CUDA, the resident set on CPU.

On Linux the kernel keeps the resident-set high-water mark (VmHWM) and lets a process reset it by writing 5 to
/proc/self/clear_refs, so the peak of exactly the measured window is read without sampling and without missing
short spikes. Where that file is not writable, a thread samples VmRSS every millisecond instead (it can miss a
peak shorter than that, and says so).

glibc keeps freed blocks below its (self-raising) mmap threshold for reuse, so the resident set of a training
loop drifts up to ~1.4x its live tensors. While measuring, every allocation above 128 KiB gets its own mapping
(the heap's free chunks that large are held meanwhile), returned to the kernel when freed: the high-water mark is
then the peak of live memory, the CPU counterpart of CUDA's max_memory_allocated. Afterwards the thresholds are set
to glibc's own ceiling (32 MiB), where its adaptive mode ends up anyway in a long training run. Nothing is timed
inside the window: its fresh mappings page-fault on every large allocation (a CPU step ran ~1.6-1.9x slower).
"""
from __future__ import annotations

import ctypes
import gc
import threading
from functools import lru_cache
from pathlib import Path

import torch

STATUS = Path("/proc/self/status")
CLEAR_REFS = Path("/proc/self/clear_refs")


def _status_kib(field: str) -> int | None:
    try:
        for line in STATUS.read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1])
    except OSError:
        return None
    return None


def rss_bytes() -> int:
    kib = _status_kib("VmRSS")
    if kib is not None:
        return kib * 1024
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # no /proc: the lifetime peak (macOS: bytes)


M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3  # mallopt parameters (malloc.h)
MEASURE_THRESHOLD = 128 * 1024
STEADY_THRESHOLD = 32 * 1024 * 1024


@lru_cache(maxsize=1)
def _glibc() -> ctypes.CDLL | None:
    """glibc, whose allocator the window tunes; None elsewhere (macOS, musl), where the resident set is read as is."""
    try:
        libc = ctypes.CDLL("libc.so.6")
    except OSError:
        return None
    if not (hasattr(libc, "mallopt") and hasattr(libc, "malloc_trim")):  # glibc's own, not in other C libraries
        return None
    libc.malloc.restype = ctypes.c_void_p
    return libc


def _mallopt(mmap_threshold: int, trim_threshold: int) -> bool:
    libc = _glibc()
    return libc is not None and bool(libc.mallopt(M_MMAP_THRESHOLD, mmap_threshold)
                                     and libc.mallopt(M_TRIM_THRESHOLD, trim_threshold))


def _hold_free_heap_chunks() -> list[int]:
    """Allocate (without touching) every free heap chunk of at least MEASURE_THRESHOLD and return them.

    malloc serves a request from a free chunk of the heap before it considers a new mapping. Earlier work (steps at
    the steady thresholds, a data stage's numpy arrays) leaves such chunks behind, and a large allocation of the
    window would reuse one: its pages stay resident after it is freed, the next allocation lands in another chunk,
    and the high-water mark adds up fragmentation (a probe's peak read 10-20% high after an earlier probe's steps).
    Held, they leave every large allocation of the window a fresh mapping, as in a fresh process."""
    libc = _glibc()
    if libc is None:
        return []
    word = ctypes.sizeof(ctypes.c_size_t)
    held, size = [], 1 << 30
    while size >= MEASURE_THRESHOLD and len(held) < 100_000:
        ptr = libc.malloc(ctypes.c_size_t(size))  # at least the threshold: a new mapping unless a free chunk fits
        if not ptr or ctypes.c_size_t.from_address(ptr - word).value & 2:  # glibc's chunk header: IS_MMAPPED
            libc.free(ctypes.c_void_p(ptr))  # none that large is free (or, without overcommit, none can be mapped)
            size //= 2
        else:
            held.append(ptr)
    return held


def _free(pointers: list[int]) -> None:
    for ptr in pointers:
        _glibc().free(ctypes.c_void_p(ptr))


def release_freed_memory() -> None:
    """Collect garbage and hand freed heap pages back to the OS (glibc), so the baseline is what is live."""
    gc.collect()
    if (libc := _glibc()) is not None:
        libc.malloc_trim(0)


class PeakMemory:
    """with PeakMemory(device) as pm: ...; then pm.peak is the growth over the baseline at entry, in bytes."""

    def __init__(self, device: torch.device):
        self.device = device
        self.method = ""
        self.exact_mappings = False
        self.peak = 0
        self.baseline = 0
        self._stop = threading.Event()
        self._sampled = 0
        self._thread: threading.Thread | None = None
        self._held: list[int] = []

    def __enter__(self) -> "PeakMemory":
        release_freed_memory()
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
            torch.cuda.reset_peak_memory_stats(self.device)
            self.baseline = torch.cuda.memory_allocated(self.device)
            self.method = "torch.cuda.max_memory_allocated"
            return self
        self.exact_mappings = _mallopt(MEASURE_THRESHOLD, MEASURE_THRESHOLD)
        release_freed_memory()
        self._held = _hold_free_heap_chunks() if self.exact_mappings else []
        self.baseline = rss_bytes()
        try:
            CLEAR_REFS.write_text("5")
            self.method = "VmHWM after resetting it through /proc/self/clear_refs"
        except OSError:
            self.method = "VmRSS sampled every 1 ms (may miss shorter peaks)"
            self._sampled = self.baseline
            self._thread = threading.Thread(target=self._sample, daemon=True)
            self._thread.start()
        return self

    def _sample(self) -> None:
        while not self._stop.wait(0.001):
            self._sampled = max(self._sampled, rss_bytes())

    def read(self) -> int:
        """Peak growth so far (can be called inside the block)."""
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
            return torch.cuda.max_memory_allocated(self.device) - self.baseline
        if self._thread is not None:
            return max(self._sampled, rss_bytes()) - self.baseline
        return (_status_kib("VmHWM") or 0) * 1024 - self.baseline

    def __exit__(self, *exc) -> None:
        self.peak = self.read()
        _free(self._held)
        if self.device.type != "cuda" and self.exact_mappings:
            _mallopt(STEADY_THRESHOLD, 2 * STEADY_THRESHOLD)
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
