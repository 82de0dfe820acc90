"""The per-document steps of the prepare stage. Each takes one document and a StepContext and returns the
document (maybe edited) or None after recording why in the ledger (ctx.drop). They run in worker processes,
so they are module-level functions of picklable arguments.
"""
from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass

import numpy as np

from .clean.boilerplate import RepeatedLineFinder, remove_lines, strip_boilerplate_lines
from .clean.langid import UNDETERMINED, close_relative, detect_language, unit_languages
from .clean.structure import parse, short_of, skeleton_reason, without
from .clean.promo import promo_score
from .clean.quality import c4_filter_lines, quality_verdict
from .quality_config import QualitySettings
from .jsonl import read_jsonl
from .readers import READ_NOTES, Rejected
from .step_runner import StepContext
from .val_split import HELD_OUT_PIECE, PIECE_SUFFIX, SPLIT_FROM, WHOLE, tail_cut

_PARAGRAPH_BREAK = re.compile(r"\n\s*\n")


@dataclass(frozen=True)
class ReadSettings:
    normalization: str
    min_chars: int
    max_chars: int


def _too_short(doc: dict, ctx: StepContext, min_chars: int) -> bool:
    if not short_of(doc["text"], min_chars):
        return False
    read = doc.get("chars_read", 0)
    if read >= min_chars:  # it was long enough until a step cut lines out of it
        why = skeleton_reason(doc["text"], read, min_chars)
        if why is None:  # the cuts took little of a page that was short already
            return False
        ctx.drop(doc["id"], "skeleton", why, doc["text"])
    else:
        ctx.drop(doc["id"], "too_short", f"{len(doc['text'])} < {min_chars} chars", doc["text"])
    return True


def read_doc(item: dict | Rejected, ctx: StepContext) -> dict | None:
    """Reader output -> a normalized document within the length bounds."""
    s: ReadSettings = ctx.settings
    if isinstance(item, Rejected):
        ctx.drop(item.id, item.rule, item.detail)
        return None
    _note_reading(item.pop(READ_NOTES, {}), ctx)
    text = unicodedata.normalize(s.normalization, item["text"]).strip()
    doc = {**item, "text": text, "source": ctx.unit.source, "domain": ctx.unit.domain, "chars_read": len(text)}
    if _too_short(doc, ctx, s.min_chars):
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


def boilerplate_doc(doc: dict, ctx: StepContext) -> dict | None:
    """Cookie banners, nav bars, copyright footers, share/newsletter prompts: line rules, no corpus statistics."""
    if ctx.skips("boilerplate_line"):
        return doc
    text, removed = strip_boilerplate_lines(doc["text"])
    ctx.removed(doc["id"], "boilerplate_line", removed, "line", original=doc["text"])
    doc["text"] = text
    return None if _too_short(doc, ctx, ctx.settings) else doc


EDGE_LINES = 3  # the first and last non-blank lines of a page, where its template (chrome) sits


def count_lines(doc: dict, ctx: StepContext) -> dict:
    """Observe only: count each line's documents, and its documents where it is among the first or last lines,
    for the corpus-wide repeated-line step."""
    ctx.memo.setdefault("finder", RepeatedLineFinder()).feed(doc["text"])
    lines = [line for line in doc["text"].split("\n") if line.strip()]
    edge = lines if len(lines) <= 2 * EDGE_LINES else lines[:EDGE_LINES] + lines[-EDGE_LINES:]
    ctx.memo.setdefault("edges", RepeatedLineFinder()).feed("\n".join(edge))
    return doc


def save_line_counts(ctx: StepContext) -> None:
    finder = ctx.memo.get("finder") or RepeatedLineFinder()
    edges = ctx.memo.get("edges") or RepeatedLineFinder()
    keys, counts = finder.table()
    edge_keys, edge_counts = edges.table()
    ctx.sides.update(keys=keys, counts=counts, n_docs=np.array([finder.n_docs]), edge_keys=edge_keys,
                     edge_counts=edge_counts)


def repeated_lines_doc(doc: dict, ctx: StepContext) -> dict | None:
    """Remove lines found in many documents of the same source (templates: site footers, license headers)."""
    if "frequent" not in ctx.memo:  # the state is the path of the source's frequent-line hashes in the cache
        ctx.memo["frequent"] = set(np.load(ctx.cache / ctx.state).tolist())
    if ctx.skips("repeated_line"):
        return doc
    original = doc["text"]
    doc["text"], removed = remove_lines(original, ctx.memo["frequent"])
    ctx.removed(doc["id"], "repeated_line", removed, "line", "page chrome found in many documents of this source",
                original)
    return None if _too_short(doc, ctx, ctx.settings) else doc


# A document keeps its wanted-language prose, minus the foreign units, unless that prose is under this share: a
# half-translated man page is a page in the wanted language with holes, not a foreign page.
MIN_WANTED_SHARE = 0.2


@dataclass(frozen=True)
class LanguageSettings:
    min_score: float
    min_chars: int
    unit_min_chars: int = 100  # shorter units get near-random labels and stay with their document


def language_doc(doc: dict, ctx: StepContext) -> dict | None:
    """Keep documents in the languages asked for, judged by their prose units (code, tables and options carry
    no language); cut confidently foreign units out of a document that is mostly in a wanted language."""
    s: LanguageSettings = ctx.settings
    keep_langs: tuple[str, ...] = ctx.state
    lang, prob = detect_language(doc["text"])
    ctx.note("language_in", lang if prob >= s.min_score else UNDETERMINED)
    lines = parse(doc["text"])
    judged = unit_languages(doc["text"], s.unit_min_chars, lines)
    chars: dict[str, int] = {}
    for u in judged:
        chars[u.lang] = chars.get(u.lang, 0) + u.chars
    if keep_langs and not ctx.skips("language"):
        wanted = sum(n for k, n in chars.items() if k in keep_langs)
        foreign = [u for u in judged if u.lang not in keep_langs and u.prob >= s.min_score
                   and not close_relative(u, keep_langs)]
        foreign_chars = sum(u.chars for u in foreign)
        foreign = [u for u in foreign if not u.pooled]
        # A document without judged prose in a wanted language (short, all code, or only unsure units) is judged
        # whole: a foreign label drops it, a wanted one keeps it whatever its probability (short pages score low
        # on any language).
        mostly_foreign = foreign_chars > (1 - MIN_WANTED_SHARE) * (wanted + foreign_chars)
        judged_whole = not wanted and not foreign_chars
        foreign_whole = judged_whole and lang not in keep_langs and lang != UNDETERMINED
        if foreign_whole or (not judged_whole and mostly_foreign):
            shares = ", ".join(f"{k} {n / max(sum(chars.values()), 1):.0%}"
                               for k, n in sorted(chars.items(), key=lambda kv: -kv[1])[:3])
            why = (f"{lang} (p={prob:.2f}) is not in {list(keep_langs)}" if judged_whole
                   else f"prose units by language: {shares}; keeps {list(keep_langs)}")
            ctx.drop(doc["id"], "language", why, doc["text"], round(prob, 4))
            return None
        if foreign and not ctx.skips("language_paragraph"):
            cut = {i for u in foreign for i in u.lines}
            pieces = ["\n".join(lines[i].text for i in u.lines) for u in foreign]
            original = doc["text"]
            doc["text"] = without(lines, cut)
            ctx.removed(doc["id"], "language_paragraph", pieces, "paragraph",
                        f"{', '.join(sorted({u.lang for u in foreign}))} in a source that keeps {list(keep_langs)}",
                        original)
    doc["lang"] = _document_language(lang, chars, keep_langs)
    ctx.note("language_out", doc["lang"])
    return None if _too_short(doc, ctx, s.min_chars) else doc


def _document_language(detected: str, chars: dict[str, int], keep_langs: tuple[str, ...]) -> str:
    """The language the quality rules read the document in: the wanted language with most prose."""
    candidates = {k: n for k, n in chars.items() if not keep_langs or k in keep_langs}
    if candidates:
        return max(candidates, key=lambda k: candidates[k])
    return detected if not keep_langs or detected in keep_langs else keep_langs[0]


def quality_doc(doc: dict, ctx: StepContext) -> dict | None:
    """Gopher quality + repetition, C4 and FineWeb document rules (prose) or code-file rules, read in the
    document's language; then C4's line rules."""
    settings: QualitySettings = ctx.state
    lang = doc.get("lang")
    if lang is None and settings.profile != "code":  # the language step was skipped: rules still need one
        lang = detect_language(doc["text"])[0]
    if lang not in ctx.memo:
        ctx.memo[lang] = settings.for_language(lang)
    cfg, off = ctx.memo[lang]
    for rule in off:
        ctx.note("language_rules_off", f"{lang or UNDETERMINED}: {rule}")
    failures = [f for f in quality_verdict(doc["text"], cfg) if not ctx.skips(f.rule)]
    for f in failures:
        ctx.note("rules_failed", f.rule)
    if failures:
        first = failures[0]
        detail = "; ".join(f"{f.rule} {f.value:.3g} vs {f.threshold:.3g}" for f in failures)
        ctx.drop(doc["id"], first.rule, detail, doc["text"], round(first.value, 4))
        return None
    if not ctx.skips("c4_line"):
        original = doc["text"]
        doc["text"], removed = c4_filter_lines(original, cfg)
        ctx.removed(doc["id"], "c4_line", removed, "line", original=original)
    return None if _too_short(doc, ctx, ctx.settings) else doc


def promo_doc(doc: dict, ctx: StepContext) -> dict | None:
    """Promotional, spam and templated (auto-generated) text."""
    if ctx.skips("promotional"):
        return doc
    score = promo_score(doc["text"], templates=ctx.state != "technical").total
    ctx.note("promo", "promotional" if score >= ctx.settings else "not promotional")
    ctx.note("promo_score_decile", f"{min(int(score * 10), 9) / 10:.1f}")
    if score >= ctx.settings:
        ctx.drop(doc["id"], "promotional", f"promo score {score:.2f} >= {ctx.settings}", doc["text"],
                 round(score, 4))
        return None
    return doc


def _decisions(ctx: StepContext) -> dict[str, dict]:
    if "decisions" not in ctx.memo:  # the state is the path of this unit's decisions in the cache
        path = ctx.cache / ctx.state
        ctx.memo["decisions"] = {r.pop("id"): r for r in read_jsonl(path)} if path.exists() else {}
    return ctx.memo["decisions"]


def apply_dedup(doc: dict, ctx: StepContext) -> dict | None:
    """Apply the corpus-wide decisions for this unit: drop duplicates (and skeletons), cut duplicate paragraphs."""
    decision = _decisions(ctx).get(doc["id"])
    if decision is None or ctx.skips(decision.get("rule", "paragraph_duplicate")):
        return doc
    if decision["action"] == "drop":
        ctx.drop(doc["id"], decision["rule"], decision["detail"], doc["text"], decision.get("score"))
        return None
    original = doc["text"]
    doc["text"] = decision["text"]
    ctx.removed(doc["id"], "paragraph_duplicate", decision["removed"], "paragraph", decision["detail"], original)
    return doc


def split_validation(doc: dict, ctx: StepContext) -> dict | None:
    """Divert the drawn documents to validation; of a document too long to hold out whole, only its tail."""
    budget = ctx.memo.setdefault("val", dict(ctx.state)).get(doc["id"])
    if budget is None:
        return doc
    if budget == WHOLE:
        ctx.divert("val", doc)
        return None
    cut = tail_cut(doc["text"], budget, ctx.settings)
    if cut is None:  # no paragraph or line boundary leaves a tail that fits: the document stays in training
        ctx.note("val_piece", "no_boundary")
        return doc
    piece_id = doc["id"] + PIECE_SUFFIX
    ctx.divert_piece("val", {**doc, "id": piece_id, "text": doc["text"][cut:], SPLIT_FROM: doc["id"]})
    return {**doc, "text": doc["text"][:cut].rstrip(), HELD_OUT_PIECE: piece_id}
