"""Agreement between the cleaning benchmark's labels and a blind second labeler.

    python bench/cleaning_agreement.py

bench/cleaning_second_labels.jsonl: 120 items (60 lines, 60 documents) drawn with random.Random(0) from
bench/cleaning_labels.jsonl as it stood at 825 labels, labeled by a second reader who saw only the item and its
context (bench/cleaning/labels.py `context`), never the first labels, with the written criteria of
docs/benchmarks.md. Prints raw agreement and Cohen's kappa for lines, documents and all, the confusion table
and every disagreement with both notes.
"""
from __future__ import annotations

import json
from pathlib import Path

HERE = Path(__file__).resolve().parent
FIRST, SECOND = HERE / "cleaning_labels.jsonl", HERE / "cleaning_second_labels.jsonl"
LABELS = ("content", "junk")


def _load(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def _key(r: dict) -> tuple:
    return r["kind"], r["id"], r.get("line", "")


def agreement(pairs: list[tuple[dict, dict]]) -> tuple[float, float, dict]:
    """(raw agreement, Cohen's kappa, {(first, second): count})."""
    n = len(pairs)
    table = {(a, b): sum(f["label"] == a and s["label"] == b for f, s in pairs) for a in LABELS for b in LABELS}
    observed = (table["content", "content"] + table["junk", "junk"]) / n
    first = (table["content", "content"] + table["content", "junk"]) / n
    second = (table["content", "content"] + table["junk", "content"]) / n
    chance = first * second + (1 - first) * (1 - second)
    return observed, (observed - chance) / (1 - chance), table


def main() -> None:
    first = {_key(r): r for r in _load(FIRST)}
    pairs = [(first[_key(s)], s) for s in _load(SECOND)]
    print("| items | n | agreement | Cohen's kappa | both content | first content, second junk | first junk, "
          "second content | both junk |\n|---|---:|---:|---:|---:|---:|---:|---:|")
    for name, part in (("lines", [p for p in pairs if p[1]["kind"] == "line"]),
                       ("documents", [p for p in pairs if p[1]["kind"] == "doc"]), ("all", pairs)):
        observed, kappa, t = agreement(part)
        print(f"| {name} | {len(part)} | {observed:.3f} | {kappa:.3f} | {t['content', 'content']} | "
              f"{t['content', 'junk']} | {t['junk', 'content']} | {t['junk', 'junk']} |")
    print("\nDisagreements:")
    for f, s in pairs:
        if f["label"] != s["label"]:
            print(f"- {s['kind']} {s['id']}" + (f" | {s['line'][:100]}" if s["kind"] == "line" else ""))
            print(f"    first:  {f['label']:7s} {f.get('note', '')}\n    second: {s['label']:7s} {s.get('note', '')}")


if __name__ == "__main__":
    main()
