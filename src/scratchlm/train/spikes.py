"""train.on_spike: what the loop does about a step whose loss or gradient norm spikes (monitor/detectors.py
StepSpikes judges each step against the steps before it).

  warn      alerts only (the grad_norm_spike detector). Each step's loss and gradient norm are copied into a device
            buffer and read back where the loop syncs anyway (log steps, checkpoints): no host sync is added.
  skip      the step's update is not applied (metaseq rejects a batch whose gradient norm is over the clip norm;
            OLMo-core's SkipStepOptimizer skips one that spikes against its windows). Deciding before the update
            reads both values back at every step: one host sync per step. The gradients are dropped; the step
            counter, the learning-rate schedule and the data go on as if the update had happened.
  rollback  read back as in warn. A spike found there sends the run back to its last checkpoint (or its start),
            and the spiking steps are trained without their update from then on; spikes.json remembers them, for
            a later --resume too. No checkpoint holds a spike's update: the values are judged before each is
            written. After monitor.spike_rollbacks rollbacks the next spike stops the run.
  stop      read back at every step as in skip. A spike stops the run before its update, with a checkpoint of the
            state before it and diagnosis.json; `--resume` continues from there and skips that step's update.

Under torchrun every rank decides alone, and the same: the loss is the mean over ranks (an all-reduce), and the
gradient norm is computed from gradients that are identical on every rank (DDP all-reduces them; under FSDP the
norm of the shards is reduced to one replicated number, clip_gradients). So every rank judges the same numbers in
the same order against the same windows, which a checkpoint stores and every rank loads.
"""
from __future__ import annotations

from pathlib import Path

import torch

from ..config import MonitorConfig
from ..ids import read_json, write_json
from ..monitor.detectors import StepSpikes
from ..monitor.diagnosis import DOCUMENTS_SHOWN, batch_document_ids

SPIKES_FILE = "spikes.json"
APPLY, SKIP, STOP = "apply", "skip", "stop"  # what the loop does with a step's update
# The action each mode takes about a spike (a step's `spikes` entry); "none": alerts only.
ACTIONS = {"warn": "none", "skip": "skipped", "rollback": "rolled back", "stop": "stopped"}
EVERY_STEP = ("skip", "stop")  # the modes that decide before each update, and so read the values back every step


class RollingBack(Exception):
    """Unwinds a training attempt to its last checkpoint: train_model starts it again from `resume`/`resume_from`,
    with `record` (the steps to skip) kept in memory, on every rank alike."""

    def __init__(self, resume: bool, resume_from: Path | None, record: "SpikeRecord"):
        super().__init__("rolling back")
        self.resume, self.resume_from, self.record = resume, resume_from, record


class StepValues:
    """Each step's loss and gradient norm, kept on the device until the loop reads them all back at once.

    NonfiniteWatch's pattern: `record` is device copies only, `take` (which waits for the device) is called where
    the loop syncs anyway, or, in the modes that decide before each update, at every step."""

    def __init__(self, capacity: int, device: torch.device):
        dtype = torch.float32 if device.type == "mps" else torch.float64  # MPS has no float64
        self.values = torch.zeros((max(capacity, 1), 2), dtype=dtype, device=device)
        self.steps: list[int] = []

    def record(self, step: int, loss: torch.Tensor, grad_norm: torch.Tensor) -> None:
        if len(self.steps) == len(self.values):  # the loop reads back at least every log_every steps: not expected
            self.values = torch.cat([self.values, torch.zeros_like(self.values)])
        row = self.values[len(self.steps)]
        row[0].copy_(loss.detach())
        row[1].copy_(grad_norm.detach())
        self.steps.append(step)

    def take(self) -> list[tuple[int, float, float]]:
        """(step, loss, gradient norm) of each step recorded since the last take, in order. Waits for the device."""
        if not self.steps:
            return []
        values = self.values[:len(self.steps)].tolist()
        taken = [(step, loss, norm) for step, (loss, norm) in zip(self.steps, values)]
        self.steps = []
        return taken


class SpikeRecord:
    """spikes.json in the run directory: the steps whose update the run never applies again (`skip`: step ->
    "rolled back" or "stopped"), its rollbacks, and each action taken with its batch's documents (`actions`).
    Rank 0 writes it; each rank keeps the same record in memory through a rollback."""

    def __init__(self, path: Path, data: dict | None = None):
        data = data or {}
        self.path = path
        self.skip: dict[int, str] = {int(step): action for step, action in data.get("skip", {}).items()}
        self.rollbacks: list[dict] = data.get("rollbacks", [])
        self.actions: list[dict] = data.get("actions", [])

    @classmethod
    def resumed(cls, path: Path, step: int) -> "SpikeRecord":
        """The record of a run resumed at `step`: a skip after it will happen again, so its entry goes."""
        record = cls(path, read_json(path) if path.exists() else None)
        record.actions = [a for a in record.actions if a["step"] <= step or a["step"] in record.skip]
        return record

    @classmethod
    def fresh(cls, path: Path, main: bool) -> "SpikeRecord":
        """A run starting over: an earlier attempt's steps to skip are not this run's."""
        if main:
            path.unlink(missing_ok=True)
        return cls(path)

    def remember(self, spikes: list[dict]) -> None:
        """Steps never to apply again (rolled back past, or stopped before), with their actions."""
        for spike in spikes:
            self.skip[spike["step"]] = spike["action"]
        self.actions += spikes

    def save(self) -> None:
        write_json(self.path, {"skip": {str(step): action for step, action in sorted(self.skip.items())},
                               "rollbacks": self.rollbacks, "actions": self.actions})


class SpikeGuard:
    """The loop's side of train.on_spike: records each step's values, judges them (StepSpikes) when they are read
    back, and says what to do with each update. Spikes of every mode go into the next log row's `spikes` field."""

    def __init__(self, mode: str, cfg: MonitorConfig, device: torch.device, capacity: int, record: SpikeRecord,
                 describe, main: bool):
        """describe(step): the step's batch as documents (Monitor.batch_of; None on ranks other than 0)."""
        self.mode, self.record, self.describe, self.main = mode, record, describe, main
        self.windows = StepSpikes(cfg.grad_spike_window, cfg.grad_spike_z)
        self.values = StepValues(capacity, device)
        self.row_spikes: list[dict] = []  # for the next log row
        self.decided: dict[int, dict] = {}  # skip and stop: this step's spike, judged before its update

    def observe(self, step: int, loss: torch.Tensor, grad_norm: torch.Tensor) -> None:
        """Step `step` (as logged) trained: its loss (mean over ranks) and gradient norm before clipping, on the
        device. Nothing is read back here."""
        self.values.record(step, loss, grad_norm)

    def catch_up(self) -> list[dict]:
        """Reads back and judges every step observed since the last call (waits for the device: call it where the
        loop syncs anyway). Returns the spikes to roll back past (rollback mode), in step order."""
        found = []
        for step, loss, grad_norm in self.values.take():
            spike = self._judge(step, loss, grad_norm)
            if spike is None:
                continue
            if spike["action"] == "rolled back" and not spike.get("remembered"):
                found.append(spike)  # no row: the rollback drops this attempt's rows after the checkpoint
            elif self.mode in EVERY_STEP and not spike.get("remembered") and spike["action"] != "none":
                self.decided[step] = spike
            else:
                self.row_spikes.append(_row_entry(spike))
        return found

    def decide(self, step: int) -> tuple[str, dict | None]:
        """Before step `step`'s update: APPLY, SKIP or STOP, and the spike it is about. In skip and stop modes this
        reads the step's values back first (waits for the device: one host sync per step)."""
        if self.mode in EVERY_STEP:
            self.catch_up()
        if step in self.record.skip:  # judged at the next read-back; its row entry says why it was skipped
            return SKIP, None
        spike = self.decided.pop(step, None)
        if spike is None:
            return APPLY, None
        if spike["action"] == "skipped":
            self.record.actions.append(spike)
            if self.main:
                self.record.save()
            self.row_spikes.append(_row_entry(spike))
            return SKIP, spike
        return STOP, spike

    def take_row_spikes(self) -> list[dict]:
        taken, self.row_spikes = self.row_spikes, []
        return taken

    def _judge(self, step: int, loss: float, grad_norm: float) -> dict | None:
        spike = self.windows.judge(step, loss, grad_norm)
        remembered = self.record.skip.get(step)
        if remembered is not None:  # skipped as spikes.json says, whatever the windows say this time
            spike = spike or {"step": step, "loss": loss, "grad_norm": grad_norm}
            spike.update(action=remembered, remembered=True)
        elif spike is not None:
            spike["action"] = ACTIONS[self.mode]
        if spike is None or spike["action"] != "stopped" or spike.get("remembered"):
            self.windows.add(loss, grad_norm)  # a stop's checkpoint holds the windows from before its step
        if spike is not None:
            self._describe(spike)
        return spike

    def _describe(self, spike: dict) -> None:
        batch = self.describe(spike["step"])
        if batch is None:
            return
        ids = batch_document_ids(batch)
        spike["documents"], spike["documents_total"] = ids[:DOCUMENTS_SHOWN], len(ids)
        if spike["action"] != "none":
            spike["batch"] = batch  # spikes.json and diagnosis.json have the whole batch, the row its first documents


def _row_entry(spike: dict) -> dict:
    return {k: v for k, v in spike.items() if k != "batch"}
