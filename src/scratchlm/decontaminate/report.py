"""What a scan found, per eval set and in total, with a verdict: as JSON for the artifact and as markdown."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

from ..data.dedup.ngram_index import ContaminationIndex
from ..data.dedup.ngram_scan import Match
from .cut import Decontaminated, span_cuts

VALIDATION_PREFIX = "validation/"  # eval set names of the data stage's validation split: validation/<domain>


@dataclass
class EvalSetReport:
    name: str
    items: int
    too_short: int
    contaminated_items: set[str] = field(default_factory=set)
    docs_touched: set[str] = field(default_factory=set)
    removed_chars: int = 0
    examples: list[dict[str, str]] = field(default_factory=list)
    error_fraction: float = 0.5
    min_coverage: float = 0.0  # share of an item's n-grams a training document must hold to count as a hit
    partial_overlaps: int = 0  # (document, item) overlaps below min_coverage: reported, not removed
    error_train_share: float = 0.2  # removing more than this share of the training text is an error
    train_chars: int = 0  # characters of training text scanned, set when the scan completes

    @property
    def builtin(self) -> bool:
        """The data stage's validation split, not a set the user configured (their names have no `/`)."""
        return self.name.startswith(VALIDATION_PREFIX)

    @property
    def train_share(self) -> float:
        """Share of the training text removed because of this set: large means it is training data, not held out."""
        return self.removed_chars / self.train_chars if self.train_chars else 0.0

    @property
    def checked(self) -> int:
        return self.items - self.too_short

    @property
    def contaminated_fraction(self) -> float:
        return len(self.contaminated_items) / self.checked if self.checked else 0.0

    @property
    def verdict(self) -> str:
        if self.contaminated_fraction > self.error_fraction or self.train_share > self.error_train_share:
            return "error"
        return "warning" if self.contaminated_items else "ok"

    @property
    def message(self) -> str:
        share = f"{len(self.contaminated_items)}/{self.checked} checked items ({self.contaminated_fraction:.0%})"
        if self.verdict == "error" and self.train_share > self.error_train_share and self.builtin:
            return (f"ERROR: '{self.name}' is scratchlm's own validation split, drawn by the data stage from your "
                    f"sources, and near copies of it stay in training: {share} are each held by a training "
                    f"document ({len(self.docs_touched)} documents, {self.train_share:.0%} of the training text, "
                    f"would be removed). The draw puts back every document with such a copy and draws again, "
                    f"but the corpus is mostly near copies of itself, so it ran out of draws. Deduplicate harder "
                    f"(lower data.fuzzy_threshold or data.containment_threshold), or set "
                    f"decontaminate.guard_validation = false to accept a validation loss on recalled text.")
        if self.verdict == "error" and self.train_share > self.error_train_share:
            return (f"ERROR: eval set '{self.name}' overlaps a large part of the training data: {share} appear in "
                    f"{len(self.docs_touched)} training documents, {self.train_share:.0%} of the training text. "
                    f"It is not held-out data; point the eval set at data kept out of the training sources.")
        if self.verdict == "error":
            return (f"ERROR: eval set '{self.name}' is largely a copy of the training data: {share} appear in "
                    f"{len(self.docs_touched)} training documents. Scores on it would measure memorization; "
                    f"decontaminate the training data or pick another eval set.")
        if self.verdict == "warning":
            return (f"warning: {share} of eval set '{self.name}' appear in {len(self.docs_touched)} training "
                    f"documents.")
        return f"ok: no item of eval set '{self.name}' was found in the training data."

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "items": self.items,
            "too_short_to_check": self.too_short,
            "checked": self.checked,
            "contaminated_items": sorted(self.contaminated_items),
            "contaminated_fraction": self.contaminated_fraction,
            "docs_touched": sorted(self.docs_touched),
            "removed_chars": self.removed_chars,
            "examples": list(self.examples),
            "min_coverage": self.min_coverage,
            "partial_overlaps_kept": self.partial_overlaps,
            "train_share_removed": self.train_share,
            "verdict": self.verdict,
            "message": self.message,
        }


_VERDICT_RANK = {"ok": 0, "warning": 1, "error": 2}


@dataclass
class ContaminationReport:
    """What a scan found, filled in by scan_corpus document by document. removed_chars per eval set counts the
    characters removed because of that set, so a document hit by two sets counts in both; chars_removed is the
    total actually removed."""

    n: int
    mode: str
    index_content_id: str
    sets: dict[str, EvalSetReport]
    docs_scanned: int = 0
    chars_scanned: int = 0
    docs_touched: int = 0
    docs_dropped: int = 0
    chars_removed: int = 0

    @classmethod
    def for_index(cls, index: ContaminationIndex, mode: str, error_fraction: float = 0.5,
                  min_coverage: Mapping[str, float] | None = None,
                  error_train_share: float = 0.2) -> "ContaminationReport":
        sets = {}
        for k, name in enumerate(index.set_names):
            mine = index.item_sets == k
            sets[name] = EvalSetReport(name=name, items=int(mine.sum()),
                                       too_short=int((mine & ~index.item_checked).sum()),
                                       error_fraction=error_fraction,
                                       min_coverage=(min_coverage or {}).get(name, 0.0),
                                       error_train_share=error_train_share)
        return cls(n=index.n, mode=mode, index_content_id=index.content_id, sets=sets)

    @property
    def verdict(self) -> str:
        return max((s.verdict for s in self.sets.values()), key=_VERDICT_RANK.__getitem__, default="ok")

    def record(self, doc_id: str, text: str, matches: list[Match], result: Decontaminated, span_window: int) -> None:
        self.docs_scanned += 1
        self.chars_scanned += len(text)
        if not matches:
            return
        self.docs_touched += 1
        self.docs_dropped += not result.kept
        self.chars_removed += result.removed_chars
        by_set: dict[str, list[Match]] = {}
        for m in matches:
            by_set.setdefault(m.eval_set, []).append(m)
        for name, set_matches in by_set.items():
            report = self.sets[name]
            report.docs_touched.add(doc_id)
            if self.mode == "document":
                report.removed_chars += len(text)
            else:
                report.removed_chars += sum(e - s for s, e in span_cuts(text, set_matches, span_window))
            for m in set_matches:
                report.contaminated_items.add(m.item_id)
                if len(report.examples) < 3:
                    excerpt = " ".join(text[m.char_start:m.char_end].split())
                    report.examples.append({
                        "item_id": m.item_id,
                        "doc_id": doc_id,
                        "excerpt": excerpt if len(excerpt) <= 300 else excerpt[:297] + "...",
                    })

    def to_dict(self) -> dict[str, Any]:
        return {
            "n": self.n,
            "mode": self.mode,
            "index_content_id": self.index_content_id,
            "docs_scanned": self.docs_scanned,
            "chars_scanned": self.chars_scanned,
            "docs_touched": self.docs_touched,
            "docs_dropped": self.docs_dropped,
            "chars_removed": self.chars_removed,
            "verdict": self.verdict,
            "eval_sets": {name: s.to_dict() for name, s in self.sets.items()},
        }

    def to_markdown(self) -> str:
        lines = [
            "## Contamination report",
            "",
            f"- verdict: **{self.verdict.upper()}**",
            f"- {self.n}-gram overlap, mode `{self.mode}`, index `{self.index_content_id}`",
            f"- training documents scanned: {self.docs_scanned:,} ({self.chars_scanned:,} characters)",
            f"- training documents touched: {self.docs_touched:,} (dropped whole: {self.docs_dropped:,}); "
            f"characters removed: {self.chars_removed:,}",
            "",
            "| eval set | items | too short to check | contaminated items | training docs touched "
            "| removed chars | verdict |",
            "|---|---:|---:|---:|---:|---:|---|",
        ]
        for s in self.sets.values():
            lines.append(f"| {s.name} | {s.items} | {s.too_short} | {len(s.contaminated_items)} "
                         f"({s.contaminated_fraction:.1%}) | {len(s.docs_touched)} | {s.removed_chars:,} "
                         f"| {s.verdict} |")
        for s in self.sets.values():
            lines += ["", f"### {s.name}", "", s.message]
            if s.min_coverage > 0:
                lines.append(f"- a training document counts as a copy when it holds at least {s.min_coverage:.0%} "
                             f"of an item's {self.n}-grams; {s.partial_overlaps} smaller overlaps were kept")
            if s.contaminated_items:
                ids = sorted(s.contaminated_items)
                more = f" … and {len(ids) - 20} more" if len(ids) > 20 else ""
                lines.append(f"- contaminated items: {', '.join(ids[:20])}{more}")
                docs = sorted(s.docs_touched)
                more = f" … and {len(docs) - 20} more" if len(docs) > 20 else ""
                lines.append(f"- training documents: {', '.join(docs[:20])}{more}")
            for ex in s.examples:
                lines.append(f"- item `{ex['item_id']}` in training doc `{ex['doc_id']}`: \"{ex['excerpt']}\"")
        return "\n".join(lines) + "\n"
