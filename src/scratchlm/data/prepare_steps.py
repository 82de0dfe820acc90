"""The per-document steps of the prepare stage. Each takes one document and a StepContext and returns the
document (maybe edited) or None after recording why in the ledger (ctx.drop). They run in worker processes,
so they are module-level functions of picklable arguments.
"""
from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .clean.boilerplate import RepeatedLineFinder, line_hash, remove_lines, strip_boilerplate_lines
from .clean.langid import UNDETERMINED, detect_language, paragraph_languages
from .clean.promo import promo_score
from .clean.quality import QualityConfig, c4_filter_lines, quality_verdict
from .jsonl import read_jsonl
from .readers import Rejected
from .step_runner import StepContext

_PARAGRAPH_BREAK = re.compile(r"\n\s*\n")


@dataclass(frozen=True)
class ReadSettings:
    normalization: str
    min_chars: int
    max_chars: int


def _too_short(doc: dict, ctx: StepContext, min_chars: int) -> bool:
    if len(doc["text"]) >= min_chars:
        return False
    ctx.drop(doc["id"], "too_short", f"{len(doc['text'])} < {min_chars} chars", doc["text"])
    return True


def read_doc(item: dict | Rejected, ctx: StepContext) -> dict | None:
    """Reader output -> a normalized document within the length bounds."""
    s: ReadSettings = ctx.settings
    if isinstance(item, Rejected):
        ctx.drop(item.id, item.rule, item.detail)
        return None
    text = unicodedata.normalize(s.normalization, item["text"]).strip()
    doc = {**item, "text": text, "source": ctx.unit.source, "domain": ctx.unit.domain}
    if _too_short(doc, ctx, s.min_chars):
        return None
    if len(text) > s.max_chars:
        ctx.drop(doc["id"], "too_long", f"{len(text)} > {s.max_chars} chars", text)
        return None
    return doc


def boilerplate_doc(doc: dict, ctx: StepContext) -> dict | None:
    """Cookie banners, nav bars, copyright footers, share/newsletter prompts: line rules, no corpus statistics."""
    text, removed = strip_boilerplate_lines(doc["text"])
    ctx.removed(doc["id"], "boilerplate_line", removed, "line")
    doc["text"] = text
    return None if _too_short(doc, ctx, ctx.settings) else doc


def count_lines(doc: dict, ctx: StepContext) -> dict:
    """Observe only: count each line's documents, for the corpus-wide repeated-line step."""
    ctx.memo.setdefault("finder", RepeatedLineFinder()).feed(doc["text"])
    return doc


def save_line_counts(ctx: StepContext) -> None:
    finder = ctx.memo.get("finder") or RepeatedLineFinder()
    keys, counts = finder.table()
    ctx.sides.update(keys=keys, counts=counts, n_docs=np.array([finder.n_docs]))


def repeated_lines_doc(doc: dict, ctx: StepContext) -> dict | None:
    """Remove lines found in many documents of the same source (templates: site footers, license headers)."""
    if "frequent" not in ctx.memo:  # the state is the path of the source's frequent-line hashes
        ctx.memo["frequent"] = set(np.load(ctx.state).tolist())
    frequent = ctx.memo["frequent"]
    removed = [line for line in doc["text"].split("\n") if line.strip() and line_hash(line) in frequent]
    if removed:
        doc["text"], _ = remove_lines(doc["text"], frequent)
        ctx.removed(doc["id"], "repeated_line", removed, "line", "line in many documents of this source")
    return None if _too_short(doc, ctx, ctx.settings) else doc


@dataclass(frozen=True)
class LanguageSettings:
    min_score: float
    min_chars: int
    paragraph_min_chars: int = 100  # shorter paragraphs get near-random labels and stay with their document


def language_doc(doc: dict, ctx: StepContext) -> dict | None:
    """Keep documents in the languages asked for; cut confidently foreign paragraphs out of mixed ones."""
    s: LanguageSettings = ctx.settings
    keep_langs: tuple[str, ...] = ctx.state
    lang, prob = detect_language(doc["text"])
    ctx.note("language_in", lang if prob >= s.min_score else UNDETERMINED)
    wanted = not keep_langs or lang in keep_langs
    paragraphs = [p for p in _PARAGRAPH_BREAK.split(doc["text"]) if p.strip()]
    if keep_langs and len(paragraphs) > 1:
        foreign = [p for p, (plang, pprob, n) in zip(paragraphs, paragraph_languages(doc["text"]))
                   if n >= s.paragraph_min_chars and pprob >= s.min_score and plang not in keep_langs]
        foreign_chars = sum(len(p) for p in foreign)
        if foreign and foreign_chars < 0.5 * len(doc["text"]):  # mixed, mostly wanted: cut the rest out
            cut = set(foreign)
            doc["text"] = "\n\n".join(p.strip() for p in paragraphs if p not in cut)
            ctx.removed(doc["id"], "language_paragraph", foreign, "paragraph", f"not in {list(keep_langs)}")
            lang, prob = detect_language(doc["text"])
            wanted = lang in keep_langs
    if not wanted or prob < s.min_score:
        why = (f"{lang} p={prob:.2f} is below language_min_score {s.min_score}" if wanted else
               f"{lang} (p={prob:.2f}) is not in {list(keep_langs)}")
        ctx.drop(doc["id"], "language", why, doc["text"], round(prob, 4))
        return None
    doc["lang"] = lang
    ctx.note("language_out", lang)
    return None if _too_short(doc, ctx, s.min_chars) else doc


def quality_doc(doc: dict, ctx: StepContext) -> dict | None:
    """Gopher quality + repetition, C4 and FineWeb document rules (prose) or code-file rules; then C4 lines."""
    cfg: QualityConfig = ctx.state
    failures = quality_verdict(doc["text"], cfg)
    for f in failures:
        ctx.note("rules_failed", f.rule)
    if failures:
        first = failures[0]
        detail = "; ".join(f"{f.rule} {f.value:.3g} vs {f.threshold:.3g}" for f in failures)
        ctx.drop(doc["id"], first.rule, detail, doc["text"], round(first.value, 4))
        return None
    text, removed = c4_filter_lines(doc["text"], cfg)
    ctx.removed(doc["id"], "c4_line", removed, "line")
    doc["text"] = text
    return None if _too_short(doc, ctx, ctx.settings) else doc


def promo_doc(doc: dict, ctx: StepContext) -> dict | None:
    """Promotional, spam and templated (auto-generated) text."""
    score = promo_score(doc["text"]).total
    ctx.note("promo", "promotional" if score >= ctx.settings else "not promotional")
    ctx.note("promo_score_decile", f"{min(int(score * 10), 9) / 10:.1f}")
    if score >= ctx.settings:
        ctx.drop(doc["id"], "promotional", f"promo score {score:.2f} >= {ctx.settings}", doc["text"],
                 round(score, 4))
        return None
    return doc


def apply_dedup(doc: dict, ctx: StepContext) -> dict | None:
    """Apply the corpus-wide dedup decisions for this unit: drop duplicates, cut duplicate paragraphs."""
    if "decisions" not in ctx.memo:
        path = Path(ctx.state)
        ctx.memo["decisions"] = {r.pop("id"): r for r in read_jsonl(path)} if path.exists() else {}
    decision = ctx.memo["decisions"].get(doc["id"])
    if decision is None:
        return doc
    if decision["action"] == "drop":
        ctx.drop(doc["id"], decision["rule"], decision["detail"], doc["text"], decision.get("score"))
        return None
    doc["text"] = decision["text"]
    ctx.removed(doc["id"], "paragraph_duplicate", decision["removed"], "paragraph", decision["detail"])
    return doc


def split_validation(doc: dict, ctx: StepContext) -> dict | None:
    if doc["id"] in ctx.memo.setdefault("val", set(ctx.state)):
        ctx.divert("val", doc)
        return None
    return doc
