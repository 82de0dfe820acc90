"""The prepare stage's config keys: quality profiles, skip list, per-source overrides, and their template."""
import tomllib

import pytest

from scratchlm.config import config_from_dict
from scratchlm.stages import check_config
from scratchlm.config_template import EXAMPLE_SOURCES, render_config
from scratchlm.data.clean.quality import CODE, PROSE
from scratchlm.data.quality_config import profile_config
from scratchlm.errors import UserError

SOURCES = [{"name": "a", "domain": "web", "path": "a.txt"}]


def _validate(**data):
    cfg = config_from_dict({"data": {"sources": SOURCES, **data}})
    check_config(cfg, "c.toml")
    return cfg


def test_quality_overrides_apply_and_false_switches_a_rule_off():
    cfg = _validate(quality={"prose": {"min_words": 20, "c4_min_sentences": False, "c4_reject_curly_braces": False,
                                       "max_top_ngram_char_share": [[2, 0.3]]}})
    q = profile_config("prose", cfg.data.quality.prose)
    assert q.min_words == 20 and q.c4_min_sentences is None and q.c4_reject_curly_braces is False
    assert q.max_top_ngram_char_share == ((2, 0.3),) and q.max_words == PROSE.max_words
    assert profile_config("code", cfg.data.quality.code) == CODE


def test_typos_in_prepare_keys_are_named():
    with pytest.raises(UserError, match=r"unknown key `min_wrds` in \[data.quality.prose\]; did you mean `min_words`"):
        _validate(quality={"prose": {"min_wrds": 3}})
    with pytest.raises(UserError, match=r"`data.skip`: unknown step `prom`; did you mean `promo`"):
        _validate(skip=["prom"])
    cfg = config_from_dict({"data": {"sources": [{**SOURCES[0], "profile": "legal"}]}})
    with pytest.raises(UserError, match="source `a`: profile must be prose, technical, code or auto"):
        check_config(cfg, "c.toml")


def test_template_documents_every_threshold_and_its_origin():
    text = render_config(EXAMPLE_SOURCES, {"data": {"quality": {"prose": {"min_words": 30}}}})
    assert "\nmin_words = 30  # Gopher quality filter (Rae et al. 2021" in text
    assert "# c4_min_sentences = 5  # C4 (Raffel et al. 2020" in text
    assert "# code_max_line_chars = 1000  # Code files (Codex 3.1, StarCoder 3)" in text
    cfg = config_from_dict(tomllib.loads(text))
    assert cfg.data.quality.prose == {"min_words": 30} and cfg.data.quality.code == {}
