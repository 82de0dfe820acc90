"""The text blocks of an HTML page, and which of them reached an extraction's output.

A block is a run of text owned by one block element (a paragraph, a list item, a table cell, a heading, an
example, a definition-list entry; a <div> holding text directly counts as a paragraph, as DocBook's
<div class="para"> does), cut where a nested block starts, so "Run <pre>ls</pre> then quit" is three blocks.
`reached` aligns the blocks with the output in document order, as an extractor writes them: a block is kept
when its text (whitespace ignored) is found after the previous kept block. Blocks of 20 characters or more that
occur once in the page anchor the alignment; any other (a table cell "I:853", a heading "Options", a sentence the
page repeats, a heading its table of contents repeats) only counts when it lies between its neighbouring
anchors, so a copy elsewhere in the page does not count as this block kept.

The read step uses it to say what an extractor it does not steer (resiliparse's main-content mode) left out;
bench/html_body_recall.py to measure how much of a manual's body reaches the output.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from resiliparse.parse.html import NodeType

from .html_dom import children

# The kind of text each block element holds; an element not named here is inline, its text its block's.
BLOCK_KINDS = {**{h: "heading" for h in ("h1", "h2", "h3", "h4", "h5", "h6")}, "pre": "pre", "td": "td",
               "th": "td", "caption": "td", "li": "li", "dt": "dl", "dd": "dl",
               **{tag: "p" for tag in ("p", "div", "blockquote", "section", "article", "main", "body", "figcaption",
                                       "header", "footer", "nav", "aside", "table", "tr", "ul", "ol", "dl",
                                       "form", "details", "summary", "figure", "center", "address")}}
_NOT_TEXT = frozenset({"script", "style", "noscript", "template", "head", "title", "textarea", "select", "button",
                       "input", "option", "svg", "math", "iframe", "object"})
ANCHOR_CHARS = 20


@dataclass
class Block:
    kind: str  # heading, p, li, td, pre, dl
    text: str
    element: object  # its owning element (resiliparse ElementNode)

    @property
    def key(self) -> str:
        return squash(self.text)


def page_blocks(root) -> list[Block]:
    """The non-blank text blocks under `root` in document order. An explicit stack: a page can nest deeper than
    Python recurses."""
    blocks: list[Block] = []
    parts: list[str] = []
    owner = [root]

    def flush() -> None:
        text = "".join(parts)
        if text.strip():
            blocks.append(Block(BLOCK_KINDS.get(owner[0].tag, "p"), text, owner[0]))
        parts.clear()

    stack: list = [(root, root, iter(children(root)))]
    while stack:
        element, block_owner, rest = stack[-1]
        child = next(rest, None)
        if child is None:
            stack.pop()
            if element.tag in BLOCK_KINDS and stack:
                flush()  # the text after a nested block is a block of its own
                owner[0] = stack[-1][1]
            continue
        if child.type == NodeType.TEXT:
            if owner[0] is not block_owner:
                flush()
                owner[0] = block_owner
            parts.append(child.text)
        elif child.type == NodeType.ELEMENT and child.tag not in _NOT_TEXT:
            if child.tag in BLOCK_KINDS:
                flush()
                owner[0] = child
            stack.append((child, child if child.tag in BLOCK_KINDS else block_owner, iter(children(child))))
    flush()
    return blocks


def squash(text: str) -> str:
    return "".join(text.split())


def reached(blocks: list[Block], output: str) -> list[bool]:
    """For each block, whether the output holds it in its place (see the module's docstring)."""
    out = squash(output)
    keys = [b.key for b in blocks]
    copies = Counter(keys)
    anchor = [len(key) >= ANCHOR_CHARS and copies[key] == 1 for key in keys]
    kept = [False] * len(blocks)
    spans: list[tuple[int, int] | None] = [None] * len(blocks)
    cursor = 0
    for i, key in enumerate(keys):
        if anchor[i] and (pos := out.find(key, cursor)) >= 0:
            kept[i], spans[i], cursor = True, (pos, pos + len(key)), pos + len(key)
    start, i = 0, 0
    while i < len(blocks):
        if spans[i] is not None:
            start = spans[i][1]
            i += 1
            continue
        j = i  # blocks i..j-1 lie between the anchors around them
        while j < len(blocks) and spans[j] is None:
            j += 1
        end = spans[j][0] if j < len(blocks) else len(out)
        cursor = start
        for k in range(i, j):
            if not anchor[k] and (pos := out.find(keys[k], cursor, end)) >= 0:
                kept[k], cursor = True, pos + len(keys[k])
        i = j
    return kept
