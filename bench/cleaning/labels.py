"""The hand-labeled items and the deterministic sample of what to label.

An item is a document ({"kind": "doc", "id"}) or a line of one ({"kind": "line", "id", "line"}, the line
stripped with whitespace collapsed), labeled "content" or "junk" independently of any system. The sample, per
system: for every rule, up to PER_RULE of its removals spread evenly over its sorted removals (so every source a
rule hit is represented); and RANDOM_DOCS kept documents and RANDOM_LINES kept lines in a fixed hash order. The
same item drawn for two systems is labeled once. `sample` lists the drawn items that have no label yet, so a
new run of a changed system (new kinds of removals) is labeled incrementally.
"""
from __future__ import annotations

import hashlib
import re
import json
import textwrap
from pathlib import Path

from .corpus import LABELS
from .systems import norm, read_gz

PER_RULE = 15
RANDOM_DOCS = 40
RANDOM_LINES = 40
SEED = "issue-12"


def key(item: dict) -> tuple:
    return (item["kind"], item["id"], item.get("line", ""))


def load_labels(path: Path = LABELS) -> dict[tuple, dict]:
    if not path.exists():
        return {}
    out = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip():
            rec = json.loads(line)
            if rec.get("label") not in ("content", "junk"):
                raise SystemExit(f"{path}: label must be content or junk: {line[:200]}")
            out[key(rec)] = rec
    return out


def _h(*parts: str) -> str:
    return hashlib.sha1("\x1f".join((SEED, *parts)).encode("utf-8")).hexdigest()


def evenly(items: list, n: int) -> list:
    if len(items) <= n:
        return list(items)
    return [items[(i * len(items)) // n + (len(items) // n) // 2] for i in range(n)]


def removals(decisions: list[dict]) -> dict[str, list[dict]]:
    """rule -> its removals as items (documents for document rules, lines for line and paragraph rules)."""
    out: dict[str, list[dict]] = {}
    for d in decisions:
        if d["status"] == "dropped":
            out.setdefault(d["rule"], []).append({"kind": "doc", "id": d["id"]})
        for line, rule in d.get("removed_lines", []):
            out.setdefault(rule, []).append({"kind": "line", "id": d["id"], "line": line})
    for items in out.values():
        items.sort(key=key)
    return out


def kept_lines(decisions: list[dict]) -> list[dict]:
    out = []
    for d in decisions:
        if d["status"] == "kept":
            seen = set()
            for raw in d["final"].split("\n"):
                ln = norm(raw)
                if ln and ln not in seen:
                    seen.add(ln)
                    out.append({"kind": "line", "id": d["id"], "line": ln})
    return out


def draw(decisions: list[dict], system: str) -> list[dict]:
    """The items to label for one system, each with the stratum that drew it."""
    items = []
    for rule, rem in sorted(removals(decisions).items()):
        for it in evenly(rem, PER_RULE):
            items.append({**it, "stratum": f"{system}:removed:{rule}"})
    kept_docs = sorted((d for d in decisions if d["status"] == "kept"), key=lambda d: _h(d["id"]))
    for d in kept_docs[:RANDOM_DOCS]:
        items.append({"kind": "doc", "id": d["id"], "stratum": f"{system}:kept:doc"})
    lines = sorted(kept_lines(decisions), key=lambda it: _h(it["id"], it["line"]))
    for it in lines[:RANDOM_LINES]:
        items.append({**it, "stratum": f"{system}:kept:line"})
    return items


def load_decisions(root: Path, system: str) -> list[dict]:
    return list(read_gz(root / "runs" / system / "decisions.jsonl.gz"))


def load_inputs(root: Path, system: str) -> dict[str, dict]:
    return {r["id"]: r for r in read_gz(root / "runs" / system / "input.jsonl.gz")}


def context(item: dict, text: str | None, doc_chars: int = 1500) -> str:
    if text is None:
        return "  (not in this system's input)"
    if item["kind"] == "doc":
        more = f"\n  ... [{len(text):,} chars in all, {text.count(chr(10)) + 1} lines]"
        text = re.sub(r"\n\s*\n", "\n", text)  # display only: paragraph breaks of extracted HTML double the lines
        if len(text) <= doc_chars:
            return textwrap.indent(text, "  | ") + more
        head, mid = text[: doc_chars // 2], len(text) // 2
        middle = text[mid : mid + doc_chars // 4]
        tail = text[-doc_chars // 6 :]
        return (textwrap.indent(head, "  | ") + "\n  [...middle...]\n" + textwrap.indent(middle, "  | ")
                + "\n  [...end...]\n" + textwrap.indent(tail, "  | ") + more)
    lines = [norm(x) for x in text.split("\n") if x.strip()]
    try:
        i = lines.index(item["line"])
    except ValueError:
        return "  (line not found in input)"
    out = []
    for j in range(max(0, i - 2), min(len(lines), i + 3)):
        out.append(("  >> " if j == i else "     ") + lines[j][:300])
    return "\n".join(out)


def sample_command(root: Path, systems: list[str], show: bool = False, as_json: bool = False,
                   labels_path: Path = LABELS) -> None:
    labeled = load_labels(labels_path)
    todo: dict[tuple, dict] = {}
    total: dict[tuple, dict] = {}
    for system in systems:
        for it in draw(load_decisions(root, system), system):
            k = key(it)
            rec = total.setdefault(k, {**{x: it[x] for x in ("kind", "id", "line") if x in it}, "strata": [],
                                       "system": system})
            rec["strata"].append(it["stratum"])
            if k not in labeled:
                todo[k] = rec
    inputs = {s: load_inputs(root, s) for s in systems} if show else {}
    print(f"# {len(total)} items drawn for {', '.join(systems)}; {len(total) - len(todo)} labeled, "
          f"{len(todo)} to label (labels: {labels_path})")
    for n, rec in enumerate(todo.values()):
        if as_json:
            print(json.dumps(rec, ensure_ascii=False))
            continue
        head = f"[{n}] {rec['kind']} {rec['id']}  ({', '.join(rec['strata'])})"
        print(head if rec["kind"] == "doc" else f"{head}\n  line: {rec['line'][:300]}")
        if show:
            doc = inputs[rec["system"]].get(rec["id"])
            print(context(rec, doc["text"] if doc else None))
            print()
