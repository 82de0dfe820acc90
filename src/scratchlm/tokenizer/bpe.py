"""Byte-level BPE training with the `tokenizers` library.

Byte-level means every string is representable (no <unk>), which matters for code and for languages the sample
under-represents. The pre-tokenizer is the GPT-4 split pattern, with digits in groups of at most three so
numbers do not each become their own token.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Iterable, Iterator

from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers

from ..data.markers import BOS, CHAT_TOKENS, END, EOS, PAD, SPECIAL_TOKENS  # one list: data's
from ..errors import UserError
from ..ids import content_id, write_json

# Every document in the shards is <|bos|> text <|eos|>, Llama-style: BOS opens it, so a prompt that starts with
# BOS reads like the start of a document; EOS closes it, so the model learns to emit the token that
# transformers' generation_config and llama.cpp stop on. Shards, token counts and estimates all use this pair.
DOCUMENT_WRAP = (BOS, EOS)
DOC_SPECIALS = len(DOCUMENT_WRAP)  # tokens each document costs beyond its text
# EOS ends a document, <|end|> a chat turn; BOS is what checkpoints trained before documents had an EOS emit
# at a document's end, and it never belongs inside a continuation, so stopping on it costs nothing.
STOP_TOKENS = (EOS, END, BOS)
GPT4_SPLIT = (r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]++[\r\n]*"""
              r"""|\s*[\r\n]|\s+(?!\S)|\s+""")


def new_tokenizer() -> Tokenizer:
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(GPT4_SPLIT), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
    ])
    tok.decoder = decoders.ByteLevel()
    return tok


def train_bpe(texts: Iterable[str], vocab_size: int, min_frequency: int = 2, length: int | None = None) -> Tokenizer:
    minimum = 256 + len(SPECIAL_TOKENS)
    if vocab_size < minimum:
        raise UserError(f"tokenizer.vocab_size {vocab_size} is too small: 256 bytes + {len(SPECIAL_TOKENS)} "
                        f"special tokens need at least {minimum}")
    tok = new_tokenizer()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size, min_frequency=min_frequency, special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=sys.stderr.isatty())
    counted = _count_nonempty(texts)
    tok.train_from_iterator(counted, trainer=trainer, length=length)
    if counted.n == 0:
        raise UserError("the tokenizer training sample is empty: no training documents survived data preparation")
    return text_only(tok)


SPECIALS_IN_TEXT = "characters"  # what text_only makes of a marker written in a text; in the shards' identity


def text_only(tok: Tokenizer) -> Tokenizer:
    """`tok` encoding "<|eos|>" written in a text as the characters it is, not as the special token: documents
    that quote a chat template or another model's markers (READMEs, docs) must not put a document end or a
    turn marker inside the shards, and a user's prompt or chat message must not inject one. Special tokens
    enter only by id (DOCUMENT_WRAP, the chat template). A runtime flag: tokenizer.json does not store it."""
    tok.encode_special_tokens = True
    return tok


class _count_nonempty:
    def __init__(self, texts: Iterable[str]):
        self.texts, self.n = texts, 0

    def __iter__(self) -> Iterator[str]:
        for t in self.texts:
            if t:
                self.n += 1
                yield t


def load_tokenizer(path: Path) -> Tokenizer:
    try:
        return text_only(Tokenizer.from_file(str(path)))
    except Exception as e:  # tokenizers raises a bare Exception on a bad file
        raise UserError(f"{path}: not a valid tokenizer.json ({e})") from None


def special_ids(tok: Tokenizer) -> dict[str, int]:
    return {t: tok.token_to_id(t) for t in SPECIAL_TOKENS}


def document_wrap_ids(tok: Tokenizer) -> tuple[int, int]:
    """(id put before, id put after) each document in the shards."""
    opening, closing = (tok.token_to_id(t) for t in DOCUMENT_WRAP)
    return opening, closing


def prompt_ids(tok: Tokenizer, text: str) -> list[int]:
    """A prompt as the start of a training document: BOS, then the text (never the closing EOS)."""
    return [tok.token_to_id(DOCUMENT_WRAP[0]), *tok.encode(text, add_special_tokens=False).ids]


def shard_tokens(tok: Tokenizer, texts: list[str]) -> int:
    """Tokens `texts` take in the shards: each document's text plus its DOC_SPECIALS."""
    return sum(len(e.ids) + DOC_SPECIALS for e in tok.encode_batch(texts, add_special_tokens=False))


def stop_ids(tok: Tokenizer) -> tuple[int, ...]:
    """Token ids that end a generation, in scratchlm and in the exports' metadata alike; EOS first."""
    return tuple(i for i in (tok.token_to_id(t) for t in STOP_TOKENS) if i is not None)


def save_tokenizer(tok: Tokenizer, directory: Path) -> Path:
    """tokenizer.json plus the two small files `transformers` reads to know which tokens are bos/eos/pad."""
    path = Path(directory) / "tokenizer.json"
    tok.save(str(path))
    roles = {"bos_token": BOS, "eos_token": EOS, "pad_token": PAD, "additional_special_tokens": CHAT_TOKENS}
    write_json(path.with_name("special_tokens_map.json"), roles)
    write_json(path.with_name("tokenizer_config.json"), {"tokenizer_class": "PreTrainedTokenizerFast", **roles})
    return path


def tokenizer_content_id(path: Path) -> str:
    """ID of what the tokenizer does (vocabulary, merges, pre-tokenizer), independent of JSON formatting."""
    try:
        return content_id(json.loads(Path(path).read_text(encoding="utf-8")))
    except (OSError, ValueError) as e:
        raise UserError(f"{path}: cannot read tokenizer file ({e})") from None
