"""Words and word n-gram hashes: how dedup and decontamination compare texts, so that "the same words" and "the
same n-gram" are defined once.

Words. normalize_words turns a text into the words n-grams are made of, under one of two rules:
- dedup (the default): NFKC, lowercase, punctuation and symbols (Unicode categories P* and S*) become spaces,
  whitespace separates words. Punctuation turns into a space rather than vanishing so that `os.path` and `ospath`
  stay different words (this corpus is full of code). Scripts written without spaces between words (Chinese,
  Japanese kana and kanji, Thai, Lao, Khmer, Myanmar) get a space around each of their characters: otherwise a
  whole Japanese sentence is one "word", a page has a handful of word n-grams, and only its embedded English and
  commands are compared (a Japanese page whose prose is its own was measured as 83% inside the Portuguese
  edition of the same chapter).
- keep_offsets (decontamination): every word is a stretch of the original text, so that a match can be cut out
  of it (word_spans says where): lowercase only, no NFKC and no inserted spaces; a word is a run of letters,
  digits and combining marks.
The rules also differ on control and format characters (part of a word for dedup, separators for
decontamination). Both are kept as they are: making them one would change dedup verdicts and the fingerprints
of every decontamination index already written.

Pure-ASCII text (the common case) takes a bytes.translate fast path in the dedup rule that produces exactly the
same result as the general Unicode path; tests check the two agree on every ASCII character.

N-gram hashes. Given one uint64 hash w_j per word, the hash of the words [s, e) is
    sum_{j < e-s} w_{s+j} * base^j  (mod 2^64)
computed for any number of spans from one prefix sum, S[k] = sum_{j<k} w_j base^j, as (S[e] - S[s]) * base^-s:
O(words) for the whole text whatever the n-gram size. The base is odd, so it is invertible mod 2^64. Each user
picks its own base, word hash and final mix (minhash.py, fingerprint.py).
"""

import re
import string
import sys
import unicodedata
from functools import cache, lru_cache

import numpy as np

# ---------------------------------------------------------------------------------------------------------------
# The dedup rule


def _ascii_table() -> bytes:
    # Everything str.split() treats as whitespace in ASCII, plus ASCII punctuation/symbols, maps to a space.
    to_space = set(string.punctuation.encode()) | set(b" \t\n\r\x0b\x0c\x1c\x1d\x1e\x1f")
    table = bytearray(range(256))
    for byte in range(256):
        if byte in to_space:
            table[byte] = 0x20
        elif 0x41 <= byte <= 0x5A:
            table[byte] = byte + 0x20
    return bytes(table)


ASCII_TABLE = _ascii_table()


@lru_cache(maxsize=1)
def _non_ascii_table() -> dict[int, int]:
    # Built once, lazily (~0.3 s): only non-ASCII documents need it. Whitespace is included because
    # str.split() splits on Unicode whitespace (e.g. U+0085) that NFKC leaves alone.
    return {
        cp: 0x20
        for cp in range(0x80, sys.maxunicode + 1)
        if unicodedata.category(chr(cp))[0] in "PS" or chr(cp).isspace()
    }


_NON_ASCII_RUN = re.compile(r"[^\x00-\x7f]+")


# Characters of scripts without word spaces: each is a "word" for n-grams (see the module docstring).
_UNSPACED = re.compile("([\u0e00-\u0eff\u1000-\u109f\u1780-\u17ff\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff"
                       "\uf900-\ufaff\uff66-\uff9f])")


def _translate_run(match: re.Match) -> str:
    return _UNSPACED.sub(r" \1 ", match.group().translate(_non_ascii_table()))


def fold_to_bytes(text: str) -> bytes:
    """normalize_for_hash without the whitespace collapse: every word separator is one or more b" "."""
    if text.isascii():
        return text.encode("ascii").translate(ASCII_TABLE)
    folded = unicodedata.normalize("NFKC", text).lower()
    # str.translate costs a dict lookup per character, so only the non-ASCII runs take it; the ASCII
    # characters go through the 256-byte table like pure-ASCII text does.
    folded = _NON_ASCII_RUN.sub(_translate_run, folded)
    return folded.encode("utf-8").translate(ASCII_TABLE)


def normalize_to_bytes(text: str) -> bytes:
    """UTF-8 bytes of normalize_for_hash(text); the hashers work on bytes, so this skips a decode/encode."""
    return b" ".join(fold_to_bytes(text).split())


def normalize_for_hash(text: str) -> str:
    """NFKC + lowercase + punctuation/symbols to spaces + collapsed whitespace."""
    return normalize_to_bytes(text).decode("utf-8")


# ---------------------------------------------------------------------------------------------------------------
# The keep_offsets rule


def _class_ranges(codepoints: list[int]) -> str:
    parts: list[str] = []
    start = prev = codepoints[0]
    for c in codepoints[1:] + [-1]:
        if c != prev + 1:
            parts.append(f"{re.escape(chr(start))}-{re.escape(chr(prev))}" if prev > start else re.escape(chr(start)))
            start = c
        prev = c
    return "".join(parts)


@cache
def _word_patterns() -> tuple[re.Pattern[str], re.Pattern[str]]:
    r"""(pattern for text without astral characters, pattern for any text).

    A word is a run of letters, digits and combining marks. Python's \w covers letters, digits and "_", but not
    combining marks, so Devanagari or decomposed accents ("e" + U+0301) would otherwise split mid-word. "_" is
    punctuation (Pc) and is turned into a space before matching. The marks above U+FFFF (rare scripts) are kept
    in a second pattern: with them the character class can no longer be compiled to a bitmap and is 4x slower."""
    marks = [c for c in range(sys.maxunicode + 1) if unicodedata.category(chr(c))[0] == "M"]
    bmp = [c for c in marks if c <= 0xFFFF]
    return re.compile(r"[\w" + _class_ranges(bmp) + r"]+"), re.compile(r"[\w" + _class_ranges(marks) + r"]+")


_ASTRAL = re.compile("[\U00010000-\U0010FFFF]")


def _word_pattern(prepared: str) -> re.Pattern[str]:
    fast, full = _word_patterns()
    return fast if prepared.isascii() or not _ASTRAL.search(prepared) else full


def _prepare(text: str) -> str:
    return text.lower().replace("_", " ")


def word_spans(text: str) -> list[tuple[int, int]]:
    """(start, end) character offsets in `text` of each word normalize_words(text, keep_offsets=True) returns,
    in the same order."""
    prepared = _prepare(text)
    spans = [m.span() for m in _word_pattern(prepared).finditer(prepared)]
    if len(prepared) == len(text):
        return spans
    # A few characters lowercase to two ("İ" -> "i̇"), which shifts offsets: map prepared offsets back to text.
    origin: list[int] = []
    for i, ch in enumerate(text):
        origin.extend([i] * len(ch.lower()))
    origin.append(len(text))
    return [(origin[s], origin[e - 1] + 1) for s, e in spans]


# ---------------------------------------------------------------------------------------------------------------
# Words and shingles


def normalize_words(text: str, *, keep_offsets: bool = False) -> list[str]:
    """The words of a text, lowercased, without punctuation or symbols: under the dedup rule, or with
    keep_offsets under the rule whose words are stretches of the original text (see the module docstring)."""
    if keep_offsets:
        prepared = _prepare(text)
        return _word_pattern(prepared).findall(prepared)
    normalized = normalize_for_hash(text)
    return normalized.split(" ") if normalized else []


def word_shingles(text: str, n: int = 5) -> list[str]:
    """Word n-grams of the normalized text (dedup rule), in order (duplicates kept; take set() for Jaccard).

    A document shorter than n words yields one shingle of all its words, so short documents still get a
    signature; an empty document yields none. The vectorized hasher in minhash.py follows the same rule.
    """
    tokens = normalize_words(text)
    if len(tokens) < n:
        return [" ".join(tokens)] if tokens else []
    return list(map(" ".join, zip(*(tokens[i:] for i in range(n)))))


# ---------------------------------------------------------------------------------------------------------------
# N-gram hashes


class NgramPolynomial:
    """Hashes of word spans as polynomials in `base` over the word hashes (see the module docstring). The
    powers base^j and base^-j are cached and grown by doubling."""

    def __init__(self, base: int) -> None:
        self.base = base
        self.inverse = pow(base, -1, 1 << 64)  # exists for an odd base; an even one raises ValueError
        self.powers = np.ones(1, dtype=np.uint64)
        self.inverse_powers = np.ones(1, dtype=np.uint64)

    def _ensure(self, length: int) -> None:
        if len(self.powers) >= length:
            return
        length = max(length, 2 * len(self.powers))
        self.powers = np.full(length, self.base, dtype=np.uint64)
        self.powers[0] = 1
        np.cumprod(self.powers, out=self.powers)  # uint64 products wrap mod 2^64, as wanted
        self.inverse_powers = np.full(length, self.inverse, dtype=np.uint64)
        self.inverse_powers[0] = 1
        np.cumprod(self.inverse_powers, out=self.inverse_powers)

    def prefix_sums(self, word_hashes: np.ndarray) -> np.ndarray:
        """S[k] = sum_{j<k} w_j base^j: len(word_hashes) + 1 entries, S[0] = 0."""
        self._ensure(len(word_hashes) + 1)
        prefix = np.zeros(len(word_hashes) + 1, dtype=np.uint64)
        np.cumsum(word_hashes * self.powers[:len(word_hashes)], dtype=np.uint64, out=prefix[1:])
        return prefix

    def span_hashes(self, prefix: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
        """The hash of the words [starts[i], ends[i]) for every i."""
        self._ensure(len(prefix))
        return (prefix[ends] - prefix[starts]) * self.inverse_powers[starts]

    def window_hashes(self, prefix: np.ndarray, length: int) -> np.ndarray:
        """The hash of every window of `length` words; entry i is the window starting at word i. Slices rather
        than span_hashes' gathers: the same numbers, without two index arrays as long as the text."""
        count = len(prefix) - length
        if count <= 0:
            return np.empty(0, dtype=np.uint64)
        self._ensure(count)
        return (prefix[length:] - prefix[:count]) * self.inverse_powers[:count]


@cache
def ngram_polynomial(base: int) -> NgramPolynomial:
    """One NgramPolynomial per base and process, so its powers are computed once."""
    return NgramPolynomial(base)
