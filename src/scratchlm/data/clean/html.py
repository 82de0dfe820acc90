"""HTML -> main-content plain text, with resiliparse.

resiliparse's extractor is a C++ DOM walker with a main-content heuristic (drops nav, header, footer,
sidebars, cookie/consent banners by tag, role and class/id names). bench/html_extract_bench.py measures
it against trafilatura on synthetic pages; see docs/benchmarks.md "## HTML extraction".

Preformatted blocks (<pre>: examples, configuration, command output) come out fenced with ``` lines. The
extractor puts every block element on a line of its own, so without the fence a config line such as
"lxc.net.0.type = veth" after "...via /etc/lxc/default.conf:" reads as the next line of that English sentence;
the language step then judges it as English prose and cuts it from a translated page. Fenced, it is code
(data/clean/structure.py), which no line rule or language step touches, and the fence is the Markdown
convention a model meets in READMEs anyway.
"""
import re

from resiliparse.extract.html2text import extract_plain_text
from resiliparse.parse.encoding import bytes_to_str, detect_encoding

_BLANK_RUNS = re.compile(r"\n{3,}")
_PRE = re.compile(r"(<pre\b[^>]*>)(.*?)(</pre\s*>)", re.S | re.I)
_TAG = re.compile(r"<[^>]*>")
FENCE = "```"


def _fence(match: re.Match) -> str:
    opening, body, closing = match.groups()
    if not _TAG.sub("", body).strip():
        return match.group(0)
    return f"{opening}\n{FENCE}\n{body.strip(chr(10))}\n{FENCE}\n{closing}"


def extract_main_text(html: str | bytes) -> str:
    """The main content of one HTML page as plain text, paragraphs separated by blank lines.

    Bytes are decoded with the encoding resiliparse detects (meta charset / byte statistics), so raw
    WARC payloads can be passed as they are. Returns "" for empty or content-free pages.
    """
    if isinstance(html, bytes):
        html = bytes_to_str(html, detect_encoding(html))
    if not html.strip():
        return ""
    text = extract_plain_text(
        _PRE.sub(_fence, html),
        main_content=True,
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
