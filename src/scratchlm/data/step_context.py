"""What a document step's function sees besides the document: its unit, settings and state, the ledger, and
the counts every step keeps (documents, characters and bytes in and out, rules fired, notes)."""
from __future__ import annotations

from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import numpy as np

from .clean.structure import piece_contexts
from .jsonl import ShardWriter
from .ledger import Ledger
from .units import Unit


def new_stats() -> dict:
    return {"docs_in": 0, "chars_in": 0, "bytes_in": 0, "docs_out": 0, "chars_out": 0, "bytes_out": 0,
            "dropped": Counter(), "diverted": Counter(), "removed": defaultdict(lambda: [0, 0]),
            "notes": defaultdict(Counter)}


def text_size(text: str) -> tuple[int, int]:
    return len(text), len(text.encode("utf-8", "surrogatepass"))


class StepContext:
    """What a step function sees besides the document: its unit, settings and state, and the ledger."""

    def __init__(self, step: str, unit: Unit, settings: Any, state: Any, ledger: Ledger, directory: Path,
                 cache: Path):
        self.step, self.unit, self.settings, self.state, self.ledger = step, unit, settings, state, ledger
        self.directory = directory
        self.cache = cache  # a state naming a cached file names it relative to this, so a moved workdir fits
        self.stats = new_stats()
        self.sides: dict[str, np.ndarray] = {}  # arrays an observing step leaves for a corpus step
        self.memo: dict[str, Any] = {}  # per-task scratch space (a set built once from the state, ...)
        self._writers: dict[str, ShardWriter] = {}

    def divert(self, name: str, doc: dict) -> None:
        """Send a document to another output (`<name>-00000.jsonl.zst`), e.g. the validation split."""
        self._writer(name).write(doc)
        self.stats["diverted"][name] += 1

    def divert_piece(self, name: str, piece: dict) -> None:
        """Send a piece of a document whose rest the step returns (the held-out tail of a long document). It is
        counted in the notes, not as a document, so every document in is still one document out."""
        self._writer(name).write(piece)
        self.note(f"{name}_piece", "docs")
        self.note(f"{name}_piece", "chars", len(piece["text"]))

    def _writer(self, name: str) -> ShardWriter:
        if name not in self._writers:
            self._writers[name] = ShardWriter(self.directory, name, per_shard=1 << 62, level=1)
        return self._writers[name]

    def close_writers(self) -> None:
        for w in self._writers.values():
            w.close()

    def drop(self, doc_id: str, rule: str, detail: str = "", text: str = "", score: float | None = None) -> None:
        self.stats["dropped"][rule] += 1
        self.ledger.reject(source=self.unit.source, doc_id=doc_id, stage=self.step, rule=rule, detail=detail,
                           text=text, score=score)

    def removed(self, doc_id: str, rule: str, pieces: list[str], level: str, detail: str = "",
                original: str | None = None, record: bool = True) -> None:
        """Record the lines or paragraphs a step cut out of a kept document; with the `original` text, each
        record also gets the piece's neighbouring lines (what an auditor needs to judge the cut). Without
        `record`, the pieces are counted in the stats only (the page chrome an HTML page loses, below the
        threshold of data/html_losses.py)."""
        if not pieces:
            return
        entry = self.stats["removed"][rule]
        entry[0] += len(pieces)
        entry[1] += sum(len(p) for p in pieces)
        if not record:
            return
        contexts = piece_contexts(original, pieces) if original is not None else [""] * len(pieces)
        for piece, around in zip(pieces, contexts):
            self.ledger.reject(source=self.unit.source, doc_id=doc_id, stage=self.step, rule=rule, detail=detail,
                               text=piece, level=level, context=around)

    def skips(self, rule: str) -> bool:
        """The unit's source switched this rule off (`skip_rules` on the source)."""
        return rule in self.unit.skip_rules

    def note(self, key: str, value: str, n: int = 1) -> None:
        self.stats["notes"][key][value] += n
