"""Every numeric key has its allowed range declared beside it; a value outside it is a one-line error naming the
file, the key and the range, at load time instead of a traceback or a nonsense result stages later."""
import dataclasses
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
train.learning_rate = 0 | > 0
data.val_fraction = 0.5 | in [0, 0.5)
decontaminate.validation_min_coverage = 0 | in (0, 1]
train.learning_rate = nan | > 0
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
        for bad in _outside(limits, default if default is not None else 1):
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
