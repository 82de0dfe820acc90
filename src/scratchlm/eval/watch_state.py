"""What the trainer and the eval watcher tell each other, through two small files in the training directory.

trainer.json  written by the trainer at start: its PID and host (is it still running?), its devices and the CPU
              cores it may run on (does a watcher compete with it?).
watch.json    written by the watcher: its device, whether it competes with training and why, and when it was
              busy evaluating, so that the trainer can record, per log window, the share of it a competing watcher
              was busy (`watch_share`): a stall or a throughput drop in that window then has a visible cause.

Which steps are evaluated is read from metrics.jsonl (a row with "eval" at the step): the one record both
processes already keep, so nothing here can disagree with the curves.
"""
from __future__ import annotations

import os
import socket
import time
from pathlib import Path

from ..ids import read_json, write_json
from ..model.checkpoint import PREFIX, list_checkpoints

TRAINER = "trainer.json"
WATCHER = "watch.json"
BUSY_KEPT = 64  # busy intervals kept in watch.json: many more than one log window can overlap


def cpu_set() -> list[int]:
    """The CPU cores this process may run on (all of them where the platform cannot say)."""
    if hasattr(os, "sched_getaffinity"):
        return sorted(os.sched_getaffinity(0))
    return list(range(os.cpu_count() or 1))


def device_name(device) -> str:
    """`cuda` and `cuda:0` are one device: names compared across processes always carry the index."""
    text = str(device)
    return f"{text}:0" if text in ("cuda", "mps") else text


def write_trainer_info(out: Path, device, local_ranks: int) -> None:
    """local_ranks: processes training on this host (torchrun's LOCAL_WORLD_SIZE); rank r uses cuda:r."""
    name = device_name(device)
    devices = [f"cuda:{r}" for r in range(local_ranks)] if name.startswith("cuda") and local_ranks > 1 else [name]
    write_json(out / TRAINER, {"pid": os.getpid(), "host": socket.gethostname(), "devices": devices,
                               "cpus": cpu_set(), "started": time.time()})


def read_state(path: Path) -> dict | None:
    try:
        return read_json(path)
    except (OSError, ValueError):  # not written yet; written atomically, so never half
        return None


def trainer_running(train_dir: Path) -> bool | None:
    """True/False when the trainer's process can be checked (same host), None when it cannot."""
    info = read_state(Path(train_dir) / TRAINER)
    return False if info is None else process_alive(info)


def process_alive(info: dict) -> bool | None:
    """Whether the process a state file names (pid, host) still runs; None on another host."""
    if info.get("host") != socket.gethostname():
        return None
    try:
        os.kill(int(info["pid"]), 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process has that PID: it exists
        return True
    return True


def competition(watch_device: str, watch_cpus: list[int], trainer: dict | None) -> str | None:
    """Why a watcher on `watch_device` competes with the training, or None when it does not.

    On the training device it takes compute and memory from every step. On the CPU it takes cores from the data
    loader's thread (and from the training itself when that runs on the CPU too), unless its cores are disjoint
    from the trainer's (taskset)."""
    if trainer is None:
        return None
    watch_device = device_name(watch_device)
    if watch_device == "cpu":  # a CPU is shared core by core
        if not set(watch_cpus) & set(trainer["cpus"]):
            return None
        if "cpu" in trainer["devices"]:
            return "it evaluates on the CPU cores the training runs on"
        return "it evaluates on the CPU cores the training's data loader runs on"
    if watch_device in trainer["devices"]:
        return f"it evaluates on the training device {watch_device}"
    return None


class WatchFile:
    """The watcher's side of watch.json."""

    def __init__(self, train_dir: Path, device: str, competes: str | None):
        self.path = Path(train_dir) / WATCHER
        self.state = {"pid": os.getpid(), "host": socket.gethostname(), "device": device_name(device),
                      "competes": competes, "started": time.time(), "busy": []}
        write_json(self.path, self.state)

    def busy(self) -> None:
        self.state["busy"] = [*self.state["busy"][-(BUSY_KEPT - 1):], [time.time(), None]]
        write_json(self.path, self.state)

    def idle(self) -> None:
        if self.state["busy"] and self.state["busy"][-1][1] is None:
            self.state["busy"][-1][1] = time.time()
            write_json(self.path, self.state)


def watch_share(train_dir: Path, start: float, end: float) -> float | None:
    """The share of the wall-clock window [start, end] during which a competing watcher was evaluating; None when
    no watcher competes with this training (none started, or on another device and other cores)."""
    state = read_state(Path(train_dir) / WATCHER)
    if state is None or not state.get("competes") or end <= start:
        return None
    alive = process_alive(state) is not False  # a killed watcher's last evaluation never ended: it is not busy
    busy = 0.0
    for begun, ended in state["busy"]:
        if ended is None and not alive:
            continue
        busy += max(0.0, min(end, ended if ended is not None else end) - max(start, begun))
    return min(1.0, busy / (end - start))


def eval_due(step: int, t) -> bool:
    """The steps evaluated during training (`t`: the TrainConfig): inline by the trainer, else by the watcher."""
    return step % t.eval_every == 0 or step == t.max_steps


def evaluated_steps(rows: list[dict]) -> set[int]:
    return {r["step"] for r in rows if "eval" in r}


def awaiting_evaluation(checkpoint_dir: Path, rows: list[dict], due) -> list[Path]:
    """Checkpoints at evaluation steps (`due(step)`) that have no evaluation row yet: an external run keeps them
    on disk until the watcher has read them, whatever train.keep_last says."""
    done = evaluated_steps(rows)
    return [p for p in list_checkpoints(checkpoint_dir)
            if due(step_of(p)) and step_of(p) not in done]


def step_of(checkpoint: Path) -> int:
    return int(Path(checkpoint).name[len(PREFIX):])
