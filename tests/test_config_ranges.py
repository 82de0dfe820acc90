"""Every numeric key has its allowed range declared beside it; a value outside it is a one-line error naming the
file, the key and the range, at load time instead of a traceback or a nonsense result stages later."""
import dataclasses
import math
import subprocess
import sys
import typing

import pytest

from scratchlm.config import Config, config_from_dict, validate
from scratchlm.config_template import EXAMPLE_SOURCES, render_config
from scratchlm.errors import UserError
from scratchlm.stages import load_config

SOURCE = '[[data.sources]]\nname = "a"\ndomain = "web"\npath = "a.txt"\n'
BASE = {"data": {"sources": [{"name": "a", "domain": "web", "path": "a.txt"}]}}


def _load(tmp_path, text):
    (tmp_path / "c.toml").write_text(text)
    return load_config(tmp_path / "c.toml")


def _rejects(tmp_path, text, *needles):
    with pytest.raises(UserError) as e:
        _load(tmp_path, text)
    message = str(e.value)
    assert "\n" not in message and message.startswith(f"{tmp_path / 'c.toml'}: ")
    for needle in needles:
        assert needle in message, message
    return message


def test_n_head_zero_is_named_not_a_zero_division(tmp_path):
    _rejects(tmp_path, SOURCE + "[model]\nn_head = 0\n", "[model] n_head", "must be >= 1", "got 0")


def test_dropout_out_of_range_fails_at_load_not_at_train_time(tmp_path):
    _rejects(tmp_path, SOURCE + "[model]\ndropout = 1.5\n", "[model] dropout", "must be in [0, 1)", "got 1.5")


# `section.key = value | the range the message names`. All were accepted before: eval.max_batches = 0 reported
# "validation loss nan vs unigram baseline 0.000"; data.max_chars = 0 or tokenizer.sample_chars = 0 surfaced two
# stages later as "the tokenizer training sample is empty".
OUT_OF_RANGE = """
eval.max_batches = 0 | >= 1
train.warmup_steps = -1 | >= 0
train.weight_decay = -0.1 | >= 0
train.grad_clip = -1 | >= 0
eval.temperature = -0.5 | >= 0
eval.max_new_tokens = -3 | >= 1
eval.top_k = -1 | >= 0
data.min_chars = -1 | >= 0
data.max_chars = 0 | >= 1
tokenizer.sample_chars = 0 | >= 1
train.learning_rate = 0 | in (0, 1]
data.val_fraction = 0.5 | in [0, 0.5)
decontaminate.validation_min_coverage = 0 | in (0, 1]
train.learning_rate = nan | in (0, 1]
model.init_std = inf | > 0
"""


@pytest.mark.parametrize("assignment, allowed", [line.split(" | ") for line in OUT_OF_RANGE.strip().splitlines()])
def test_out_of_range_values_name_key_and_range(tmp_path, assignment, allowed):
    dotted, value = assignment.split(" = ")
    section, key = dotted.split(".")
    _rejects(tmp_path, SOURCE + f"[{section}]\n{key} = {value}\n", f"[{section}] {key} must be {allowed}",
             f"got {value}")


def test_min_chars_above_max_chars(tmp_path):
    _rejects(tmp_path, SOURCE + "[data]\nmin_chars = 500\nmax_chars = 400\n",
             "[data] min_chars (500) must be <= [data] max_chars (400)")


def test_spike_detector_that_could_never_fire(tmp_path):
    _rejects(tmp_path, SOURCE + "[monitor]\nspike_window = 5\nspike_min_history = 10\n",
             "[monitor] spike_min_history (10) must be <= [monitor] spike_window (5)")


def test_values_that_mean_off_are_accepted(tmp_path):
    cfg = _load(tmp_path, SOURCE + "[train]\nwarmup_steps = 0\nweight_decay = 0\ngrad_clip = 0\n"
                "[model]\ndropout = 0.0\nlogit_softcap = 0\n[eval]\ntemperature = 0\ntop_k = 0\n"
                "[data]\nmin_chars = 0\nval_fraction = 0\n[sft]\nlearning_rate = 0\n")
    assert cfg.train.grad_clip == 0 and cfg.eval.top_k == 0 and cfg.data.min_chars == 0


@pytest.mark.parametrize("name", ["", "a/b", "..", ".hidden", "-x", "a b", "a\\b", "a:b"])
def test_unsafe_source_names_are_rejected(tmp_path, name):
    text = SOURCE + f'[[data.sources]]\nname = "{name}"\ndomain = "web"\npath = "b.txt"\n'
    _rejects(tmp_path, text.replace("\\", "\\\\"), "[[data.sources]] #2 name", "without `/`")


def test_unsafe_domain_is_rejected(tmp_path):
    _rejects(tmp_path, '[[data.sources]]\nname = "a"\ndomain = "web/x"\npath = "a.txt"\n',
             "[[data.sources]] #1 domain")


def test_file_safe_names_are_accepted(tmp_path):
    cfg = _load(tmp_path, '[[data.sources]]\nname = "docs-de_2.v1"\ndomain = "c++"\npath = "a.txt"\n'
                          '[[data.sources]]\nname = "Straße"\ndomain = "web"\npath = "b.txt"\n')
    assert [s.name for s in cfg.data.sources] == ["docs-de_2.v1", "Straße"]


def test_empty_prompt_is_rejected(tmp_path):
    _rejects(tmp_path, SOURCE + '[eval]\nprompts = ["def f(", " "]\n', "[eval] prompts #2", "empty")


def test_negative_quota_names_its_domain(tmp_path):
    _rejects(tmp_path, SOURCE + "[tokenizer]\ndomain_quotas = { web = -0.5 }\n",
             "[tokenizer] domain_quotas.web must be >= 0")


def test_toml_syntax_error_keeps_its_line(tmp_path):
    _rejects(tmp_path, SOURCE + "[train]\nmax_steps = = 3\n", "invalid TOML", "line 6")


def _tables(cls=Config):
    """Every dataclass reachable from Config: its sections and the tables inside them ([[data.sources]], ...)."""
    yield cls
    for hint in typing.get_type_hints(cls).values():
        for t in (hint, *typing.get_args(hint)):
            if dataclasses.is_dataclass(t):
                yield from _tables(t)


NUMERIC = (int, float, int | None, float | None, dict[str, float])


def test_every_numeric_key_declares_its_range():
    fields = [(cls, f) for cls in _tables() for f in dataclasses.fields(cls)
              if typing.get_type_hints(cls)[f.name] in NUMERIC]
    assert len(fields) > 100  # the walk reached every section
    missing = [f"{cls.__name__}.{f.name}" for cls, f in fields if "range" not in f.metadata]
    assert not missing, f"numeric keys without a declared range: {missing}"


def _outside(limits, value) -> list:
    """The values just below and just above `limits` (where it has that end), of the key's type."""
    step = 1 if isinstance(value, int) else 0.5
    below = limits.ge - step if limits.ge is not None else limits.gt
    above = limits.le + step if limits.le is not None else limits.lt
    return [v for v in (below, above) if v is not None]


def _raw_with(table: str, key: str, value) -> dict:
    raw = {"data": {"sources": [{"name": "a", "domain": "web", "path": "a.txt"}]}}
    (raw["data"]["sources"][0] if table == "source" else raw.setdefault(table, {}))[key] = value
    return raw


SECTIONS = ["source"] + [f.name for f in dataclasses.fields(Config) if f.name not in ("path", "run")]


@pytest.mark.parametrize("table", SECTIONS)
def test_every_declared_range_is_checked_and_named(table):
    from scratchlm.config import SourceConfig

    instance = SourceConfig("a", "web", "a.txt") if table == "source" else getattr(Config(), table)
    label = "[[data.sources]] #1" if table == "source" else f"[{table}]"
    checked = 0
    for f in dataclasses.fields(instance):
        limits = f.metadata.get("range")
        default = getattr(instance, f.name)
        if limits is None or isinstance(default, dict):
            continue
        if default is None:  # a value of the key's type: `float | None` gets floats, `int | None` ints
            default = 1.0 if float in typing.get_args(typing.get_type_hints(type(instance))[f.name]) else 1
        for bad in _outside(limits, default):
            with pytest.raises(UserError) as e:
                validate(config_from_dict(_raw_with(table, f.name, bad)), "t.toml")
            assert str(e.value) == f"t.toml: {label} {f.name} must be {limits}, got {bad!r}"
            checked += 1
    assert checked


def test_presets_quickstart_and_template_pass_validation(tmp_path):
    from scratchlm.presets import PRESETS
    from scratchlm.quickstart import PRESET

    for name in PRESETS:
        validate(config_from_dict({**BASE, "model": {"preset": name}}), "preset")
    _load(tmp_path, render_config(EXAMPLE_SOURCES, PRESET))
    _load(tmp_path, render_config(EXAMPLE_SOURCES))


def test_cli_prints_a_range_error_as_one_line(tmp_path):
    (tmp_path / "c.toml").write_text(SOURCE + "[model]\nn_head = 0\n")
    r = subprocess.run([sys.executable, "-m", "scratchlm", "data", "prepare", "-c", str(tmp_path / "c.toml")],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    assert r.stderr.strip().splitlines() == [f"error: {tmp_path / 'c.toml'}: [model] n_head must be >= 1, got 0"]


def test_generate_rejects_an_empty_prompt(tmp_path):
    r = subprocess.run([sys.executable, "-m", "scratchlm", "generate", "--checkpoint", str(tmp_path),
                        "--prompt", ""], capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and r.stderr.strip().splitlines() == [
        "error: --prompt is empty; leave it out to generate from the start of a document"], r.stderr


# ---- values accepted without a word before (bug report item 7) -------------------------------------------------

@pytest.mark.parametrize("section, key", [("train", "learning_rate"), ("train", "muon_lr"), ("sft", "learning_rate")])
def test_a_learning_rate_past_one_is_an_error(tmp_path, section, key):
    _rejects(tmp_path, SOURCE + f"[{section}]\n{key} = 1e308\n", f"[{section}] {key} must be in ", ", 1], got 1e+308")
    _load(tmp_path, SOURCE + f"[{section}]\n{key} = 0.05\n")  # Muon's range


def test_a_derived_sft_learning_rate_past_one_is_an_error(tmp_path):
    _rejects(tmp_path, SOURCE + "[train]\nlearning_rate = 0.01\n[sft]\nlr_scale = 1e6\n",
             "[sft] lr_scale (1e+06) x [train] learning_rate (0.01) = 10000 must be <= 1")
    _load(tmp_path, SOURCE + "[train]\nlearning_rate = 0.01\n[sft]\nlr_scale = 1e6\nlearning_rate = 1e-4\n")


@pytest.mark.parametrize("section, warmup, steps", [("train", 100, 100), ("train", 2000, 1000), ("sft", 10, 6)])
def test_a_warmup_as_long_as_the_run_is_a_warning_naming_both_keys(tmp_path, capsys, section, warmup, steps):
    _load(tmp_path, SOURCE + f"[{section}]\nwarmup_steps = {warmup}\nmax_steps = {steps}\n")
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith(f"config: {tmp_path / 'c.toml'}: warning: [{section}] warmup_steps ({warmup}) >= "
                           f"[{section}] max_steps ({steps}): the learning rate never leaves its warmup"), line
    _load(tmp_path, SOURCE + f"[{section}]\nwarmup_steps = {steps - 1}\nmax_steps = {steps}\n")
    assert capsys.readouterr().err == ""


def _section_class(table: str) -> type:
    from scratchlm.config import SourceConfig

    return SourceConfig if table == "source" else type(getattr(Config(), table))


FLOAT_KEYS = [(table, f.name) for table in SECTIONS for f in dataclasses.fields(_section_class(table))
              if typing.get_type_hints(_section_class(table))[f.name] in (float, float | None)]


@pytest.mark.parametrize("table, key", FLOAT_KEYS)
def test_no_float_key_takes_nan_or_infinity(table, key):
    """TOML spells them nan, inf and -inf; no key means anything by them, whatever its declared bounds."""
    assert len(FLOAT_KEYS) > 30
    for bad in (math.nan, math.inf, -math.inf):
        with pytest.raises(UserError) as e:
            validate(config_from_dict(_raw_with(table, key, bad)), "t.toml")
        assert f" {key} must be " in str(e.value) and str(e.value).endswith(f"got {bad:g}"), str(e.value)


def test_a_model_past_the_parameter_limit_is_refused_at_load_by_every_command(tmp_path, monkeypatch):
    """Every command that trains or plans (plan, check, train, run, ablate) loads its config through validate():
    the refusal comes from arithmetic there, before any stage builds the model."""
    from scratchlm.model import gpt

    def never(*a, **kw):
        raise AssertionError("a model was built")

    monkeypatch.setattr(gpt.GPT, "__init__", never)
    _rejects(tmp_path, SOURCE + "[model]\nn_layer = 100000\n", "the [model] keys (n_layer 100000, d_model 768, ",
             "with vocab_size 32768 make a model of 708B parameters, over the limit of 100B")
    _rejects(tmp_path, SOURCE + "[model]\nd_model = 1048576\nn_head = 8192\n[tokenizer]\nvocab_size = 300\n",
             "(n_layer 12, d_model 1048576, n_head 8192, head_dim 128, mlp_ratio 4) with vocab_size 300")
    _load(tmp_path, SOURCE + "[model]\npreset = \"1b\"\n")


def test_cli_refuses_an_absurd_model_in_one_line(tmp_path):
    (tmp_path / "c.toml").write_text(SOURCE + "[model]\nn_layer = 100000\n")
    r = subprocess.run([sys.executable, "-m", "scratchlm", "plan", "-c", str(tmp_path / "c.toml")],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    (line,) = r.stderr.strip().splitlines()
    assert line.startswith(f"error: {tmp_path / 'c.toml'}: the [model] keys (n_layer 100000") and "limit" in line
