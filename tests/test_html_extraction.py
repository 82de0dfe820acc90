"""The HTML reader keeps the body of a documentation page, drops its chrome, and counts what it dropped: in the
extraction, the read step's stats, the ledger for a page that lost much, and the report."""
import pytest

from scratchlm.config import config_from_dict
from scratchlm.data.clean.html import extract_html
from scratchlm.data.clean.html_blocks import page_blocks, reached
from scratchlm.data.clean.structure import CODE, HEADING, TABLE, parse
from scratchlm.data.jsonl import read_jsonl
from scratchlm.data.prepare import prepare_data
from scratchlm.errors import UserError
from scratchlm.stages import size_estimate

# A chapter as DocBook XSL writes one (the Debian Reference): navigation bars above and below, a table of contents,
# the XHTML `<a id="..."/>` that an HTML parser opens around the paragraph after it, a table of packages whose
# first column is links, a cross-reference list that is all links, a tip box DocBook calls "sidebar", an example.
FIRST = "The root shell prompt is reached by typing su -l at the prompt of the console, then the root password."
TIP = "Use sudo for the occasional command instead of keeping a root shell open for the whole session."
CELL = "A program to allow limited root privileges to users"
EXAMPLE = "$ sudo apt-get update\n$ sudo apt-get install mc"
TERM, DEFINITION = "umask", "The mask of the permission bits a new file does not get."
LAST = ("Working as root all the time is dangerous: a typing mistake in a command can remove system files or make "
        "the machine unbootable, and a program started from a root shell can change any file it likes. The account "
        "is meant for administration only. Create an ordinary account for daily work, add it to the sudo group, and "
        "run the few commands that need the privileges through sudo, which asks for your own password and writes "
        "every command it runs to the system log, so that what was done as root can be read afterwards.")
XREFS = ["Section 1.2, Unix-like filesystem", "Section 1.3, Midnight Commander", "Section 1.4, The basic Unix"]
NAV = ["Chapter 1. GNU/Linux tutorials Prev", "Preface Chapter 2. Debian package management"]
COOKIE = "We use cookies to count visitors of this manual."


def chapter() -> str:
    toc = "".join(f'<dt><span class="section"><a href="#s{i}">1.{i}. Section {i}</a></span></dt>' for i in range(4))
    xrefs = "".join(f'<li class="listitem"><p><a class="xref" href="ch01.html#x{i}">{x}</a></p></li>'
                    for i, x in enumerate(XREFS))
    return f"""<?xml version="1.0" encoding="UTF-8"?><html xmlns="http://www.w3.org/1999/xhtml"><head>
<title>Chapter 1</title><style>p {{ margin: 0 }}</style></head><body>
<div id="cookie-consent"><p>{COOKIE}</p></div>
<div class="navheader"><table><tr><th colspan="3">Chapter 1. GNU/Linux tutorials</th></tr>
<tr><td><a href="pr01.html">Prev</a></td></tr></table><hr/></div>
<div class="chapter"><div class="titlepage"><h1 class="title"><a id="_tutorials"/>Chapter 1. GNU/Linux tutorials</h1>
</div><div class="toc"><p><strong>Table of Contents</strong></p><dl class="toc">{toc}</dl></div>
<div class="section"><div class="titlepage"><h2 class="title"><a id="_root"/>1.1. The root shell prompt</h2></div>
<a id="_the_root_shell_prompt"/><p>{FIRST}</p>
<div class="sidebar"><p class="title"><strong>Tip</strong></p><p>{TIP}</p></div>
<div class="table"><div class="table-contents"><table class="table"><tr><th>package</th><th>description</th></tr>
<tr><td><a class="ulink" href="https://packages.debian.org/sudo">sudo</a></td><td>{CELL}</td></tr></table></div></div>
<pre class="screen">{EXAMPLE}</pre>
<dl><dt>{TERM}</dt><dd>{DEFINITION}</dd></dl>
<div class="itemizedlist"><ul class="itemizedlist">{xrefs}</ul></div><p>{LAST}</p></div></div>
<div class="navfooter"><table><tr><td><a href="pr01.html">Preface</a></td>
<td><a href="ch02.html">Chapter 2. Debian package management</a></td></tr></table></div></body></html>"""


def test_auto_keeps_the_body_of_a_manual_page_and_drops_its_chrome():
    ex = extract_html(chapter())
    text = ex.text
    for body in (FIRST, TIP, CELL, TERM, DEFINITION, *XREFS, LAST):
        assert body in text, body
    assert "# Chapter 1. GNU/Linux tutorials" in text and "## 1.1. The root shell prompt" in text
    assert f"```\n{EXAMPLE}\n```" in text
    for chrome in (COOKIE, "Table of Contents", "1.2. Section 2", "Prev", "Chapter 2. Debian package management"):
        assert chrome not in text, chrome
    kinds = {line.text.strip(): line.kind for line in parse(text)}
    assert kinds["## 1.1. The root shell prompt"] == HEADING and kinds["$ sudo apt-get update"] == CODE
    assert kinds[f"sudo\t\t{CELL}"] == TABLE  # a table row: cells apart, no line rule cuts it
    assert [(d.rule, d.what) for d in ex.dropped] == [
        ("cookie", '<div id="cookie-consent">'), ("nav", '<div class="navheader">'), ("toc", '<div class="toc">'),
        ("nav", '<div class="navfooter">')]
    toc = ex.dropped[2]
    assert toc.blocks == {"p": 1, "dl": 4} and toc.chars == len(toc.text) and "1.3. Section 3" in toc.text
    # what the page lost is what was dropped, give or take the blank lines around each dropped element
    assert 0 <= ex.page_chars - len(text) - sum(d.chars for d in ex.dropped) <= 4 * len(ex.dropped)


def test_full_keeps_every_visible_element_and_main_accounts_for_what_it_drops():
    full = extract_html(chapter(), "full")
    assert full.dropped == [] and full.page_chars == len(full.text)
    for piece in (COOKIE, "Table of Contents", FIRST, CELL):
        assert piece in full.text
    main = extract_html(chapter(), "main")
    lost = " ".join(d.text for d in main.dropped)
    for piece in (FIRST, TIP, CELL, TERM, DEFINITION, *XREFS, "1.1. The root shell prompt"):
        assert piece in main.text or piece in lost, piece  # nothing it leaves out goes unsaid
    assert all(d.rule == "main_content" and d.text not in main.text for d in main.dropped)


def test_hidden_elements_are_dropped_and_counted_in_auto_and_full():
    page = ("<html><body><h1>Title</h1><p>Visible paragraph of the page.</p><div hidden><p>Secret hidden text.</p>"
            "</div><p style='display: none'>Styled away.</p></body></html>")
    for mode in ("auto", "full"):
        ex = extract_html(page, mode)
        assert "Secret" not in ex.text and "Styled" not in ex.text and {d.rule for d in ex.dropped} == {"hidden"}


def web_page(layout: str) -> str:
    article = "<p>The harbour council voted to restore the old lighthouse, closed since the storm of 1987.</p>"
    menu = "".join(f"<li><a href='/{w}'>{w}</a></li>" for w in ("Home", "News", "Sport", "Contact"))
    if layout == "semantic":
        return (f"<html><body><header><h2>Cape Gazette</h2><nav><ul>{menu}</ul></nav></header><main><article>"
                f"<header><h1>Lighthouse to reopen</h1></header>{article}</article></main>"
                "<aside><p>Most read: ten beaches</p></aside><footer><p>Cape Gazette Media</p></footer></body></html>")
    # div soup: the menu is known only as a block of links outside the content; a "sidebar" at page level
    return (f"<html><body><div class='x1'><div class='x2'><ul>{menu}</ul></div></div><div class='sidebar'>"
            f"<p>Most read: ten beaches</p></div><div class='x3'><h1>Lighthouse to reopen</h1>{article}</div>"
            "</body></html>")


@pytest.mark.parametrize("layout", ["semantic", "divs"])
def test_web_page_chrome_goes_by_tag_role_name_and_place(layout):
    text = extract_html(web_page(layout)).text
    assert "Lighthouse to reopen" in text and "storm of 1987" in text
    for chrome in ("Contact", "Sport", "Most read", "Cape Gazette Media"):
        assert chrome not in text, chrome


def test_blocks_are_aligned_in_order_so_a_copy_elsewhere_does_not_count():
    from resiliparse.parse.html import HTMLTree

    tree = HTMLTree.parse("<body><ul><li>1.1. Basics</li></ul><h2>1.1. Basics</h2><p>A paragraph long enough to "
                          "anchor.</p><table><tr><td>I:853</td></tr></table></body>")
    blocks = page_blocks(tree.body)
    assert [b.kind for b in blocks] == ["li", "heading", "p", "td"]
    # the output of an extractor that kept the contents list but not the heading
    output = "• 1.1. Basics\n\nA paragraph long enough to anchor.\n\nI:853"
    assert reached(blocks, output) == [True, False, True, True]


def _prepare(tmp_path, pages: dict[str, str], **source):
    site = tmp_path / "site"
    site.mkdir()
    for name, html in pages.items():
        (site / name).write_text(html, encoding="utf-8")
    cfg = config_from_dict({"data": {
        "sources": [{"name": "guide", "domain": "docs", "path": "site", **source}], "min_chars": 20, "workers": 1,
        "skip": ["boilerplate", "repeated_lines", "language", "quality", "promo", "fuzzy_dedup", "paragraph_dedup"]}})
    cfg.path = tmp_path / "c.toml"
    out = tmp_path / "out"
    out.mkdir()
    return out, prepare_data(cfg, out, size_estimate(cfg))


def test_losses_are_counted_in_the_stats_the_ledger_and_the_report(tmp_path):
    from scratchlm.report.build import _table
    from scratchlm.report.data_section import data_section

    toc_page = chapter().replace(LAST, "")  # a contents page: its table of contents is most of its text
    toc_page = toc_page.replace("</dl></div>", "".join(f"<dt><a href='#t{i}'>1.{i}. Another section of the "
                                                       f"chapter</a></dt>" for i in range(40)) + "</dl></div>")
    out, stats = _prepare(tmp_path, {"ch01.html": chapter(), "index.html": toc_page})
    src = stats["sources"]["guide"]
    chapter_ex, index_ex = extract_html(chapter()), extract_html(toc_page)
    html = src["html"]
    assert html["pages"] == 2 and html["page_chars"] == chapter_ex.page_chars + index_ex.page_chars
    assert html["extracted_chars"] == len(chapter_ex.text) + len(index_ex.text)
    assert set(html["dropped_by_rule"]) == {"html_cookie", "html_nav", "html_toc"}
    assert html["pages_over"] == 1 and html["blocks_dropped"]["dl"] == 4 + 44
    assert src["steps"]["read"]["chars_in"] == html["page_chars"]  # "chars in" starts from the pages' text
    assert src["steps"]["read"]["removed"]["html_toc"] == {"pieces": 2, "chars": html["dropped_by_rule"]["html_toc"]}
    ledger = [r for f in out.glob("rejected-*.jsonl.zst") for r in read_jsonl(f)]
    assert {(r["id"], r["rule"], r["level"]) for r in ledger} == {
        ("guide/index.html", rule, "block") for rule in ("html_cookie", "html_nav", "html_toc")}
    toc = next(r for r in ledger if r["rule"] == "html_toc")
    assert toc["detail"].startswith('<div class="toc">: ') and "data.html_loss_ledger 0.2" in toc["detail"]
    md = "\n".join(data_section(stats, None, None, _table))
    line = next(x for x in md.splitlines() if x.startswith("Read 2 HTML page(s)"))
    assert f"{html['page_chars']:,} characters of page text, {html['extracted_chars']:,} extracted" in line
    assert "1 page(s) lost more than 20% of their text" in line and "--source guide --rule html_toc" in line


def test_main_mode_losses_reach_the_stats(tmp_path):
    _, stats = _prepare(tmp_path, {"ch01.html": chapter()}, html_extract="main")
    html = stats["sources"]["guide"]["html"]
    main = extract_html(chapter(), "main")
    assert html["html_extract"] == "main" and html["extracted_chars"] == len(main.text)
    assert html["dropped_chars"] == sum(d.chars for d in main.dropped)


def test_html_extract_is_checked_with_the_other_source_keys(tmp_path):
    from scratchlm.config import validate

    cfg = config_from_dict({"data": {"sources": [{"name": "g", "domain": "docs", "path": "site",
                                                  "html_extract": "article"}]}})
    with pytest.raises(UserError, match="source `g`: html_extract must be one of auto, main, full, got `article`"):
        validate(cfg, "c.toml")
    cfg = config_from_dict({"data": {"sources": [{"name": "g", "domain": "docs", "path": "site"}],
                                     "html_loss_ledger": 1.5}})
    with pytest.raises(UserError, match="html_loss_ledger must be in"):
        validate(cfg, "c.toml")


def test_skip_rules_keep_one_kind_of_chrome(tmp_path):
    from scratchlm.data.config_checks import check_data_config

    _, stats = _prepare(tmp_path, {"ch01.html": chapter()}, skip_rules=["html_toc"])
    dropped = stats["sources"]["guide"]["html"]["dropped_by_rule"]
    assert "html_toc" not in dropped and {"html_nav", "html_cookie"} <= set(dropped)
    assert "1.2. Section 2" in extract_html(chapter(), keep={"toc"}).text
    cfg = config_from_dict({"data": {"sources": [{"name": "g", "domain": "docs", "path": "site",
                                                  "skip_rules": ["html_tco"]}]}})
    with pytest.raises(UserError, match="unknown rule `html_tco` in `skip_rules`; did you mean `html_toc`"):
        check_data_config(cfg, "c.toml")
