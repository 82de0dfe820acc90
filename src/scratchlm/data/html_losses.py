"""What the HTML reader left out of each page, so that no loss before the cleaning rules goes uncounted.

Every page: its characters of page text and of extracted text in the read step's notes, and each element it
dropped under the rule `html_<why>` (html_nav, html_toc, html_footer, html_main_content, ...) in the step's
removed counts, with the kinds of blocks it held. A page that lost more than `data.html_loss_ledger` of its text
also gets each dropped element in the ledger (level "block"), where `scratchlm data rejected --source S` shows it.
The read step's "chars in" is the page text (readers.read_size), so the per-step table shows the loss too.
"""
from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the report words the summary without loading the HTML parser
    from .clean.html import Extraction
    from .step_context import StepContext

RULE_PREFIX = "html_"
NOTES = "html"  # pages, page_chars, extracted_chars, pages_over: counts per read step
BLOCK_NOTES = "html_blocks_dropped"  # block kind (p, li, td, pre, heading, dl) -> elements dropped


def lost_share(extraction: Extraction) -> float:
    lost = sum(d.chars for d in extraction.dropped)
    return lost / extraction.page_chars if extraction.page_chars else 0.0


def count_losses(doc_id: str, extraction: Extraction, ctx: StepContext, ledger_share: float) -> None:
    """Count what the page lost in the read step's stats; above `ledger_share` of its text, record it too."""
    ctx.note(NOTES, "pages")
    ctx.note(NOTES, "page_chars", extraction.page_chars)
    ctx.note(NOTES, "extracted_chars", len(extraction.text))
    share = lost_share(extraction)
    over = share > ledger_share
    if over:
        ctx.note(NOTES, "pages_over")
    for d in extraction.dropped:
        for kind, n in d.blocks.items():
            ctx.note(BLOCK_NOTES, kind, n)
        blocks = ", ".join(f"{n} {k}" for k, n in sorted(d.blocks.items())) or "no block elements"
        detail = (f"{d.what}: {d.chars:,} chars ({blocks}); the page lost {share:.0%} of its "
                  f"{extraction.page_chars:,} characters of text (data.html_loss_ledger {ledger_share:g})")
        ctx.removed(doc_id, RULE_PREFIX + d.rule, [d.text], "block", detail, record=over)


def html_summary(read: dict, mode: str, ledger_share: float) -> dict | None:
    """The read step's HTML figures for stats.json (None without HTML pages): characters of page text and
    extracted, what was dropped by rule and by block kind, the pages over the ledger threshold."""
    notes = read.get("notes", {})
    counts = notes.get(NOTES, {})
    if not counts.get("pages"):
        return None
    by_rule = {rule: r["chars"] for rule, r in read.get("removed", {}).items() if rule.startswith(RULE_PREFIX)}
    return {"pages": counts["pages"], "page_chars": counts.get("page_chars", 0),
            "extracted_chars": counts.get("extracted_chars", 0), "dropped_chars": sum(by_rule.values()),
            "dropped_by_rule": dict(Counter(by_rule).most_common()),
            "blocks_dropped": dict(Counter(notes.get(BLOCK_NOTES, {})).most_common()),
            "pages_over": counts.get("pages_over", 0), "ledger_share": ledger_share, "html_extract": mode}


def html_line(name: str, html: dict) -> str:
    """The report's and the log's line: read N characters of page text, M extracted, and where the rest went."""
    page, kept = html["page_chars"], html["extracted_chars"]
    line = (f"source `{name}`: read {html['pages']:,} HTML page(s) (html_extract = \"{html['html_extract']}\"): "
            f"{page:,} characters of page text, {kept:,} extracted ({kept / page:.1%})" if page else
            f"source `{name}`: read {html['pages']:,} HTML page(s) without text")
    if html["dropped_chars"]:
        rules = ", ".join(f"{rule} {chars:,}" for rule, chars in html["dropped_by_rule"].items())
        blocks = ", ".join(f"{n:,} {kind}" for kind, n in html["blocks_dropped"].items())
        line += f"; dropped {html['dropped_chars']:,} characters: {rules}" + (f" (holding {blocks})" if blocks else "")
    if html["pages_over"]:
        top = next(iter(html["dropped_by_rule"]))
        line += (f"; {html['pages_over']:,} page(s) lost more than {html['ledger_share']:.0%} of their text, their "
                 f"drops are in the ledger: `scratchlm data rejected -c CONFIG --source {name} --rule {top}`")
    return line
