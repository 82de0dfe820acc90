"""Exact resume, proven: a run killed with SIGKILL mid-interval and resumed logs the same losses, bit for bit;
Muon/MuonH state resumes exactly; time-based checkpoints and keep-last."""
import signal
import shutil
import subprocess
import sys
import time

import pytest

from scratchlm.model.checkpoint import list_checkpoints
from scratchlm.stages import load_config, plan_artifacts, stage_train
from train_procs import STEPS, env, losses, prepare_run, train


@pytest.fixture(scope="module")
def prepared(builtin_corpus, micro_config, tmp_path_factory):
    return prepare_run(builtin_corpus, micro_config, tmp_path_factory)


def test_sigkill_then_resume_reproduces_every_step_bit_for_bit(prepared):
    path, train_dir = prepared
    done = train(path)
    assert done.returncode == 0, done.stderr
    uninterrupted = losses(train_dir)
    assert [s for s, _, _ in uninterrupted] == list(range(1, STEPS + 1))

    shutil.rmtree(train_dir)  # so the poll below cannot see the finished run's files
    proc = subprocess.Popen([sys.executable, "-m", "scratchlm", "train", "-c", str(path)], env=env(),
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    metrics, deadline = train_dir / "metrics.jsonl", time.time() + 120
    while time.time() < deadline and proc.poll() is None:  # kill mid-interval, after the step-10 checkpoint
        if metrics.exists() and len(metrics.read_text().splitlines()) >= 14:
            break
        time.sleep(0.005)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert proc.returncode == -signal.SIGKILL, "the run finished before it could be killed"
    survivors = list_checkpoints(train_dir / "checkpoints")
    assert survivors and int(survivors[-1].name.split("_")[1]) < STEPS
    assert not (train_dir / "manifest.json").exists()

    resumed = train(path, "--resume")
    assert resumed.returncode == 0, resumed.stderr
    assert f"resumed from {survivors[-1]}" in resumed.stderr
    assert losses(train_dir) == uninterrupted  # losses and grad norms, exactly


@pytest.mark.parametrize("optimizer", ["muon", "muonh"])
def test_switching_optimizer_is_one_key_and_its_state_resumes_exactly(prepared, optimizer):
    path, _ = prepared
    cfg = load_config(path)
    cfg.train.optimizer, cfg.train.max_steps = optimizer, 20
    art = plan_artifacts(cfg)
    stage_train(cfg, art)
    full = losses(art["train"].dir)
    (art["train"].dir / "manifest.json").unlink()
    shutil.rmtree(list_checkpoints(art["train"].dir / "checkpoints")[-1])  # back to step 10
    stage_train(cfg, art, resume=True)
    assert losses(art["train"].dir) == full and full[-1][1] < full[0][1]


def test_time_based_checkpoints_and_keep_last(prepared):
    path, _ = prepared
    cfg = load_config(path)
    cfg.train.max_steps, cfg.train.checkpoint_every, cfg.train.keep_last = 5, 1000, 2
    cfg.train.checkpoint_minutes = 1e-9  # always due: one checkpoint per step, pruned to the last 2
    art = plan_artifacts(cfg)
    result = stage_train(cfg, art)
    names = [p.name for p in list_checkpoints(art["train"].dir / "checkpoints")]
    assert names == ["step_0000004", "step_0000005"]
    assert result["best_checkpoint"].endswith("step_0000005")  # the only evaluated checkpoint
