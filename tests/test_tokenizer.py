import numpy as np
import pytest

from scratchlm.errors import UserError
from scratchlm.tokenizer.bpe import SPECIAL_TOKENS, train_bpe
from scratchlm.tokenizer.shards import TokenShard, TokenShardWriter, dtype_for_vocab

TEXTS = ["def add(a, b):\n    return a + b\n", "The quick brown fox jumps over the lazy dog. " * 3,
         "Zahlen wie 1234567 werden in Dreiergruppen geteilt.", "naïve café — ünïcödé 日本語"] * 20


def test_bpe_round_trips_any_text_and_has_special_tokens():
    tok = train_bpe(TEXTS, vocab_size=400, min_frequency=1)
    assert tok.get_vocab_size() <= 400
    for t in SPECIAL_TOKENS:
        assert tok.token_to_id(t) is not None
    for text in TEXTS[:4] + ["never seen: ∮ 🚀 \t\r\n"]:
        assert tok.decode(tok.encode(text).ids) == text  # byte-level: no <unk>, lossless
    pieces = tok.encode("1234567").tokens
    assert all(len(p) <= 3 for p in pieces)  # digits are split in groups of at most 3


def test_vocab_too_small_and_empty_sample():
    with pytest.raises(UserError, match="too small"):
        train_bpe(TEXTS, vocab_size=100)
    with pytest.raises(UserError, match="empty"):
        train_bpe(["", ""], vocab_size=400)


@pytest.mark.parametrize("vocab,dtype", [(4096, np.uint16), (65536, np.uint16), (70000, np.uint32)])
def test_shard_round_trip(tmp_path, vocab, dtype):
    assert dtype_for_vocab(vocab) == dtype
    w = TokenShardWriter(tmp_path / "s.bin", vocab)
    w.add([1, 2, 3], domain_id=0)
    w.add([vocab - 1, 5], domain_id=2)
    assert w.close() == 5
    s = TokenShard(tmp_path / "s.bin")
    assert s.tokens.dtype == dtype and list(s.tokens) == [1, 2, 3, vocab - 1, 5]
    assert s.docs.tolist() == [[0, 0], [3, 2]]


def test_bad_shard_header(tmp_path):
    (tmp_path / "x.bin").write_bytes(b"garbage" * 10)
    with pytest.raises(UserError, match="not a scratchlm token shard"):
        TokenShard(tmp_path / "x.bin")
