"""The rule steps: Gopher, C4 and FineWeb quality rules (or the code-file rules), then the promotional-text score
(not on code); each source by its filter set (profile_step.py)."""
from __future__ import annotations

from dataclasses import dataclass

from .clean.langid import UNDETERMINED, detect_language
from .clean.promo import MARKETING_LEVEL, promo_score
from .clean.quality import c4_filter_lines, quality_verdict
from .profile_step import profile
from .quality_config import QualitySettings
from .short_docs import too_short
from .step import Corpus, DocumentStep
from .step_context import StepContext
from .units import Unit


@dataclass(frozen=True)
class QualityStepSettings:
    min_chars: int
    rules: QualitySettings  # the source's profile, with the user's overrides and language rules

    @classmethod
    def of(cls, corpus: Corpus, unit: Unit) -> QualityStepSettings:
        rules = QualitySettings.of_source(corpus.source(unit), corpus.data, profile(corpus, unit.source))
        return cls(corpus.data.min_chars, rules)


def quality_doc(doc: dict, ctx: StepContext) -> dict | None:
    """Gopher quality + repetition, C4 and FineWeb document rules (prose) or code-file rules, read in the
    document's language; then C4's line rules."""
    s: QualityStepSettings = ctx.settings
    lang = doc.get("lang")
    if lang is None and s.rules.profile != "code":  # the language step was skipped: rules still need one
        lang = detect_language(doc["text"])[0]
    if lang not in ctx.memo:
        ctx.memo[lang] = s.rules.for_language(lang)
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
    return None if too_short(doc, ctx, s.min_chars) else doc


@dataclass(frozen=True)
class PromoSettings:
    threshold: float
    templates: bool  # also score templated (auto-generated) text: not on technical text, whose pages are alike

    @classmethod
    def of(cls, corpus: Corpus, unit: Unit) -> PromoSettings:
        return cls(corpus.data.promo_threshold, profile(corpus, unit.source) != "technical")


def promo_doc(doc: dict, ctx: StepContext) -> dict | None:
    """Promotional, spam and templated (auto-generated) text."""
    s: PromoSettings = ctx.settings
    if ctx.skips("promotional"):
        return doc
    score = promo_score(doc["text"], templates=s.templates).total
    ctx.note("promo", "promotional" if score >= s.threshold else "not promotional")
    ctx.note("promo_score_decile", f"{min(int(score * 10), 9) / 10:.1f}")
    # counted kept or dropped: a source full of product pages under the drop threshold still skews the corpus
    ctx.note("promo_marketing", "marketing" if score >= MARKETING_LEVEL else "not marketing")
    if score >= s.threshold:
        ctx.drop(doc["id"], "promotional", f"promo score {score:.2f} >= {s.threshold}", doc["text"],
                 round(score, 4))
        return None
    return doc


QUALITY = DocumentStep("quality", quality_doc, QualityStepSettings.of, skip="quality")
PROMO = DocumentStep("promo", promo_doc, PromoSettings.of, applies=Corpus.prose, skip="promo")
