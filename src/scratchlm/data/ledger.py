"""The rejection ledger: every document or paragraph a stage drops, with the rule that dropped it.

Nothing is lost silently. A user can count, sample and audit what a filter removed, and undo a rule knowing
exactly what it cost.
"""
from __future__ import annotations

from collections import Counter, defaultdict
from pathlib import Path

from .jsonl import ShardWriter

EXCERPT_CHARS = 160
CONTEXT_CHARS = 1200


class Ledger:
    def __init__(self, directory: Path):
        self.writer = ShardWriter(directory, "rejected", per_shard=1_000_000)
        self.counts: dict[str, Counter] = defaultdict(Counter)  # source -> rule -> docs

    def reject(self, *, source: str, doc_id: str, stage: str, rule: str, detail: str = "",
               text: str = "", score: float | None = None, level: str = "document", context: str = "") -> None:
        self.counts[source][rule] += 1
        record = {"source": source, "id": doc_id, "stage": stage, "rule": rule, "detail": detail,
                  "excerpt": text[:EXCERPT_CHARS], "level": level}
        if score is not None:
            record["score"] = score
        if context:  # a cut line or paragraph with its neighbours, for `scratchlm data audit`
            record["context"] = context[:CONTEXT_CHARS]
        self.writer.write(record)

    def add(self, record: dict) -> None:
        """Copy a record from another ledger (the per-unit ledgers merged into the stage's)."""
        self.counts[record["source"]][record["rule"]] += 1
        self.writer.write(record)

    def close(self) -> list[Path]:
        return self.writer.close()
