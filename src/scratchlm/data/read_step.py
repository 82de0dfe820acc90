"""The first step: reader output -> normalized documents within the length bounds. A source none of whose
documents could even be read stops the stage: that is a config mistake, not data to filter."""
from __future__ import annotations

import unicodedata
from collections import Counter, defaultdict
from dataclasses import dataclass

from ..errors import UserError
from .jsonl import read_jsonl
from .prepare_stats import READ_RULES
from .html_losses import count_losses
from .readers import EXTRACTION, READ_NOTES, Rejected
from .short_docs import too_short
from .step import Corpus, DocumentStep
from .step_context import StepContext
from .step_runner import StepRunner
from .units import Unit


@dataclass(frozen=True)
class ReadSettings:
    normalization: str
    min_chars: int
    max_chars: int  # also keeps a huge file from being read at all (step_worker.py)
    html_loss_ledger: float  # an HTML page that lost more of its text has its drops in the ledger

    @classmethod
    def of(cls, corpus: Corpus, unit: Unit) -> ReadSettings:
        d = corpus.data
        return cls(d.normalization, d.min_chars, d.max_chars, d.html_loss_ledger)


def read_doc(item: dict | Rejected, ctx: StepContext) -> dict | None:
    s: ReadSettings = ctx.settings
    if isinstance(item, Rejected):
        ctx.drop(item.id, item.rule, item.detail)
        return None
    _note_reading(item.pop(READ_NOTES, {}), ctx)
    if (extraction := item.pop(EXTRACTION, None)) is not None:
        count_losses(item["id"], extraction, ctx, s.html_loss_ledger)
    text = unicodedata.normalize(s.normalization, item["text"]).strip()
    doc = {**item, "text": text, "source": ctx.unit.source, "domain": ctx.unit.domain, "chars_read": len(text)}
    if too_short(doc, ctx, s.min_chars):
        return None
    if len(text) > s.max_chars:
        ctx.drop(doc["id"], "too_long", f"{len(text)} > {s.max_chars} chars", text)
        return None
    return doc


def _note_reading(notes: dict, ctx: StepContext) -> None:
    """The reader's notes in the stats: documents by encoding (UTF-8 is not counted), and documents and
    characters repaired (NULs stripped, lone surrogates replaced)."""
    for key, value in notes.items():
        if key == "encoding":
            ctx.note("encoding", value)
        else:
            ctx.note("repaired_docs", key)
            ctx.note("repaired_chars", key, value)


def check_sources_readable(run: StepRunner, corpus: Corpus) -> None:
    per_source: dict[str, Counter] = defaultdict(Counter)
    for unit in run.units:
        st = run.stats["read"][unit.name]
        per_source[unit.source]["in"] += st["docs_in"]
        per_source[unit.source]["read"] += st["docs_in"] - sum(n for r, n in st["dropped"].items() if r in READ_RULES)
        per_source[unit.source].update({r: n for r, n in st["dropped"].items() if r in READ_RULES})
    for name, c in per_source.items():
        if c["in"] and not c["read"]:
            rule, n = max(((r, n) for r, n in c.items() if r not in ("in", "read")), key=lambda x: x[1])
            raise UserError(f"source `{name}` ({corpus.sources[name].path}): none of its {c['in']} documents could "
                            f"be read; top reason: {rule} ({n} of {c['in']}){_first_record(run, name, rule)}")


def _first_record(run: StepRunner, source: str, rule: str) -> str:
    """`, e.g. ID: detail` from the read step's ledger: the file, and for a damaged one where."""
    for unit in run.units:
        if unit.source == source:
            for path in sorted(run.outputs["read"][unit.name].glob("rejected-*.jsonl.zst")):
                for record in read_jsonl(path):
                    if record["rule"] == rule:
                        return f", e.g. {record['id']}: {record['detail']}"
    return ""


READ = DocumentStep("read", read_doc, ReadSettings.of, after=check_sources_readable)
