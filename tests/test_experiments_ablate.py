"""`scratchlm ablate` end to end on the micro config: the runs, the statistics from their eval.json files, the
outputs, resuming a half-done ablation, and the flags it refuses."""
import json
import re
import shutil

import pytest

from scratchlm.cli import main
from scratchlm.experiments.ablate_report import row_cells
from scratchlm.experiments.stats import compare_arms
from scratchlm.ids import read_json

STEPS = 20
VARIANT = "train.learning_rate=0.01"


@pytest.fixture(scope="module")
def ablation(tmp_path_factory, builtin_corpus, micro_config):
    cfg = micro_config(tmp_path_factory.mktemp("ablate"), builtin_corpus, steps=80, ckpt=10)
    cfg.write_text(cfg.read_text().replace("threads = 2", "threads = 1"))
    argv = ["ablate", "-c", str(cfg), "--set", VARIANT, "--seeds", "2", "--steps", str(STEPS)]
    assert main(argv) == 0
    out = next((cfg.parent / "run" / "experiments").glob("ablate-*"))
    return cfg, argv, out


def final_losses(workdir, runs, variant, domain=None):
    losses = []
    for r in runs:
        if r["variant"] == variant:
            e = read_json(workdir / "eval" / r["ids"]["eval"] / "eval.json")
            assert e["step"] == STEPS  # --steps sets where training ends, and the eval stage evaluates there
            losses.append(e["val_loss"] if domain is None else e["domains"][domain]["loss"])
    return losses


def test_statistics_come_from_the_runs(ablation):
    cfg, _, out = ablation
    result = read_json(out / "ablation.json")
    runs, workdir = result["runs"], cfg.parent / "run"
    assert [(r["variant"], r["seed"]) for r in runs] == [("base", 1337), ("base", 1338), (VARIANT, 1337),
                                                         (VARIANT, 1338)]
    base_seed0 = read_json(workdir / "train" / runs[0]["ids"]["train"] / "checkpoints" / f"step_{STEPS:07d}" /
                           "meta.json")
    assert base_seed0["seed"] == 1337 and base_seed0["config"]["train"]["max_steps"] == STEPS
    (variant,) = result["variants"]
    assert variant["val_loss"] == compare_arms(final_losses(workdir, runs, "base"),
                                               final_losses(workdir, runs, VARIANT))
    for d in result["domains"]:
        assert variant["domains"][d] == compare_arms(final_losses(workdir, runs, "base", d),
                                                     final_losses(workdir, runs, VARIANT, d))
    assert variant["upstream_differs"] == []  # a learning rate shares data, tokenizer and shards with the base
    assert len({r["train_dir"] for r in runs}) == 4


def test_base_at_the_first_seed_is_the_plain_training(ablation, tmp_path, builtin_corpus, micro_config):
    """The seed and steps overrides write the config's own values: the ID of `scratchlm run` on a config with
    those steps, so an ablation reuses a base trained before, and `scratchlm run` reuses the ablation's."""
    from scratchlm.stages import load_config, plan_artifacts

    out = ablation[2]
    plain = load_config(micro_config(tmp_path, builtin_corpus, steps=STEPS, ckpt=10))
    assert read_json(out / "ablation.json")["runs"][0]["ids"]["train"] == plan_artifacts(plain)["train"].id


def test_outputs(ablation):
    out = ablation[2]
    result = read_json(out / "ablation.json")
    (variant,) = result["variants"]
    md = (out / "ablation.md").read_text()
    row = row_cells(VARIANT, variant["val_loss"]["variant"], variant["val_loss"])
    assert "| " + " | ".join(row) + " |" in md  # the same cells as the terminal's table
    assert variant["val_loss"]["verdict"] in md and "(Welch, 2 seeds)" in md
    base_dir, variant_dir = result["runs"][0]["train_dir"], result["runs"][2]["train_dir"]
    assert f"scratchlm compare {base_dir} {variant_dir}" in md
    for d in result["domains"]:
        assert f"### {d}" in md
    assert (out / "ablation.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_rerun_trains_only_the_missing_runs(ablation, capsys):
    cfg, argv, out = ablation
    runs = read_json(out / "ablation.json")["runs"]
    workdir = cfg.parent / "run"
    train_dirs = [workdir / "train" / r["ids"]["train"] for r in runs]
    shutil.rmtree(train_dirs[3])  # a run never started
    (train_dirs[1] / "manifest.json").unlink()  # a run killed after its last checkpoint
    before = {i: (d / "manifest.json").stat().st_mtime_ns for i, d in enumerate(train_dirs) if i in (0, 2)}
    capsys.readouterr()
    assert main(argv) == 0
    err = capsys.readouterr().err
    assert "4 runs of 20 steps: 2 reused (trained before), 1 resumed from a checkpoint, 1 new" in err
    assert len(re.findall(r"^train: running", err, re.MULTILINE)) == 2  # the stage cache skipped the two others
    assert {i: (train_dirs[i] / "manifest.json").stat().st_mtime_ns for i in before} == before
    assert all((d / "manifest.json").exists() for d in train_dirs)
    rerun = read_json(out / "ablation.json")
    assert [r["status"] for r in rerun["runs"]] == ["reused", "resumed", "reused", "new"]
    assert (rerun["reused"], rerun["resumed"], rerun["new"]) == (2, 1, 1)
    assert "2 reused from earlier trainings, 1 resumed" in (out / "ablation.md").read_text()


@pytest.mark.parametrize("flags, message", [
    (["--set", "train.learning_rate=0.005"], "that is the base config's value"),
    (["--set", "train.log_every=7"], "changes no artifact ID"),
    (["--set", "train.seed=7"], "the seed is what --seeds varies"),
    (["--set", "train.max_steps=30", "--steps", "20"], "--steps sets train.max_steps of every run"),
    (["--set", VARIANT, "--set", VARIANT], "is given twice"),
    (["--set", VARIANT, "--seeds", "0"], "--seeds must be at least 1"),
    (["--set", VARIANT, "--jobs", "many"], "expected a number or auto"),
    (["--set", VARIANT, "--jobs", "0"], "--jobs must be at least 1"),
    (["--set", "train.no_such_key=1"], "no_such_key"),
    (["--set", VARIANT, "--steps", "5"], "would never leave the warmup (train.warmup_steps = 5)"),
    (["--set", "data.sources[nope].weight=2"], "no `sources` named 'nope'; the names are: "),
])
def test_bad_flags_are_one_line_errors(ablation, capsys, flags, message):
    cfg = ablation[0]
    capsys.readouterr()
    assert main(["ablate", "-c", str(cfg), *flags]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1 and "Traceback" not in err


def test_two_values_of_one_key_are_two_variants(ablation, monkeypatch):
    """Parsed, checked and planned without training: both are variants of the same key."""
    from scratchlm.experiments import ablate

    cfg = ablation[0]
    base = ablate.variant_config(cfg)
    overrides = ablate.check_variants(cfg, base, ["train.learning_rate=0.01", "train.learning_rate=0.002"], 20)
    assert [str(o) for o in overrides] == ["train.learning_rate=0.01", "train.learning_rate=0.002"]


def test_jobs_auto_on_cuda_fits_the_memory_estimate(ablation, monkeypatch):
    """No GPU needed: the device and its free memory are stubbed; the estimate is the plan's."""
    import torch

    import scratchlm.model.device as device_module
    import scratchlm.plan.make  # noqa: F401  imported before the stub: it binds pick_device at import, and
    import scratchlm.plan.memory  # noqa: F401  a stub bound there would outlive this test (a later run on "cuda")
    from scratchlm.experiments import ablate

    cfg = ablation[0]
    arms = [ablate.Arm("base", ())]
    runs = ablate.plan_runs(cfg, arms, [1337, 1338, 1339, 1340, 1341], 25)  # never trained: all five to do
    assert {r.status for r in runs} == {"new"}
    monkeypatch.setattr(device_module, "pick_device", lambda requested: torch.device("cuda", 0))
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: (8, 0))
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device=None: "stub GPU")
    per_run = ablate.run_memory(ablate.variant_config(cfg), torch.device("cuda", 0))
    assert per_run > 0.5 * 2 ** 30  # the CUDA context each process adds, at least
    for free, expected in ((2.5 * per_run, 2), (100 * per_run, 5), (0.5 * per_run, 1)):
        monkeypatch.setattr(torch.cuda, "mem_get_info", lambda device=None, free=free: (int(free), 80 * 2 ** 30))
        assert ablate.resolve_jobs(None, cfg, runs) == expected
    assert ablate.resolve_jobs(3, cfg, runs) == 3 and ablate.resolve_jobs(9, cfg, runs) == 5


def test_jobs_auto_is_one_on_cpu(ablation, capsys):
    from scratchlm.experiments import ablate

    cfg = ablation[0]
    runs = ablate.plan_runs(cfg, [ablate.Arm("base", ())], [1337, 1338], STEPS)
    assert ablate.resolve_jobs(None, cfg, runs) == 1
    assert "parallel runs only split the same cores" in capsys.readouterr().err
    assert json.loads(json.dumps([r.status for r in runs])) == ["reused", "reused"]


def test_a_variant_that_changes_the_data_reports_it():
    """From the runs' artifact IDs alone (no training): the stages before training a variant does not share."""
    from pathlib import Path

    from scratchlm.experiments import ablate
    from scratchlm.experiments.ablate_report import upstream_lines
    from scratchlm.experiments.variants import Override, TrainedRun

    arms = [ablate.Arm("base", ()), ablate.Arm("tokenizer.vocab_size=1024", (Override("tokenizer.vocab_size", 1024),))]
    runs, trained = [], []
    for arm, tokenizer in ((arms[0], "tok-a"), (arms[1], "tok-b")):
        for seed, loss in ((1, 3.0), (2, 3.1)):
            runs.append(ablate.PlannedRun(arm, seed, arm.overrides, "new"))
            ids = {"data": "d", "decontaminate": "c", "tokenizer": tokenizer, "shards": f"s-{tokenizer}",
                   "train": f"t{seed}{tokenizer}", "eval": f"e{seed}{tokenizer}"}
            trained.append(TrainedRun(ids, Path(f"/w/train/{ids['train']}"),
                                      {"step": 20, "val_loss": loss, "domains": {"web": {"loss": loss}}}))
    result = ablate.summarize(runs, trained, arms)
    (variant,) = result["variants"]
    assert [d["stage"] for d in variant["upstream_differs"]] == ["tokenizer", "shards"]
    text = "\n".join(upstream_lines(result))
    assert "tokenizer (tok-a → tok-b), shards (s-tok-a → s-tok-b)" in text
    assert "not comparable across tokenizers" in text and "validation text" not in text
    assert variant["val_loss"]["verdict"] == "no difference detectable with 2 seeds"
    assert variant["compare"] == "scratchlm compare /w/train/t1tok-a /w/train/t1tok-b"


def test_one_seed_rows_say_no_test():
    one = compare_arms([3.0], [2.9])
    assert row_cells("x", one["variant"], one) == ["x", "2.9000 (1 seed)", "-0.1000 (no interval)",
                                                   "— (Welch, 1 seed)", "no test possible with 1 seed",
                                                   "cannot estimate with 1 seed"]


# Weights of 1e30: the norms' fp32 sums of squares overflow and the first gradient is non-finite. (A learning rate
# of 1e30 did it too, until the config refused learning rates above 1.)
DIVERGES = "model.init_std=1e30"


def test_a_diverging_variant_is_reported_and_not_retrained(ablation, capsys):
    """The base's runs are the fixture's (reused); the variant's halt on a non-finite loss. The ablation still
    writes its report, and a rerun reports the same runs as diverged without training them again."""
    cfg = ablation[0]
    argv = ["ablate", "-c", str(cfg), "--set", DIVERGES, "--seeds", "2", "--steps", str(STEPS)]
    assert main(argv) == 0
    out = next(p for p in (cfg.parent / "run" / "experiments").glob("ablate-*") if p != ablation[2])
    result = read_json(out / "ablation.json")
    diverged = [r for r in result["runs"] if r["variant"] == "model.init_std=1e+30"]
    assert [(r["status"], r["val_loss"]) for r in diverged] == [("diverged", None)] * 2
    assert all("training stopped at step" in r["halted"] for r in diverged)
    (variant,) = result["variants"]
    assert variant["val_loss"]["verdict"] == "diverged (2 of 2 seeds): no finite variant loss"
    assert variant["val_loss"]["test"] is None and variant["domains"]  # the domains the base's runs measured
    assert all(d["verdict"] == variant["val_loss"]["verdict"] for d in variant["domains"].values())
    assert "| diverged |" in (out / "ablation.md").read_text()
    capsys.readouterr()
    assert main(argv) == 0
    err = capsys.readouterr().err
    assert "train: running" not in err and "diverged before" in err
    assert [r["status"] for r in read_json(out / "ablation.json")["runs"]] == ["reused"] * 2 + ["diverged"] * 2


def test_parallel_jobs_finish_every_run(ablation, capsys):
    """--jobs 2: spawn workers; the same structure as one at a time, every run evaluated or recorded as diverged
    (a worker's halt is no failure of the ablation), each run's start and end logged."""
    from scratchlm.experiments.variants import available_cpus

    cfg, _, out = ablation
    steps = 10  # new runs (the fixture's are 20 steps); warmup 5 > 10 / 3: warned, not changed
    capsys.readouterr()
    assert main(["ablate", "-c", str(cfg), "--set", DIVERGES, "--seeds", "2", "--steps", str(steps),
                 "--jobs", "2"]) == 0
    err = capsys.readouterr().err
    assert f"2 at a time (at most {max(1, available_cpus() // 2)} CPU thread(s) each)" in err
    assert "spends 5 steps (50%) in the learning-rate warmup" in err
    for i, state in ((1, "finished"), (2, "finished"), (3, "diverged"), (4, "diverged")):
        assert f"run {i}/4 submitted" in err and f"run {i}/4 {state}" in err
    parallel = next(p for p in (cfg.parent / "run" / "experiments").glob("ablate-*")
                    if read_json(p / "ablation.json")["steps"] == steps)
    result, serial = read_json(parallel / "ablation.json"), read_json(out / "ablation.json")
    assert result["jobs"] == 2 and [r["step"] for r in result["runs"]] == [steps, steps, None, None]
    assert [(r["seed"], r["status"]) for r in result["runs"]] == [(1337, "new"), (1338, "new"), (1337, "diverged"),
                                                                  (1338, "diverged")]
    assert [r.keys() - {"halted"} for r in result["runs"]] == [r.keys() for r in serial["runs"]]
    assert result["variants"][0].keys() == serial["variants"][0].keys()
    assert result["variants"][0]["val_loss"]["verdict"] == "diverged (2 of 2 seeds): no finite variant loss"


def test_an_eval_only_variant_shares_the_trainings():
    from scratchlm.experiments.ablate import compare_hint

    assert compare_hint("/w/train/a", "/w/train/a").startswith("# same trainings as the base")
    assert compare_hint("/w/train/a", "/w/train/b") == "scratchlm compare /w/train/a /w/train/b"


def test_training_exceptions_survive_pickling():
    """A spawn worker's exception reaches the parent pickled."""
    import pickle

    from scratchlm.train.loop import TrainingHalted, TrainingInterrupted, TrainingPaused

    interrupted = pickle.loads(pickle.dumps(TrainingInterrupted("stopped", 15)))
    assert (str(interrupted), interrupted.exit_code) == ("stopped", 143)
    assert str(pickle.loads(pickle.dumps(TrainingHalted("nan")))) == "nan"
    assert pickle.loads(pickle.dumps(TrainingPaused("paused"))).exit_code == 0
