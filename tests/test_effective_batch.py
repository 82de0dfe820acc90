"""One batch arithmetic (train/batch.py): with `train.batch_tokens` set, the plan and the mix count the tokens the
training loop really draws, not batch_size x grad_accum."""
import pytest

from scratchlm import stages
from scratchlm.config import config_from_dict
from scratchlm.errors import UserError
from scratchlm.ids import read_json
from scratchlm.plan.make import make_plan
from scratchlm.stages import load_config, plan_artifacts
from scratchlm.train.batch import effective_batch
from scratchlm.train.loop import train_model
from scratchlm.train.mix import mix_from_shards, planned_mix

SOURCES = {"sources": [{"name": "a", "domain": "a", "path": "x"}]}


def _config(**train):
    return config_from_dict({"data": SOURCES, "model": {"seq_len": 64}, "train": train})


def test_batch_tokens_sets_grad_accum_and_rejects_a_world_size_that_does_not_divide_it():
    cfg = _config(batch_tokens=4096, batch_size=8)
    assert effective_batch(cfg, 1).grad_accum == 8 and effective_batch(cfg, 2).grad_accum == 4
    assert effective_batch(cfg, 2).sequences == 64 and effective_batch(cfg, 2).tokens == 4096
    with pytest.raises(UserError, match=r"not a multiple of batch_size x seq_len x world size = 8 x 64 x 3"):
        effective_batch(cfg, 3)
    without = effective_batch(_config(batch_size=8, grad_accum=5), 3)
    assert (without.grad_accum, without.sequences, without.tokens) == (5, 8 * 5 * 3, 8 * 5 * 3 * 64)


@pytest.fixture(scope="module")
def built(builtin_corpus, micro_config, tmp_path_factory):
    path = micro_config(tmp_path_factory.mktemp("batch"), builtin_corpus)
    cfg = load_config(path)
    stages.stage_training_inputs(cfg, plan_artifacts(cfg))
    return path


def test_plan_and_mix_count_the_tokens_training_draws(built, tmp_path, monkeypatch):
    monkeypatch.delenv("WORLD_SIZE", raising=False)  # one rank, as training here
    cfg = load_config(built)
    cfg.train.max_steps = 3
    cfg.train.batch_tokens = 4096  # batch_size 16 x seq_len 64: 4 micro-batches per step, grad_accum stays 1
    art = plan_artifacts(cfg)
    plan = make_plan(cfg, art, probe_seconds=0, save=False)
    shards = read_json(art["shards"].dir / "shards.json")
    mix = planned_mix(cfg, shards)

    summary = train_model(cfg, art["shards"].dir, art["tokenizer"].dir, tmp_path / "train", {}, ["def "])
    drawn = mix_from_shards(shards, summary["tokens"], cfg.model.seq_len, summary["epochs_per_source"])
    loader_tokens = sum(s.achieved_tokens for s in drawn.sources)

    assert summary["tokens"] == 3 * 4096
    assert abs(loader_tokens - summary["tokens"]) <= len(drawn.sources)  # epochs x tokens, rounded per source
    assert plan["arithmetic"]["tokens_per_step"] == 4096
    assert plan["arithmetic"]["planned_tokens"] == mix.planned_tokens == summary["tokens"]
    assert plan["memory"]["configured"]["grad_accum"] == 4  # the memory estimate is of the step that runs
