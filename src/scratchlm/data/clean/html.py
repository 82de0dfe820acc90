"""HTML -> plain text, with resiliparse, and an account of what the page held that the text does not.

Three ways to read a page (a source's `html_extract`):
- auto (the default): the body without the page chrome. html_chrome.py finds the chrome by markup (navigation,
  site header and footer, sidebars, cookie banners, ads, share and comment boxes, tables of contents, hidden
  elements, page-level link lists); everything else is extracted: headings as Markdown headings, paragraphs, lists,
  tables as rows of tab-separated cells, definition lists, examples fenced. On the Debian Reference and the Debian
  Handbook (12 languages) it keeps all of the body and none of the navigation (docs/benchmarks.md,
  bench/html_body_recall.py). A source's `skip_rules` keeps a kind of chrome: "html_toc" keeps contents lists.
- main: resiliparse's main-content heuristic, which also drops what is mostly links and what its class names
  suggest is a side box. On a crawl of article pages with anonymous markup it removes more junk; on a manual it
  drops a third or more of the body: first paragraphs, tables, examples, tip boxes, every section heading.
- full: every visible element of the page.

Whatever the mode, `Extraction` says what was lost: the characters of the page's text (the whole page extracted
the same way) and, for every element dropped, why (its chrome rule, or "main_content") and what blocks it held.
The read step counts it in the stats and, for a page that lost much, in the ledger (data/html_losses.py). The
account costs time (a pass over the tree in Python, about 1 ms a page against 0.13 for resiliparse alone).

Preformatted blocks (<pre>: examples, configuration, command output) come out fenced with ``` lines. The
extractor puts every block element on a line of its own, so without the fence a config line such as
"lxc.net.0.type = veth" after "...via /etc/lxc/default.conf:" reads as the next line of that English sentence;
the language step then judges it as English prose and cuts it from a translated page. Fenced, it is code
(data/clean/structure.py), which no line rule or language step touches, and the fence is the Markdown
convention a model meets in READMEs anyway. Headings get their Markdown marks (auto and full) for the same
reason: a heading is a structural line, which no line rule cuts for lacking a full stop. Main leaves them plain
lines, as before: on crawled pages its leftovers are headings like "Related stories" that the line rules remove.
"""
from __future__ import annotations

import re
from collections import Counter
from collections.abc import Collection
from dataclasses import dataclass, field

from resiliparse.extract.html2text import extract_plain_text
from resiliparse.parse.encoding import bytes_to_str, detect_encoding
from resiliparse.parse.html import HTMLTree

from ...config import HTML_EXTRACT
from .html_blocks import BLOCK_KINDS, page_blocks, reached
from .html_chrome import HEADINGS, find_chrome
from .html_dom import select

_BLANK_RUNS = re.compile(r"\n{3,}")
_PRE = re.compile(r"(<pre\b[^>]*>)(.*?)(</pre\s*>)", re.S | re.I)
_TAG = re.compile(r"<[^>]*>")
FENCE = "```"
MAIN_CONTENT = "main_content"  # the rule of what resiliparse's main-content mode left out
_BLOCK_TAGS = ", ".join(tag for tag, kind in BLOCK_KINDS.items() if kind != "p") + ", p"
_WHAT_CHARS = 60


@dataclass
class Dropped:
    """One element (or, in main mode, one run of blocks) of the page that is not in the text."""
    rule: str  # a chrome rule of html_chrome.py, or MAIN_CONTENT
    what: str  # `<ul class="docnav">`, or the blocks of a run: "2 p, 5 td"
    chars: int  # its text, whitespace collapsed
    blocks: dict[str, int]  # the block elements it held, by kind: p, li, td, pre, heading, dl
    text: str  # its text, whitespace collapsed


@dataclass
class Extraction:
    text: str
    page_chars: int  # the whole page's text, extracted the same way
    page_bytes: int
    dropped: list[Dropped] = field(default_factory=list)


def _fence(match: re.Match) -> str:
    opening, body, closing = match.groups()
    if not _TAG.sub("", body).strip():
        return match.group(0)
    return f"{opening}\n{FENCE}\n{body.strip(chr(10))}\n{FENCE}\n{closing}"


def _plain_text(tree: HTMLTree, main_content: bool) -> str:
    text = extract_plain_text(
        tree,
        main_content=main_content,
        # Image alt texts, form labels, <noscript> fallbacks and user-comment sections are not
        # article prose; keeping them adds exactly the kind of fragments the later filters remove.
        alt_texts=False,
        form_fields=False,
        noscript=False,
        comments=False,
        links=False,
        list_bullets=True,
    )
    return _BLANK_RUNS.sub("\n\n", text).strip()


def _mark_headings(tree: HTMLTree) -> None:
    for heading in select(tree.body, ", ".join(HEADINGS)):
        if heading.text.strip():
            heading.prepend(tree.create_text_node("#" * (HEADINGS.index(heading.tag) + 1) + " "))


def _collapsed(text: str) -> str:
    return " ".join(text.split())


def _describe(element) -> str:
    names = " ".join(f'{a}="{v}"' for a in ("id", "class", "role") if (v := element.getattr(a)))
    what = f"<{element.tag}{' ' + names if names else ''}>"
    return what if len(what) <= _WHAT_CHARS else what[:_WHAT_CHARS - 4] + '...>'


def _kinds(element) -> dict[str, int]:
    return dict(Counter(BLOCK_KINDS[e.tag] for e in select(element, _BLOCK_TAGS)))


def _drop_chrome(tree: HTMLTree, mode: str, keep: Collection[str]) -> list[Dropped]:
    """Remove the page's chrome (auto) or only its hidden elements (full) from the tree, but for the rules in
    `keep`; what each one held."""
    dropped = []
    for chrome in find_chrome(tree, hidden_only=mode == "full", keep=keep):
        text = _collapsed(chrome.element.text)
        if text:
            dropped.append(Dropped(chrome.rule, _describe(chrome.element), len(text), _kinds(chrome.element), text))
        chrome.element.decompose()
    return dropped


def _main_content_losses(tree: HTMLTree, text: str) -> list[Dropped]:
    """The runs of blocks resiliparse's main-content mode left out, found by aligning the page's blocks with
    its output (html_blocks.py)."""
    blocks = page_blocks(tree.body)
    runs: list[list] = []
    previous_lost = False
    for block, kept in zip(blocks, reached(blocks, text)):
        if not kept:
            if not previous_lost:
                runs.append([])
            runs[-1].append(block)
        previous_lost = not kept
    out = []
    for run in runs:
        body = _collapsed(" ".join(b.text for b in run))
        kinds = dict(Counter(b.kind for b in run))
        out.append(Dropped(MAIN_CONTENT, ", ".join(f"{n} {k}" for k, n in sorted(kinds.items())), len(body), kinds,
                           body))
    return out


def extract_html(html: str | bytes, mode: str = "auto", keep: Collection[str] = ()) -> Extraction:
    """The text of one HTML page read the `mode` way (see the module's docstring), paragraphs separated by blank
    lines, with what it lost. `keep` names chrome rules (html_chrome.CHROME_RULES) whose elements stay: a source's
    `skip_rules` switched them off; keeping MAIN_CONTENT reads a "main" page whole.

    Bytes are decoded with the encoding resiliparse detects (meta charset / byte statistics), so raw
    WARC payloads can be passed as they are. An empty or content-free page gives "".
    """
    if mode not in HTML_EXTRACT:
        raise ValueError(f"html_extract must be one of {', '.join(HTML_EXTRACT)}, got {mode!r}")
    if mode == "main" and MAIN_CONTENT in keep:
        mode = "full"
    if isinstance(html, bytes):
        html = bytes_to_str(html, detect_encoding(html))
    if not html.strip():
        return Extraction("", 0, 0)
    tree = HTMLTree.parse(_PRE.sub(_fence, html))
    if tree.body is None:
        return Extraction("", 0, 0)
    if mode != "main":
        _mark_headings(tree)
    page = _plain_text(tree, main_content=False)
    if mode == "main":
        text = _plain_text(tree, main_content=True)
        dropped = _main_content_losses(tree, text) if len(text) < len(page) else []
    else:
        dropped = _drop_chrome(tree, mode, keep)
        text = _plain_text(tree, main_content=False) if dropped else page
    return Extraction(text, len(page), len(page.encode("utf-8", "surrogatepass")), dropped)


def extract_main_text(html: str | bytes) -> str:
    """The page's main content by resiliparse's heuristic (mode "main"): for crawled article pages."""
    return extract_html(html, "main").text
