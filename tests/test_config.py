import pytest

from scratchlm.config import config_from_dict, load_config
from scratchlm.config_template import EXAMPLE_SOURCES, render_config
from scratchlm.errors import UserError

SOURCE = '[[data.sources]]\nname = "a"\ndomain = "web"\npath = "a.txt"\n'


def test_sources_only_is_a_valid_config(tmp_path):
    (tmp_path / "c.toml").write_text(SOURCE)
    cfg = load_config(tmp_path / "c.toml")
    assert cfg.data.sources[0].text_field == "text" and cfg.data.sources[0].weight == 1.0
    assert cfg.train.grad_clip > 0
    assert cfg.workdir == (tmp_path / "run").resolve()  # relative to the config file, not the cwd


def test_unknown_key_suggests_the_closest(tmp_path):
    (tmp_path / "c.toml").write_text(SOURCE + "[train]\nlerning_rate = 0.1\n")
    with pytest.raises(UserError, match=r"unknown key `lerning_rate` in \[train\]; did you mean `learning_rate`\?"):
        load_config(tmp_path / "c.toml")


def test_unknown_section_and_source_key(tmp_path):
    with pytest.raises(UserError, match="unknown key `trian`.*did you mean `train`"):
        config_from_dict({"trian": {}})
    with pytest.raises(UserError, match=r"unknown key `wieght` in \[data.sources\[0\]\]; did you mean `weight`"):
        config_from_dict({"data": {"sources": [{"name": "a", "domain": "b", "path": "x", "wieght": 1}]}})


def test_type_errors_name_the_key(tmp_path):
    (tmp_path / "c.toml").write_text(SOURCE + '[train]\nmax_steps = "many"\n')
    with pytest.raises(UserError, match="c.toml: `train.max_steps` must be int"):
        load_config(tmp_path / "c.toml")


def test_missing_required_source_key():
    with pytest.raises(UserError, match="missing required key `path`"):
        config_from_dict({"data": {"sources": [{"name": "a", "domain": "b"}]}})


def test_missing_file_and_bad_toml(tmp_path):
    with pytest.raises(UserError, match="not found"):
        load_config(tmp_path / "nope.toml")
    (tmp_path / "bad.toml").write_text("[train\n")
    with pytest.raises(UserError, match="bad.toml: invalid TOML"):
        load_config(tmp_path / "bad.toml")


def test_model_that_cannot_be_built(tmp_path):
    (tmp_path / "c.toml").write_text(SOURCE + "[model]\nd_model = 100\nn_head = 3\n")
    with pytest.raises(UserError, match="divisible"):
        load_config(tmp_path / "c.toml")


def test_no_sources(tmp_path):
    (tmp_path / "c.toml").write_text("[train]\nmax_steps = 3\n")
    with pytest.raises(UserError, match="no \\[\\[data.sources\\]\\]"):
        load_config(tmp_path / "c.toml")


def test_init_template_loads_back_with_every_default(tmp_path):
    text = render_config(EXAMPLE_SOURCES)
    (tmp_path / "c.toml").write_text(text)
    cfg = load_config(tmp_path / "c.toml")
    assert [s.name for s in cfg.data.sources] == ["docs", "forum"]
    assert "# sequences per micro-batch" in text  # comments come from the dataclasses
    assert cfg.to_dict() == config_from_dict({"data": {"sources": EXAMPLE_SOURCES}}).to_dict()
