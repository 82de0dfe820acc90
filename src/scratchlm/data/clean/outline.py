"""Heads and what they govern: a section heading and its section, an option line (or the term of a definition
list) and the description indented under it.

A head carries no language of its own ("-v, --version", "OPCIONES", "DEFEDITOR"), so a step that cuts prose by
its language never judges it, and a cut that takes every paragraph under a head used to leave the head behind: an
option directly followed by the next option, a heading directly followed by the next heading. A head and what it
governs are one unit: emptied_heads() finds the heads a cut left with nothing under them, and the cut takes them
too.

What a head governs, from the layouts of rendered man pages (`man -l page | col -bx`), Markdown, reST and other
plain-text manuals:
  indented    a head whose next line (blank lines aside) is indented deeper governs the lines up to the next one
              at its own indentation or less: a man page's section ("DESCRIPTION" at 0, its body at 7), an option
              and its description ("       -a, --all" then "              do not ignore ..."), a definition
              list's term and its definition.
  ranked      a heading whose body sits at its own indentation (Markdown, underlined or numbered headings) governs
              the lines up to the next heading of its rank or above ("## Usage" ends at the next "##" or "#").
Any other line is a term (a head) only when it is a unit of its own, the next line is indented deeper right under
it, and it names something (a few words that end no sentence, a synopsis, a table row) or starts its description
in the column the next lines keep: an ordinary paragraph never governs the one after it. Names stacked right above
a head at its indentation ("-a" over "--addresses") are lines of that head. A head whose own line holds a
paragraph of its own ("-J     Compress with xz", then a blank line) is never left empty: it says something.
"""
from __future__ import annotations

from dataclasses import dataclass

from .structure import (BLANK, CODE, HEADING, MD_HEADING, NUMBERED_HEADING, OPTION, SENTENCE_END, TABLE, UNDERLINE,
                        Line, hangs_at, indent_of)

TERM_MAX_WORDS = 8  # "correo-electrónico-informe-fallo", "showpkg pkg...", "Storage": a term is a few words at most


@dataclass(frozen=True)
class Head:
    lines: tuple[int, ...]  # the head's own lines: the heading and its underline, if it has one
    end: int  # it governs lines[self.lines[-1] + 1:end]; end is past the last non-blank line governed
    # Its line holds a paragraph of its own after the tag ("-J     Compress with xz" and a blank line): what it
    # says was never judged, so no cut under it leaves it empty.
    speaks: bool = False

    @property
    def span(self) -> range:
        """The head's lines and everything it governs."""
        return range(self.lines[0], self.end)


@dataclass
class _Open:
    head: int  # index in the list of heads found so far
    indent: int
    rank: int  # 0 for an indented head (closed by indentation alone)


def _rank(lines: list[Line], i: int) -> int:
    """1 for "#", a heading underlined with "=", "1." or a heading known by its case alone; deeper levels rank
    higher ("###" is 3, "2.1.4" is 3, an underline of "-" is 2)."""
    text = lines[i].text.strip()
    if MD_HEADING.match(lines[i].text):
        return len(text) - len(text.lstrip("#"))
    if i + 1 < len(lines) and UNDERLINE.match(lines[i + 1].text):
        return 1 if lines[i + 1].text.strip()[0] == "=" else 2
    if NUMBERED_HEADING.match(lines[i].text):
        return len(text.split()[0].rstrip(".").split("."))
    return 1


def _is_term(lines: list[Line], i: int) -> bool:
    """A line of its own with a deeper-indented line right under it that is the term of a definition list, not a
    paragraph's last line: a name ("correo-electrónico-informe-fallo", "inherit_errexit", "disown [-ar] [-h]
    [jobspec ...]"), or a tag whose description starts on its line, in the column the description's next lines
    keep ("X      Concise.  Prints the ...", "tid   TID   the unique number ...")."""
    line = lines[i]
    below = lines[i + 1] if i + 1 < len(lines) else None
    if line.kind in (BLANK, HEADING) or below is None or below.kind == BLANK or not _starts_unit(lines, i):
        return False
    column = indent_of(below.text)
    return column > indent_of(line.text) and (_names(line) or hangs_at(line.text, column))


def _stacked_tag(lines: list[Line], k: int, indent: int, column: int) -> bool:
    """Whether line k is another name, at `indent`, for the description that starts in `column` below: "-a" over
    "--addresses", "ORGMAIL path too long" over the next message. Not a field with its value ("Conflicts: x", in
    an example control file) nor a table row with its own text in the description's column."""
    line = lines[k]
    return (line.kind != BLANK and indent_of(line.text) == indent and _starts_unit(lines, k) and _names(line)
            and ": " not in line.text and not hangs_at(line.text, column))


def _names(line: Line) -> bool:
    """Whether the line names something rather than says it: an option, a synopsis or a table row whatever its
    length ("export [-fn] [name[=word]] ..."), else a few words that end no sentence."""
    text = line.text.strip()
    if line.kind in (OPTION, CODE, TABLE):
        return True
    return len(text.split()) <= TERM_MAX_WORDS and not text.endswith(SENTENCE_END[:8] + (":",))


def _starts_unit(lines: list[Line], i: int) -> bool:
    """Not the wrapped tail of the line above."""
    return i == 0 or lines[i - 1].unit != lines[i].unit


def heads(lines: list[Line]) -> list[Head]:
    """Every head of the parsed document (structure.parse) with the span it governs, in document order (a head
    inside another's span comes after it). One pass, a stack of the heads still open."""
    following = [len(lines)] * (len(lines) + 1)  # following[i]: the first non-blank line at i or after
    for i in range(len(lines) - 1, -1, -1):
        following[i] = i if lines[i].kind != BLANK else following[i + 1]
    owns: list[tuple[int, ...]] = []
    ends: list[int] = []  # filled in when the head closes
    speaks: list[bool] = []
    stack: list[_Open] = []
    last, skip = -1, -1  # the last non-blank line seen; an underline already taken by its heading
    for i, line in enumerate(lines):
        if line.kind == BLANK or i == skip:
            continue
        indent = indent_of(line.text)
        heading = line.kind == HEADING and any(c.isalnum() for c in line.text)
        rank = _rank(lines, i) if heading else 0
        # An indented head closes at a line as far left as it; a ranked one also at a heading of its rank or above.
        while stack and (indent < stack[-1].indent or indent == stack[-1].indent
                         and (not stack[-1].rank or heading and rank <= stack[-1].rank)):
            ends[stack.pop().head] = last + 1
        own = (i, i + 1) if heading and i + 1 < len(lines) and UNDERLINE.match(lines[i + 1].text) else (i,)
        below = following[own[-1] + 1]
        deeper = below < len(lines) and indent_of(lines[below].text) > indent
        if heading or (line.kind == OPTION and deeper) or _is_term(lines, i):
            if deeper:  # tags stacked right above share the description: "-a" over "--addresses" over it
                while own[0] and _stacked_tag(lines, own[0] - 1, indent, indent_of(lines[below].text)):
                    own = (own[0] - 1, *own)
                if owns and owns[-1][-1] >= own[0]:  # a stacked heading ("DEFEDITOR" over "EDITOR") opened one
                    owns.pop(), ends.pop(), speaks.pop()
                    if stack and stack[-1].head == len(owns):
                        stack.pop()
            owns.append(own)
            ends.append(-1)
            speaks.append(deeper and lines[i + 1].kind == BLANK and hangs_at(line.text, indent_of(lines[below].text)))
            stack.append(_Open(len(owns) - 1, indent, 0 if deeper else rank))
            skip = own[-1]
        last = own[-1]
    for open_ in stack:
        ends[open_.head] = last + 1
    return [Head(*fields) for fields in zip(owns, ends, speaks)]


def emptied_heads(lines: list[Line], cut: set[int]) -> list[Head]:
    """The heads whose span had something to say and lost all of it to `cut`: each goes with its span. A head
    emptied by the heads under it going is emptied too (a section whose options all went). Outermost first, none
    inside another."""
    gone: list[Head] = []
    cut = set(cut)
    for head in reversed(heads(lines)):  # the heads inside a span come after it: they are settled first
        said = [k for k in range(head.lines[-1] + 1, head.end) if any(c.isalnum() for c in lines[k].text)]
        if said and not head.speaks and all(k in cut for k in said):
            cut.update(head.span)
            while gone and gone[-1].lines[0] in head.span:  # the heads inside it, found last, go with it
                gone.pop()
            gone.append(head)
    return gone[::-1]
