"""`scratchlm compare`: the config diff and its verdict, the training clock, matching at equal tokens and wall-clock,
bad arguments (on synthetic training directories), and one real comparison of two micro runs."""
import json

import pytest

from scratchlm.cli import main
from scratchlm.config import Config
from scratchlm.errors import UserError
from scratchlm.experiments.compare_match import Clock, training_seconds
from scratchlm.experiments.compare_summary import build_summary
from scratchlm.experiments.config_diff import diff_runs
from scratchlm.experiments.runs import load_runs
from scratchlm.experiments.variants import parse_set, train_and_evaluate, variant_config

DOMAINS = ("code", "web")
IDS = {"data": "d0", "tokenizer": "t0", "shards": "s0", "train": "r0"}


def _config(**changes) -> dict:
    """The default config as meta.json records it, with `section__key=value` changes."""
    cfg = Config().to_dict()
    for name, value in changes.items():
        section, key = name.split("__")
        cfg[section][key] = value
    return cfg


def synthetic_run(train_dir, config=None, ids=IDS, steps=300, eval_every=100, tokens_per_s=1000.0,
                  loss_per_mtoken=1.0, prompts=("def add(", "The cat"), domains=DOMAINS):
    """A training directory as the trainer writes it: 1,000 tokens a step, a log row every 10 steps, validation
    loss 6 - loss_per_mtoken x (millions of tokens), samples and a checkpoint at each evaluation."""
    train_dir.mkdir(parents=True)
    rows = []
    for step in range(10, steps + 1, 10):
        tokens = step * 1000
        rows.append({"step": step, "loss": 6.5 - loss_per_mtoken * tokens / 1e6, "lr": 1e-3, "grad_norm": 0.5,
                     "tokens_per_s": tokens_per_s, "tokens": tokens})
        if step % eval_every == 0:
            val = 6 - loss_per_mtoken * tokens / 1e6
            rows.append({"step": step, "val_loss": val, "eval": {
                d: {"loss": val + i / 10, "bpb": val / 2, "top1": 0.1 + tokens / 1e7, "top10": 0.3 + tokens / 1e7}
                for i, d in enumerate(domains)}})
            (train_dir / "samples").mkdir(exist_ok=True)
            (train_dir / "samples" / f"step_{step:07d}.json").write_text(json.dumps(
                [{"prompt": p, "completion": f"{train_dir.name} at {step}"} for p in prompts]))
            ckpt = train_dir / "checkpoints" / f"step_{step:07d}"
            ckpt.mkdir(parents=True)
            (ckpt / "meta.json").write_text(json.dumps({"config": config or _config(), "ids": ids, "step": step}))
    (train_dir / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return train_dir


def _diff(ref_config, config, ids=IDS):
    return diff_runs("#1", ref_config, IDS, "#2", config, ids)


# --- the config diff ---------------------------------------------------------------------------------------------

def test_one_change_names_the_key_and_both_values():
    d = _diff(_config(), _config(train__optimizer="muon", train__threads=4))
    assert d.verdict() == "one change: train.optimizer adamw -> muon"
    assert [k for k, _, _ in d.no_effect] == ["train.threads"]  # listed, not counted


def test_several_changes_are_confounded():
    d = _diff(_config(), _config(train__learning_rate=1e-3, train__optimizer="muon", tokenizer__vocab_size=8192))
    assert d.verdict() == ("confounded: 3 things changed (tokenizer.vocab_size, train.optimizer, "
                           "train.learning_rate)")


def test_a_source_weight_is_keyed_by_the_source_name():
    ref = _config()
    ref["data"]["sources"] = [{"name": "code", "weight": 1.0}, {"name": "web", "weight": 0.5}]
    run = json.loads(json.dumps(ref))
    run["data"]["sources"][1]["weight"] = 0.25
    assert _diff(ref, run).verdict() == "one change: data.sources[web].weight 0.5 -> 0.25"


def test_upstream_content_change_without_a_key_is_one_change():
    ids = {"data": "d1", "tokenizer": "t1", "shards": "s1", "train": "r1"}
    d = _diff(_config(), _config(), ids)
    assert d.verdict() == "one change: data: same keys, different content (id d0 vs d1)"
    # A data key that differs explains the new data ID (and the tokenizer and shards after it).
    d = _diff(_config(), _config(data__min_chars=100), ids)
    assert d.verdict() == "one change: data.min_chars 200 -> 100"
    # A tokenizer key explains its own ID, not the data's.
    d = _diff(_config(), _config(tokenizer__vocab_size=8192), {**IDS, "data": "d1", "tokenizer": "t1"})
    assert d.verdict().startswith("confounded: 2 things changed (tokenizer.vocab_size, data content)")


def test_operational_keys_change_nothing_but_evaluation_keys_count():
    d = _diff(_config(), _config(train__threads=2, train__log_every=1, run__workdir="elsewhere",
                                 monitor__spike_z=3.0, plan__budget_hours=2.0, sft__seed=1))
    assert d.changes() == [] and d.verdict().startswith("no change:")
    assert {k for k, _, _ in d.no_effect} == {"train.threads", "train.log_every", "run.workdir", "monitor.spike_z",
                                               "plan.budget_hours", "sft.seed"}
    suite = _config()
    suite["eval"]["suite"]["humaneval"] = "off"
    assert _diff(_config(), suite).changes() == []
    d = _diff(_config(), _config(eval__max_batches=4, eval__prompts=["x"]))
    assert [k for k, _, _ in d.trained] == ["eval.prompts"] and [k for k, _, _ in d.measured] == ["eval.max_batches"]
    assert d.verdict().startswith("confounded: 2 things changed")


def test_bookkeeping_keys_are_listed_but_not_counted():
    """keep_last, checkpoint_every and eval_every are in the train ID but cannot change the weights."""
    d = _diff(_config(), _config(train__keep_last=5, train__checkpoint_every=7, train__eval_every=9))
    assert d.changes() == [] and d.kind == "none" and d.verdict().startswith("no change:")
    assert {k for k, _, _ in d.bookkeeping} == {"train.keep_last", "train.checkpoint_every", "train.eval_every"}
    d = _diff(_config(), _config(train__keep_last=5, train__optimizer="muon"))
    assert d.verdict() == "one change: train.optimizer adamw -> muon" and d.to_json()["kind"] == "one"
    assert _diff(_config(), _config(train__seed=1, train__optimizer="muon")).to_json()["kind"] == "confounded"


# --- the training clock and matching --------------------------------------------------------------------------

def test_training_seconds_sum_each_window_at_its_own_speed():
    rows = [{"step": 10, "tokens": 1000, "tokens_per_s": 100.0}, {"step": 20, "tokens": 2000, "tokens_per_s": 50.0},
            {"step": 30, "tokens": 3000, "tokens_per_s": 200.0}]
    assert training_seconds(rows) == [10.0, 30.0, 35.0]
    clock = Clock.of(rows)
    assert clock.at(20) == (2000.0, 30.0)  # an evaluation at a log step: that row's clock
    assert clock.at(25) == (2500.0, 32.5)  # between log rows: interpolated
    assert clock.at(5) == (500.0, 5.0)  # before the first row: from step 0
    assert clock.at(40) == (4000.0, 40.0)  # past the last row: at its speed


def test_matching_at_equal_tokens_and_equal_wall_clock(tmp_path):
    """Run #2 steps three times as fast but learns half as much per token: behind at equal tokens, ahead at equal
    wall-clock, and the table shows both."""
    synthetic_run(tmp_path / "a", steps=300, tokens_per_s=1000, loss_per_mtoken=2.0)
    synthetic_run(tmp_path / "b", _config(train__optimizer="muon"), steps=400, tokens_per_s=3000,
                  loss_per_mtoken=1.0)
    s = build_summary(load_runs([str(tmp_path / "a"), str(tmp_path / "b")]))
    # a's last evaluation is at 300K tokens; b's at 400K tokens / 3,000 tokens/s = 133 s.
    assert s["matched"] == pytest.approx({"tokens": 300_000.0, "seconds": 400 / 3})
    row = next(r for r in s["table"] if r["metric"] == "val_loss")
    assert row["final"] == pytest.approx([6 - 0.6, 6 - 0.4])
    assert row["at_tokens"] == pytest.approx([6 - 0.6, 6 - 0.3])  # a better per token
    assert row["at_seconds"] == pytest.approx([6 - 2 * 0.4 / 3, 6 - 0.4])  # b better per second
    verdict = s["verdicts"][0]
    assert "at equal tokens (300K): +0.3000 (worse)" in verdict
    assert "at equal wall-clock (2.2 min): -0.1333 (better)" in verdict
    assert "cannot separate noise from effect" in verdict
    assert "--set train.optimizer=muon --seeds 3" in verdict  # runs as printed: --set reads `muon` back as a string
    assert s["diff"][0]["verdict"] == "one change: train.optimizer adamw -> muon"


def test_more_runs_are_each_compared_with_the_first(tmp_path):
    synthetic_run(tmp_path / "a")
    synthetic_run(tmp_path / "b", _config(train__learning_rate=1e-3))
    synthetic_run(tmp_path / "c", _config(train__optimizer="muon", train__seed=7))
    s = build_summary(load_runs([str(tmp_path / n) for n in "abc"]))
    assert [d["verdict"] for d in s["diff"]] == ["one change: train.learning_rate 0.003 -> 0.001",
                                                 "confounded: 2 things changed (train.optimizer, train.seed)"]
    assert [v.split(" on ")[0] for v in s["verdicts"]] == ["#2 b vs #1 a", "#3 c vs #1 a"]
    assert s["legends"] == ["#1 a (learning_rate=0.003, optimizer=adamw, seed=1337)",
                            "#2 b (learning_rate=0.001, optimizer=adamw, seed=1337)",
                            "#3 c (learning_rate=0.003, optimizer=muon, seed=7)"]


def test_higher_is_better_metrics_and_per_domain_metrics(tmp_path):
    synthetic_run(tmp_path / "a", loss_per_mtoken=1.0)
    synthetic_run(tmp_path / "b", _config(train__seed=1), loss_per_mtoken=2.0, tokens_per_s=1000)
    runs = load_runs([str(tmp_path / "a"), str(tmp_path / "b")])
    assert "(better)" in build_summary(runs, "web/loss")["verdicts"][0]
    assert "top1" in build_summary(runs, "top1")["verdicts"][0]  # equal top1 here: the line still stands
    assert build_summary(runs, "code/bpb")["table"][0]["metric"] == "code/bpb"


def test_different_eval_every_has_no_common_sample_step(tmp_path):
    synthetic_run(tmp_path / "a", eval_every=100)
    synthetic_run(tmp_path / "b", _config(train__eval_every=70), eval_every=70)
    s = build_summary(load_runs([str(tmp_path / "a"), str(tmp_path / "b")]))["samples"]
    assert s["step"] is None and s["note"].startswith("no common evaluation step")
    assert s["steps"] == [300, 280] and s["rows"][0]["completions"] == ["a at 300", "b at 280"]
    synthetic_run(tmp_path / "c", _config(train__eval_every=50), eval_every=50, steps=250)
    s = build_summary(load_runs([str(tmp_path / "a"), str(tmp_path / "c")]))["samples"]
    assert s["step"] == 200 and [r["prompt"] for r in s["rows"]] == ["def add(", "The cat"]


def test_a_workdir_names_its_newest_training_and_says_so(tmp_path):
    import os

    synthetic_run(tmp_path / "w" / "train" / "old")
    synthetic_run(tmp_path / "w" / "train" / "new", _config(train__seed=2))
    os.utime(tmp_path / "w" / "train" / "old" / "metrics.jsonl", (1, 1))
    synthetic_run(tmp_path / "other")
    runs = load_runs([str(tmp_path / "w"), str(tmp_path / "other")])
    assert runs[0].id == "new" and "newest of 2 training(s)" in runs[0].chosen and runs[0].state == "in progress"


@pytest.mark.parametrize("args, message", [
    (["{a}"], "at least two runs"),
    (["{a}", "{tmp}/missing"], "missing: not a training directory"),
    (["{a}", "{a}"], "are the same training"),
    (["{a}", "{b}", "--metric", "perplexity"], "--metric perplexity: unknown"),
    (["{a}", "{nockpt}"], "has no checkpoint yet"),
    (["{a}", "{b}", "--html", "{tmp}/out.md"], "needs its own name"),
])
def test_bad_arguments_are_one_line(tmp_path, capsys, args, message):
    synthetic_run(tmp_path / "a")
    synthetic_run(tmp_path / "b")
    (tmp_path / "nockpt").mkdir()
    (tmp_path / "nockpt" / "metrics.jsonl").write_text('{"step": 10, "loss": 5.0, "tokens": 10, "tokens_per_s": 1}\n')
    names = {"a": tmp_path / "a", "b": tmp_path / "b", "nockpt": tmp_path / "nockpt", "tmp": tmp_path}
    argv = ["compare", *(a.format(**names) for a in args)]
    if "--html" not in argv:
        argv += ["--html", str(tmp_path / "out" / "c.html")]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1
    with pytest.raises(UserError):  # and the library raises it, for callers other than the CLI
        load_runs([str(tmp_path / "a")])


def test_a_diverged_run_says_so_and_its_json_stays_valid(tmp_path):
    synthetic_run(tmp_path / "a")
    synthetic_run(tmp_path / "b", _config(train__learning_rate=1.0))
    rows = (tmp_path / "b" / "metrics.jsonl").read_text().splitlines()
    last_eval = max(i for i, r in enumerate(rows) if '"eval"' in r)
    rows[last_eval] = json.dumps({**json.loads(rows[last_eval]), "val_loss": float("nan")})
    (tmp_path / "b" / "metrics.jsonl").write_text("\n".join(rows) + "\n")
    (tmp_path / "b" / "diagnosis.json").write_text("{}")
    out = tmp_path / "out" / "c.html"
    assert main(["compare", str(tmp_path / "a"), str(tmp_path / "b"), "--html", str(out)]) == 0
    text = out.with_suffix(".json").read_text()
    assert "NaN" not in text  # JSON has no NaN: null instead
    summary = json.loads(text)
    verdict = summary["verdicts"][0]
    assert "(better)" not in verdict and "final nan vs 5.7000 (steps 300 and 300): not comparable (#2 b diverged)" \
        in verdict and "#2 b diverged (halted; see " in verdict
    row = next(r for r in summary["table"] if r["metric"] == "val_loss")
    assert row["final"][1] is None


def test_different_domain_sets_compare_on_the_shared_domains(tmp_path):
    synthetic_run(tmp_path / "a", domains=("code", "web"))
    synthetic_run(tmp_path / "d", _config(train__seed=1), domains=("prose", "web"), loss_per_mtoken=2.0)
    s = build_summary(load_runs([str(tmp_path / "a"), str(tmp_path / "d")]))
    row = next(r for r in s["table"] if r["metric"] == "val_loss")
    assert row["final"] == pytest.approx([6 - 0.3 + 0.1, 6 - 0.6 + 0.1])  # web's loss alone, not code or prose
    verdict = s["verdicts"][0]
    assert "-0.3000 (better)" in verdict and "mean over the domains every run has (web)" in verdict
    assert "#1 a alone has code; #2 d alone has prose" in verdict
    out = tmp_path / "out" / "c.html"  # the charts and the page take the shared domains too
    assert main(["compare", str(tmp_path / "a"), str(tmp_path / "d"), "--html", str(out)]) == 0
    assert "mean over the domains every run has (web)" in out.with_suffix(".md").read_text()
    synthetic_run(tmp_path / "p", domains=("prose",))
    s = build_summary(load_runs([str(tmp_path / "a"), str(tmp_path / "p")]))
    assert "no verdict: no domain was evaluated in every run" in s["verdicts"][0]
    assert "(better)" not in s["verdicts"][0] and "(equal)" not in s["verdicts"][0]


def test_different_tokenizers_recommend_bits_per_byte(tmp_path):
    synthetic_run(tmp_path / "a")
    synthetic_run(tmp_path / "b", _config(tokenizer__vocab_size=8192), ids={**IDS, "tokenizer": "t1"})
    runs = load_runs([str(tmp_path / "a"), str(tmp_path / "b")])
    assert "tokenizers differ (t0 vs t1)" in build_summary(runs)["verdicts"][0]
    assert "use --metric bpb" in build_summary(runs)["verdicts"][0]
    assert "use --metric bpb" not in build_summary(runs, "bpb")["verdicts"][0]


def test_a_workdir_picks_the_training_its_lineage_names_as_report_does(tmp_path):
    from scratchlm.monitor.dashboard import resolve_train_dir

    synthetic_run(tmp_path / "w" / "train" / "finished")
    synthetic_run(tmp_path / "w" / "train" / "newer", _config(train__seed=2))
    (tmp_path / "w" / "lineage.json").write_text(json.dumps({"artifacts": {"train": {"dir": "train/finished"}}}))
    synthetic_run(tmp_path / "other")
    run = load_runs([str(tmp_path / "w"), str(tmp_path / "other")])[0]
    assert run.id == "finished" == resolve_train_dir(tmp_path / "w").name and "lineage.json" in run.chosen


def test_a_checkpoint_without_config_is_one_line(tmp_path):
    synthetic_run(tmp_path / "a")
    synthetic_run(tmp_path / "old")
    (tmp_path / "old" / "checkpoints" / "step_0000300" / "meta.json").write_text(json.dumps({"step": 300}))
    with pytest.raises(UserError, match="records no config"):
        load_runs([str(tmp_path / "a"), str(tmp_path / "old")])


# --- two real micro runs ----------------------------------------------------------------------------------------

def test_compare_two_real_runs_end_to_end(tmp_path, builtin_corpus, micro_config, capsys):
    base = micro_config(tmp_path, builtin_corpus, steps=30, ckpt=15)
    first = train_and_evaluate(variant_config(base), threads=1)
    second = train_and_evaluate(variant_config(base, [parse_set("train.learning_rate=0.002")]), threads=1)
    assert first.train_dir != second.train_dir
    out = tmp_path / "cmp" / "compare.html"
    assert main(["compare", str(first.train_dir), str(second.train_dir), "--html", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "one change: train.learning_rate 0.005 -> 0.002" in printed
    summary = json.loads(out.with_suffix(".json").read_text())
    assert [k["key"] for k in summary["diff"][0]["trained"] + summary["diff"][0]["measured"]] == [
        "train.learning_rate"]
    assert summary["diff"][0]["content"] == []  # data, tokenizer and shards are shared
    assert summary["diff"][0]["verdict"] == "one change: train.learning_rate 0.005 -> 0.002"
    # Final = the last evaluation row, which is what the eval stage measured on the same checkpoint.
    row = next(r for r in summary["table"] if r["metric"] == "val_loss")
    assert row["final"] == pytest.approx([first.eval["val_loss"], second.eval["val_loss"]])
    assert row["final_steps"] == [30, 30] and summary["samples"]["step"] == 30
    assert [r["eval_stage"] for r in summary["runs"]] == [{"step": 30, "val_loss": first.eval["val_loss"]},
                                                          {"step": 30, "val_loss": second.eval["val_loss"]}]
    assert summary["matched"]["tokens"] == summary["runs"][0]["tokens"]  # same batch, same steps
    html = out.read_text()
    assert html.count("data:image/png;base64,") == 5 and "train.learning_rate" in html
    assert "one change: train.learning_rate" in out.with_suffix(".md").read_text()
    # A config names its training too; a workdir, the training `scratchlm report WORKDIR` shows.
    from scratchlm.monitor.dashboard import resolve_train_dir

    assert main(["compare", str(base), str(second.train_dir), "--html", str(out)]) == 0
    assert f"#1 {first.train_dir.name}" in capsys.readouterr().out
    assert main(["compare", str(first.train_dir), str(base.parent / "run"), "--html", str(out)]) == 0
    printed = capsys.readouterr().out
    assert f"#2 {resolve_train_dir(base.parent / 'run').name}: " in printed and "(its lineage.json" in printed
