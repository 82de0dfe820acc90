"""Exact deduplication: two documents are duplicates when their normalized texts are identical.

One 128-bit xxh3 digest per distinct document (collisions are ~2^-64 likely even at billions of documents), so
memory is one 16-byte key plus the first document's id per distinct text.
"""

import xxhash

from scratchlm.data.dedup.words import normalize_to_bytes


def exact_key(text: str) -> bytes:
    return xxhash.xxh3_128_digest(normalize_to_bytes(text))


class ExactDeduper:
    """Streaming exact deduper: feed documents in order; the first occurrence of a text wins."""

    def __init__(self) -> None:
        self._first_id: dict[bytes, str] = {}
        self.num_checked = 0
        self.num_duplicates = 0

    def check(self, doc_id: str, text: str) -> str | None:
        """Returns the id of the earlier document with the same normalized text, or None (and remembers this one)."""
        self.num_checked += 1
        key = exact_key(text)
        earlier = self._first_id.get(key)
        if earlier is None:
            self._first_id[key] = doc_id
            return None
        self.num_duplicates += 1
        return earlier

    def __len__(self) -> int:
        """Number of distinct texts seen."""
        return len(self._first_id)
