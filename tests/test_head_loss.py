"""The chunked head + cross-entropy against the plain F.cross_entropy(lm_head(h)) it replaces: same loss, same
gradients, in fp32 and under bf16 autocast, with a soft cap, a loss mask and a last chunk that is not full."""
import pytest
import torch
import torch.nn.functional as F

from scratchlm.config import ModelConfig
from scratchlm.model import GPT
from scratchlm.model.device import autocast
from scratchlm.model.head_loss import head_loss


def _plain(h, weight, targets, token_weights, softcap):
    logits = (h @ weight.t()).float()
    if softcap > 0:
        logits = softcap * torch.tanh(logits / softcap)
    return (F.cross_entropy(logits, targets, reduction="none") * token_weights).sum()


def _loss_and_grads(fn, h, weight, *args):
    h, weight = h.detach().requires_grad_(), weight.detach().requires_grad_()
    loss = fn(h, weight, *args)
    (2.5 * loss).backward()  # a scale on the incoming gradient, as a loss scaler or accumulation would apply
    return loss.detach(), h.grad, weight.grad


@pytest.mark.parametrize("softcap", [0.0, 5.0])
@pytest.mark.parametrize("masked", [False, True])
def test_same_loss_and_gradients_as_the_plain_head(softcap, masked):
    g = torch.Generator().manual_seed(0)
    n, d, vocab = 300, 24, 97  # 300 tokens in chunks of 128: the last one is partial
    h, weight = torch.randn(n, d, generator=g), torch.randn(vocab, d, generator=g)
    targets = torch.randint(0, vocab, (n,), generator=g)
    mask = (torch.rand(n, generator=g) > 0.3).float() if masked else torch.ones(n)
    token_weights = mask / mask.sum()
    ours = _loss_and_grads(lambda *a: head_loss(*a, chunk_tokens=128), h, weight, targets, token_weights, softcap)
    plain = _loss_and_grads(_plain, h, weight, targets, token_weights, softcap)
    for a, b in zip(ours, plain):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)


def test_under_bf16_autocast_it_matches_the_plain_head_within_bf16_rounding():
    g = torch.Generator().manual_seed(1)
    n, d, vocab = 256, 32, 200
    h, weight = torch.randn(n, d, generator=g), torch.randn(vocab, d, generator=g) * 0.1
    targets, token_weights = torch.randint(0, vocab, (n,), generator=g), torch.full((n,), 1 / n)
    with autocast(torch.device("cpu"), "bf16"):
        ours = _loss_and_grads(lambda *a: head_loss(*a, chunk_tokens=100), h, weight, targets, token_weights, 0.0)
        plain = _loss_and_grads(_plain, h, weight, targets, token_weights, 0.0)
    assert ours[1].dtype == plain[1].dtype == torch.float32 and ours[2].dtype == torch.float32
    for a, b in zip(ours, plain):
        torch.testing.assert_close(a, b, rtol=2e-2, atol=2e-3)


def test_the_model_trains_with_it_and_evaluates_without_gradients():
    """GPT.forward with targets: the loss of its own logits, gradients that reach the tied embedding, and under
    no_grad (an evaluation) no gradient work at all."""
    torch.manual_seed(0)
    model = GPT(ModelConfig(n_layer=1, d_model=32, n_head=2, seq_len=16), 64)
    x, y = torch.randint(0, 64, (3, 16)), torch.randint(0, 64, (3, 16))
    logits, none = model(x)
    expected = F.cross_entropy(logits.reshape(-1, 64), y.reshape(-1))
    returned, loss = model(x, y)
    assert none is None and returned is None
    torch.testing.assert_close(loss, expected)
    loss.backward()
    assert model.tok_emb.weight.grad is not None and model.tok_emb.weight.grad.abs().sum() > 0
    with torch.no_grad():
        torch.testing.assert_close(model(x, y)[1], expected.detach())


def test_under_fp16_autocast_no_vocabulary_row_flushes_to_zero():
    """fp16's smallest subnormal is 6e-8; the logit gradient of a token not among the targets is about
    1/(vocab x tokens), here 1.5e-8. Made in the forward pass, before GradScaler's scale exists, it used to flush to
    zero: every vocabulary row that was not a target got an all-zero head gradient. Now within standard AMP's
    error (the plain head with the loss scaled before backward), against the fp32 gradients."""
    g = torch.Generator().manual_seed(2)
    n, d, vocab, scale = 4096, 16, 16384, 2.0 ** 16
    h, weight = torch.randn(n, d, generator=g), torch.randn(vocab, d, generator=g) * 0.02
    targets, token_weights = torch.randint(0, vocab, (n,), generator=g), torch.full((n,), 1 / n)

    def scaled_grads(fn, dtype):
        hh, ww = h.clone().requires_grad_(), weight.clone().requires_grad_()
        with torch.autocast("cpu", dtype=dtype or torch.float32, enabled=dtype is not None):
            loss = fn(hh, ww, targets, token_weights, 0.0)
        (scale * loss).backward()  # as GradScaler does; unscaled below
        return hh.grad / scale, ww.grad / scale

    exact = scaled_grads(_plain, None)
    amp = scaled_grads(_plain, torch.float16)
    ours = scaled_grads(head_loss, torch.float16)
    assert int((ours[1].abs().sum(dim=1) == 0).sum()) == 0
    for o, a, e in zip(ours, amp, exact):
        assert (o - e).norm() / e.norm() < 2 * (a - e).norm() / e.norm()
