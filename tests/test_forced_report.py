"""A run forced past error verdicts and one not, in one workdir (one data stage): what the report's first lines,
`scratchlm check` and the training's manifest say of it; and every ID either report shows is an artifact's own."""
import re
from types import SimpleNamespace

import pytest

from scratchlm.cli import main
from scratchlm.ids import read_json
from scratchlm.pipeline import plan_path
from scratchlm.stages import forced_past, load_config, plan_artifacts, run_all, stage_plan, stage_training_inputs

FORCED_LINE = "training not forced past an error"  # the name of check's line


@pytest.fixture(scope="module")
def runs(builtin_corpus, micro_config, tmp_path_factory):
    """plain: the micro demo, run as it is. forced: the same workdir and data, but no demo, a budget of 3.6 ms and
    an eval set that is the web source itself: a contamination error (the copies leave too little corpus), a
    corpus-size error and a time error, all three passed with --force."""
    d = tmp_path_factory.mktemp("forced")
    plain = load_config(micro_config(d, builtin_corpus, steps=6, ckpt=6))
    _run_all(plain)
    forced_path = d / "forced.toml"
    forced_path.write_text(plain.path.read_text().replace("demo = true", "demo = false")
                           + f'\n[plan]\nbudget_hours = 0.000001\n\n[[eval.sets]]\nname = "leak"\n'
                             f'path = "{builtin_corpus["web"]}"\n')
    forced = load_config(forced_path)
    _run_all(forced, force=True)
    return SimpleNamespace(plain=plain, forced=forced)


def _run_all(cfg, force: bool = False) -> None:
    """run_all, its plan's step timed for 0.1 s beforehand: run_all's plan reuses saved timings, and a 3 s probe
    (up to 4x that on a busy machine) is no part of what is tested here."""
    art = plan_artifacts(cfg)
    stage_training_inputs(cfg, art, allow_contaminated=force)
    stage_plan(cfg, art, force=force, probe_seconds=0.1)
    run_all(cfg, force=force)


def _report(cfg) -> tuple[str, dict]:
    """report.md and report.json of this config's own report artifact (the top of the workdir holds the latest)."""
    directory = plan_artifacts(cfg)["report"].dir
    return (directory / "report.md").read_text(), read_json(directory / "report.json")


def _forced_of(cfg) -> list[dict] | None:
    return plan_artifacts(cfg)["train"].manifest()["result"].get("forced")


def test_the_training_records_each_verdict_it_was_forced_past(runs):
    art = plan_artifacts(runs.forced)
    forced = _forced_of(runs.forced)
    assert [(f["stage"], f["verdict"], f["level"], f["forced_by"]) for f in forced] == [
        ("decontaminate", "contamination", "error", "--force"), ("plan", "corpus", "error", "--force"),
        ("plan", "time", "error", "--force")]
    assert "eval set 'leak' overlaps a large part of the training data" in forced[0]["summary"]
    plan = read_json(plan_path(runs.forced.workdir, art["train"].id))
    figures = {v["name"]: v["summary"] for v in plan["verdicts"]}
    assert [f["summary"] for f in forced[1:]] == [figures["corpus"], figures["time"]]  # the plan's own figures
    assert read_json(art["train"].dir / "summary.json")["forced"] == forced  # the summary travels with the run
    art["train"].check_whole(deep=True)  # the manifest hashed summary.json as it was left


def test_the_report_says_it_first(runs):
    md, report = _report(runs.forced)
    lines = md.splitlines()
    assert lines[0] == "# scratchlm run report" and lines[1] == ""
    first = lines[2]
    assert first.startswith("**Forced:** trained past 3 error verdicts with --force: (1) decontaminate "
                            "contamination error: eval set 'leak' overlaps")
    assert "(2) plan corpus error: " in first and "tokens/parameter" in first
    assert "(3) plan time error: " in first and "> budget 1e-06 h" in first
    assert report["train"]["forced"] == _forced_of(runs.forced)


def test_check_names_the_forced_verdicts_and_the_end_of_run_repeats_them(runs, capsys):
    capsys.readouterr()
    assert main(["check", "-c", str(runs.forced.path), "--skip-resume"]) == 1
    line = next(x for x in capsys.readouterr().out.splitlines() if FORCED_LINE in x)
    assert line.lstrip().startswith("[  ERROR]")
    assert "trained past 3 error verdicts with --force: (1) decontaminate contamination error" in line
    assert "(2) plan corpus error" in line and "(3) plan time error" in line
    run_all(runs.forced, force=True)  # every stage skipped: the line comes from the training's manifest
    assert "train: trained past 3 error verdicts with --force: " in capsys.readouterr().err


def test_a_run_not_forced_shows_nothing_new(runs, capsys):
    assert _forced_of(runs.plain) is None
    md, report = _report(runs.plain)
    assert "**Forced:**" not in md and "trained past" not in md and "forced" not in report["train"]
    assert md.splitlines()[2] == "## Expected in this demo"  # the demo's note still comes first of the rest
    capsys.readouterr()
    main(["check", "-c", str(runs.plain.path), "--skip-resume"])
    assert FORCED_LINE not in capsys.readouterr().out


def test_a_demo_is_not_forced_past_the_corpus_error_it_trains_through(runs):
    """Only what --force let through counts: a demo trains through the corpus-size error on its own."""
    corpus = {"name": "corpus", "level": "error", "summary": "1 token for 10 parameters"}
    time = {"name": "time", "level": "error", "summary": "2 h > budget 1 h"}
    results = {"decontaminate": {"eval_sets": {}}, "plan": {"verdicts": [corpus, time]}}
    assert [f["verdict"] for f in forced_past(runs.plain, results)] == ["time"]  # plain is a demo
    assert [f["verdict"] for f in forced_past(runs.forced, results)] == ["corpus", "time"]
    assert forced_past(runs.forced, {"decontaminate": {"eval_sets": {}}, "plan": None}) == []  # trained already


# An ID the report could show: 12 hex digits with at least one letter (a plain number is no ID), on its own.
ID = re.compile(r"(?<![0-9A-Za-z])(?=[0-9]*[a-f])[0-9a-f]{12}(?![0-9A-Za-z])")


def _own_ids(cfg) -> tuple[dict[str, str], set[str]]:
    """The pipeline's artifact IDs of this config (the report's own among them: its plots' folder), and the eval
    sets' own IDs (the contamination table's)."""
    art = plan_artifacts(cfg)
    eval_sets = read_json(art["decontaminate"].dir / "eval_sets.json")
    return {s: a.id for s, a in art.items()}, {r["id"] for r in eval_sets.values()}


def _id_values(value, key: str = ""):
    """Every value report.json files under an ID's key (`id`, `*_id`), recursively."""
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _id_values(v, k)
    elif isinstance(value, list):
        for v in value:
            yield from _id_values(v, key)
    elif isinstance(value, str) and (key == "id" or key.endswith("_id")) and ID.fullmatch(value):
        yield key, value


@pytest.mark.parametrize("which", ["plain", "forced"])  # forced: its tokenizer trained again, on other data
def test_every_id_a_report_shows_is_the_artifacts_own(runs, which):
    cfg = getattr(runs, which)
    artifacts, eval_sets = _own_ids(cfg)
    md, report = _report(cfg)
    text = re.sub(r"```.*?```", "", md, flags=re.S)  # the samples: the model's text, not the report's
    text = "\n".join(line for line in text.splitlines() if not line.startswith("**Prompt:**"))
    assert set(ID.findall(text)) - set(artifacts.values()) - eval_sets == set()
    assert f"(artifact `{artifacts['tokenizer']}`)" in md  # the tokenizer section names the artifact it read
    assert report["ids"] == {s: i for s, i in artifacts.items() if s != "report"}
    assert [(k, v) for k, v in _id_values(report) if v not in {*artifacts.values(), *eval_sets}] == []
