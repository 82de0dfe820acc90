import re

import pytest

from scratchlm.config import config_from_dict
from scratchlm.config_template import EXAMPLE_SOURCES, render_config
from scratchlm.errors import UserError
from scratchlm.stages import load_config

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


def test_init_config_lets_the_preset_decide_the_shape(tmp_path):
    from scratchlm.config_template import write_init
    from scratchlm.presets import PRESETS, describe_preset

    path = write_init(tmp_path)
    text = path.read_text()
    assert "\nn_layer = " not in text and "\n# n_layer = 12" in text  # the shape keys are left to the preset
    path.write_text(re.sub(r"^# preset = .*$", 'preset = "tiny"', text, count=1, flags=re.M))
    m = load_config(path).model
    assert {k: getattr(m, k) for k in PRESETS["tiny"]} == PRESETS["tiny"]
    assert describe_preset(m) == "preset tiny"


def test_explicit_model_keys_over_a_preset_are_named():
    from scratchlm.presets import describe_preset, preset_overrides

    sources = {"sources": EXAMPLE_SOURCES}
    m = config_from_dict({"data": sources, "model": {"preset": "tiny", "n_layer": 8, "d_model": 256,
                                                     "seq_len": 256}}).model  # seq_len: tiny's own value
    assert preset_overrides(m) == ["n_layer", "d_model"]
    assert describe_preset(m) == "preset tiny, overridden: n_layer, d_model"
    assert describe_preset(config_from_dict({"data": sources}).model) is None


def test_quickstart_config_is_a_tiny_demo(tmp_path):
    from scratchlm.presets import PRESETS
    from scratchlm.quickstart import PRESET

    (tmp_path / "c.toml").write_text(render_config(EXAMPLE_SOURCES, PRESET))
    cfg = load_config(tmp_path / "c.toml")
    assert cfg.run.demo and cfg.model.preset == "tiny"
    assert {k: getattr(cfg.model, k) for k in PRESETS["tiny"]} == PRESETS["tiny"]
