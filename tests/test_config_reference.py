"""The config reference (docs/config.md) and the files `scratchlm init` writes: the reference is the generator's
output, every key has a meaning and its allowed values from the one table validate() checks; no comment in the
template states a bound the value beside it breaks; the short file loads to the same config as the full one."""
import dataclasses
import re
import tomllib
from pathlib import Path

import pytest

from scratchlm import config as C
from scratchlm.config_reference import render_reference
from scratchlm.config_template import EXAMPLE_SOURCES, render_config
from scratchlm.errors import UserError
from scratchlm.quickstart import PRESET
from scratchlm.stages import load_config

DOCS = Path(__file__).resolve().parents[1] / "docs" / "config.md"
BASE = {"data": {"sources": [{"name": "a", "domain": "web", "path": "a.txt"}]}}
# A user's values beside the dataclass comments: quality thresholds off the published ones, a preset.
USER = {"model": {"preset": "tiny"}, "train": {"max_steps": 300},
        "data": {"quality": {"prose": {"max_hash_per_word": 0.5, "min_words": 30},
                             "technical": {"min_alpha_word_share": 0.4}}},
        "eval": {"suite": {"humaneval": "off"}}}


def test_the_committed_reference_is_the_generators_output():
    assert DOCS.read_text(encoding="utf-8") == render_reference(), \
        "docs/config.md is stale: python -m scratchlm.config_reference > docs/config.md"


def _reference_rows() -> dict[str, list[str]]:
    rows, section = {}, None
    for line in render_reference().splitlines():
        if line.startswith("## "):
            section = line[3:]
        elif line.startswith("| `") and section:
            cells = [c.strip() for c in re.split(r"(?<!\\)\|", line)[1:-1]]
            rows[f"{section} {cells[0]}"] = cells
    return rows


def test_every_key_has_a_meaning_and_a_declared_range_is_shown():
    rows = _reference_rows()
    assert [k for k, cells in rows.items() if not cells[-1]] == []
    assert rows["[model] `dropout`"][2] == "in [0, 1)" and rows["[train] `optimizer`"][2] == "adamw, muon or muonh"
    assert rows["[[data.sources]] `profile`"][2] == "prose, technical, code or auto"
    assert rows["[train] `compile`"][2] == "auto, true or false"
    technical = rows["Filter profiles: [data.quality.<profile>] `max_hash_per_word`"]
    assert technical[1:5] == ["`0.1`", "`0.5`", "off", "`0.1`"]  # prose, technical, code, published


def _config_with(key: str, value):
    raw = {"data": {"sources": [dict(BASE["data"]["sources"][0])]}}
    if key.startswith("data.sources."):
        raw["data"]["sources"][0][key.rsplit(".", 1)[1]] = value
    elif key == "eval.suite.tasks.kind":
        raw["eval"] = {"suite": {"tasks": [{"name": "t", "path": "t.jsonl", "kind": value}]}}
    else:
        *path, last = key.split(".")
        table = raw
        for part in path:
            table = table.setdefault(part, {})
        table[last] = value
    return C.config_from_dict(raw)


@pytest.mark.parametrize("key", sorted(C.CHOICES))
def test_validation_takes_its_choices_from_the_table(key):
    for allowed in C.CHOICES[key]:
        C.validate(_config_with(key, allowed), "c.toml")
    with pytest.raises(UserError) as e:
        C.validate(_config_with(key, "nonsense"), "c.toml")
    assert key.rsplit(".", 1)[1] in str(e.value)


# --- the template's comments --------------------------------------------------------------------------------------

LINE = re.compile(r"^(?:# )?(\w+) = (.+?)  # (.*)$")
NUMBER = r"(-?\d+(?:\.\d+)?(?:e[-+]?\d+)?)"
INTERVAL = re.compile(rf"\bin ([\[(])\s*{NUMBER},\s*{NUMBER}\s*([\])])")
COMPARED = re.compile(rf"must be (>=|>|<=|<) {NUMBER}")
AT_MOST, AT_LEAST = (re.compile(rf"\bat {w} {NUMBER}(%?)", re.I) for w in ("most", "least"))


def stated_violations(value: float, comment: str) -> list[str]:
    """The bounds a comment states ("must be in [0, 1)", "must lie in [3, 10]", "at most 0.1", "at least 80%")
    that `value` breaks."""
    broken = []
    for lo_bracket, lo, hi, hi_bracket in INTERVAL.findall(comment):
        lo, hi = float(lo), float(hi)
        above = value >= lo if lo_bracket == "[" else value > lo
        inside = above and (value <= hi if hi_bracket == "]" else value < hi)
        broken += [] if inside else [f"in {lo_bracket}{lo}, {hi}{hi_bracket}"]
    for op, bound in COMPARED.findall(comment):
        ok = {">=": value >= float(bound), ">": value > float(bound), "<=": value <= float(bound),
              "<": value < float(bound)}[op]
        broken += [] if ok else [f"{op} {bound}"]
    for pattern, ok in ((AT_MOST, lambda v, b: v <= b), (AT_LEAST, lambda v, b: v >= b)):
        for bound, percent in pattern.findall(comment):
            b = float(bound) / (100 if percent else 1)
            broken += [] if ok(value, b) else [f"{pattern.pattern.split()[1]} {bound}{percent}"]
    return broken


def contradictions(text: str) -> list[str]:
    out = []
    for line in text.splitlines():
        m = LINE.match(line)
        if not m:
            continue
        value = tomllib.loads(f"v = {m.group(2)}")["v"]
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            out += [f"{line!r}: states {b}" for b in stated_violations(value, m.group(3))]
    return out


def test_the_checker_catches_a_comment_the_value_contradicts():
    assert contradictions("# max_hash_per_word = 0.5  # Gopher: ... separately: at most 0.1.")
    assert contradictions("max_mean_word_len = 15.0  # Mean word length must lie in [3, 10].")
    assert contradictions("dropout = 1.5  # ...; must be in [0, 1)")
    assert contradictions("x = 0.7  # At least 80% of words")
    assert not contradictions("min_alpha_word_share = 0.8  # At least 80% of words; must be > 0")


@pytest.mark.parametrize("full", [True, False], ids=["full", "short"])
@pytest.mark.parametrize("overrides", [None, PRESET, USER], ids=["defaults", "quickstart", "user"])
def test_no_comment_states_a_bound_its_value_breaks(full, overrides):
    text = render_config(EXAMPLE_SOURCES, overrides, full=full)
    assert contradictions(text) == []
    if full:  # the published threshold is still named where a filter set departs from it
        assert ("# max_hash_per_word = 0.5  # Gopher quality filter (Rae et al. 2021, A.1.1): the `technical` filter "
                "set's value (published: 0.1") in text


def test_a_preset_decides_the_shape_lines_it_shows():
    text = render_config(EXAMPLE_SOURCES, {"model": {"preset": "tiny"}}, full=False)
    assert "\n# n_layer = 4  # transformer blocks; from preset `tiny`; must be >= 1" in text


# --- short and full -------------------------------------------------------------------------------------------

@pytest.mark.parametrize("overrides", [None, PRESET, USER], ids=["defaults", "quickstart", "user"])
def test_the_short_file_loads_to_the_same_config_as_the_full_one(tmp_path, overrides):
    configs = []
    for full in (True, False):
        path = tmp_path / ("full" if full else "short") / "scratchlm.toml"
        path.parent.mkdir()
        path.write_text(render_config(EXAMPLE_SOURCES, overrides, full=full), encoding="utf-8")
        configs.append(load_config(path).to_dict())
    assert configs[0] == configs[1]


def test_init_writes_the_short_file_and_init_full_every_key(tmp_path, capsys):
    from scratchlm.cli import main

    assert main(["init", str(tmp_path / "short")]) == 0 and main(["init", "--full", str(tmp_path / "full")]) == 0
    short = (tmp_path / "short" / "scratchlm.toml").read_text()
    full = (tmp_path / "full" / "scratchlm.toml").read_text()
    assert len(short.splitlines()) <= 50 and "[monitor]" not in short and "[monitor]" in full
    for key in ("preset", "max_steps", "batch_size", "budget_hours", "languages", "[[data.sources]]"):
        assert key in short
    sections = [f.name for f in dataclasses.fields(C.Config) if f.name != "path"]
    assert all(f"\n[{name}]" in full for name in sections)
