"""A run that went on past an error verdict because of --force, recorded with it.

The gates before training (the contamination check, the plan) stop `scratchlm run` on an error, and the gate
before fine-tuning (the base's quality) stops `scratchlm sft`; with --force they let it through, and the run
records which verdicts it went past, so that every later reader of the run says so: the report's first lines,
`scratchlm check`, the end of `scratchlm run`, the fine-tuning report. These two functions are the record and its
one line, for all of them.
"""
from __future__ import annotations

FORCE_FLAG = "--force"


def forced_record(gates: dict[str, list[dict]]) -> list[dict]:
    """One entry per error verdict a gate let through under --force. gates: the gate's stage -> its error
    verdicts, each with a name, a level and a summary (the figure it was decided on)."""
    return [{"stage": stage, "verdict": v["name"], "level": v["level"], "summary": v["summary"],
             "forced_by": FORCE_FLAG} for stage, found in gates.items() for v in found]


def forced_line(forced: list[dict]) -> str:
    """The record as one line, naming each verdict, its level and its figure. Several are numbered: a summary may
    hold a `;` of its own."""
    entries = [f"{f['stage']} {f['verdict']} {f['level']}: {f['summary'].rstrip('.')}" for f in forced]
    if len(entries) > 1:
        entries = [f"({k}) {entry}" for k, entry in enumerate(entries, 1)]
    count = f"{len(forced)} error verdict{'' if len(forced) == 1 else 's'}"
    return f"trained past {count} with {FORCE_FLAG}: " + "; ".join(entries)
