"""A small random-weight checkpoint with a real BPE tokenizer, for the export / SFT / eval tests."""
from __future__ import annotations

from pathlib import Path

import torch

from scratchlm.config import ModelConfig
from scratchlm.model import GPT
from scratchlm.tokenizer.bpe import train_bpe
from scratchlm.train.checkpoint import save_checkpoint

TEXTS = ["def add(a, b):\n    return a + b\n", "The quick brown fox jumps over the lazy dog. " * 3,
         "Hello, how are you today? I am fine, thank you.", "for i in range(10):\n    print(i * i)\n"] * 20


def make_checkpoint(directory: Path, seed: int = 0, **model_overrides) -> Path:
    torch.manual_seed(seed)
    tok = train_bpe(TEXTS, vocab_size=320, min_frequency=1)
    tok_file = directory / "tokenizer.json"
    directory.mkdir(parents=True, exist_ok=True)
    tok.save(str(tok_file))
    cfg = ModelConfig(**{"n_layer": 2, "d_model": 64, "n_head": 4, "seq_len": 64, **model_overrides})
    model = GPT(cfg, tok.get_vocab_size())
    with torch.no_grad():  # norms away from 1, so a mapping that drops them would show in the logits
        for name, p in model.named_parameters():
            if p.dim() == 1:
                p.mul_(1 + 0.3 * torch.randn_like(p))
    meta = {"config": {"model": vars(cfg)}, "vocab_size": tok.get_vocab_size(), "ids": {}, "prompts": ["def "]}
    opt = torch.optim.AdamW(model.parameters())
    return save_checkpoint(directory / "checkpoints", 1, model, opt, {}, meta, keep_last=1, files=(tok_file,))
