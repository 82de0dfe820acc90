"""A document step's output documents in the cache: stored whole, or as what the step changed in its input.

Only the first step (read: the text as read from the user's files) and the last (split: the train files link to
it) store whole documents. Every step between stores one line per document it read: `1` kept as it came, `0`
dropped or diverted, or an object naming what changed: the text as the pieces of the input's text it kept
(`spans`, start and end offsets: line and paragraph rules only cut), fields set (`set`, the whole new text among
them when it is not made of its input's pieces) and fields removed (`unset`). A full copy per step took 2.3-4.2
times the input on disk (90-170 GB beside a 40 GB corpus); the changes of the eight steps between take a few
percent of it.

A result directory holding changes also holds `input.json`: the directories its input is rebuilt from (the
whole documents, then each step's changes, relative to the cache, so a moved workdir still fits). Any result can
so be read on its own (read_docs), by the next step's worker, a corpus step, or `scratchlm data explain`, and a
run killed at any step resumes from the results it finished.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Iterator

import zstandard

from ..errors import UserError
from ..ids import read_json, write_json
from .jsonl import read_jsonl, read_lines

DOCS = "docs-00000.jsonl.zst"
CHANGES = "changes-00000.jsonl.zst"
INPUT = "input.json"
KEPT, GONE = "1", "0"


def kept_spans(old: str, new: str) -> list[list[int]] | None:
    """`new` as pieces of `old` in order ([start, end) each), or None where it has text `old` lacks there.
    Line by line, each at its first place after the previous one: the earliest place leaves the most of `old`
    for the lines after it, so a text made by cutting lines or parts of lines out of `old` is always found."""
    spans: list[list[int]] = []
    at = 0
    for line in new.splitlines(keepends=True):
        found = old.find(line, at)
        if found < 0:
            return None
        if spans and spans[-1][1] == found:
            spans[-1][1] = found + len(line)
        else:
            spans.append([found, found + len(line)])
        at = found + len(line)
    return spans


def change(before: dict, after: dict | None) -> str:
    """The line recording what a step made of a document (`before`: a copy taken before the step ran)."""
    if after is None:
        return GONE
    old, new = before.get("text"), after.get("text")
    changed = {k: v for k, v in after.items() if k != "text" and (k not in before or before[k] != v)}
    unset = [k for k in before if k not in after]
    if new is old or new == old:
        if not changed and not unset:
            return KEPT
        record: dict = {}
    else:
        spans = kept_spans(old, new) if isinstance(old, str) and isinstance(new, str) else None
        record = {"spans": spans} if spans is not None else {}
        if spans is None and "text" in after:
            changed["text"] = new
    if changed:
        record["set"] = changed
    if unset:
        record["unset"] = unset
    return json.dumps(record, ensure_ascii=False)


def apply(doc: dict, line: str) -> dict | None:
    """The document as a step left it, from its `change` line."""
    line = line.rstrip("\n")
    if line == KEPT:
        return doc
    if line == GONE:
        return None
    record = json.loads(line)
    if "spans" in record:
        text = doc["text"]
        doc["text"] = "".join(text[a:b] for a, b in record["spans"])
    doc.update(record.get("set", {}))
    for k in record.get("unset", ()):
        doc.pop(k, None)
    return doc


class ChangeWriter:
    """Writes a step's change lines into its result directory, with the input it is read against."""

    def __init__(self, directory: Path, chain: list[str]):
        write_json(directory / INPUT, {"input": chain})
        self._out = zstandard.ZstdCompressor(level=1).stream_writer(open(directory / CHANGES, "wb"))

    def write(self, before: dict, after: dict | None) -> None:
        self._out.write((change(before, after) + "\n").encode("utf-8"))

    def close(self) -> None:
        self._out.close()  # closes the file too


def input_chain(source: Path) -> list[str]:
    """The directories a step reading the finished result `source` rebuilds its input from, relative to the
    cache: the whole documents first, then every step's changes in order, `source` last."""
    if (source / DOCS).exists():
        return [relative(source)]
    return read_json(source / INPUT)["input"] + [relative(source)]


def whole_size(result: Path) -> int:
    """Bytes of the whole documents `result` is read from."""
    if (result / DOCS).exists():
        return (result / DOCS).stat().st_size
    return (result.parent.parent / read_json(result / INPUT)["input"][0] / DOCS).stat().st_size


def read_docs(result: Path) -> Iterator[dict]:
    """The documents a step's result holds, whole or rebuilt from its input and changes (none if it wrote no
    documents)."""
    if (result / DOCS).exists():
        yield from read_jsonl(result / DOCS)
        return
    if not (result / INPUT).exists():
        return
    cache = result.parent.parent
    chain = [cache / d for d in read_json(result / INPUT)["input"]] + [result]
    steps = [read_lines(d / CHANGES) for d in chain[1:]]
    for doc in read_jsonl(chain[0] / DOCS):
        for path, lines in zip(chain[1:], steps):
            line = next(lines, None)
            if line is None:  # one line per document in: a shorter file was cut short outside a run
                raise UserError(f"{path / CHANGES} ends before its input does; delete {path} and run again")
            doc = apply(doc, line)
            if doc is None:
                break
        else:
            yield doc


def relative(result: Path) -> str:
    return f"{result.parent.name}/{result.name}"
