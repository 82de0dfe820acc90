"""Page chrome in an HTML tree: the elements of a page that are not its body (navigation, site header and footer,
sidebars, cookie banners, ads, share and comment boxes, tables of contents, hidden elements).

The body of a documentation page is everything else, tables, examples and cross-reference lists included. This
is why chrome is found by what the markup says an element is (its tag, ARIA role, class and id names), and by how
much of it is links only outside the content: in the Debian Reference, tables of packages and "see also" lists
inside a section hold 80-100% link text and are body (bench/html_body_recall.py). Text density is left to the
line rules of boilerplate.py, which see every source after extraction.

Where an element stands decides what some markup means:
- <header>, <footer>, <aside> (and the roles banner, contentinfo, complementary) are the page's own only outside
  <article>, <section> and <main>; inside one they are that section's title block, notes or aside, as HTML says;
- the names "header", "footer" and "sidebar" are a site's top, bottom and side column outside the content, but
  DocBook calls a tip box inside a section "sidebar" and a card or table has a "header". They are chrome, like a
  block that is mostly links (LINK_LIST_SHARE), only outside the content or before the page's title;
- the content: <main>, <article>, role=main and every element that holds the page's title, its first top-level
  heading outside the page's header and navigation (without a heading, its longest paragraph or example).
An element of the content is never chrome, and nothing inside <pre> or <code> is (a highlighter's "comment").
"""
from __future__ import annotations

import re
from collections.abc import Collection
from dataclasses import dataclass

from resiliparse.parse.html import HTMLTree

from .html_blocks import squash
from .html_dom import select

HEADINGS = ("h1", "h2", "h3", "h4", "h5", "h6")
# Elements whose class or id names are read: containers and blocks. An inline element's names say what its words
# are in a sentence (DocBook's <span class="guimenu">File</span>); only a skip link's count, outside the content.
_CONTAINERS = frozenset("div section nav header footer aside ul ol dl table form p iframe dialog".split())
_LINK_LIST_TAGS = "ul, ol, dl, table, div, section, p"
LINK_LIST_SHARE = 0.6  # share of a block's text in its links above which, outside the content, it is a menu ...
LINK_LIST_MIN_LINKS = 3  # ... when it holds at least this many links, and no heading or example: an old table
_NOT_IN_MENUS = ", ".join(HEADINGS) + ", pre"  # layout puts a site's menu and a page's index of links in one cell

# Rule -> how a part of a class or id name (split at "-" and "_", lowercased) says it. Checked in this order.
# "contents" only as a whole name: DocBook wraps every table in <div class="table-contents">; its lists of tables,
# figures and examples repeat the captions as a table of contents repeats the headings.
_NAME_RULES: tuple[tuple[str, re.Pattern], ...] = tuple((rule, re.compile(p)) for rule, p in (
    ("cookie", r"cookies?\w*|consent\w*|gdpr"),
    ("toc", r"toc|toctree|tableofcontents"),
    ("nav", r"nav\w*|\w+nav|menus?\w*|\w+menu|breadcrumbs?|pagination|pager|skiplinks?|skip"),
    ("ad", r"ads?|adverts?\w*|adsbygoogle|sponsor\w*|banners?"),
    ("share", r"share|sharing|sharebar|sharethis|social\w*|newsletters?|subscribe|subscription"),
    ("comments", r"comments?|disqus\w*"),
    ("related", r"related"),
    ("search", r"search\w*"),
    ("header", r"header|masthead"),
    ("footer", r"footer|colophon"),
    ("sidebar", r"sidebars?"),
))
_WHOLE_NAME_TOC = re.compile(r"contents|table[-_]?of[-_]?contents|list-of-(tables|figures|examples|procedures)")
_OUTSIDE_CONTENT_NAMES = frozenset({"header", "footer", "sidebar"})
_ANYWHERE_TAGS = {"nav": "nav", "dialog": "dialog"}
_ANYWHERE_ROLES = {"navigation": "nav", "menu": "nav", "menubar": "nav", "search": "search", "dialog": "dialog",
                   "alertdialog": "dialog"}
_PAGE_TAGS = {"header": "header", "footer": "footer", "aside": "sidebar"}  # the page's own outside sections
_PAGE_ROLES = {"banner": "header", "contentinfo": "footer", "complementary": "sidebar"}
_SECTIONS = "article, section, main, [role=main], [role=article]"
# Every rule find_chrome can name: the read step's ledger rules are these with "html_" before them.
CHROME_RULES = tuple(dict.fromkeys([*(rule for rule, _ in _NAME_RULES), *_ANYWHERE_TAGS.values(),
                                    *_ANYWHERE_ROLES.values(), *_PAGE_TAGS.values(), "hidden", "link_list"]))
_HIDDEN_STYLE = re.compile(r"display\s*:\s*none|visibility\s*:\s*hidden", re.I)
_PARTS = re.compile(r"[-_\s]+")
# The candidates, as one selector run by the parser: a chapter has thousands of inline elements with classes.
_NAMED = ", ".join(["[role]", "[hidden]", "[aria-hidden]", "[style]", "nav", "header", "footer", "aside", "dialog",
                    *(f"{tag}[{name}]" for tag in sorted(_CONTAINERS) for name in ("class", "id")),
                    '[class*="skip"]', '[id*="skip"]'])
_VERBATIM = frozenset({"pre", "code", "kbd", "samp"})


@dataclass(frozen=True)
class Chrome:
    element: object  # a resiliparse ElementNode
    rule: str  # nav, toc, header, footer, sidebar, cookie, ad, share, comments, related, search, dialog, hidden,
    #            link_list


def _name_rule(element) -> str | None:
    names = f"{element.getattr('class') or ''} {element.getattr('id') or ''}".lower()
    if any(_WHOLE_NAME_TOC.fullmatch(name) for name in names.split()):
        return "toc"
    parts = [p for p in _PARTS.split(names) if p]
    for rule, pattern in _NAME_RULES:
        if any(pattern.fullmatch(p) for p in parts):
            return rule
    return None


def _hidden(element) -> bool:
    return (element.hasattr("hidden") or (element.getattr("aria-hidden") or "").strip().lower() == "true"
            or bool(_HIDDEN_STYLE.search(element.getattr("style") or "")))


def _ancestors(element, body):
    node = element.parent
    while node is not None and node is not body:
        yield node
        node = node.parent


class _Page:
    """Where things stand on one page: its content roots, its sections, its title's place in document order."""

    def __init__(self, body):
        self.body = body
        self.sections = set(select(body, _SECTIONS))
        self.roots = set(select(body, "main, article, [role=main]"))
        self.order = {e: i for i, e in enumerate(select(body, "*"))}  # document order
        title = self._title()
        self.title_at = self.order[title] if title is not None else -1
        while title is not None and title is not body:
            self.roots.add(title)
            title = title.parent

    def _title(self):
        """The first heading of the highest level in <main> or <article>, else outside the page's header and
        navigation (a DocBook section page has no <h1>; a Node.js API page's <h1> is the site's name)."""
        headings = select(self.body, ", ".join(HEADINGS))
        inside = [h for h in headings if any(a in self.roots for a in _ancestors(h, self.body))]
        outside = [h for h in headings if not any(self._page_chrome_tag(a) for a in _ancestors(h, self.body))]
        for candidates in (inside, outside, headings):
            if candidates:
                return min(candidates, key=lambda h: HEADINGS.index(h.tag))
        blocks = select(self.body, "p, pre, td")
        return max(blocks, key=lambda b: len(b.text), default=None)

    def _page_chrome_tag(self, element) -> bool:
        role = (element.getattr("role") or "").strip().lower()
        if element.tag in _ANYWHERE_TAGS or role in _ANYWHERE_ROLES:
            return True
        return (element.tag in _PAGE_TAGS or role in _PAGE_ROLES) and not self.sectioned(element)

    def in_content(self, element) -> bool:
        return any(a in self.roots for a in _ancestors(element, self.body))

    def before_title(self, element) -> bool:
        return self.order.get(element, -1) < self.title_at

    def sectioned(self, element) -> bool:
        return any(a in self.sections for a in _ancestors(element, self.body))

    def verbatim(self, element) -> bool:
        return element.tag in _VERBATIM or any(a.tag in _VERBATIM for a in _ancestors(element, self.body))


def _rule(element, page: _Page) -> str | None:
    """What chrome the element's markup and place say it is, if any (hidden first: an invisible element is
    never body)."""
    if _hidden(element):
        return "hidden"
    tag, role = element.tag, (element.getattr("role") or "").strip().lower()
    if tag in _ANYWHERE_TAGS or role in _ANYWHERE_ROLES:
        return _ANYWHERE_TAGS.get(tag) or _ANYWHERE_ROLES[role]
    if tag in _PAGE_TAGS or role in _PAGE_ROLES:
        return None if page.sectioned(element) else _PAGE_TAGS.get(tag) or _PAGE_ROLES[role]
    rule = _name_rule(element)
    if rule is None:
        return None
    if tag not in _CONTAINERS or rule in _OUTSIDE_CONTENT_NAMES:
        return rule if not page.in_content(element) or page.before_title(element) else None
    return rule


def _menu(element) -> bool:
    """Mostly links, and no heading or example in it."""
    links = select(element, "a[href]")
    if len(links) < LINK_LIST_MIN_LINKS:
        return False
    text = len(squash(element.text))
    linked = sum(len(squash(a.text)) for a in links)
    return linked >= LINK_LIST_SHARE * text > 0 and element.query_selector(_NOT_IN_MENUS) is None


def find_chrome(tree: HTMLTree, hidden_only: bool = False, keep: Collection[str] = ()) -> list[Chrome]:
    """The chrome elements of the page (with `hidden_only`, its hidden elements), outermost only, in document
    order; an element whose rule is in `keep` is not chrome (what it holds may be)."""
    body = tree.body
    if body is None:
        return []
    page = _Page(body)
    found: dict = {}
    for element in select(body, _NAMED):
        if element in page.roots or (rule := _rule(element, page)) is None or rule in keep:
            continue
        if (not hidden_only or rule == "hidden") and not page.verbatim(element):
            found[element] = rule
    for element in () if hidden_only or "link_list" in keep else select(body, _LINK_LIST_TAGS):
        if element in page.roots or element in found:
            continue
        if (not page.in_content(element) or page.before_title(element)) and _menu(element):
            found[element] = "link_list"
    chrome = [Chrome(e, rule) for e, rule in found.items() if not any(a in found for a in _ancestors(e, body))]
    return sorted(chrome, key=lambda c: page.order[c.element])
