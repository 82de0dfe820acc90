"""Auditing what the prepare stage removed: `scratchlm data rejected` and `scratchlm data explain`."""
from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Iterator

from ..errors import UserError
from ..ids import read_json
from .jsonl import read_jsonl


def ledger_records(data_dir: Path) -> Iterator[dict]:
    for path in sorted(data_dir.glob("rejected-*.jsonl.zst")):
        yield from read_jsonl(path)


def rejected(data_dir: Path, rule: str | None, source: str | None, sample: int) -> str:
    """Count of ledger records for a rule (all rules when None) and an evenly spread sample of them."""
    matching, by_rule = [], Counter()
    for r in ledger_records(data_dir):
        if source and r["source"] != source:
            continue
        by_rule[r["rule"]] += 1
        if rule is None or r["rule"] == rule:
            matching.append(r)
    if rule is not None and not matching:
        known = ", ".join(f"{k} ({n})" for k, n in by_rule.most_common()) or "none"
        raise UserError(f"no ledger record with rule `{rule}`; rules in the ledger: {known}")
    lines = [f"{len(matching)} records" + (f" for rule `{rule}`" if rule else "") + (f" in `{source}`" if source
                                                                                   else "")]
    if rule is None:
        lines += [f"  {k}: {n}" for k, n in by_rule.most_common()]
    step = max(len(matching) // max(sample, 1), 1)
    for r in matching[::step][:sample]:
        score = f" score {r['score']}" if r.get("score") is not None else ""
        lines += ["", f"{r['id']}  [{r['source']} / {r['stage']} / {r['rule']} / {r.get('level', 'document')}]"
                  f"{score}", f"  {r['detail']}" if r["detail"] else "",
                  "  " + r["excerpt"].replace("\n", "\n  ")]
    return "\n".join(line for line in lines if line is not None)


def _unit_of(stats: dict, doc_id: str) -> str | None:
    for name, unit in stats["units"].items():
        for prefix in unit["files"]:
            if doc_id == prefix or doc_id.startswith(prefix + ":"):
                return name
    return None


def explain(data_dir: Path, doc_id: str) -> str:
    """One document's way through every step: its size after each, and the ledger records about it."""
    stats = read_json(data_dir / "stats.json")
    unit = _unit_of(stats, doc_id)
    if unit is None:
        raise UserError(f"document `{doc_id}` is not in any source of this config (IDs look like "
                        f"`source/path/file.jsonl:LINE`; see `scratchlm data rejected`)")
    records = [r for r in ledger_records(data_dir) if r["id"] == doc_id]
    lines = [f"{doc_id} (work unit {unit})"]
    for step in stats["steps"]:
        result = stats["units"][unit]["steps"].get(step)
        about = [r for r in records if r["stage"] == step]
        if result is None:
            lines.append(f"  {step:15s} not run on this document's source")
            continue
        doc = next((d for d in _read_docs(Path(result)) if d["id"] == doc_id), None)
        if doc is not None:
            lines.append(f"  {step:15s} kept, {len(doc['text'])} chars")
        elif any(r.get("level", "document") == "document" for r in about):
            pass
        elif (Path(result) / "val-00000.jsonl.zst").exists() and any(
                d["id"] == doc_id for d in read_jsonl(Path(result) / "val-00000.jsonl.zst")):
            lines.append(f"  {step:15s} held out for validation")
        for r in about:
            what = "dropped" if r.get("level", "document") == "document" else f"cut a {r['level']}"
            score = f" (score {r['score']})" if r.get("score") is not None else ""
            lines.append(f"  {step:15s} {what}: {r['rule']}{score} {r['detail']} | {r['excerpt'][:80]!r}")
        if doc is None:
            break
    return "\n".join(lines)


def _read_docs(result: Path) -> Iterator[dict]:
    path = result / "docs-00000.jsonl.zst"
    return read_jsonl(path) if path.exists() else iter(())
