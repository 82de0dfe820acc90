"""Pretraining core pieces on their own: presets, batch arithmetic, the loader, checkpoint retention and errors."""
import time

import numpy as np
import pytest
import torch

from scratchlm.config import ModelConfig, config_from_dict
from scratchlm.errors import UserError
from scratchlm.ids import write_json
from scratchlm.model import GPT
from scratchlm.model.best import best_checkpoint, mark_best
from scratchlm.model.checkpoint import list_checkpoints, load_model_weights, verify_checkpoint
from scratchlm.tokenizer.shards import TokenShard, TokenShardWriter
from scratchlm.train.checkpoint import save_checkpoint
from scratchlm.train.loader import MixtureLoader, Prefetcher, on_device, window_starts

SOURCES = {"sources": [{"name": "a", "domain": "a", "path": "x"}]}


def test_preset_fills_unset_keys_and_an_explicit_key_wins():
    cfg = config_from_dict({"data": SOURCES, "model": {"preset": "125m", "n_layer": 6}})
    assert (cfg.model.d_model, cfg.model.n_head, cfg.model.n_layer) == (768, 12, 6)
    with pytest.raises(UserError, match="unknown `model.preset` 'huge'.*tiny, 50m, 125m, 350m, 1b"):
        config_from_dict({"data": SOURCES, "model": {"preset": "huge"}})


@pytest.mark.parametrize("name,low,high", [("50m", 40e6, 60e6), ("125m", 100e6, 135e6), ("350m", 300e6, 370e6),
                                           ("1b", 0.95e9, 1.15e9)])
def test_preset_parameter_counts(name, low, high):
    cfg = config_from_dict({"data": SOURCES, "model": {"preset": name}})
    with torch.device("meta"):  # counts shapes without allocating a billion floats
        n = GPT(cfg.model, 32768).num_params()
    assert low <= n <= high


def test_head_dim_decouples_head_width_from_d_model():
    model = GPT(ModelConfig(n_layer=1, d_model=48, n_head=4, head_dim=32, seq_len=16), vocab_size=50)
    assert model.blocks[0].attn.q_proj.out_features == 128
    _, loss = model(torch.randint(0, 50, (2, 16)), torch.randint(0, 50, (2, 16)))
    assert torch.isfinite(loss)


def _shards(tmp_path, doc_lengths, bos=1, vocab=100):
    (tmp_path / "train").mkdir()
    writer = TokenShardWriter(tmp_path / "train" / "a.bin", vocab_size=vocab)
    rng = np.random.default_rng(0)
    for n in doc_lengths:
        writer.add([bos, *rng.integers(2, vocab, n - 1)], domain_id=0)
    total = writer.close()
    write_json(tmp_path / "shards.json", {"train": {"a": {"weight": 1.0, "tokens": total}}, "val": {},
                                          "vocab_size": vocab})
    return tmp_path


def test_windows_start_at_documents_or_aligned_chunks_of_long_ones(tmp_path):
    shard = TokenShard(_shards(tmp_path, [5, 40, 7, 100]) / "train" / "a.bin")
    # docs start at 0, 5, 45, 52; the 100-token doc is cut at 52, 68, 84, ...; a window needs 17 tokens
    assert window_starts(shard, 16).tolist() == [0, 5, 21, 37, 45, 52, 68, 84, 100, 116, 132]


def test_the_global_batch_is_the_same_however_ranks_and_micro_batches_split_it(tmp_path):
    d = _shards(tmp_path, [30, 50, 20, 90, 64] * 4)
    one = MixtureLoader(d, 16, 4, seed=7, grad_accum=2)
    ranks = [MixtureLoader(d, 16, 4, seed=7, rank=r, world_size=2) for r in range(2)]
    for step in range(3):
        for micro in range(2):
            assert torch.equal(one.draw(step, micro)[0], ranks[micro].draw(step, 0)[0])
    tokens = one.shards[0].tokens
    allowed = {tuple(tokens[s:s + 16].tolist()) for s in one.starts[0]}
    assert all(tuple(row.tolist()) in allowed for row in one.draw(0, 0)[0])  # only document-aware windows


@pytest.mark.parametrize("vocab, wire", [(65536, torch.int16), (100_000, torch.int32)])
def test_a_batch_crosses_in_the_shards_width_and_is_widened_exactly(tmp_path, vocab, wire):
    """Ids above the signed half of the width (32,767 for 2 bytes) come back whole after the narrow copy."""
    loader = MixtureLoader(_shards(tmp_path, [40] * 20, vocab=vocab), 16, 4, seed=3)
    rows, _ = loader.draw_rows(0)
    assert rows.dtype == wire and rows.is_contiguous() and rows.shape == (4, 17)
    x, y = on_device(rows, torch.device("cpu"))
    expected = np.stack([loader.shards[0].tokens[s:s + 17] for s in loader.positions(0)[1]]).astype(np.int64)
    assert x.dtype == torch.int64 and (x.numpy() == expected[:, :-1]).all() and (y.numpy() == expected[:, 1:]).all()
    assert expected.max() > vocab // 2  # the high ids were in the batch


def test_prefetcher_yields_the_loaders_batches_in_order(tmp_path):
    loader = MixtureLoader(_shards(tmp_path, [40] * 20), 16, 4, seed=3, grad_accum=2)
    batches = Prefetcher(loader, start_step=2, max_steps=5, depth=2)
    for step in range(2, 5):
        for micro in range(2):
            x, y = on_device(batches.get(step, micro)[0], torch.device("cpu"))
            expected = loader.draw(step, micro)
            assert torch.equal(x, expected[0]) and torch.equal(y, expected[1])
    assert loader.tokens_drawn.sum() == 3 * 2 * 4 * 16
    batches.close()


@pytest.mark.parametrize("depth", [0, 2])
def test_the_prefetcher_times_the_wait_for_data_with_or_without_its_thread(tmp_path, monkeypatch, depth):
    """The one data-wait timer (the monitor's data_wait_share reads it): without the thread, drawing is the wait."""
    loader = MixtureLoader(_shards(tmp_path, [40] * 20), 16, 4, seed=3)
    draw = loader.draw_rows

    def slow_draw(step, micro=0, pin=False):
        time.sleep(0.05)
        return draw(step, micro, pin)

    monkeypatch.setattr(loader, "draw_rows", slow_draw)
    batches = Prefetcher(loader, start_step=0, max_steps=3, depth=depth)
    for step in range(3):
        batches.get(step, 0)
    batches.close()
    assert batches.wait_seconds >= 0.1  # three draws of 0.05 s, none of them ready before it is asked for


def test_loader_state_leaves_out_the_unused_position_and_still_loads_checkpoints_that_have_it(tmp_path):
    loader = MixtureLoader(_shards(tmp_path, [40] * 20), 16, 4, seed=3)
    loader.batch(0)
    state = loader.state_dict()
    assert "position" not in state
    again = MixtureLoader(tmp_path, 16, 4, seed=3)
    again.load_state_dict({"position": 1, **state})  # as written by earlier versions
    assert again.tokens_drawn.tolist() == loader.tokens_drawn.tolist() != [0]


def test_missing_shard_is_named(tmp_path):
    d = _shards(tmp_path, [40] * 5)
    (d / "train" / "a.bin").unlink()
    with pytest.raises(UserError, match=r"token shard .*a\.bin is missing"):
        MixtureLoader(d, 16, 4, seed=0)


def _tiny_model(**kw):
    torch.manual_seed(0)
    return GPT(ModelConfig(**{"n_layer": 1, "d_model": 32, "n_head": 2, "seq_len": 16, **kw}), vocab_size=40)


def _save(directory, step, model, keep_last):
    opt = torch.optim.AdamW(model.parameters())
    return save_checkpoint(directory, step, model, opt, {}, {"config": {}}, keep_last)


def test_pruning_keeps_the_last_k_and_the_best(tmp_path):
    model = _tiny_model()
    _save(tmp_path, 10, model, keep_last=2)
    assert mark_best(tmp_path, 10, 2.0)
    _save(tmp_path, 20, model, keep_last=2)
    assert not mark_best(tmp_path, 20, 2.5)  # worse: the best stays step 10
    _save(tmp_path, 30, model, keep_last=2)
    _save(tmp_path, 40, model, keep_last=2)
    assert [p.name for p in list_checkpoints(tmp_path)] == ["step_0000010", "step_0000030", "step_0000040"]
    assert best_checkpoint(tmp_path).name == "step_0000010"
    assert mark_best(tmp_path, 40, 1.5) and best_checkpoint(tmp_path).name == "step_0000040"
    assert not mark_best(tmp_path, 50, 1.0)  # no checkpoint at step 50 to point at


def test_corrupt_checkpoint_names_the_file_and_offers_the_previous_one(tmp_path):
    model = _tiny_model()
    _save(tmp_path, 1, model, keep_last=5)
    latest = _save(tmp_path, 2, model, keep_last=5)
    verify_checkpoint(latest)
    with open(latest / "model.safetensors", "r+b") as f:
        f.seek(-4, 2)
        f.write(b"\x00\x01\x02\x03")
    with pytest.raises(UserError, match=r"model\.safetensors is corrupt.*previous checkpoint is step_0000001"):
        verify_checkpoint(latest)


def test_a_corrupt_checkpoint_error_gives_a_complete_command_in_every_case(tmp_path):
    import subprocess
    import sys

    model = _tiny_model()
    good = _save(tmp_path, 1, model, keep_last=5)
    latest = _save(tmp_path, 2, model, keep_last=5)
    with open(latest / "model.safetensors", "r+b") as f:
        f.seek(-4, 2)
        f.write(b"\x00\x01\x02\x03")
    for config in ("run.toml", "CONFIG"):  # training; "CONFIG" when its config has no file (the trainer's words)
        with pytest.raises(UserError) as e:
            verify_checkpoint(latest, config)
        assert str(e.value).endswith(f"which verifies: `scratchlm train -c {config} --resume-from {good}`")
    # any other command that was given the checkpoint: the same command line with the good one
    r = subprocess.run([sys.executable, "-m", "scratchlm", "generate", "--checkpoint", str(latest), "--prompt", "a"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and r.stderr.strip().endswith(
        f"which verifies: `scratchlm generate --checkpoint {good} --prompt a`"), r.stderr


def test_checkpoint_from_a_different_model_config_is_explained(tmp_path):
    path = _save(tmp_path, 1, _tiny_model(), keep_last=1)
    with pytest.raises(UserError, match="does not match the model config"):
        load_model_weights(_tiny_model(d_model=48), path)
    with pytest.raises(UserError, match="does not match the model config"):
        load_model_weights(_tiny_model(n_layer=2), path)


def test_activation_checkpointing_gives_the_same_loss_and_gradients():
    x, y = torch.randint(0, 40, (2, 16)), torch.randint(0, 40, (2, 16))
    grads = []
    for flag in (False, True):
        model = _tiny_model(n_layer=2)
        model.activation_checkpointing = flag
        _, loss = model(x, y)
        loss.backward()
        grads.append((loss.item(), [p.grad.clone() for p in model.parameters()]))
    assert grads[0][0] == grads[1][0]
    assert all(torch.allclose(a, b, atol=1e-6) for a, b in zip(grads[0][1], grads[1][1]))
