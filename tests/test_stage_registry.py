"""The stage registry is the one declaration of each stage: the README's table, the CLI's commands, the artifact
IDs and the config's keys are all derived from it or checked against it."""
import dataclasses
import re
from pathlib import Path

import pytest

from scratchlm import config as C
from scratchlm.cli import LOCKING, build_parser
from scratchlm.config import config_from_dict
from scratchlm.errors import UserError
from scratchlm.stages import ARTIFACT_STAGES, STAGES, plan_artifacts

ROOT = Path(__file__).resolve().parents[1]


def _readme_table() -> list[tuple[str, str, str]]:
    text = ROOT.joinpath("README.md").read_text(encoding="utf-8")
    section = text.split("\n## Stages\n", 1)[1].split("\n## ", 1)[0]
    rows = re.findall(r"^\| (\w+) \| `([^`]*)` \| `([^`]*)` \|", section, re.M)
    return [(stage, command.split(" -c ")[0], package.rstrip("/")) for stage, command, package in rows]


def test_readme_stage_table_is_the_registry():
    assert _readme_table() == [(s.name, s.cli, s.package) for s in STAGES]


def test_every_stage_package_exists_and_every_input_comes_earlier():
    for i, stage in enumerate(STAGES):
        assert (ROOT / "src" / "scratchlm" / stage.package / "__init__.py").exists(), stage.package
        assert all(dep in [s.name for s in STAGES[:i]] for dep in stage.inputs), stage.name
        assert all(hasattr(C.Config(), section) for section in stage.sections), stage.name


def test_every_stage_command_exists_and_locks_the_workdir():
    sub = next(a for a in build_parser()._actions if a.dest == "command").choices
    for stage in ARTIFACT_STAGES:
        group, *verb = stage.command
        parser = sub[group].__dict__["_subparsers"]._group_actions[0].choices[verb[0]] if verb else sub[group]
        options = {o for a in parser._actions for o in a.option_strings}
        assert {"-c", "--force", "--wait"} <= options, stage.cli
        assert (group, verb[0] if verb else None) in LOCKING


def test_a_stage_missing_its_input_names_the_command_from_the_registry(builtin_corpus, micro_config, tmp_path):
    from scratchlm.stages import load_config, stage_tokenizer

    cfg = load_config(micro_config(tmp_path, builtin_corpus))
    with pytest.raises(UserError, match=r"the decontaminate stage .* run `scratchlm data decontaminate -c CONFIG`"):
        stage_tokenizer(cfg, plan_artifacts(cfg))


def test_operational_keys_stay_out_of_the_stage_ids(tmp_path):
    """A key marked operational() (processes, logging, the checkpoint suite) changes no artifact ID; every other
    key of a stage's section changes that stage's ID."""
    (tmp_path / "a.txt").write_text("text\n", encoding="utf-8")
    base = {"data": {"sources": [{"name": "a", "domain": "web", "path": "a.txt"}]}, "run": {"workdir": "w"}}
    cfg = config_from_dict(base)
    cfg.path = tmp_path / "c.toml"
    before = {s: a.id for s, a in plan_artifacts(cfg).items()}
    for section in ("data", "shards", "train", "decontaminate", "eval"):
        for f in dataclasses.fields(getattr(cfg, section)):
            if f.metadata.get("in_id", True) or f.name == "sets":  # [[eval.sets]] are the decontaminate stage's
                continue
            changed = config_from_dict({**base, section: {**base.get(section, {}), f.name: _other(cfg, section, f)}})
            changed.path = cfg.path
            assert {s: a.id for s, a in plan_artifacts(changed).items()} == before, f"{section}.{f.name}"
    lr = config_from_dict({**base, "train": {"learning_rate": 1e-4}})
    lr.path = cfg.path
    after = {s: a.id for s, a in plan_artifacts(lr).items()}
    assert {s for s in before if before[s] != after[s]} == {"train", "eval", "report"}


def _other(cfg, section, f):
    value = getattr(getattr(cfg, section), f.name)
    if isinstance(value, bool):
        return not value
    if isinstance(value, (int, float)):
        return value + 1
    if f.name == "suite":
        return {"humaneval": "off", "diversity_samples": 7}
    if (section, f.name) == ("train", "eval"):
        return "external"
    if (section, f.name) == ("data", "executor"):
        return "ray"
    if (section, f.name) == ("data", "ray_address"):
        return "ray://head:10001"
    raise AssertionError(f"no other value for {section}.{f.name}")


def test_a_suite_key_left_in_eval_still_loads_and_says_where_it_moved(capsys):
    """A config from the `scratchlm init` of before [eval.suite] keeps working."""
    cfg = config_from_dict({"eval": {"humaneval": "on", "human_scale": 7, "max_batches": 3}})
    assert (cfg.eval.suite.humaneval, cfg.eval.suite.human_scale, cfg.eval.max_batches) == ("on", 7, 3)
    assert "humaneval, human_scale moved from [eval] to [eval.suite]" in capsys.readouterr().err
    assert config_from_dict({"eval": {"suite": {"humaneval": "on"}}}).eval.suite.humaneval == "on"
    with pytest.raises(UserError, match=r"`humaneval` is set in both \[eval\] and \[eval.suite\]"):
        config_from_dict({"eval": {"humaneval": "on", "suite": {"humaneval": "off"}}})
