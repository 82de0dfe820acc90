"""Line-level boilerplate removal for plain text.

Two complementary tools:
- strip_boilerplate_lines: pattern rules for the boilerplate every site has (cookie banners, nav bars,
  copyright footers, share/newsletter prompts). Works on one document, needs no corpus statistics.
- RepeatedLineFinder + remove_lines: the site-specific rest. A line that appears verbatim in a large share
  of one source's documents, at the start or end of its pages, is template, not content (the idea behind
  C4's and RefinedWeb's line-frequency dedup), whatever words it uses.

Both only cut page chrome (chrome_lines): a line inside the body is content even when it recurs or holds a
keyword, and structural lines (headings, options, tables, code; see structure.py) are never cut.
"""
import re
from dataclasses import dataclass

import numpy as np
import xxhash

# Each pattern is searched in the lowercased line; it only counts on short lines (BoilerplateConfig.max_words)
# so that a real paragraph that happens to mention "cookies" or "copyright" survives.
_PATTERNS: dict[str, re.Pattern] = {
    "cookie": re.compile(
        r"\b(we|this (web)?site|our (web)?site) (use|uses|using) cookies\b"
        r"|\b(accept|reject|allow|decline|manage) (all |our )?cookies\b"
        r"|\bcookie (policy|settings|preferences|consent)\b"
        r"|\buse of cookies\b"
        r"|\bby (continuing|continuing to (use|browse)|using this (web)?site),? you (agree|accept|consent)\b"
        r"|\bwe value your privacy\b|\bmanage (your )?consent\b"
    ),
    "copyright": re.compile(
        r"\ball rights reserved\b|^\s*(copyright|©|\(c\))\s*(\d{4}|©)|©\s*\d{4}|\bcopyright\s+\d{4}\b"
    ),
    "share": re.compile(
        r"^\W*share (this|on|via|article|post|page|story)\b"
        r"|\bshare on (facebook|twitter|linkedin|whatsapp|pinterest|reddit|x)\b"
        r"|\b(follow|like|find) us on (facebook|twitter|instagram|linkedin|youtube|x)\b"
    ),
    "newsletter": re.compile(
        r"\b(subscribe|sign up|signup|register) (to|for) (our|the|my)\b.{0,40}\b(newsletter|mailing list)\b"
        r"|\b(subscribe|sign up|signup|register) (to|for) (our|my) (blog|updates|channel)\b"
        r"|\bjoin (our|the) (newsletter|mailing list)\b|\benter your e-?mail( address)? (to|and|below)\b"
    ),
    "legal": re.compile(r"\b(privacy policy|terms (of use|of service|and conditions)|cookie notice)\b"),
    "browser": re.compile(
        r"\b(enable|turn on) javascript\b|\bjavascript (is|must be) (disabled|enabled|required)\b"
        r"|\byour browser (does not|doesn't) support\b|\bupgrade your browser\b"
    ),
    "comments": re.compile(
        r"^\W*(leave a (comment|reply)|comments are closed|\d+ comments?|no comments( yet)?|related (posts|articles))\W*$"
    ),
    "prompt": re.compile(r"^\W*click here (to|for)\b|\bpowered by (wordpress|blogger|wix|squarespace|shopify)\b"),
}

# One alternation of named groups: a single regex pass per line instead of one per pattern.
_ANY_PATTERN = re.compile("|".join(f"(?P<{name}>{p.pattern})" for name, p in _PATTERNS.items()))

# Every pattern contains one of these substrings; checking them first skips the regex for most lines
# (about 4x faster on extracted article text).
_TRIGGERS = (
    "cookie", "consent", "privacy", "continu", "copyright", "©", "(c)", "rights", "share", "follow", "like us",
    "find us", "subscribe", "sign", "regist", "join", "mail", "terms", "javascript", "browser",
    "comment", "reply", "related", "click", "powered", "agree", "accept",
)

# Whole-line widgets: a line that is exactly one of these (after lowercasing and dropping punctuation)
# is a button or menu label, never content.
_WIDGET_LINES = frozenset(
    "menu|search|home|login|log in|logout|log out|sign in|sign up|register|skip to content|skip to main content"
    "|back to top|print|email|share|tweet|next|previous|next post|previous post|read more|continue reading"
    "|load more|show more|close|accept|accept all|reject all|advertisement|sponsored|toggle navigation"
    "|main menu|navigation|breadcrumb|comments|related stories|related posts|related articles|you may also like"
    "|most popular|trending|tags|categories".split("|")
)
# Separators of nav bars and breadcrumbs: "Home | About | Contact", "Home > Blog > Post", "A • B • C".
# "|", "/" and ">" only count with spaces around them, so "TCP/IP/UDP", "{on|off|auto}" and "a>b>c" stay content.
_NAV_SPLIT = re.compile(r"\s*[•·»›]\s*|\s+[|/>]\s+")
_MENU_WORD = re.compile(r"^[^\W\d_]+(['’&-][^\W\d_]+)*$")
_PUNCT = re.compile(r"[^\w\s]+")
_BLANK_RUNS = re.compile(r"\n{3,}")


@dataclass(frozen=True)
class BoilerplateConfig:
    # Pattern rules only fire on lines with at most this many words. Cookie banners run to ~40 words;
    # a content paragraph that merely mentions cookies is usually longer and is kept.
    max_words: int = 50
    # A nav bar has at least this many separator-delimited items ...
    nav_min_items: int = 3
    # ... and each item is a short label of at most this many words.
    nav_max_item_words: int = 3


def boilerplate_reason(line: str, cfg: BoilerplateConfig = BoilerplateConfig()) -> str | None:
    """Why this line is boilerplate ("cookie", "nav", "widget", ...), or None when it looks like content."""
    low = line.strip().lower()
    if not low:
        return None
    bare = " ".join(_PUNCT.sub(" ", low).split())
    if bare in _WIDGET_LINES:
        return "widget"
    if len(low.split()) > cfg.max_words:
        return None
    if _is_nav_line(low, cfg):
        return "nav"
    if not any(word in low for word in _TRIGGERS):
        return None
    match = _ANY_PATTERN.search(low)
    return match.lastgroup if match else None


def _is_nav_line(low: str, cfg: BoilerplateConfig) -> bool:
    items = [item for item in _NAV_SPLIT.split(low) if item]
    # A line opening with "|" is a markdown table row, which is content.
    if len(items) < cfg.nav_min_items or low.startswith("|") or low.endswith((".", "!", "?")):
        return False
    # Menu labels are words: a shell pipeline ("cat a1 | gzip > a.gz"), a grammar rule ("op = Add | Sub") or
    # an option list ("Aliases: pu | up") has digits, dots, dashes or '=' in its items.
    return all(1 <= len(item.split()) <= cfg.nav_max_item_words and all(_MENU_WORD.match(w) for w in item.split())
               for item in items)


# "Copyright © 2022 ...", "Copyright 2000-2022 ...", "© 1998 ...": a notice, not a sentence about copyright
# ("copyright conditions. Note that ...", "Copyright-Bedingungen der Übersetzung ...").
_NOTICE = re.compile(r"^\s*(copyright\s+(©|\(c\)|\d{4})|©\s*\d|\(c\)\s*\d)", re.IGNORECASE)
_NOTICE_MAX_WORDS = 15

# Reasons that mark a line as chrome even standing alone in the body; a lone "Next", "Privacy Policy" or
# "A | B | C" line there is as likely a term, a heading or a value.
_BANNERS = frozenset({"cookie", "share", "newsletter", "browser", "comments", "prompt"})


def chrome_lines(lines: list[str], is_chrome, is_banner=None) -> set[int]:
    """Indices of the page chrome among `lines`, given a per-line test: the run of chrome (and blank) lines at the
    start and at the end of the page, and (with `is_banner`) blocks in the body made only of chrome that are
    either several lines long or one banner line (a cookie notice, a share prompt). A chrome-looking line
    inside the body of the text is content (a quoted value, an option list, command output, the term "next"
    in a reference table) and stays."""
    chrome = [bool(line.strip()) and is_chrome(i) for i, line in enumerate(lines)]
    cut: set[int] = set()
    for order in (range(len(lines)), range(len(lines) - 1, -1, -1)):
        for i in order:
            if chrome[i]:
                cut.add(i)
            elif lines[i].strip():
                break
    block: list[int] = []
    for i, line in enumerate(lines + [""] if is_banner else []):
        if line.strip():
            block.append(i)
            continue
        if block and all(chrome[j] for j in block) and (len(block) >= 2 or is_banner(block[0])):
            cut.update(block)
        block = []
    return cut


def strip_boilerplate_lines(text: str, cfg: BoilerplateConfig = BoilerplateConfig()) -> tuple[str, list[str]]:
    """(text without its boilerplate, the removed lines as they were). Boilerplate is page chrome: lines the
    pattern rules recognise at the start or end of the page or in blocks of their own (chrome_lines). A
    "Print", "next" or "close" line inside the body of a reference page is a term, not a button."""
    from .structure import HEADING, OPTION, STRUCTURAL, TABLE, parse, widen_to_units

    lines = text.split("\n")
    parsed = parse(text)
    reasons = [None if parsed[i].kind in STRUCTURAL else boilerplate_reason(line, cfg) for i, line in enumerate(lines)]
    cut = chrome_lines(lines, lambda i: reasons[i] is not None, lambda i: reasons[i] in _BANNERS)
    cut = widen_to_units(parsed, cut)  # a banner wrapped over two lines goes whole
    # A copyright notice is a footer wherever the page put it (a man page's COPYRIGHT section sits above its
    # last line); it goes with the wrapped paragraph it opens, so no half sentence is left behind.
    # (A year list reads as data to parse(), so only headings, options and table rows are exempt.)
    notices = {i for i, line in enumerate(lines)
               if parsed[i].kind not in (HEADING, OPTION, TABLE) and _NOTICE.match(line)
               and len(line.split()) <= _NOTICE_MAX_WORDS}
    # a word hyphenated across the line end ("Founda‐" / "tion, Inc.") takes the next line with it
    notices |= {i + 1 for i in notices if lines[i].rstrip().endswith(("-", "‐")) and i + 1 < len(lines)}
    cut |= widen_to_units(parsed, notices)
    if not cut:
        return text, []
    removed = [lines[i] for i in sorted(cut)]
    return _join([line for i, line in enumerate(lines) if i not in cut]), removed


def _join(lines: list[str]) -> str:
    # Removing lines leaves stacks of blank lines behind; keep paragraph breaks, not the gaps.
    return _BLANK_RUNS.sub("\n\n", "\n".join(lines)).strip()


# ---------------------------------------------------------------------------------------------------------
# Lines repeated across the documents of one source


_DIGITS = re.compile(r"\d+")


def normalize_line(line: str) -> str:
    """Lowercase, collapse whitespace, digits -> 0: "© 2023 ACME" and "© 2024 Acme" count as one line."""
    return _DIGITS.sub("0", " ".join(line.lower().split()))


def line_hash(line: str) -> int:
    """64-bit xxhash of the normalized line; the key RepeatedLineFinder counts and remove_lines looks up."""
    return xxhash.xxh64_intdigest(normalize_line(line).encode("utf-8"))


class RepeatedLineFinder:
    """Counts, per normalized line, how many documents of one source contain it, in bounded memory.

    Counts live in two numpy arrays (sorted uint64 hashes, uint32 document counts): 12 bytes a line instead
    of ~100 for a Python dict. New hashes are buffered and merged in batches. When the table outgrows
    max_entries, the rarest entries are pruned until at most half of max_entries remain. A pruned line that
    comes back starts counting from zero again, so stored counts are lower bounds of the true ones: pruning
    can make frequent() miss a line, never report one that is not frequent. `undercount_bound` is how far
    below its true count any stored count can be.
    """

    def __init__(self, max_entries: int = 1_000_000, min_line_chars: int = 10, merge_every: int = 1 << 18):
        # Lines shorter than min_line_chars ("}", "Thanks!", "end") are common by nature, not template;
        # they are never counted and so never removed.
        self.max_entries = max_entries
        self.min_line_chars = min_line_chars
        self.merge_every = merge_every
        self.n_docs = 0
        self.undercount_bound = 0
        self._keys = np.empty(0, dtype=np.uint64)
        self._counts = np.empty(0, dtype=np.uint32)
        self._pending: list[np.ndarray] = []
        self._pending_len = 0

    def feed(self, text: str) -> None:
        """Count the distinct lines of one document (a line repeated inside one document counts once)."""
        self.n_docs += 1
        hashes = {line_hash(line) for line in text.split("\n") if len(line.strip()) >= self.min_line_chars}
        if not hashes:
            return
        self._pending.append(np.fromiter(hashes, dtype=np.uint64, count=len(hashes)))
        self._pending_len += len(hashes)
        if self._pending_len >= self.merge_every:
            self._merge()

    def _merge(self) -> None:
        if not self._pending:
            return
        new_keys, new_counts = np.unique(np.concatenate(self._pending), return_counts=True)
        self._pending, self._pending_len = [], 0
        self._combine(new_keys, new_counts.astype(np.uint32))

    def _combine(self, new_keys: np.ndarray, new_counts: np.ndarray) -> None:
        keys = np.concatenate([self._keys, new_keys])
        counts = np.concatenate([self._counts, new_counts])
        self._keys, inverse = np.unique(keys, return_inverse=True)
        self._counts = np.bincount(inverse, weights=counts, minlength=len(self._keys)).astype(np.uint32)
        if len(self._keys) > self.max_entries:
            self._prune(self.max_entries // 2)

    def _prune(self, target: int) -> None:
        # Drop every entry whose count is at or below the target-th largest count: keeps <= target entries
        # and never keeps a rarer line while dropping a more frequent one.
        floor = int(np.partition(self._counts, len(self._counts) - target - 1)[len(self._counts) - target - 1])
        keep = self._counts > floor
        self._keys, self._counts = self._keys[keep], self._counts[keep]
        self.undercount_bound += floor

    def table(self) -> tuple[np.ndarray, np.ndarray]:
        """(sorted line hashes, document counts): what a worker hands to the corpus-wide merge."""
        self._merge()
        return self._keys, self._counts

    def add_table(self, keys: np.ndarray, counts: np.ndarray, n_docs: int) -> None:
        """Merge another finder's table (counts of disjoint documents add up)."""
        self._merge()
        self.n_docs += n_docs
        self._combine(np.asarray(keys, dtype=np.uint64), np.asarray(counts, dtype=np.uint32))

    def __len__(self) -> int:
        """Entries in the table (after merging what is buffered)."""
        self._merge()
        return len(self._keys)

    def counts_of(self, hashes: np.ndarray) -> np.ndarray:
        """Documents seen so far holding each line hash (0 for a hash not in the table; lower bounds)."""
        self._merge()
        hashes = np.asarray(hashes, dtype=np.uint64)
        if not len(self._keys):
            return np.zeros(len(hashes), dtype=np.uint32)
        at = np.searchsorted(self._keys, hashes).clip(0, len(self._keys) - 1)
        return np.where(self._keys[at] == hashes, self._counts[at], 0).astype(np.uint32)

    def count(self, line: str) -> int:
        """Documents seen so far that contain this line (a lower bound, see the class docstring)."""
        return int(self.counts_of(np.array([line_hash(line)], dtype=np.uint64))[0])

    def frequent(self, min_docs: int, min_share: float) -> set[int]:
        """Hashes (line_hash) of lines found in at least min_docs documents AND at least min_share of them."""
        self._merge()
        need = max(min_docs, int(np.ceil(min_share * self.n_docs)))
        return set(self._keys[self._counts >= need].tolist())


def remove_lines(text: str, line_hashes: set[int]) -> tuple[str, list[str]]:
    """(text without the page chrome among the lines whose line_hash is in line_hashes, the removed lines).

    A frequent line is template only where chrome stands: at the start or end of the page (chrome_lines).
    "DESCRIPTION", "-v, --verbose" or a recurring sentence in the body of a man page recur across a source
    because they are its content; structural lines are never removed."""
    if not line_hashes:
        return text, []
    from .structure import STRUCTURAL, parse, widen_to_units

    lines = text.split("\n")
    parsed = parse(text)
    # Head and tail only: in the body, a block of frequent lines is a recurring note ("New in version 3.3.",
    # "If x is a NaN, a NaN is returned.", a translation credit), content that paragraph dedup thins out.
    cut = chrome_lines(lines, lambda i: parsed[i].kind not in STRUCTURAL and line_hash(lines[i]) in line_hashes)
    cut = widen_to_units(parsed, cut)  # a template sentence wrapped over two lines goes whole
    if not cut:
        return text, []
    return _join([line for i, line in enumerate(lines) if i not in cut]), [lines[i] for i in sorted(cut)]
