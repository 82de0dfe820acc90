"""The training monitor: the trainer calls a handful of hooks; everything measured and judged lives here.

Hooks, in the order the trainer calls them:
  before_update(step)     after backward and unscaling, before clipping: per-group gradient norms and, at log
                          steps, a copy of the weights for the update ratio
  on_log(step, row, s, w) adds norms, MFU, data-wait share, memory to the log row, runs the log detectors
                          (s: seconds since the last log, w: of them waiting for data, by the loader's timer)
  on_eval(step, row, samples)  adds repetition, writes the sample diff, runs the evaluation detectors
  publish(row)            TensorBoard / W&B
  diagnose(...)           on a non-finite loss or gradient (the trainer halts)
  batch_of(step)          a step's batch as documents, for what train.on_spike does about a spiking step
  diagnose_spike(...)     on a spike with train.on_spike = "stop" (the trainer halts)
  close()                 verdict per detector, written to monitor.json
Alerts go to alerts.jsonl and the log as they start; the verdicts go to the report and the dashboard.
"""
from __future__ import annotations

import json
from pathlib import Path

from .. import gpu_peaks
from ..errors import UserError
from ..ids import write_json
from ..progress import log
from .detectors import NONFINITE, Alert, SpikeAction
from .diagnosis import batch_documents, diagnose, spike_diagnosis
from .norms import UpdateRatio, grad_norms, grouped_parameters, weight_norms
from .sample_diff import load_samples, repetition_rates, sample_files, write_sample_diff
from .sinks import flatten, open_sinks
from .throughput import flops_per_token, memory_bytes, peak_flops
from .verdicts import ALERTS, SUMMARY, Verdicts


def read_rows(path: Path) -> list[dict]:
    return [row for _, row in row_lines(path)[0]]


def row_lines(path: Path) -> tuple[list[tuple[str, dict]], str | None]:
    """(line, row) of each row of a JSON-lines file, and its last line if torn (a kill mid-write, or a writer
    still at it), which is left out. A damaged line before the last is an error: nothing tears those."""
    if not path.exists():
        return [], None
    lines = [line for line in path.read_text(encoding="utf-8", errors="replace").splitlines() if line.strip()]
    rows = []
    for n, line in enumerate(lines, 1):
        row = _parse_row(line)
        if row is not None:
            rows.append((line, row))
        elif n == len(lines):
            return rows, line
        else:
            raise UserError(f"{path} is damaged: line {n} is not a JSON row with a step ({line[:40]!r}); "
                            f"delete that line")
    return rows, None


def _parse_row(line: str) -> dict | None:
    try:
        row = json.loads(line)
    except ValueError:
        return None
    return row if isinstance(row, dict) and "step" in row else None


class Monitor:
    def __init__(self, cfg, out: Path, model, device, precision: str, loader=None, start_step: int = 0,
                 group_norms: bool = True):
        """group_norms=False: skip per-group norms, e.g. under multi-rank FSDP, where a norm of a sharded
        parameter is a collective that only this rank (0) would enter."""
        self.cfg, self.m, self.out, self.model, self.device, self.loader = cfg, cfg.monitor, out, model, device, loader
        self.log_every, self.max_steps = cfg.train.log_every, cfg.train.max_steps
        self.groups = grouped_parameters(model) if group_norms else {}
        self.flops_per_token = flops_per_token(model)
        self.peak = peak_flops(device, precision, self.m.peak_flops)  # measured matmul peak, or monitor.peak_flops
        self.datasheet_peak = gpu_peaks.datasheet_peak(device, precision)  # None on a CPU or an unknown GPU
        self.update = UpdateRatio()
        self.verdicts = Verdicts(cfg, out / ALERTS)
        self.stats = self.verdicts.stats
        self.grad_groups: dict[str, float] = {}
        self.last_row: dict | None = None
        self.previous_samples, self.previous_step = None, None
        (out / SUMMARY).unlink(missing_ok=True)  # a stopped run's verdicts: this run is going, the dashboard says
        # resume: rebuild detector state from the rows kept (in step order: a watcher appends its rows late)
        self.verdicts.replay(sorted(read_rows(out / "metrics.jsonl"), key=lambda r: r["step"]))
        for s, path in sample_files(out / "samples"):
            if s <= start_step:
                self.previous_samples, self.previous_step = load_samples(path), s
        self.sinks = open_sinks(cfg, out, start_step)

    # ---- hooks -------------------------------------------------------------------------------------------
    def before_update(self, step: int) -> None:
        """`step` is the number the step will have once applied (the trainer's step + 1)."""
        if not self._is_log_step(step):
            return
        self.grad_groups = grad_norms(self.groups)
        if self.m.update_ratio:
            self.update.snapshot(self.groups)

    def on_log(self, step: int, row: dict, elapsed: float, data_wait: float) -> dict:
        row["grad_norm_groups"] = self.grad_groups
        row["weight_norm"] = weight_norms(self.groups)
        if self.m.update_ratio:
            row["update_ratio"] = self.update.measure(self.groups)
        row["mfu"] = row["tokens_per_s"] * self.flops_per_token / self.peak
        if self.datasheet_peak:
            row["mfu_datasheet"] = row["tokens_per_s"] * self.flops_per_token / self.datasheet_peak
        row["data_wait_share"] = min(1.0, data_wait / max(elapsed, 1e-9))
        row["memory_kind"], row["memory_bytes"] = memory_bytes(self.device)
        self.stats[NONFINITE]["checks"] = step  # checked at every step, by the trainer's halt
        self._judge(row)
        self.last_row = row
        return row

    def on_eval(self, step: int, row: dict, samples: list[dict]) -> dict:
        row["repetition"] = repetition_rates(samples, self.m.repetition_ngram)
        write_sample_diff(self.out / "samples", step, samples, self.previous_samples, self.previous_step)
        self.previous_samples, self.previous_step = samples, step
        self._judge(row)
        return row

    def publish(self, row: dict) -> None:
        scalars = flatten(row)
        for sink in self.sinks:
            sink.publish(row["step"], scalars)

    def diagnose(self, step: int, loss: float, grad_norm: float, lr: float | None = None) -> dict:
        d = diagnose(step, loss, grad_norm, self.model, self.loader, self._grad_accum(), self.last_row, lr)
        self.verdicts.record([Alert(step, NONFINITE, "loss/gradients", "error", d["explanation"])], NONFINITE)
        self.close()
        return d

    def batch_of(self, step: int) -> list[dict] | None:
        """Step `step`'s batch (as logged, 1-based) as documents (batch_documents); None when the loader cannot
        replay it."""
        return batch_documents(self.loader, step - 1, self._grad_accum())

    def diagnose_spike(self, spike: dict, lr: float | None = None) -> dict:
        """The diagnosis of a spike that stops the run (train.on_spike = "stop"); records its alert and closes."""
        d = spike_diagnosis(spike, self.m.grad_spike_z, self.model, self.last_row, lr, self.cfg.train.grad_clip)
        self.verdicts.record([Alert(spike["step"], SpikeAction.name, f"step {spike['step']}", "error",
                                    f"{d['explanation']}: training stopped before its update (train.on_spike)")],
                             SpikeAction.name)
        self.close()
        return d

    def close(self, quiet: bool = False) -> dict:
        """quiet: no verdict line in the log (a rollback closes the monitor of the attempt it abandons)."""
        summary = {"detectors": self.stats, "flops_per_token": self.flops_per_token, "peak_flops": self.peak,
                   "datasheet_peak_flops": self.datasheet_peak}
        write_json(self.out / SUMMARY, summary)
        if not self.verdicts.alerts_file.closed:
            self.verdicts.close()
            for sink in self.sinks:
                sink.close()
            if not quiet:
                log("monitor: " + ", ".join(f"{n} {s['verdict']}" + (f" ({s['fired']}x)" if s["fired"] else "")
                                            for n, s in self.stats.items()))
        return summary

    def _grad_accum(self) -> int:
        return getattr(self.loader, "grad_accum", self.cfg.train.grad_accum)

    # ---- judging -----------------------------------------------------------------------------------------
    def _is_log_step(self, step: int) -> bool:
        return step % self.log_every == 0 or step == self.max_steps

    def _judge(self, row: dict) -> None:
        self.verdicts.judge(row)


class NullMonitor:
    """What ranks other than 0 use under torchrun: the same hooks, no work and no files."""

    def before_update(self, step: int) -> None:
        pass

    def on_log(self, step: int, row: dict, elapsed: float, data_wait: float) -> dict:
        return row

    def on_eval(self, step: int, row: dict, samples: list[dict]) -> dict:
        return row

    def publish(self, row: dict) -> None:
        pass

    def diagnose(self, step: int, loss: float, grad_norm: float, lr: float | None = None) -> dict:
        return {"step": step, "loss": loss, "grad_norm": grad_norm}

    def batch_of(self, step: int) -> None:
        return None

    def diagnose_spike(self, spike: dict, lr: float | None = None) -> dict:
        return {"step": spike["step"], "explanation": f"at step {spike['step']} the loss or gradient norm spiked"}

    def close(self, quiet: bool = False) -> dict:
        return {"detectors": {}}
