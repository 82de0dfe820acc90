"""The language step (not on code): keep documents in the languages asked for, judged by their prose units (code,
tables and options carry no language), and cut confidently foreign units out of a document that is mostly in a
wanted language."""
from __future__ import annotations

from dataclasses import dataclass

from ..config import DataConfig, SourceConfig
from .clean.langid import UNDETERMINED, close_relative, detect_language, unit_languages
from .clean.outline import emptied_heads
from .clean.structure import parse, without
from .short_docs import too_short
from .step import Corpus, DocumentStep
from .step_context import StepContext
from .units import Unit

# A document keeps its wanted-language prose, minus the foreign units, unless that prose is under this share: a
# half-translated man page is a page in the wanted language with holes, not a foreign page.
MIN_WANTED_SHARE = 0.2


def wanted_languages(data: DataConfig, source: SourceConfig) -> tuple[str, ...]:
    """The source's own list, else the data-wide one; empty keeps every language."""
    return tuple(source.languages if source.languages is not None else data.languages)


@dataclass(frozen=True)
class LanguageSettings:
    min_score: float
    min_chars: int
    keep: tuple[str, ...]  # the unit's source's wanted languages
    unit_min_chars: int = 100  # shorter units get near-random labels and stay with their document

    @classmethod
    def of(cls, corpus: Corpus, unit: Unit) -> LanguageSettings:
        d = corpus.data
        return cls(d.language_min_score, d.min_chars, wanted_languages(d, corpus.source(unit)))


def language_doc(doc: dict, ctx: StepContext) -> dict | None:
    s: LanguageSettings = ctx.settings
    keep_langs = s.keep
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
            _cut_foreign_units(doc, ctx, lines, foreign, keep_langs)
    doc["lang"] = _document_language(lang, chars, keep_langs)
    ctx.note("language_out", doc["lang"])
    return None if too_short(doc, ctx, s.min_chars) else doc


def _cut_foreign_units(doc: dict, ctx: StepContext, lines: list, foreign: list, keep_langs: tuple[str, ...]) -> None:
    """Cut the foreign units, and with them each head (an option line, a term, a heading) they leave with nothing
    under it: an option and its description, a heading and its section, go together (clean/outline.py). A head
    that went is recorded with everything it governed, as one piece; every other unit as a piece of its own."""
    cut = {i for u in foreign for i in u.lines}
    gone = emptied_heads(lines, cut)
    governed = {i for head in gone for i in head.span}
    alone = [[i for i in u.lines if i not in governed] for u in foreign]
    original = doc["text"]
    doc["text"] = without(lines, cut | governed)
    why = f"{', '.join(sorted({u.lang for u in foreign}))} in a source that keeps {list(keep_langs)}"
    ctx.removed(doc["id"], "language_paragraph", [_piece(lines, ix) for ix in alone if ix], "paragraph", why,
                original)
    ctx.removed(doc["id"], "language_paragraph", [_piece(lines, head.span) for head in gone], "paragraph",
                f"{why}, with the heading or option line it left with nothing under it", original)


def _piece(lines: list, indices) -> str:
    return "\n".join(lines[i].text for i in indices)


def _document_language(detected: str, chars: dict[str, int], keep_langs: tuple[str, ...]) -> str:
    """The language the quality rules read the document in: the wanted language with most prose."""
    candidates = {k: n for k, n in chars.items() if not keep_langs or k in keep_langs}
    if candidates:
        return max(candidates, key=lambda k: candidates[k])
    return detected if not keep_langs or detected in keep_langs else keep_langs[0]


LANGUAGE = DocumentStep("language", language_doc, LanguageSettings.of, applies=Corpus.prose, skip="language")
