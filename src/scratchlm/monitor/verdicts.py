"""The detectors' verdicts over a run: each detector's checks, alerts and verdict, and alerts.jsonl.

The trainer's monitor judges its rows as they come; the eval watcher judges its evaluation rows the same way and,
once training is over, judges the whole metrics.jsonl again (`rejudge`), so that monitor.json and alerts.jsonl hold
the verdicts of every row, whichever process wrote it.
"""
from __future__ import annotations

import json
from pathlib import Path

from ..ids import read_json, write_json
from ..progress import log
from .detectors import ALL_NAMES, NONFINITE, Alert, build_detectors

ALERTS = "alerts.jsonl"
SUMMARY = "monitor.json"


class Verdicts:
    def __init__(self, cfg, alerts_path: Path | None, kinds: tuple[str, ...] = ("log", "eval")):
        """cfg: the run's Config; alerts_path: where alerts go as they start (None: the log only); kinds: which
        rows to judge (the watcher judges evaluation rows only)."""
        self.detectors = [d for d in build_detectors(cfg.monitor, cfg.train) if d.kind in kinds]
        self.active: set[tuple[str, str]] = set()
        self.stats = {name: {"checks": 0, "fired": 0, "verdict": "ok", "first_step": None, "last_step": None,
                             "message": ""} for name in ALL_NAMES}
        # Open for the whole run: alerts are written as they start.
        self.alerts_file = None if alerts_path is None else open(alerts_path, "w", encoding="utf-8")  # noqa: SIM115
        self.replaying = False  # rows judged again (a resume): their alerts are not news, so not logged

    def judge(self, row: dict) -> None:
        kind = "eval" if "eval" in row else "log"
        for det in self.detectors:
            if det.kind == kind:
                self.record(det.check(row), det.name)

    def replay(self, rows: list[dict]) -> None:
        self.replaying = True
        for row in rows:
            self.judge(row)
        self.replaying = False

    def record(self, alerts: list[Alert], detector: str) -> None:
        s = self.stats[detector]
        s["checks"] += 1
        now = {(a.detector, a.subject) for a in alerts}
        for a in alerts:
            s["fired"] += 1
            s["first_step"] = a.step if s["first_step"] is None else s["first_step"]
            s["last_step"], s["message"] = a.step, a.message
            if a.verdict == "error" or s["verdict"] == "ok":
                s["verdict"] = a.verdict
            if (a.detector, a.subject) in self.active:
                continue  # still holding: already in the log and the timeline
            if self.alerts_file is not None:
                self.alerts_file.write(json.dumps(a.to_dict()) + "\n")
                self.alerts_file.flush()
            if not self.replaying:
                log(f"monitor: {a.verdict}: step {a.step}: {a.message}")
        self.active = {k for k in self.active if k[0] != detector} | now

    def close(self) -> None:
        if self.alerts_file is not None and not self.alerts_file.closed:
            self.alerts_file.close()


def rejudge(cfg, train_dir: Path, rows: list[dict]) -> dict:
    """The verdicts of every row of a finished run again, in step order, into monitor.json and alerts.jsonl.

    The trainer wrote both when it closed, before the watcher's last evaluations existed. What only the trainer
    saw is kept from its monitor.json: the non-finite halt (no row records it) and the run's FLOP figures."""
    train_dir = Path(train_dir)
    verdicts = Verdicts(cfg, train_dir / ALERTS)
    verdicts.replay(sorted(rows, key=lambda r: r["step"]))
    verdicts.close()
    summary_path = train_dir / SUMMARY
    summary = read_json(summary_path) if summary_path.exists() else {}
    if NONFINITE in summary.get("detectors", {}):
        verdicts.stats[NONFINITE] = summary["detectors"][NONFINITE]
    summary["detectors"] = verdicts.stats
    write_json(summary_path, summary)
    return summary
