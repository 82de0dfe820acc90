"""How much of a real HTML manual's body reaches the read step's output, and how much of its navigation stays out.

The manuals are the ones Debian packages install, written by nobody on the team: the Debian Reference
(debian-reference-{en,de,fr,es,it}: /usr/share/debian-reference/*.<lang>.html, DocBook XSL) and the Debian
Administrator's Handbook (debian-handbook: /usr/share/doc/debian-handbook/html/<lang>/*.html, Publican).

Each page is measured against its own elements (scratchlm.data.clean.html_blocks): its text blocks (paragraphs,
list items, table cells, examples, headings, definition-list entries) in document order, outside the manual's
navigation, which is named here from the generator's markup, independently of the extractor's rules:
  Debian Reference: div.navheader, div.navfooter (previous/next links), div.toc (the chapter's contents),
                    div.list-of-tables (the index page's list of table captions)
  Debian Handbook:  div#banner ("Download the ebook"), p#title (logo links), ul.docnav (previous/up/next), div.toc
Figures, per manual and language, for each extraction mode as the reader runs it (scratchlm.data.clean.html):
  recall per kind  share of the body's characters, whitespace ignored, found in the output in their place, of the
                   text inside each kind of element: a paragraph in a list item in a table cell counts for p, li
                   and td (p: <p>, and <div>s holding text as DocBook's div.para; dl: <dt> and <dd>)
  nav kept         share of the navigation's characters that are in the output more often than in the body (the
                   chapter title of a nav bar is also the page's <h1>: only its second copy is the nav's)
  text share       the extracted characters against the characters of the whole page's text

    python bench/html_body_recall.py                       # every manual and language installed
    python bench/html_body_recall.py --only reference:en handbook:fr-FR --modes auto main
    python bench/html_body_recall.py --sample-removed 40   # also print an even sample of what auto removed
    python bench/html_body_recall.py --only --sample-removed 40 --also '/usr/share/doc/nodejs/api/*.html'
        # the removals of other pages (no recall figure: their navigation is not named here)
"""
from __future__ import annotations

import argparse
import glob
import sys
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from resiliparse.parse.html import HTMLTree  # noqa: E402

from scratchlm.data.clean.html import _PRE, _fence, extract_html  # noqa: E402
from scratchlm.data.clean.html_blocks import BLOCK_KINDS, page_blocks, reached, squash  # noqa: E402
from scratchlm.data.clean.html_dom import select  # noqa: E402

MANUALS = {
    "reference": ("/usr/share/debian-reference/*.{lang}.html",
                  (".navheader", ".navfooter", ".toc", ".list-of-tables"),
                  ("en", "de", "fr", "es", "it")),
    "handbook": ("/usr/share/doc/debian-handbook/html/{lang}/*.html", ("#banner", "#title", "ul.docnav", ".toc"),
                 ("en-US", "de-DE", "fr-FR", "es-ES", "it-IT", "pt-BR", "ja-JP")),
}
KINDS = ("p", "li", "td", "pre", "dl", "heading")


def _nav_elements(tree: HTMLTree, selectors: tuple[str, ...]) -> set:
    found = set()
    for selector in selectors:
        for element in select(tree.body, selector):
            found.add(element)
    return found


def _in_nav(element, nav: set) -> bool:
    while element is not None:
        if element in nav:
            return True
        element = element.parent
    return False


def _kinds(block) -> set[str]:
    """The kinds of element the block's text is inside: its own and its ancestors'."""
    kinds, element = {block.kind}, block.element.parent
    while element is not None and element.tag != "body":
        if (kind := BLOCK_KINDS.get(element.tag, "p")) != "p" or element.tag == "p":
            kinds.add(kind)
        element = element.parent
    return kinds


def measure_page(html: str, nav_selectors: tuple[str, ...], modes: list[str]) -> dict:
    """Per mode: body characters by kind (total, found), nav characters (total, kept), page and text characters,
    and the auto mode's drops."""
    tree = HTMLTree.parse(_PRE.sub(_fence, html))  # the reader fences <pre> before parsing: so does the measure
    nav = _nav_elements(tree, nav_selectors)
    blocks = page_blocks(tree.body)
    flags = [_in_nav(b.element, nav) for b in blocks]
    body = [b for b, is_nav in zip(blocks, flags) if not is_nav]
    body_text = "\0".join(b.key for b in body)
    nav_keys = Counter(b.key for b, is_nav in zip(blocks, flags) if is_nav)
    out = {}
    for mode in modes:
        ex = extract_html(html, mode)
        found = reached(body, ex.text)
        total, kept = Counter(), Counter()
        for b, ok in zip(body, found):
            for kind in [*_kinds(b), "all"]:
                total[kind] += len(b.key)
                kept[kind] += len(b.key) * ok
        text = squash(ex.text)
        nav_total = sum(len(k) * n for k, n in nav_keys.items())
        nav_kept = sum(len(k) * min(n, max(0, text.count(k) - body_text.count(k))) for k, n in nav_keys.items())
        out[mode] = {"total": total, "kept": kept, "nav": (nav_total, nav_kept), "page": ex.page_chars,
                     "text": len(ex.text), "dropped": ex.dropped}
    return out


def _share(a: int, b: int) -> str:
    return f"{a / b:.2%}" if b else "-"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--only", nargs="*", default=None, help="manual:lang pairs, e.g. reference:en handbook:fr-FR")
    ap.add_argument("--modes", nargs="*", default=["auto", "main", "full"])
    ap.add_argument("--sample-removed", type=int, default=0, help="print an even sample of N auto removals")
    ap.add_argument("--also", nargs="*", default=[], help="globs of other pages whose auto removals join the sample")
    args = ap.parse_args()
    pairs = [p.split(":", 1) for p in args.only] if args.only is not None else \
        [(m, lang) for m, (_, _, langs) in MANUALS.items() for lang in langs]
    removed: list[tuple[str, object]] = []
    for pattern in args.also:
        for f in sorted(glob.glob(pattern)):
            html = Path(f).read_text(encoding="utf-8", errors="replace")
            removed += [(f, d) for d in extract_html(html, "auto").dropped]
    print(f"{'manual':10s} {'lang':6s} {'pages':>5s} {'mode':5s} " + " ".join(f"{k:>8s}" for k in KINDS)
          + f" {'all':>7s} {'nav kept':>9s} {'text/page':>9s}")
    for manual, lang in pairs:
        pattern, nav_selectors, _ = MANUALS[manual]
        files = sorted(glob.glob(pattern.format(lang=lang)))
        if not files:
            print(f"{manual:10s} {lang:6s} not installed ({pattern.format(lang=lang)})")
            continue
        sums = {m: {"total": Counter(), "kept": Counter(), "nav": [0, 0], "page": 0, "text": 0} for m in args.modes}
        for f in files:
            for mode, r in measure_page(Path(f).read_text(encoding="utf-8"), nav_selectors, args.modes).items():
                s = sums[mode]
                s["total"].update(r["total"])
                s["kept"].update(r["kept"])
                s["nav"][0] += r["nav"][0]
                s["nav"][1] += r["nav"][1]
                s["page"] += r["page"]
                s["text"] += r["text"]
                if mode == "auto":
                    removed += [(f"{manual}:{lang}:{Path(f).name}", d) for d in r["dropped"]]
        for mode, s in sums.items():
            cells = " ".join(f"{_share(s['kept'][k], s['total'][k]):>8s}" for k in KINDS)
            print(f"{manual:10s} {lang:6s} {len(files):5d} {mode:5s} {cells} "
                  f"{_share(s['kept']['all'], s['total']['all']):>7s} "
                  f"{_share(s['nav'][1], s['nav'][0]):>9s} {_share(s['text'], s['page']):>9s}")
    if args.sample_removed and removed:
        rules = Counter(d.rule for _, d in removed)
        print(f"\nauto removed {len(removed)} elements ({sum(d.chars for _, d in removed):,} chars): "
              + ", ".join(f"{r} {n}" for r, n in rules.most_common()))
        step = max(len(removed) // args.sample_removed, 1)
        for i, (page, d) in enumerate(removed[::step][:args.sample_removed], 1):
            print(f"{i:3d}. {page} {d.rule} {d.what} {d.chars} chars {d.blocks}: {d.text[:160]!r}")


if __name__ == "__main__":
    main()
