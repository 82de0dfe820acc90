"""Compare the fixed-prompt generations of one evaluation with the previous one, and measure repetition."""
from __future__ import annotations

import difflib
import json
import re
from pathlib import Path

SAMPLE_FILE = re.compile(r"step_(\d+)\.json$")


def repeated_ngram_rate(text: str, n: int) -> float | None:
    """Share of word n-grams that already occurred earlier in the text; None when the text is too short."""
    words = text.split()
    grams = [tuple(words[i:i + n]) for i in range(len(words) - n + 1)]
    if not grams:
        return None
    return 1.0 - len(set(grams)) / len(grams)


def repetition_rates(samples: list[dict], n: int) -> list[float | None]:
    """The repetition rate of each generation: what an evaluation row records under "repetition"."""
    return [repeated_ngram_rate(s["completion"], n) for s in samples]


def write_sample_diff(samples_dir: Path, step: int, samples: list[dict], previous: list[dict] | None,
                      previous_step: int | None) -> None:
    """samples/step_N.diff: this evaluation's generations against the previous evaluation's."""
    label = f"step {previous_step}" if previous_step is not None else "(none)"
    samples_dir.mkdir(exist_ok=True)
    (samples_dir / f"step_{step:07d}.diff").write_text(text_diff(previous, samples, label, f"step {step}"),
                                                       encoding="utf-8")


def sample_files(samples_dir: Path) -> list[tuple[int, Path]]:
    """(step, path) of every saved generation set, in step order."""
    if not samples_dir.is_dir():
        return []
    found = [(int(m.group(1)), p) for p in samples_dir.iterdir() if (m := SAMPLE_FILE.search(p.name))]
    return sorted(found)


def load_samples(path: Path) -> list[dict]:
    return json.loads(path.read_text(encoding="utf-8"))


def text_diff(previous: list[dict] | None, current: list[dict], prev_label: str, cur_label: str) -> str:
    """A unified diff per prompt, for reading the change in a terminal or an editor."""
    out = []
    for i, s in enumerate(current):
        before = previous[i]["completion"] if previous and i < len(previous) else ""
        out.append(f"=== prompt {i}: {s['prompt']!r}")
        if before == s["completion"]:
            out.append("(unchanged)")
            continue
        out += difflib.unified_diff(before.splitlines(), s["completion"].splitlines(), prev_label, cur_label,
                                    lineterm="")
    return "\n".join(out) + "\n"


def html_diff(before: str, after: str, prev_label: str, cur_label: str) -> str:
    """Side-by-side table with the changed words highlighted (styles come with the dashboard)."""
    return difflib.HtmlDiff(wrapcolumn=60).make_table(before.splitlines() or [""], after.splitlines() or [""],
                                                      prev_label, cur_label)
