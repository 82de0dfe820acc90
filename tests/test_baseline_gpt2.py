import math
import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
from baseline_gpt2 import BaselineConfig, BaselineGPT  # noqa: E402

CFG = BaselineConfig(vocab_size=101, n_layer=2, n_head=4, d_model=32, seq_len=16)


@pytest.fixture(autouse=True, scope="module")
def one_thread():
    # These models are tiny; on a shared, busy machine torch's intra-op threads spin-wait on each other and a 0.4 s
    # test takes a minute. One thread is as fast when idle and stays fast when not.
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(previous)


def model(seed: int = 0) -> BaselineGPT:
    torch.manual_seed(seed)
    return BaselineGPT(CFG)


def test_forward_shapes_and_loss_is_optional():
    idx = torch.randint(CFG.vocab_size, (3, 10))
    logits, loss = model()(idx)
    assert logits.shape == (3, 10, CFG.vocab_size) and loss is None
    logits, loss = model()(idx, idx)
    assert loss.ndim == 0


def test_loss_at_init_is_near_uniform():
    gen = torch.Generator().manual_seed(5)  # its own stream: the global one is reseeded by model()
    idx, targets = torch.randint(CFG.vocab_size, (2, 8, CFG.seq_len), generator=gen)
    _, loss = model()(idx, targets)
    assert abs(loss.item() - math.log(CFG.vocab_size)) < 0.1  # N(0, 0.02) init: logits start near zero


def test_loss_decreases_after_a_few_adamw_steps():
    m = model()
    opt = m.configure_optimizers(weight_decay=0.1, learning_rate=3e-3, betas=(0.9, 0.95), device_type="cpu")
    torch.manual_seed(1)
    idx = torch.randint(CFG.vocab_size, (4, CFG.seq_len + 1))
    x, y = idx[:, :-1], idx[:, 1:]
    first = m(x, y)[1].item()
    for _ in range(20):
        _, loss = m(x, y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    assert m(x, y)[1].item() < first - 1.0


def test_attention_is_causal():
    m = model().eval()
    idx = torch.randint(CFG.vocab_size, (1, CFG.seq_len))
    changed = idx.clone()
    changed[0, 9] = (changed[0, 9] + 1) % CFG.vocab_size
    a, b = m(idx)[0], m(changed)[0]
    assert torch.allclose(a[0, :9], b[0, :9], atol=1e-6)
    assert not torch.allclose(a[0, 9:], b[0, 9:], atol=1e-6)


def test_embeddings_are_tied_and_counted_once():
    m = model()
    assert m.lm_head.weight is m.transformer.wte.weight
    d, V, T, L = CFG.d_model, CFG.vocab_size, CFG.seq_len, CFG.n_layer
    per_block = 2 * 2 * d + (3 * d * d + 3 * d) + (d * d + d) + (4 * d * d + 4 * d) + (4 * d * d + d)
    expected = V * d + T * d + L * per_block + 2 * d
    assert m.num_params() == expected
    assert m.num_params(non_embedding=True) == expected - T * d


def test_rejects_sequences_longer_than_seq_len():
    with pytest.raises(ValueError, match="longer than seq_len"):
        model()(torch.zeros(1, CFG.seq_len + 1, dtype=torch.long))
