"""The tokens/char ratio per source, before the real tokenizer exists: a throwaway byte-level BPE with the same
pre-tokenizer and vocabulary size, trained on half of a sample of the cleaned corpus and measured on the other
half. The data stage's corpus-size verdict uses it (data/token_estimate.py)."""
from __future__ import annotations

from .bpe import shard_tokens, train_bpe


def measure_ratio(samples: dict[str, list[str]], vocab_size: int) -> dict:
    """samples: source -> sampled document texts. Returns the ratio per source and how it was measured."""
    train = [t for texts in samples.values() for t in texts[0::2]]
    total_chars = sum(len(t) for texts in samples.values() for t in texts)
    if not train:
        return {"method": "no documents to sample", "sample_chars": 0, "ratio": {}}
    tok = train_bpe(train, vocab_size, min_frequency=2)
    ratio = {}
    for source, texts in samples.items():
        held_out = texts[1::2] or texts[0::2]  # a one-document source is measured on what trained the BPE
        chars = sum(len(t) for t in held_out)
        tokens = shard_tokens(tok, held_out)  # counted as the shards will: BOS and EOS included
        ratio[source] = tokens / chars if chars else 0.0
    return {"method": f"byte-level BPE (vocab {tok.get_vocab_size()}) trained on half of the sample, "
                      "tokens/char measured per source on the other half",
            "sample_chars": total_chars, "sample_docs": sum(len(t) for t in samples.values()), "ratio": ratio}
