"""The shape of a plain-text document: which lines are headings, options, tables, code or prose, and which
physical lines wrap one sentence.

Line rules written for web crawl (C4's, repeated lines, boilerplate keywords) read a man page or a manual as a
list of independent lines. It is not: "DESCRIPTION" and "-v, --verbose" are its skeleton, a hard-wrapped
paragraph is one sentence over several lines, and an indented example is code. The cleaning steps use this
module so that they
- never cut a structural line (heading, option, table row, code) because it recurs or lacks punctuation,
- cut a wrapped paragraph whole or not at all (a cut inside it would leave half a sentence behind),
- read the language of prose units only (code, tables and options carry no language), a hard-wrapped paragraph
  as a whole (paragraph_units); what an option or a heading governs is in outline.py.

parse() is a handful of regular expressions per line; it needs no model and no corpus statistics.
"""
from __future__ import annotations

import re
import string
import unicodedata
from dataclasses import dataclass

from ..paragraph_split import paragraphs_and_breaks

BLANK, HEADING, OPTION, TABLE, CODE, LIST, PROSE = "blank", "heading", "option", "table", "code", "list", "prose"
STRUCTURAL = frozenset({HEADING, OPTION, TABLE, CODE})  # never cut by a line rule
LANGUAGE_FREE = frozenset({OPTION, TABLE, CODE})  # never judged or cut by the language step

# Ends a sentence in the scripts we ship rules for (language_rules.json has the per-language sets; this union
# is what wrap detection needs, where the language is not known yet).
SENTENCE_END = tuple(".!?…。！？।॥؟۔։።။") + tuple("\"'”’»)")

_FENCE = re.compile(r"^\s*(```|~~~)")
MD_HEADING = re.compile(r"^\s{0,3}#{1,6}\s+\S")
UNDERLINE = re.compile(r"^\s*([=\-~^\"*+#])\1{2,}\s*$")
NUMBERED_HEADING = re.compile(r"^\s*(\d+(\.\d+)*\.?|[A-Z]\.|[IVX]+\.)\s+\S")
# "-v, --verbose", "--color[=WHEN]", "+N", "-o option": a dash glued to a letter or digit.
_OPTION = re.compile(r"^\s*(--?|\+)[A-Za-z0-9?@#]")
# "Storage=", "ExecStart=, ExecStartPre=": the keys of a configuration reference, one per line.
_CONFIG_KEY = re.compile(r"^\s*[A-Za-z_][\w.\-]*=\S*(,\s*[A-Za-z_][\w.\-]*=\S*)*\s*$")
# "lxc.net.0.type = veth", "smtpd_milters = inet:localhost:12345": one assignment of a configuration file.
_ASSIGNMENT = re.compile(r"^\s*[A-Za-z_][\w.\-\[\]]*\s*[:+]?=\s*\S+(\s+\S+){0,3}\s*$")
_LIST = re.compile(r"^\s*([-*•●○▪◦‣⁃–]|\d{1,3}[.)]|[a-z][.)])\s+\S")
_PROMPT = re.compile(r"^\s*(\$|%|>>>|\.\.\.|[A-Z]:\\>|\w+@[\w.-]+[:$#])\s")
_COLUMN_GAP = re.compile(r"\S(\s{3,}|\t+)(?=\S)")
_TABLE_RULE = re.compile(r"^\s*[+|]?[-=+|: ]{5,}$")
# One token that is a qualified name or a call: "locale.gettext(msg)", "os.RTLD_LAZY", "/etc/apt/sources.list".
_IDENTIFIER = re.compile(r"^(?=\S*(?:[._/:]\w|\w\())[\w$@~./:-]+(\([^)]*\))?[;,]?$")
_MAN_REF = re.compile(r"^[\w.:+-]+\(\d\w*\)[,.;]?$")
# Not a word of prose: a path, an option, an identifier, markup ("/etc/fstab", "--force", "os.path", "a_b", "`x`").
NOT_A_WORD = re.compile(r"[/\\_=<>{}\[\]|`@$#~]|^[-+]|::|\(\)|\w\.\w")
# Counted on a line's UTF-8 bytes (_ascii_count): code punctuation, and with digits and "-+.,:" what fills
# command output and tables of numbers.
_CODE_CHARS = b"{}[]()<>=;$|&*\\/_@%^~#`"
_DATA_CHARS = _CODE_CHARS + b"-+.,:0123456789"
_UPPER_BYTES, _LOWER_BYTES = string.ascii_uppercase.encode(), string.ascii_lowercase.encode()
_NON_ASCII = re.compile(r"[^\x00-\x7f]")
_LETTER = re.compile(r"[^\W\d_]")
_LETTERS = re.compile(r"[^\W\d_]+")  # runs of letters: counted a word at a time
# Ends an element: after it, a line that starts like an option or a list item is one.
_ENDS_ELEMENT = SENTENCE_END + (":",)
_NAV_MARKS = re.compile(r" [|>/] |[•»›]")  # "Prev | Up | Next" left of a man page's body is chrome, not a title


@dataclass(frozen=True)
class Line:
    text: str
    kind: str
    block: int  # blank-line-separated block number
    unit: int  # lines of one unit wrap one paragraph (or are one structural line); -1 for blank lines


@dataclass(slots=True)
class _Shape:
    """What the rules read of one line, worked out once: parse reads each line for itself and again as the line
    above or below its neighbours (a heading or an option starts a new element under it, a table row has a column
    where the row above or below has one)."""
    text: str
    stripped: str
    indent: int
    words: int
    column_starts: frozenset[int]  # where a column starts after a wide gap ("ISO 8859-2    Latin-2")
    underline: bool  # "=====": the line above it is a title
    option_like: bool  # "-v, --verbose", "Storage=": an option or a configuration key
    caps_heading: bool  # "DESCRIPTION", "SEE ALSO"


_NO_COLUMNS: frozenset[int] = frozenset()
_NO_LINE = _Shape("", "", 0, 0, _NO_COLUMNS, False, False, False)  # above the first line and below the last


def _shape(line: str) -> _Shape:
    s = line.strip()
    if not s:
        return _Shape(line, s, len(line), 0, _NO_COLUMNS, False, False, False)
    tokens = s.split()
    # A column gap is three blanks or a tab: a line whose words are one space apart has none, and most lines are
    # told that way without the regular expression's scan.
    columns = _NO_COLUMNS if " ".join(tokens) == s else frozenset(m.end() for m in _COLUMN_GAP.finditer(line))
    # An option starts with "-" or "+", a key holds a "=": most lines are told without the patterns.
    option_like = bool(s[0] in "-+" and _OPTION.match(line) or "=" in s and _CONFIG_KEY.match(line))
    return _Shape(line, s, indent_of(line), len(tokens), columns, bool(UNDERLINE.match(line)), option_like,
                  _is_all_caps_heading(s, len(tokens), len(columns)))


def _is_all_caps_heading(s: str, words: int, column_gaps: int) -> bool:
    """A title in capitals ("SEE ALSO", "ÉTAT"): 8 words at most, not ending like a sentence or a list item, at
    least 3 letters, 90% of them cased and 90% of those upper case. `s` is a stripped line; its words and column
    gaps the caller has counted. Two gaps or more make a table row ("200   128   80   ─   ЛИНИЯ")."""
    if words > 8 or column_gaps >= 2 or s.endswith((".", ",", ";")):  # most lines end here
        return False
    small = _ascii_count(s, _LOWER_BYTES)
    if 10 * small > len(s):  # a title has 9 capitals to each small letter: most short lines of code end here
        return False
    if s.isascii():  # the ASCII letters are A-Z and a-z, and every one is cased
        upper = _ascii_count(s, _UPPER_BYTES)
        return upper + small >= 3 and upper >= 0.9 * (upper + small)
    letters = _LETTER.findall(s)
    cased = [c for c in letters if c.lower() != c.upper()]  # "ª" and CJK are letters without case
    return (len(letters) >= 3 and len(cased) >= 0.9 * len(letters)
            and sum(c.isupper() for c in cased) >= 0.9 * len(cased))


def _ascii_count(s: str, chars: bytes) -> int:
    """How many of s's characters are among the ASCII `chars`: counted on the UTF-8 bytes, where translate deletes
    them in C, and no byte of a longer character is ASCII ("surrogatepass" encodes even a lone surrogate)."""
    b = s.encode("utf-8", "surrogatepass")
    return len(b) - len(b.translate(None, chars))


def _visible(s: str) -> int:
    """Characters that are not white space."""
    return len("".join(s.split()))


def _code_share(s: str) -> float:
    return _ascii_count(s, _CODE_CHARS) / max(_visible(s), 1)


_TRAILING_COMMENT = re.compile(r"\s*/\*.*\*/$")


def _is_statement(s: str) -> bool:
    """A short line ending like a C statement or block ("unsigned short s;", "} else {"), its comment aside
    ("unsigned char ifa_family;    /* Address type */"), or a line holding a URL that is not a sentence
    ("deb http://deb.debian.org/debian bookworm main")."""
    code = _TRAILING_COMMENT.sub("", s) if s.endswith("*/") else s
    if code.endswith((";", "{", "}")) and len(code.split()) <= 6:
        return True
    return "://" in s and not s.endswith(SENTENCE_END[:8])


def _is_ref_list(s: str) -> bool:
    """A SEE ALSO line: "chcpu(1), chrt(1), lscpu(1), ps(1),"."""
    most_refs = s.count("(")  # each reference holds one: most lines are told without splitting them
    if not most_refs:
        return False
    tokens = s.split()
    return len(tokens) >= 2 and most_refs >= 0.6 * len(tokens) \
        and sum(bool(_MAN_REF.match(t)) for t in tokens) >= 0.6 * len(tokens)


def _data_share(s: str) -> float:
    """Digits and symbols among the visible characters: high in command output and tables of numbers
    ("-rw-r--r-- 1 root root 17 Oct 16 21:42 foo"), under 0.15 in sentences that mention versions."""
    other_digits = 0 if s.isascii() else sum(map(str.isdigit, _NON_ASCII.findall(s)))  # "²", "١"
    return (_ascii_count(s, _DATA_CHARS) + other_digits) / max(_visible(s), 1)


def indent_of(line: str) -> int:
    return len(line) - len(line.lstrip())


def _reads_as_prose(block: list[_Shape]) -> bool:
    if sum(line.words for line in block) / max(len(block), 1) < 5:
        return False
    text = " ".join(line.text for line in block)
    letters = sum(map(len, _LETTERS.findall(text)))
    return letters / max(len(text) - text.count(" "), 1) >= 0.75


def _kind(line: _Shape, prev: _Shape, next_line: _Shape, body_indent: int, block_is_code: bool) -> str:
    """The kind of `line`, from itself and the lines above and below it (_NO_LINE at the ends of the text)."""
    s = line.stripped
    if not s:
        return BLANK
    if line.caps_heading or line.underline or MD_HEADING.match(line.text):
        return HEADING
    if next_line.underline and line.words <= 12:
        return HEADING
    # A line that starts like an option or a numbered item but follows an unfinished sentence is that
    # sentence's wrapped tail ("... unless the\n--reinstall option is given"). After an option or a heading
    # a new element starts.
    starts_element = (not prev.stripped or prev.stripped.endswith(_ENDS_ELEMENT) or prev.option_like
                      or prev.caps_heading)
    if starts_element and line.option_like:
        return OPTION
    # Man pages and other rendered manuals: body text at one indentation, subsection titles to its left,
    # examples in blocks of their own further to its right. A title stands alone at its indentation: a line with
    # a neighbour at the same one is a line of a paragraph there (bash(1) sets whole sections to the left of its
    # option descriptions, and its widely spaced lines are short in words).
    indent = line.indent
    alone = (not prev.stripped or prev.indent != indent) and (not next_line.stripped or next_line.indent != indent)
    if body_indent >= 2 and indent < body_indent and line.words <= 10 and alone \
            and not s.endswith(SENTENCE_END[:8]) and not _NAV_MARKS.search(s):
        return HEADING
    if block_is_code:
        return CODE
    # One "A | B | C" line is a nav bar; a table has rows above or below it.
    rows = s.count(" | ") >= 2 and (" | " in prev.text or " | " in next_line.text)
    # A two-column table has one gap per row: tabs between the cells of an extracted HTML table, or a second
    # column that starts at the same place as on the row above or below ("ISO 8859-2    Latin-2").
    tab_rows = "\t" in s and ("\t" in prev.stripped or "\t" in next_line.stripped)
    columns = line.column_starts
    aligned = bool(columns) and not (columns.isdisjoint(prev.column_starts)
                                     and columns.isdisjoint(next_line.column_starts))
    if s.startswith("|") or len(columns) >= 2 or rows or tab_rows or aligned or _TABLE_RULE.match(line.text):
        return TABLE
    if _PROMPT.match(line.text) or (len(s) >= 4 and _code_share(s) >= 0.2) or _IDENTIFIER.match(s) \
            or _is_ref_list(s) or (len(s) >= 8 and _data_share(s) >= 0.35) or _is_statement(s) \
            or ("=" in s and _ASSIGNMENT.match(s) and not s.endswith(SENTENCE_END[:8])):
        return CODE
    if starts_element and NUMBERED_HEADING.match(line.text) and line.words <= 12 \
            and not s.endswith(SENTENCE_END[:8]):
        return HEADING
    if starts_element and _LIST.match(line.text):
        return LIST
    return PROSE


def _continues(prev: str, line: str, wrap_width: int) -> bool:
    """Does `line` carry on the sentence of `prev` (a hard wrap), rather than start a new block element?"""
    p, s = prev.rstrip(), line.lstrip()
    if not s or p.endswith(":"):  # after "...in /etc/lxc/default.conf:" comes what it introduces, not more sentence
        return False
    if indent_of(line) < indent_of(prev) - 1:  # a wrapped line keeps its paragraph's indentation or hangs deeper
        return False
    if s[0].islower() or s[0] in ",;:)]}":
        return True
    # A line that fills the width and ends without punctuation was wrapped mid-sentence.
    return len(p) >= 0.6 * wrap_width and not p.endswith(_ENDS_ELEMENT)


def _body_indent(shapes: list[_Shape]) -> int:
    """The most common indentation of lines that read like sentences (4 words or more)."""
    counts: dict[int, int] = {}
    for line in shapes:
        if line.words >= 4:
            counts[line.indent] = counts.get(line.indent, 0) + 1
    return max(counts, key=lambda k: (counts[k], -k)) if counts else 0


def _code_blocks(shapes: list[_Shape], body_indent: int) -> list[bool]:
    """For each line: is it in a run of lines set off to the right of the body text, opening a block of its own
    (after a blank line or a heading), that does not read as prose? That is an example, a configuration
    snippet or command output; the indented description under an option line is prose."""
    out = [False] * len(shapes)
    i = 0
    while i < len(shapes):
        deeper = shapes[i].stripped and shapes[i].indent >= body_indent + 2
        opens = i == 0 or not shapes[i - 1].stripped or shapes[i - 1].indent < body_indent
        if not (deeper and opens):
            i += 1
            continue
        j = i
        while j < len(shapes) and shapes[j].stripped and shapes[j].indent >= body_indent + 2:
            j += 1
        if not _reads_as_prose(shapes[i:j]):
            out[i:j] = [True] * (j - i)
        i = j
    return out


_last_parsed: tuple[str | None, list[Line]] = (None, [])


def parse(text: str) -> list[Line]:
    """The lines of `text` (split at "\\n"), each with its kind, its block and its unit. The last text's lines are
    kept: the steps of a run (step_worker.py) and the helpers of one step parse the same text one after the other,
    4.4 times per document on Debian documentation. So the list is shared: read it, never change it."""
    global _last_parsed
    if text == _last_parsed[0]:  # the same object, mostly: a compare by identity
        return _last_parsed[1]
    _last_parsed = (text, _parse(text))
    return _last_parsed[1]


def _parse(text: str) -> list[Line]:
    raw = text.split("\n")
    shapes = [_shape(line) for line in raw]
    wrap_width = wrap_width_of(raw)
    body_indent = _body_indent(shapes)
    code_block = _code_blocks(shapes, body_indent)
    kinds, set_off = [], []  # set_off: code by its place (a fence, a block of its own), whatever its words
    in_fence = False
    last = len(raw) - 1
    for i, line in enumerate(raw):
        fence = bool(_FENCE.match(line))
        if in_fence or fence:
            kinds.append(CODE)
            in_fence = in_fence != fence
        else:
            kinds.append(_kind(shapes[i], shapes[i - 1] if i else _NO_LINE, shapes[i + 1] if i < last else _NO_LINE,
                               body_indent, code_block[i]))
        set_off.append(fence or in_fence or code_block[i])
    _rejoin_wrapped(raw, kinds, set_off, wrap_width)
    out: list[Line] = []
    block, unit = 0, -1
    prev_kind, prev_text = BLANK, ""
    for line, kind in zip(raw, kinds):
        if kind == BLANK:
            if prev_kind != BLANK:
                block += 1
            out.append(Line(line, kind, block, -1))
            prev_kind, prev_text = kind, line
            continue
        joins = (kind == PROSE and prev_kind in (PROSE, LIST) and _continues(prev_text, line, wrap_width))
        if not joins:
            unit += 1
        out.append(Line(line, kind, block, unit))
        prev_kind, prev_text = (prev_kind if joins and prev_kind == LIST else kind), line
    return out


# The widths text is hard-wrapped at (a rendered man page 78, e-mail and RFCs 72). Wider: a paragraph per line
# (HTML extracted); narrower: too few lines to tell the width from.
HARD_WRAP = range(60, 101)
FULL_LINE = 0.85  # a line this much of the wrap width long was ended by the formatter (man pages: 67 of 79)


def wrap_width_of(raw: list[str]) -> int:
    """The wrap width of hard-wrapped text: long lines cluster just below it (72, 80, ...). Single-line
    paragraphs (HTML-extracted text) make it large, so nothing is joined by the width test there."""
    lengths = sorted(len(r.rstrip()) for r in raw if r.strip())
    return lengths[int(0.9 * (len(lengths) - 1))] if lengths else 80


def _full(line: str, wrap_width: int) -> bool:
    """Ended by the formatter, not by its author: a line of a hard-wrapped paragraph that is not its last."""
    return wrap_width in HARD_WRAP and len(line.rstrip()) >= FULL_LINE * wrap_width


def _rejoin_wrapped(raw: list[str], kinds: list[str], set_off: list[bool], wrap_width: int) -> None:
    """Make prose again the lines of a hard-wrapped paragraph that read as a table row, code or an option on their
    own: a justified line's wide gaps ("A   string   variable   that    \"undoes\"    the"), a sentence's last
    words ("2.6.38).", "mq_overview(7)."), a sentence that starts with an option's name ("--precise mode doesn't
    yet have ..."). A line is one when the paragraph wraps into it or out of it: same indentation, no blank line
    between, the upper line full and carried on (or both full: justified lines). Otherwise a language or line
    rule cuts the paragraph and leaves these lines behind as fragments."""
    def wraps(a: int, b: int) -> bool:
        return indent_of(raw[a]) == indent_of(raw[b]) and _full(raw[a], wrap_width) \
            and (_continues(raw[a], raw[b], wrap_width) or _full(raw[b], wrap_width))

    def loose(i: int) -> bool:  # not code by its place, nor by a shape no sentence has
        s = raw[i].strip()
        return (kinds[i] in (CODE, TABLE) and not set_off[i] and not _PROMPT.match(raw[i]) and not _is_statement(s)
                and not _ASSIGNMENT.match(s) and not _CONFIG_KEY.match(raw[i]))

    for i in range(1, len(raw)):
        if kinds[i - 1] == PROSE and loose(i) and wraps(i - 1, i):
            kinds[i] = PROSE
    for i in range(len(raw) - 2, -1, -1):
        if kinds[i + 1] != PROSE:  # both rules read a line over prose
            continue
        # an option's line is a sentence when it is full and its paragraph goes on at its indentation: an option
        # and its description are on one line, or the description is indented deeper
        if (loose(i) or kinds[i] == OPTION and not _CONFIG_KEY.match(raw[i])) and wraps(i, i + 1):
            kinds[i] = PROSE
        # a bullet whose text hangs over the lines below ("•      the   replacement   string")
        elif loose(i) and _LIST.match(raw[i]) and hangs_at(raw[i], indent_of(raw[i + 1])):
            kinds[i] = LIST


def hangs_at(text: str, column: int) -> bool:
    """Whether the line carries text after a gap, starting in `column`: a tag and the start of what it tags, whose
    next lines keep that column ("-t     Give each name ...", "•      the replacement ...")."""
    return column >= 2 and text[column - 2:column] == "  " and text[column:column + 1].strip() != ""


def units(lines: list[Line]) -> list[list[int]]:
    """Line indices of each unit, in order."""
    groups: dict[int, list[int]] = {}
    for i, line in enumerate(lines):
        if line.unit >= 0:
            groups.setdefault(line.unit, []).append(i)
    return list(groups.values())


def paragraph_units(lines: list[Line]) -> list[list[int]]:
    """units(), with the units of one hard-wrapped paragraph joined: the sentences of a man page's paragraph are
    units of their own when a line ends with one, but they are one text in one language (its translation is done
    a paragraph at a time) and the language of three sentences is told more surely than that of one. Two units
    join when the first's last line is full and the second starts on the next line at the same indentation; only
    prose and list units join (headings, options, tables and code stay units of their own). After a full line
    that ends a sentence, a single short line with another line under it at its indentation is not joined: it is
    an item of a list set without blank lines ("! expr True if expr is false." over "( expr )")."""
    width = wrap_width_of([line.text for line in lines])
    out: list[list[int]] = []
    for indices in units(lines):
        first, last = lines[indices[0]], out[-1][-1] if out else -1
        under = lines[indices[0] + 1].text if indices[0] + 1 < len(lines) else ""
        item = len(indices) == 1 and not _full(first.text, width) \
            and lines[last].text.rstrip().endswith(SENTENCE_END[:8]) \
            and under.strip() != "" and indent_of(under) == indent_of(first.text)
        joins = (last >= 0 and indices[0] == last + 1 and first.kind in (PROSE, LIST)
                 and lines[out[-1][0]].kind in (PROSE, LIST) and indent_of(first.text) == indent_of(lines[last].text)
                 and _full(lines[last].text, width) and not item)
        if joins:
            out[-1].extend(indices)
        else:
            out.append(list(indices))
    return out


def unit_text(lines: list[Line], indices: list[int]) -> str:
    return "\n".join(lines[i].text for i in indices)


def widen_to_units(lines: list[Line], cut: set[int], max_lines: int = 4) -> set[int]:
    """A cut that takes part of a wrapped paragraph takes all of it, so no sentence is left broken; a paragraph
    longer than max_lines is not chrome that wrapped, and a cut into it is withdrawn instead."""
    size: dict[int, int] = {}
    for line in lines:
        size[line.unit] = size.get(line.unit, 0) + 1
    partial = {lines[i].unit for i in cut if lines[i].unit >= 0}
    wanted = {u for u in partial if size[u] <= max_lines}
    whole = {i for i, line in enumerate(lines) if line.unit in wanted}
    return whole | {i for i in cut if lines[i].unit < 0}


_BLANK_RUNS = re.compile(r"\n{3,}")


def without(lines: list[Line], cut: set[int]) -> str:
    """The text with the cut lines removed; the blank lines they leave behind collapse to paragraph breaks."""
    return _BLANK_RUNS.sub("\n\n", "\n".join(line.text for i, line in enumerate(lines) if i not in cut)).strip()


# Under this many characters (about 60 words), what is left without the tables and code is too little to compare.
SIMILARITY_MIN_CHARS = 400


def similarity_text(text: str) -> str:
    """The text that near-duplicate and containment detection compare: the document without its table rows and
    code blocks, unless little else is left. Reference pages of one family share their tables (the ISO 8859
    pages share most code points, a translated page keeps the original's table and examples) but each says
    something of its own in its prose; two copies of one page share their prose too."""
    lines = parse(text)
    kept = [line.text for line in lines if line.kind not in (TABLE, CODE)]
    rest = "\n".join(kept)
    return rest if len(rest.strip()) >= SIMILARITY_MIN_CHARS else text


def context(lines: list[Line], indices: list[int], around: int = 2) -> str:
    """The removed lines (marked `>>`) with up to `around` non-blank neighbours on each side: what a person
    auditing the cut needs to judge it."""
    lo, hi = min(indices), max(indices)
    before = [i for i in range(lo - 1, -1, -1) if lines[i].kind != BLANK][:around][::-1]
    after = [i for i in range(hi + 1, len(lines)) if lines[i].kind != BLANK][:around]
    picked = set(indices)
    return "\n".join((">> " if i in picked else "   ") + lines[i].text.strip()
                     for i in before + list(range(lo, hi + 1)) + after if i in picked or lines[i].kind != BLANK)


def heading_share(text: str) -> float:
    """Share of the non-blank characters that sit in headings and other lines too short to say anything (a
    page reduced to its table of contents)."""
    lines = parse(text)
    total = sum(len(line.text.strip()) for line in lines if line.kind != BLANK)
    skeletal = sum(len(line.text.strip()) for line in lines
                   if line.kind == HEADING or len(line.text.split()) <= 4)
    return skeletal / total if total else 0.0


def piece_contexts(original: str, pieces: list[str], around: int = 2) -> list[str]:
    """context() for pieces cut out of `original`, found in order (a piece is one or more whole lines)."""
    lines = parse(original)
    raw = [line.text for line in lines]
    out, start = [], 0
    for piece in pieces:
        n = piece.count("\n") + 1
        first = piece.split("\n")[0]
        at = next((i for i in range(start, len(raw)) if raw[i] == first and raw[i:i + n] == piece.split("\n")),
                  None)
        if at is None:
            at = next((i for i in range(len(raw)) if raw[i:i + n] == piece.split("\n")), None)
        if at is None:  # rebuilt text (joined paragraphs): no line-exact position
            out.append("")
            continue
        out.append(context(lines, list(range(at, at + n)), around))
        start = at + n
    return out


def short_of(text: str, min_chars: int) -> bool:
    """Under min_chars, counting a wide character (CJK) as two: each says about as much as a short word, and a
    complete Japanese page of 191 characters is no fragment."""
    if len(text) >= min_chars:
        return False
    return len(text) + sum(unicodedata.east_asian_width(c) in "WF" for c in text) < min_chars


SKELETON_HEADING_SHARE = 0.5  # a cut page that is at least this much headings is a table of contents
STUB_CHARS = 600  # a page this short that ends by introducing something ("The modules are:") lost it
SKELETON_KEPT_SHARE = 0.2  # ... when cuts took at least 80% of it (a short page losing its boilerplate is a page)
SKELETON_MIN_CUT = 0.2  # cuts took at least this share of a page now under min_chars (git-merge-one-file(1): 12%)


def skeleton_reason(text: str, chars_read: int, min_chars: int) -> str | None:
    """Why line and paragraph removals left this document as a skeleton not worth training on, or None."""
    # A short page that lost its footer is still the page: the length rule is for what cuts reduced.
    if short_of(text, min_chars) and min_chars <= chars_read and len(text) <= (1 - SKELETON_MIN_CUT) * chars_read:
        return f"{len(text):,} of {chars_read:,} characters left after line and paragraph removal (< {min_chars})"
    if len(text) < SKELETON_KEPT_SHARE * chars_read and (share := heading_share(text)) >= SKELETON_HEADING_SHARE:
        return (f"{len(text):,} of {chars_read:,} characters left after removals, {share:.0%} of them headings "
                f"and fragments")
    if len(text) < STUB_CHARS and text.rstrip().endswith(":"):
        return (f"{len(text):,} characters ending in a colon: a page whose list or example was lost "
                f"(a chapter index whose links the extraction dropped)")
    return None


def structural_paragraphs(text: str) -> frozenset[int]:
    """Indices of the blank-line-separated paragraphs that are mostly structure (code, tables, options,
    headings) rather than prose, that document an option (its line and its description), that introduce a list
    of options, or that are a short section: a man page keeps its options and its SEE ALSO even when another
    page has them in the same words."""
    lines = parse(text)
    spans, line_no = [], 0
    paragraphs, breaks = paragraphs_and_breaks(text)  # the paragraph deduper's indices
    for i, paragraph in enumerate(paragraphs):
        spans.append(lines[line_no:line_no + paragraph.count("\n") + 1])
        line_no += paragraph.count("\n") + (breaks[i].count("\n") if i < len(breaks) else 0)
    out = set()
    for i, span in enumerate(spans):
        total = sum(len(line.text.strip()) for line in span)
        structural = sum(len(line.text.strip()) for line in span if line.kind in STRUCTURAL)
        body = [line for line in span[1:] if line.kind != BLANK]
        # A section that is a heading and a line or three (LIBRARY, SEE ALSO) belongs to its page, repeated or not.
        short_section = bool(span) and span[0].kind == HEADING and len(body) <= 3
        # "Mandatory arguments to long options are mandatory for short options too." opens the options of every
        # coreutils page, in every translation: part of each page's option list, not a template to cut.
        opens_options = i + 1 < len(spans) and bool(spans[i + 1]) and spans[i + 1][0].kind == OPTION
        if total and (structural >= 0.5 * total or (span and span[0].kind == OPTION) or short_section
                      or opens_options):
            out.add(i)
    return frozenset(out)
