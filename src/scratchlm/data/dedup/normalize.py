"""Text normalization shared by every deduper, so "the same text" means the same thing everywhere.

normalize_for_hash: NFKC, lowercase, punctuation and symbols (Unicode categories P* and S*) become spaces,
whitespace runs collapse to one space, no leading/trailing space. Punctuation turns into a space rather than
vanishing so that `os.path` and `ospath` stay different words (this corpus is full of code). Scripts written
without spaces between words (Chinese, Japanese kana and kanji, Thai, Lao, Khmer, Myanmar) get a space around
each of their characters: otherwise a whole Japanese sentence is one "word", a page has a handful of word
n-grams, and only its embedded English and commands are compared (a Japanese page whose prose is its own was
measured as 83% inside the Portuguese edition of the same chapter).

Pure-ASCII text (the common case) takes a bytes.translate fast path that produces exactly the same result as the
general Unicode path; tests check the two agree on every ASCII character.
"""

import re
import string
import sys
import unicodedata
from functools import lru_cache


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


def words(text: str) -> list[str]:
    normalized = normalize_for_hash(text)
    return normalized.split(" ") if normalized else []


def word_shingles(text: str, n: int = 5) -> list[str]:
    """Word n-grams of the normalized text, in order (duplicates kept; take set() for Jaccard).

    A document shorter than n words yields one shingle of all its words, so short documents still get a
    signature; an empty document yields none. The vectorized hasher in minhash.py follows the same rule.
    """
    tokens = words(text)
    if len(tokens) < n:
        return [" ".join(tokens)] if tokens else []
    return list(map(" ".join, zip(*(tokens[i:] for i in range(n)))))
