"""What a demo run (`run.demo = true`: the quickstart) is expected to show, and why.

The quickstart trains a small model for 10 minutes on 2 CPU cores, on the built-in corpus. Some verdicts are
inherent to that size, not mistakes to fix: they are still computed the usual way and shown where they belong,
but a demo trains through the corpus-size error instead of stopping `run`, and the log and the report group these
findings under one note, so that anything else flagged stands out.
"""
from __future__ import annotations

from ..data.token_estimate import size_verdict
from .verdicts import worst

WHY = {
    "corpus size": "a useful model needs 20 tokens per parameter, for this model tens of millions of tokens and "
                   "hours of compute; a 10-minute CPU demo has the built-in corpus",
    "tokenizer": "the demo's vocabulary is small so that its embedding fits a small model; it splits words into more "
                 "pieces, and a held-out set this small leaves some of it unseen",
    "contamination": "the standard library holds generated modules (the codec tables) whose text repeats from file "
                     "to file, so a validation file has near-copies in training",
}
ACCEPTED_ERRORS = {"corpus": "corpus size"}  # plan verdicts a demo trains through, and the fact each one is


def blocking_errors(verdicts: list[dict], demo: bool) -> list[dict]:
    """The plan errors that stop `run` and fail `scratchlm plan`: all of them, less those a demo trains through."""
    return [v for v in verdicts if v["level"] == "error" and not (demo and v["name"] in ACCEPTED_ERRORS)]


def accepted_notes(verdicts: list[dict], demo: bool) -> list[str]:
    """One line per plan error a demo trains through, saying why."""
    if not demo:
        return []
    return [f"{v['name']} error expected in this demo (run.demo = true), training anyway: "
            f"{WHY[ACCEPTED_ERRORS[v['name']]]}"
            for v in verdicts if v["level"] == "error" and v["name"] in ACCEPTED_ERRORS]


def findings(report: dict) -> list[tuple[str, str, str]]:
    """(fact, level, message) of each expected fact that is not ok, from the report's own figures."""
    out = []
    tokens = sum(v.get("tokens", 0) for v in report["shards"]["train"].values())
    size = size_verdict(tokens, report["train"]["n_params"], "counted by the trained tokenizer")
    if size["level"] != "ok":
        out.append(("corpus size", size["level"], size["message"]))
    fertility = ((report.get("tokenizer") or {}).get("fertility") or {}).get("verdicts", [])
    problems = [v for v in fertility if v["level"] != "ok"]
    if problems:
        out.append(("tokenizer", worst(v["level"] for v in problems), "; ".join(v["message"] for v in problems)))
    contamination = report.get("contamination") or {}
    if contamination.get("verdict", "ok") != "ok":
        out.append(("contamination", contamination["verdict"],
                    "; ".join(s["message"].removeprefix(f"{s['verdict']}: ")
                              for s in contamination["eval_sets"].values() if s["verdict"] != "ok")))
    return out


def note_lines(report: dict) -> list[str]:
    """The one note, as lines for the report and the log."""
    found = findings(report)
    if not found:
        return ["none of the findings a demo of this size usually shows came up"]
    return [f"{fact} {level}: {message.rstrip('.')}. Inherent: {WHY[fact]}." for fact, level, message in found]


def report_section(report: dict) -> list[str]:
    md = ["## Expected in this demo", "",
          "This config is a demo (`run.demo = true`, the quickstart): a small model trained for 10 minutes on a "
          "CPU, on the built-in corpus. The findings below are inherent to that size; each is also shown in its own "
          "section. Any other warning in this report is a finding to read.", ""]
    return md + [f"- {line}" for line in note_lines(report)] + [""]
