"""Under torchrun, where ranks wait for each other: only at log steps and every AGREE_EVERY steps for the stop and
checkpoint-by-time flags (a host sync each), and for rank 0's checkpoint writes in a barrier whose timeout is a
disk's, not a collective's. 2 gloo ranks on CPU."""
import json
import subprocess
import sys
from pathlib import Path

import pytest

from scratchlm.train import loop
from scratchlm.train.distributed import World
from train_procs import env, micro_run_config, prepare

HERE = Path(__file__).resolve().parent
TORCHRUN = ("-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2")


def test_two_ranks_read_tensors_back_only_at_log_checkpoint_evaluation_and_agreement_steps(
        builtin_corpus, micro_config, tmp_path):
    path = micro_run_config(tmp_path, builtin_corpus, micro_config, log_every=7, checkpoint_every=12, eval_every=1000,
                            max_steps=24, precision="fp32", batch_size=4)
    cfg, _ = prepare(path)
    out = tmp_path / "readbacks.json"
    r = subprocess.run([sys.executable, *TORCHRUN, str(HERE / "count_readbacks.py"), str(out), "train", "-c",
                        str(path), "--force"], env=env(), capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    t, world = cfg.train, World(0, 2)
    # the steps (0-based, as the loop counts) after which a read-back may come
    allowed = {s for s in range(t.max_steps)
               if loop.readback_due(s + 1, t, None) or loop.agreement_due(s + 1, t, world)}
    assert allowed == {6, 9, 11, 13, 19, 20, 23}
    for rank in (0, 1):
        calls = {int(step): names for step, names in json.loads(Path(f"{out}.{rank}").read_text()).items() if names}
        assert {9, 19} <= set(calls), calls  # the count sees the agreement's all-reduce read back
        assert set(calls) <= allowed, calls


def test_alone_a_process_decides_at_every_step_for_free():
    t = type("T", (), {"log_every": 7, "max_steps": 24})
    assert all(loop.agreement_due(s, t, World()) for s in range(1, 25))


WAIT_FOR_RANK_0 = """
import datetime, sys, time, torch, torch.distributed as dist
from scratchlm.train.distributed import barrier, close_world, init_world
dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=2))  # a collective's timeout, made short
world, _ = init_world(torch.device("cpu"))
if world.rank == 0:
    time.sleep(6)  # a checkpoint write slower than the collective timeout
barrier(world)
t = torch.ones(1)
dist.all_reduce(t)  # the next step's gradient all-reduce
print("rank", world.rank, "reduced", float(t))
close_world(world)  # as the trainer ends: a process group left open can abort the interpreter's exit
"""


def test_ranks_wait_for_a_slow_checkpoint_write_longer_than_a_collective_may_take(tmp_path):
    script = tmp_path / "wait.py"
    script.write_text(WAIT_FOR_RANK_0)
    r = subprocess.run([sys.executable, *TORCHRUN, str(script)], env=env(), capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr[-3000:]


def test_fp16_with_loss_scaling_trains_on_cpu_autocast_as_fp32_does(builtin_corpus, micro_config, tmp_path):
    """The fp16 path a pre-Ampere GPU gets (autocast to fp16, GradScaler), run on CPU autocast, against the same run
    in fp32: it trains as far."""
    path = micro_run_config(tmp_path, builtin_corpus, micro_config, precision="fp16", max_steps=30, eval_every=1000,
                            checkpoint_every=30)
    final = {}
    for precision in ("fp16", "fp32"):
        path.write_text(path.read_text().replace('precision = "fp16"', f'precision = "{precision}"'))
        _, train_dir = prepare(path)  # the precision is part of the run's ID: its own directory
        r = subprocess.run([sys.executable, "-m", "scratchlm", "train", "-c", str(path), "--force"], env=env(),
                           capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, r.stderr[-3000:]
        assert json.loads((train_dir / "summary.json").read_text())["precision"] == precision
        rows = [json.loads(line) for line in (train_dir / "metrics.jsonl").read_text().splitlines()]
        losses = [row["loss"] for row in rows if "loss" in row]
        assert losses[-1] < losses[0] - 0.5, losses
        final[precision] = losses[-1]
    assert abs(final["fp16"] - final["fp32"]) < 0.05, final
