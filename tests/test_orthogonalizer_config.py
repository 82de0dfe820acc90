"""`train.orthogonalizer`: how Muon orthogonalizes its update, chosen in the config and carried to the optimizer."""
import pytest
import torch

from scratchlm.config import config_from_dict, validate
from scratchlm.config_template import EXAMPLE_SOURCES, render_config
from scratchlm.errors import UserError
from scratchlm.model import GPT
from scratchlm.train import optim
from scratchlm.train.loop import build_optimizer

SOURCES = {"sources": [{"name": "a", "domain": "a", "path": "x"}]}
TINY = {"n_layer": 1, "d_model": 32, "n_head": 2, "seq_len": 16}


def _cfg(**train):
    cfg = config_from_dict({"data": SOURCES, "model": TINY, "train": train})
    validate(cfg, "config")
    return cfg


def test_an_unknown_orthogonalizer_is_rejected_with_the_choices():
    with pytest.raises(UserError, match="`train.orthogonalizer` must be newton_schulz or polar_express, got `svd`"):
        _cfg(orthogonalizer="svd")


@pytest.mark.parametrize("name", optim.ORTHOGONALIZERS)
def test_the_key_reaches_muon_and_the_train_id(name):
    cfg = _cfg(optimizer="muon", orthogonalizer=name)
    opt = build_optimizer(GPT(cfg.model, 40), cfg, torch.device("cpu"))
    assert {g["method"] for g in opt.param_groups if "method" in g} == {name}
    assert cfg.identity("train")["orthogonalizer"] == name  # it changes training, so the train stage's ID


def test_init_writes_the_key_with_its_default():
    assert '\northogonalizer = "newton_schulz"  # newton_schulz | polar_express' in render_config(EXAMPLE_SOURCES)
