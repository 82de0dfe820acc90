"""Special and chat-template markers: the one list, and how to count them in a text (the scan of a corpus is
marker_scan.py; this module stays import-light because the tokenizer, and so `generate`, imports it).

The tokenizer's own special tokens are defined here, below the tokenizer in the layers, so the data stage can
look for them in the corpus where they enter (`data prepare`), the tokenizer can register them (bpe.py imports
these names), and the SFT leak check reads the same list. Other models' markers are scanned for too: a scraped
chat log in another template teaches the base model a format it will half-remember after fine-tuning.

The data stage reports them and keeps the documents: since the tokenizer encodes a marker written in a text as
its characters (bpe.text_only), a quoted template is ordinary text in the shards, and a README about prompt
formats is worth keeping. The report says where, so a source that is really a chat dump can be dropped by hand.
"""
from __future__ import annotations

import re
from collections import Counter

BOS, EOS, PAD = "<|bos|>", "<|eos|>", "<|pad|>"
END = "<|end|>"  # closes a chat turn
CHAT_TOKENS = ["<|system|>", "<|user|>", "<|assistant|>", END]
SPECIAL_TOKENS = [BOS, EOS, PAD, *CHAT_TOKENS]
FOREIGN_MARKERS = ("<|im_start|>", "<|im_end|>", "[INST]", "<start_of_turn>", "<|start_header_id|>")
MARKERS = (*CHAT_TOKENS, BOS, EOS, PAD, *FOREIGN_MARKERS)
MARKER_RE = re.compile("|".join(map(re.escape, MARKERS)))
_ANCHORS = tuple(sorted({m[:2] if m.startswith("<|") else m for m in MARKERS}))


def has_marker(text: str) -> bool:
    """A fast pre-test: the regex scans at ~150 MB/s, a substring test at GB/s, and almost no text holds a
    marker. `<|` stands for every marker that starts with it, so it is 3 scans of the text, not 12."""
    return any(a in text for a in _ANCHORS)


def count_markers(text: str) -> Counter:
    """Occurrences of each marker in `text`."""
    return Counter(MARKER_RE.findall(text)) if has_marker(text) else Counter()
