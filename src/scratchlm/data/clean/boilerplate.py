"""Line-level boilerplate removal for plain text.

Two complementary tools:
- strip_boilerplate_lines: pattern rules for the boilerplate every site has (cookie banners, nav bars,
  copyright footers, share/newsletter prompts). Works on one document, needs no corpus statistics.
- RepeatedLineFinder + remove_lines: the site-specific rest. A line that appears verbatim in a large share
  of one source's documents is template, not content (the idea behind C4's and RefinedWeb's
  line-frequency dedup), whatever words it uses.
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
# "/" and ">" only count with spaces around them, so "TCP/IP/UDP" and "a>b>c" stay prose.
_NAV_SPLIT = re.compile(r"\s*[|•·»›]\s*|\s+[/>]\s+")
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
    return all(1 <= len(item.split()) <= cfg.nav_max_item_words and item[0].isalnum() for item in items)


def strip_boilerplate_lines(text: str, cfg: BoilerplateConfig = BoilerplateConfig()) -> tuple[str, list[str]]:
    """(text without boilerplate lines, the removed lines as they were)."""
    kept, removed = [], []
    for line in text.split("\n"):
        (removed if boilerplate_reason(line, cfg) else kept).append(line)
    return _join(kept), removed


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

    def count(self, line: str) -> int:
        """Documents seen so far that contain this line (a lower bound, see the class docstring)."""
        self._merge()
        h = np.uint64(line_hash(line))
        i = int(np.searchsorted(self._keys, h))
        return int(self._counts[i]) if i < len(self._keys) and self._keys[i] == h else 0

    def frequent(self, min_docs: int, min_share: float) -> set[int]:
        """Hashes (line_hash) of lines found in at least min_docs documents AND at least min_share of them."""
        self._merge()
        need = max(min_docs, int(np.ceil(min_share * self.n_docs)))
        return set(self._keys[self._counts >= need].tolist())


def remove_lines(text: str, line_hashes: set[int]) -> tuple[str, int]:
    """(text without the lines whose line_hash is in line_hashes, how many lines were removed)."""
    if not line_hashes:
        return text, 0
    kept = [line for line in text.split("\n") if not line.strip() or line_hash(line) not in line_hashes]
    n_removed = text.count("\n") + 1 - len(kept)
    return _join(kept), n_removed
