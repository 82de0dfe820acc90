"""`scratchlm ladder`: the rungs' shapes and step counts, the compute-optimal member of a budget, and a micro
ladder end to end through the CLI."""
import json
import math
import re

import pytest

from scratchlm import cli
from scratchlm.config import ModelConfig, TrainConfig
from scratchlm.errors import UserError
from scratchlm.experiments.fit import fit_loss_curve
from scratchlm.experiments.ladder import rung_record
from scratchlm.experiments.ladder_report import ladder_verdicts, summary_lines
from scratchlm.experiments.ladder_rungs import (
    MAX_RUNGS,
    WARMUP_MAX_SHARE,
    compute_at,
    compute_optimal,
    make_rung,
    parse_sizes,
    shape_overrides,
    warmup_for,
)
from scratchlm.plan.arithmetic import count_params, flops_per_token
from scratchlm.presets import PRESETS


def preset(name: str) -> ModelConfig:
    return ModelConfig(preset=name, **PRESETS[name])


@pytest.mark.parametrize("name", ["tiny", "50m", "125m", "350m", "1b"])
def test_auto_rungs_keep_head_size_ratio_and_grouping(name):
    m = preset(name)
    head, group, aspect = m.d_model // m.n_head, m.n_head // (m.n_kv_head or m.n_head), m.d_model / m.n_layer
    rungs = parse_sizes("auto", m)
    assert len(rungs) == 4 and [r.n_layer for r in rungs] == sorted({r.n_layer for r in rungs})
    assert all(count_params(r, 4096).total < count_params(m, 4096).total for r in rungs)
    for r in rungs:
        assert r.d_model // r.n_head == head and r.d_model % r.n_head == 0
        assert r.n_head // (r.n_kv_head or r.n_head) == group
        if r.n_layer < m.n_layer:  # at the target's own depth a member is one head group narrower
            assert abs(r.d_model - r.n_layer * aspect) <= head * group / 2 or r.d_model == head * group
        assert (r.seq_len, r.mlp, r.mlp_ratio) == (m.seq_len, m.mlp, m.mlp_ratio)


def test_sizes_are_depths_of_the_family():
    tiny = preset("tiny")
    # 4 layers: 1/5 ... 4/5 of the depth round to 3 depths, so the 4 shallowest members (the last one 4 layers
    # deep, one head narrower than the target)
    assert [(r.n_layer, r.d_model, r.n_head) for r in parse_sizes("auto", tiny)] == [(1, 64, 2), (2, 96, 3),
                                                                                     (3, 128, 4), (4, 160, 5)]
    assert [r.n_layer for r in parse_sizes("3, 1,2", tiny)] == [1, 2, 3]
    assert [r.n_layer for r in parse_sizes("auto", preset("125m"))] == [2, 5, 7, 10]
    # a family of 3 members: auto takes the 3 it has
    assert [r.n_layer for r in parse_sizes("auto", ModelConfig(n_layer=3, d_model=192, n_head=6))] == [1, 2, 3]
    big = preset("125m")
    assert len(parse_sizes(",".join(map(str, range(1, MAX_RUNGS + 1))), big)) == MAX_RUNGS
    for text, needle in (("1,2,9", "no member of depth 9"), ("1,2", "at least 3 rungs"), ("s,m", "depths")):
        with pytest.raises(UserError, match=needle):
            parse_sizes(text, tiny)
    with pytest.raises(UserError, match=f"at most {MAX_RUNGS} rungs, got 6"):
        parse_sizes("1,2,3,4,5,6", big)
    with pytest.raises(UserError, match="a deeper target"):
        parse_sizes("auto", ModelConfig(n_layer=2, d_model=64, n_head=4))


def test_steps_follow_the_tokens_per_parameter():
    train = TrainConfig(max_steps=600, warmup_steps=50)
    for m in parse_sizes("auto", preset("tiny")):
        rung = make_rung(m, 4096, 20.0, 4096, train)
        n = count_params(m, 4096).total
        assert rung.params == n and rung.steps == math.ceil(20 * n / 4096)
        assert 20 * n <= rung.tokens < 20 * n + 4096
        assert rung.compute == flops_per_token(m, 4096)["total"] * rung.tokens
        assert rung.warmup_steps == round(rung.steps * 50 / 600)  # the target's share, under the cap
    # a long warmup is capped at WARMUP_MAX_SHARE of every rung; none at all stays none
    assert warmup_for(1000, TrainConfig(max_steps=100, warmup_steps=50)) == 1000 * WARMUP_MAX_SHARE
    assert warmup_for(1000, TrainConfig(max_steps=100, warmup_steps=0)) == 0
    assert warmup_for(3, TrainConfig(max_steps=600, warmup_steps=50)) == 1


def test_compute_optimal_picks_the_member_the_budget_pays_for():
    tiny = preset("tiny")
    params, compute = compute_at(tiny, 4096, 20.0)
    exact = compute_optimal(tiny, 4096, 20.0, compute)
    assert (exact["model"].n_layer, exact["model"].d_model) == (4, 192) and exact["params"] == params
    assert exact["params_optimal"] == pytest.approx(params, rel=1e-9) and exact["where"] == "inside the family"
    bigger = compute_optimal(tiny, 4096, 20.0, compute * 30)
    assert bigger["model"].n_layer > 4 and bigger["model"].d_model // bigger["model"].n_head == 32
    assert bigger["params_optimal"] > params and bigger["compute"] > compute
    assert "below" in compute_optimal(tiny, 4096, 20.0, 1.0)["where"]


@pytest.mark.parametrize("head_dim", [32, 128])
def test_compute_optimal_finds_the_target_itself_with_an_explicit_head_dim(head_dim):
    target = ModelConfig(n_layer=12, d_model=768, n_head=12, head_dim=head_dim)
    compute = compute_at(target, 32000, 20.0)[1]
    member = compute_optimal(target, 32000, 20.0, compute)["model"]
    assert shape_overrides(member, target) == shape_overrides(target, target)


def test_the_budget_sentence_names_the_family_once():
    tiny = preset("tiny")
    compute = compute_at(tiny, 4096, 20.0)[1]
    for budget, where in ((1.0, "below"), (compute, "inside"), (compute * 1e12, "above")):
        opt = compute_optimal(tiny, 4096, 20.0, budget)
        assert opt["where"].startswith(where)
        result = {"fit": {"formula": "L", "why": "w"}, "tokens_per_param": 20.0, "prediction": None,
                  "verdicts": [], "notes": [],
                  "target": {"shape": "4x192", "params": 1, "tokens": 20, "compute": 1.0, "tokens_note": ""},
                  "budget": {**opt, "hours": 1.0, "hours_from": "--budget-hours", "flops_per_s": 1.0,
                             "shape": "4x192", "is_target": False}}
        line = next(x for x in summary_lines(result) if x.startswith("compute-optimal size"))
        assert line.count("the family") == 1 and "member the family" not in line and ") the family" not in line


def test_a_rung_rounded_up_past_the_ratio_is_reported_and_warned():
    tiny, train = preset("tiny"), TrainConfig(max_steps=600, warmup_steps=50)
    # one step of 2^24 tokens is more than twice 20 tokens per parameter of the 1-layer member (315,648 params)
    rungs = [make_rung(m, 4096, 20.0, 2 ** 24, train) for m in parse_sizes("1,2,3,4", tiny)]
    assert rungs[0].steps == 1 and rungs[0].tokens_per_param > 40

    class Run:
        eval, ids, train_dir = {"val_loss": 3.0}, {"train": "t"}, "d"

    records = [rung_record(g, Run, 0.0) for g in rungs]
    assert records[0]["tokens_per_param"] == rungs[0].tokens / rungs[0].params
    fit = fit_loss_curve([g.compute for g in rungs], [4.0, 3.5, 3.2, 3.0])
    ratio = {v.name: v for v in ladder_verdicts(fit, 1e18, rungs[-1].compute, 20.0, records)}["ratio"]
    assert ratio.level == "warning" and "1x64" in ratio.summary and "train.batch_size" in ratio.summary
    exact = [{**x, "tokens_per_param": 20.5} for x in records]  # rounded up by 2.5%: fine
    assert {v.name: v for v in ladder_verdicts(fit, 1e18, 1e15, 20.0, exact)}["ratio"].level == "ok"


def test_bad_flags_are_one_line_errors_before_anything_trains(builtin_corpus, micro_config, tmp_path, capsys):
    path = str(micro_config(tmp_path, builtin_corpus))
    for config, flags, needle in ((path, ["--tokens-per-param", "0"], "--tokens-per-param must be"),
                                  (path, ["--budget-hours", "-1"], "--budget-hours must be"),
                                  (str(tmp_path / "none.toml"), [], "not found")):
        assert cli.main(["ladder", "-c", config, *flags]) == 2
        err = capsys.readouterr().err
        assert needle in err and "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "run" / "train").exists()


def test_micro_ladder_end_to_end(builtin_corpus, micro_config, tmp_path):
    path = micro_config(tmp_path, builtin_corpus)
    # 4 layers x 64 (head size 16): a family of depths 1-4; one CPU thread
    path.write_text(path.read_text().replace("n_layer = 2", "n_layer = 4").replace("threads = 2", "threads = 1"))
    code = cli.main(["ladder", "-c", str(path), "--sizes", "1,2,3", "--tokens-per-param", "0.5",
                     "--budget-hours", "0.01", "--probe-seconds", "0.2"])
    out = next((tmp_path / "run" / "experiments").glob("ladder-*"))
    result = json.loads((out / "ladder.json").read_text())
    assert code == (1 if result["level"] == "error" else 0)
    assert [r["shape"] for r in result["rungs"]] == ["1x16", "2x32", "3x48"]
    for r in result["rungs"]:  # 1,024 tokens per step: tens of steps each
        assert r["steps"] == math.ceil(round(0.5 * r["params"]) / 1024) and r["tokens"] == r["steps"] * 1024
        assert r["val_loss"] > 0 and r["compute"] == r["flops_per_token"] * r["tokens"]
    assert result["fit"]["form"] == "power" and "3 rungs" in result["fit"]["why"]
    assert result["target"]["shape"] == "4x64" and result["target"]["compute"] > result["rungs"][-1]["compute"]
    verdicts = {v["name"]: v for v in result["verdicts"]}
    assert set(verdicts) == {"falling", "fit", "band", "reach", "ratio"}
    assert verdicts["band"]["level"] == "warning" and "3 rungs leave 1 degree of freedom" in verdicts["band"]["summary"]
    if result["prediction"] is not None:
        p = result["prediction"]
        assert p["low"] < p["loss"] < p["high"]
    budget = result["budget"]
    assert budget["flops_per_s"] > 0 and budget["tokens_per_s"] > 0 and budget["hours_from"] == "--budget-hours"
    assert re.fullmatch(r"\d+x\d+", budget["shape"])
    # the terminal, the Markdown and the JSON say the same thing: one source
    md = (out / "ladder.md").read_text()
    assert all(line in md for line in summary_lines(result))
    assert (out / "ladder.png").read_bytes()[:4] == b"\x89PNG"
    # the rungs are ordinary runs: a second ladder retrains nothing and concludes the same
    assert cli.main(["ladder", "-c", str(path), "--sizes", "1,2,3", "--tokens-per-param", "0.5"]) == code
    again = json.loads((out / "ladder.json").read_text())
    assert [r["val_loss"] for r in again["rungs"]] == [r["val_loss"] for r in result["rungs"]]
    assert "skipped" in again["budget"]
