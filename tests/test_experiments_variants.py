"""variants.apply_overrides: dotted keys into the parsed TOML, and `name[sel]` into a list of tables."""
import pytest

from scratchlm.errors import UserError
from scratchlm.experiments.variants import apply_overrides, parse_set

RAW = {"train": {"learning_rate": 1e-3},
       "data": {"sources": [{"name": "web", "weight": 1.0}, {"name": "code", "weight": 1.0}]}}


def test_a_source_is_selected_by_name():
    """The form `scratchlm compare` prints for a source's key."""
    out = apply_overrides(RAW, [parse_set("data.sources[web].weight=0.25")])
    assert out["data"]["sources"] == [{"name": "web", "weight": 0.25}, {"name": "code", "weight": 1.0}]
    assert RAW["data"]["sources"][0]["weight"] == 1.0  # a copy


@pytest.mark.parametrize("text, message", [
    ("data.sources[books].weight=1", "no `sources` named 'books'; the names are: web, code"),
    ("train[web].learning_rate=1", "`train` is not a list of tables"),
    ("data.sources.weight=1", "`data.sources` is not a table; select one element by name (`sources[NAME]`)"),
])
def test_bad_selections_are_one_line_errors(text, message):
    with pytest.raises(UserError) as e:
        apply_overrides(RAW, [parse_set(text)])
    assert message in str(e.value) and "\n" not in str(e.value)
