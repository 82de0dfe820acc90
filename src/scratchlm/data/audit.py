"""Auditing what the prepare stage did: `scratchlm data rejected` (what a rule dropped), `scratchlm data explain`
(one document through every step) and `scratchlm data show` (a kept document's final text)."""
from __future__ import annotations

import difflib
from collections import Counter
from pathlib import Path
from typing import Iterator

from ..errors import UserError
from ..ids import read_json
from .jsonl import read_jsonl
from .step_docs import read_docs
from .val_split import HELD_OUT_PIECE


def ledger_records(data_dir: Path) -> Iterator[dict]:
    for path in sorted(data_dir.glob("rejected-*.jsonl.zst")):
        yield from read_jsonl(path)


def did_you_mean(name: str, known: list[str]) -> str:
    close = difflib.get_close_matches(name, known, n=1)
    return f"did you mean `{close[0]}`? " if close else ""


def check_source(data_dir: Path, source: str | None) -> None:
    """A source the config does not have is a typo, not a source with nothing rejected."""
    known = sorted(read_json(data_dir / "stats.json")["sources"])
    if source is not None and source not in known:
        raise UserError(f"no source `{source}` in this config; {did_you_mean(source, known)}sources: "
                        f"{', '.join(known)}")


def rejected(data_dir: Path, rule: str | None, source: str | None, sample: int) -> str:
    """Count of ledger records for a rule (all rules when None) and an evenly spread sample of them."""
    check_source(data_dir, source)
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
    """One document's way through every step: a line per step saying what it did, then the ledger's records."""
    stats = read_json(data_dir / "stats.json")
    unit = _unit_or_error(stats, doc_id)
    records = [r for r in ledger_records(data_dir) if r["id"] == doc_id]
    summary, fate, chars = [], "kept for training", None
    for step in stats["steps"]:
        result = stats["units"][unit]["steps"].get(step)
        if result is None:
            summary.append(f"  {step:15s} not run on this document's source")
            continue
        about = [r for r in records if r["stage"] == step]
        dropped = [r for r in about if r.get("level", "document") == "document"]
        doc = next((d for d in read_docs(Path(result)) if d["id"] == doc_id), None)
        if dropped:
            r = dropped[0]
            summary.append(f"  {step:15s} dropped: {r['rule']}" + (f" ({r['detail']})" if r["detail"] else ""))
            fate = f"dropped at step {step} by rule `{r['rule']}`"
            break
        if doc is None:
            if any(d["id"] == doc_id for d in _read_val(Path(result))):
                summary.append(f"  {step:15s} held out for validation")
                fate = "held out for validation"
            else:
                summary.append(f"  {step:15s} not in the step's output")
                fate = f"lost at step {step} (no ledger record)"
            break
        before = f"{chars:,} -> " if chars is not None and chars != len(doc["text"]) else ""
        chars = len(doc["text"])
        cuts = Counter((r["level"], r["rule"]) for r in about)
        what = "; removed " + ", ".join(f"{n} {level}{'s' if n > 1 else ''} ({rule})"
                                        for (level, rule), n in cuts.most_common()) if cuts else ""
        piece = doc.get(HELD_OUT_PIECE)
        tail = f"; its tail held out for validation as `{piece}`" if piece else ""
        summary.append(f"  {step:15s} kept, {before}{chars:,} chars{what}{tail}")
    lines = [f"{doc_id} (source {stats['units'][unit]['source']}, work unit {unit}): {fate}", "", "Steps:"]
    lines += summary
    if records:
        lines += ["", f"Ledger records ({len(records)}):"]
        for r in records:
            what = "dropped" if r.get("level", "document") == "document" else f"cut a {r['level']}"
            score = f" (score {r['score']})" if r.get("score") is not None else ""
            lines.append(f"  {r['stage']:15s} {what}: {r['rule']}{score} {r['detail']} | {r['excerpt'][:80]!r}")
    if fate == "kept for training":
        lines += ["", f"Final text: `scratchlm data show -c CONFIG {doc_id}`"]
    return "\n".join(lines)


def _unit_or_error(stats: dict, doc_id: str) -> str:
    unit = _unit_of(stats, doc_id)
    if unit is None:
        files = [f for u in stats["units"].values() for f in u["files"]]
        raise UserError(f"document `{doc_id}` is not in any source of this config; "
                        f"{did_you_mean(doc_id.split(':')[0], files)}IDs look like `source/path/file.jsonl:LINE` "
                        f"(see `scratchlm data rejected`)")
    return unit


def show(data_dir: Path, final_dir: Path, doc_id: str) -> str:
    """The final text of a document as it went to training or validation, read from `final_dir` (the
    decontaminate stage's output once it exists, else the data stage's), with a header per piece."""
    stats = read_json(data_dir / "stats.json")
    unit = _unit_or_error(stats, doc_id)
    source = stats["units"][unit]["source"]
    final = read_json(final_dir / "stats.json")
    found, near = [], set()
    for name in final["train_files"].get(source, []):
        if not name.startswith(unit + "."):
            continue
        for doc in read_jsonl(final_dir / "train" / name):
            if _same_doc(doc["id"], doc_id):
                found.append(("train", doc))
            else:
                near.add(doc["id"])
    for path in sorted((final_dir / "val").glob("*.jsonl")):
        found += [("validation", doc) for doc in read_jsonl(path) if _same_doc(doc["id"], doc_id)]
    if not found:
        gone = next((r for r in ledger_records(data_dir) if r["id"] == doc_id and r.get("level", "document")
                     == "document"), None) or next((r for r in ledger_records(final_dir) if r["id"] == doc_id), None)
        if gone is not None:
            raise UserError(f"document `{doc_id}` did not reach training: dropped at {gone['stage']} by rule "
                            f"`{gone['rule']}`; see `scratchlm data explain -c CONFIG {doc_id}`")
        raise UserError(f"no document `{doc_id}` in source `{source}`; {did_you_mean(doc_id, sorted(near))}"
                        f"see `scratchlm data explain -c CONFIG {doc_id}`")
    out = []
    for split, doc in found:
        text = doc["text"]
        out += [f"== {doc['id']} | source {source} | {split} | {len(text):,} chars, {text.count(chr(10)) + 1:,} "
                f"lines ==", text, ""]
    return "\n".join(out).rstrip("\n")


def _same_doc(found: str, wanted: str) -> bool:
    """The document itself, its held-out tail (`ID#val`) or the pieces span-mode decontamination left (`ID#0`...)."""
    return found == wanted or (found.startswith(wanted + "#") and "#" not in found[len(wanted) + 1:])


def _read_val(result: Path) -> Iterator[dict]:
    path = result / "val-00000.jsonl.zst"
    return read_jsonl(path) if path.exists() else iter(())

