"""The evaluation's chunked head against the full-logits evaluation it replaces (eval/loss.py before issue 39): the
same summed loss, top-1 and top-10 hits and logit statistics, for several chunk sizes, with and without a soft
cap, a vocabulary that is no multiple of the chunk, and through the model in fp32 and under bf16 autocast."""
import pytest
import torch
import torch.nn.functional as F

from scratchlm.config import ModelConfig
from scratchlm.eval.chunked_head import evaluate_batch, evaluate_head
from scratchlm.model import GPT
from scratchlm.model.device import autocast
from scratchlm.monitor.logits import LogitStats

CPU = torch.device("cpu")


def _full_logits_path(logits: torch.Tensor, targets: torch.Tensor) -> dict:
    """The old evaluation, formula for formula: the whole batch's fp32 logits at once."""
    z = logits.float().reshape(-1, logits.size(-1))
    y = targets.reshape(-1)
    row_var, row_mean = torch.var_mean(z, dim=-1, correction=0)
    token_max = z.max(dim=-1).values
    p = torch.softmax(z, dim=-1)
    entropy = torch.logsumexp(z, dim=-1) - (p.unsqueeze(1) @ z.unsqueeze(-1)).reshape(-1)
    hit = z.topk(10, dim=-1).indices == y.unsqueeze(-1)
    mean = float(row_mean.double().mean())
    return {"loss": float(F.cross_entropy(z, y, reduction="sum")), "top1": int(hit[:, 0].sum()),
            "top10": int(hit.any(-1).sum()), "logit_max": float(token_max.max()),
            "logit_max_mean": float(token_max.mean()), "entropy": float(entropy.mean()),
            "logit_std": max(0.0, float((row_var.double() + row_mean.double() ** 2).mean()) - mean * mean) ** 0.5}


def _chunked(totals, stats: LogitStats) -> dict:
    return {"loss": totals.loss, "top1": totals.top1, "top10": totals.top10, **stats.result()}


def _assert_same(ours: dict, full: dict, rel: float, hits_apart: int = 0) -> None:
    """hits_apart: how many top-k hits may differ (bf16 logits tie, and a tie may fall either way)."""
    assert abs(ours["top1"] - full["top1"]) <= hits_apart and abs(ours["top10"] - full["top10"]) <= hits_apart
    for key in ("loss", "logit_max", "logit_max_mean", "entropy", "logit_std"):
        assert ours[key] == pytest.approx(full[key], rel=rel), key


@pytest.mark.parametrize("softcap", [0.0, 3.0])
@pytest.mark.parametrize("chunk_tokens", [1, 64, 128, 512])
def test_same_numbers_as_the_full_logits(softcap, chunk_tokens):
    g = torch.Generator().manual_seed(0)
    n, d, vocab = 300, 24, 1003  # 300 tokens: the last chunk is partial; the vocabulary no multiple of a chunk
    h, weight = torch.randn(n, d, generator=g), torch.randn(vocab, d, generator=g) / 2
    targets = torch.randint(0, vocab, (n,), generator=g)
    targets[::3] = (h @ weight.t()).argmax(-1)[::3]  # some top-1 hits to count
    stats = LogitStats()
    ours = _chunked(evaluate_head(h, weight, softcap, targets=targets, stats=stats, chunk_tokens=chunk_tokens),
                    stats)
    logits = h @ weight.t()
    full = _full_logits_path(softcap * torch.tanh(logits / softcap) if softcap else logits, targets)
    assert full["top1"] >= n // 3
    _assert_same(ours, full, rel=1e-5)


@pytest.mark.parametrize("precision", ["fp32", "bf16"])
@pytest.mark.parametrize("softcap", [0.0, 15.0])
def test_the_model_evaluates_through_its_own_head(precision, softcap):
    """GPT.forward(head=...) hands the final norm's output, the head weight and the softcap to the evaluation."""
    torch.manual_seed(0)
    model = GPT(ModelConfig(n_layer=2, d_model=32, n_head=4, seq_len=64, logit_softcap=softcap), 301).eval()
    window = torch.randint(0, 301, (3, 65))
    x, y = window[:, :-1], window[:, 1:]
    stats = LogitStats()
    with torch.no_grad(), autocast(CPU, precision):
        ours = _chunked(evaluate_batch(model, x, y, stats), stats)
        logits, _ = model(x)
    fp32 = precision == "fp32"
    _assert_same(ours, _full_logits_path(logits, y), rel=1e-5 if fp32 else 1e-2, hits_apart=0 if fp32 else 2)
