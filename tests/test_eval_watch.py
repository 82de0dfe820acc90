"""The eval watcher (issue 21): a run with train.eval = "external" and `scratchlm eval watch` beside it give the
evaluation rows inline evaluation gives, at the same steps; a watcher killed mid-evaluation resumes without
evaluating anything twice; the trainer keeps what the watcher has not read."""
import json
import shutil
import subprocess
import sys

import pytest
from train_procs import env, micro_run_config, prepare

from scratchlm.eval import watch as watch_module
from scratchlm.eval.watch import Watcher, WatchOptions
from scratchlm.eval.watch_state import WATCHER, competition, watch_share
from scratchlm.ids import read_json, write_json
from scratchlm.model.checkpoint import list_checkpoints
from scratchlm.monitor.dashboard import write_dashboard
from scratchlm.monitor.metrics_file import append_row
from scratchlm.monitor.monitor import read_rows
from scratchlm.plan.extrapolate import extrapolate
from scratchlm.stages import load_config, plan_artifacts, stage_train

STEPS = 30


@pytest.fixture(scope="module")
def prepared(builtin_corpus, micro_config, tmp_path_factory):
    """A 30-step run evaluated every 10 steps that checkpoints only at its end and keeps one checkpoint: an
    external run must add the evaluation steps' checkpoints and keep them for the watcher."""
    path = micro_run_config(tmp_path_factory.mktemp("watch"), builtin_corpus, micro_config, max_steps=STEPS,
                            checkpoint_every=STEPS, eval_every=10, keep_last=1, log_every=5)
    prepare(path)
    return path


def _external(path):
    text = path.read_text()
    if 'eval = "external"' not in text:
        path.write_text(text.replace("[train]\n", '[train]\neval = "external"\n', 1))
    return path


def _evals(train_dir) -> dict[int, dict]:
    return {r["step"]: r for r in read_rows(train_dir / "metrics.jsonl") if "eval" in r}


def _scratchlm(*args) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "scratchlm", *args], env=env(), stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)


@pytest.fixture(scope="module")
def inline(prepared, tmp_path_factory):
    """The inline run's evaluation rows and samples, the reference for the watcher's."""
    cfg = load_config(prepared)
    art = plan_artifacts(cfg)
    stage_train(cfg, art)
    train_dir = art["train"].dir
    kept = tmp_path_factory.mktemp("inline")
    shutil.copytree(train_dir / "samples", kept / "samples")
    rows = _evals(train_dir)
    shutil.rmtree(train_dir)
    return rows, kept


def test_external_training_with_a_watcher_beside_it_gives_the_inline_rows(prepared, inline):
    rows_inline, kept = inline
    path = _external(prepared)
    cfg = load_config(path)
    train_dir = plan_artifacts(cfg)["train"].dir
    shutil.rmtree(train_dir, ignore_errors=True)
    # The watcher first: it waits for the training to start, then follows it to its end.
    watcher = _scratchlm("eval", "watch", "-c", str(path), "--device", "cpu", "--threads", "1")
    trainer = _scratchlm("train", "-c", str(path))
    train_out, _ = trainer.communicate(timeout=300)
    watch_out, _ = watcher.communicate(timeout=300)
    assert trainer.returncode == 0, train_out
    assert watcher.returncode == 0, watch_out
    assert "eval watch: training finished; 3 checkpoint(s) evaluated" in watch_out
    rows = _evals(train_dir)
    assert sorted(rows) == sorted(rows_inline) == [10, 20, 30]
    for step, row in rows.items():
        assert row["eval"] == rows_inline[step]["eval"], step  # the same numbers, domain by domain
        assert row["val_loss"] == rows_inline[step]["val_loss"]
        assert row["repetition"] == rows_inline[step]["repetition"]
        assert row["watch"]["device"] == "cpu" and row["watch"]["latency_s"] >= row["watch"]["eval_s"] > 0
        assert row["watch"]["checkpoint"] == f"step_{step:07d}"
        assert (read_json(train_dir / "samples" / f"step_{step:07d}.json")
                == read_json(kept / "samples" / f"step_{step:07d}.json"))
    best = read_json(train_dir / "checkpoints" / "best.json")
    assert best["step"] == min(rows, key=lambda s: rows[s]["val_loss"])
    assert read_json(train_dir / "monitor.json")["detectors"]["repetition"]["checks"] == 3  # judged again, all rows
    page = write_dashboard(train_dir, kept / "dashboard").read_text()  # the per-domain curves, and where from
    assert "<h2>Evaluations beside the run</h2>" in page and "3 evaluation(s) came from the eval watcher on cpu" in page
    assert (kept / "dashboard" / "plots" / "loss.png").exists()


def test_a_killed_watcher_resumes_without_evaluating_twice(prepared, monkeypatch):
    path = _external(prepared)
    cfg = load_config(path)
    art = plan_artifacts(cfg)
    shutil.rmtree(art["train"].dir, ignore_errors=True)
    stage_train(cfg, art)  # no watcher yet: the trainer keeps the evaluation steps' checkpoints for it
    train_dir = art["train"].dir
    assert [p.name for p in list_checkpoints(train_dir / "checkpoints")] == \
        ["step_0000010", "step_0000020", "step_0000030"]  # keep_last = 1, yet none was pruned
    assert not _evals(train_dir)

    real = Watcher._evaluate_step
    calls = []

    def killed_during_the_second(self, checkpoint, step):
        calls.append(step)
        if len(calls) == 2:
            raise KeyboardInterrupt  # the kill: no row for this step
        return real(self, checkpoint, step)

    monkeypatch.setattr(Watcher, "_evaluate_step", killed_during_the_second)
    with pytest.raises(KeyboardInterrupt):
        Watcher(cfg, art, WatchOptions(device="cpu", poll_seconds=0.01)).run()
    assert sorted(_evals(train_dir)) == [10]

    calls.clear()
    monkeypatch.setattr(Watcher, "_evaluate_step", lambda self, c, s: (calls.append(s), real(self, c, s))[1])
    summary = Watcher(cfg, art, WatchOptions(device="cpu", poll_seconds=0.01)).run()
    assert calls == [20, 30] and summary["evaluated"] == [20, 30]  # step 10 was not evaluated again
    steps = [r["step"] for r in read_rows(train_dir / "metrics.jsonl") if "eval" in r]
    assert sorted(steps) == [10, 20, 30]  # one row per step

    calls.clear()  # a third start, after everything: nothing to do, exits at once
    assert Watcher(cfg, art, WatchOptions(device="cpu", poll_seconds=0.01)).run()["evaluated"] == []


def _trained_not_evaluated(prepared):
    """The external run trained (once per module) with no evaluation row: (config, artifacts, train dir)."""
    cfg = load_config(_external(prepared))
    art = plan_artifacts(cfg)
    train_dir = art["train"].dir
    if not (train_dir / "summary.json").exists():
        shutil.rmtree(train_dir, ignore_errors=True)
        stage_train(cfg, art)
    rows = read_rows(train_dir / "metrics.jsonl")
    (train_dir / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows if "eval" not in r))
    return cfg, art, train_dir


def test_every_n_and_a_damaged_checkpoint(prepared, monkeypatch):
    """--every 20 evaluates step 20 and the last; a checkpoint whose checksum fails is skipped with its reason."""
    cfg, art, train_dir = _trained_not_evaluated(prepared)
    weights = train_dir / "checkpoints" / "step_0000030" / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:-8] + b"\0" * 8)
    summary = Watcher(cfg, art, WatchOptions(device="cpu", every=20, poll_seconds=0.01)).run()
    assert summary["evaluated"] == [20]  # 10 not wanted, 30 damaged
    assert sorted(_evals(train_dir)) == [20]
    shutil.rmtree(train_dir)


def test_an_evaluation_of_a_checkpoint_replaced_meanwhile_is_dropped(prepared, monkeypatch):
    """A training started over while the watcher evaluated: the checkpoint at that step is another one now."""
    cfg, art, train_dir = _trained_not_evaluated(prepared)
    real = Watcher._evaluate_step

    def replaced_meanwhile(self, checkpoint, step):
        result = real(self, checkpoint, step)
        if step == 20:
            meta = read_json(checkpoint / "meta.json")
            write_json(checkpoint / "meta.json", {**meta, "checksums": {**meta["checksums"], "state.pt": "other"}})
        return result

    monkeypatch.setattr(Watcher, "_evaluate_step", replaced_meanwhile)
    summary = Watcher(cfg, art, WatchOptions(device="cpu", every=10, poll_seconds=0.01)).run()
    assert summary["evaluated"] == [10, 30]  # 20's result dropped; on the next look its checksums fail: skipped
    assert sorted(_evals(train_dir)) == [10, 30]
    shutil.rmtree(train_dir)


def test_competition_and_watch_share(tmp_path):
    trainer = {"devices": ["cuda:0"], "cpus": [0, 1]}
    assert "training device cuda:0" in competition("cuda", [0, 1], trainer)
    assert competition("cuda:1", [0, 1], trainer) is None
    assert "CPU cores" in competition("cpu", [1, 2], trainer)
    assert competition("cpu", [2, 3], trainer) is None  # taskset onto other cores
    assert competition("cpu", [0], None) is None  # no trainer yet
    cpu_trainer = {"devices": ["cpu"], "cpus": [0]}
    assert "cores the training runs on" in competition("cpu", [0, 1], cpu_trainer)
    assert competition("cpu", [1], cpu_trainer) is None

    assert watch_share(tmp_path, 0, 10) is None  # no watcher
    state = {"pid": 1, "host": "elsewhere", "competes": "it evaluates on the CPU", "busy": [[2, 4], [8, None]]}
    write_json(tmp_path / WATCHER, state)
    assert watch_share(tmp_path, 0, 10) == pytest.approx(0.4)  # 2 s done + 2 s still going, of 10 s
    assert watch_share(tmp_path, 5, 7) == 0.0
    write_json(tmp_path / WATCHER, {**state, "competes": None})
    assert watch_share(tmp_path, 0, 10) is None  # a watcher on its own device and cores costs training nothing


def test_rows_from_two_writers_stay_whole(tmp_path):
    """The trainer's and the watcher's appends, interleaved from two processes, never tear a line."""
    path = tmp_path / "metrics.jsonl"
    script = ("import sys; from pathlib import Path; from scratchlm.monitor.metrics_file import append_row\n"
              "for i in range(300): append_row(Path(sys.argv[1]), {'step': i, 'who': sys.argv[2], 'pad': 'x' * 9000})")
    procs = [subprocess.Popen([sys.executable, "-c", script, str(path), who], env=env()) for who in ("a", "b")]
    append_row(path, {"step": -1, "who": "main"})
    assert all(p.wait(timeout=120) == 0 for p in procs)
    rows = read_rows(path)
    assert len(rows) == 601 and {r["who"] for r in rows} == {"a", "b", "main"}


def test_plan_counts_no_evaluation_time_for_an_external_run(prepared):
    cfg = load_config(prepared)
    cfg.train.max_steps, cfg.train.checkpoint_every, cfg.train.eval_every = 1000, 300, 200
    cfg.train.eval = "inline"  # (an earlier test of this module made the file's external)
    probe = {"step_seconds": 0.1, "checkpoint_seconds": 2.0, "eval_batch_seconds": 0.05, "micro_batch": 16,
             "decode_token_seconds": 0.01, "restore_seconds": 1.0, "build_seconds": 1.0, "checkpoint_bytes": 10}
    inline = extrapolate(cfg, probe, n_domains=3, n_prompts=3)
    cfg.train.eval = "external"
    external = extrapolate(cfg, probe, n_domains=3, n_prompts=3)
    assert inline["eval_seconds"] > 0 and external["eval_seconds"] == 0
    assert inline["evaluations"] == external["evaluations"] == 5
    # a checkpoint at every evaluation step too: 300, 600, 900 and 200, 400, 800, 1000 (600 is both)
    assert inline["checkpoints"] == 4 and external["checkpoints"] == 7
    assert external["total_seconds"] == pytest.approx(inline["total_seconds"] - inline["eval_seconds"] + 3 * 2.0)


def test_watch_command_is_the_cli(prepared):
    command = watch_module.watch_command(prepared, "cuda:1")
    assert command[1:5] == ["-m", "scratchlm", "eval", "watch"] and command[-2:] == ["--device", "cuda:1"]


def test_a_watcher_on_the_training_cores_shows_in_the_rows_and_the_stall_verdict(builtin_corpus, micro_config,
                                                                                 tmp_path):
    """Trainer and watcher on the same CPU cores, two threads each: the log rows record when the watcher was busy
    (watch_share) beside the data wait, and loader_stall judges the intervals it slowed."""
    path = micro_run_config(tmp_path, builtin_corpus, micro_config, max_steps=120, checkpoint_every=120,
                            eval_every=20, keep_last=1, log_every=2, threads=2, eval="external")
    # Longer evaluations (more batches, longer samples): each spans many log intervals.
    text = path.read_text().replace("max_batches = 2", "max_batches = 20")
    path.write_text(text.replace("max_new_tokens = 8", "max_new_tokens = 64"))
    _, train_dir = prepare(path)
    watcher = _scratchlm("eval", "watch", "-c", str(path), "--device", "cpu", "--threads", "2")
    trainer = _scratchlm("train", "-c", str(path))
    assert trainer.wait(timeout=300) == 0, trainer.stdout.read()
    watch_out, _ = watcher.communicate(timeout=300)
    assert watcher.returncode == 0, watch_out
    assert "warning: it evaluates on the CPU cores the training runs on" in watch_out
    rows = [r for r in read_rows(train_dir / "metrics.jsonl") if "loss" in r]
    busy = [r for r in rows if r.get("watch_share", 0) >= 0.5]  # none before the watcher's first evaluation
    alone = [r for r in rows if r.get("watch_share", 0) == 0]
    assert busy and alone and all("data_wait_share" in r for r in rows)
    slowdowns = [a for a in read_rows(train_dir / "alerts.jsonl") if a["subject"] == "eval watcher"]
    verdict = read_json(train_dir / "monitor.json")["detectors"]["loader_stall"]
    assert slowdowns and verdict["verdict"] == "warning", (verdict, [r["tokens_per_s"] for r in busy],
                                                           [r["tokens_per_s"] for r in alone])
    assert "while the eval watcher evaluated beside it" in slowdowns[0]["message"]


def test_run_with_an_eval_device_starts_the_watcher_for_the_training(builtin_corpus, micro_config, tmp_path):
    """`scratchlm run --eval-device cpu`: the training evaluates nothing itself, the watcher it started does."""
    path = micro_run_config(tmp_path, builtin_corpus, micro_config, max_steps=20, checkpoint_every=20, eval_every=10,
                            log_every=5)
    done = subprocess.run([sys.executable, "-m", "scratchlm", "run", "-c", str(path), "--eval-device", "cpu"],
                          env=env(), capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "run: evaluating beside the training on cpu" in done.stderr
    train_dir = plan_artifacts(load_config(path))["train"].dir  # the same ID as with train.eval = inline
    rows = _evals(train_dir)
    assert sorted(rows) == [10, 20] and all(r["watch"]["device"] == "cpu" for r in rows.values())
    assert "eval watch: training finished; 2 checkpoint(s) evaluated" in done.stderr
