"""bench/vs_simple_trainer.py: `scratchlm train` against the nanoGPT-style baseline loop, end to end on a micro
workdir, and its learning-rate schedule."""
import json
import math
import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
from vs_simple_trainer import main, nanogpt_lr  # noqa: E402

from scratchlm import stages  # noqa: E402
from scratchlm.stages import load_config, plan_artifacts  # noqa: E402


def test_nanogpt_lr_warms_up_decays_to_a_tenth_and_stays():
    lrs = [nanogpt_lr(it, 1.0, warmup=10, decay_iters=100) for it in range(120)]
    assert lrs[0] == pytest.approx(1 / 11) and lrs[9] == pytest.approx(10 / 11)
    assert lrs[10] == pytest.approx(1.0)
    assert all(a >= b for a, b in zip(lrs[10:], lrs[11:]))  # never rises after the warmup
    assert lrs[100] == pytest.approx(0.1) and lrs[119] == pytest.approx(0.1)


@pytest.fixture
def restore_threads():
    threads = torch.get_num_threads()
    yield
    torch.set_num_threads(threads)


def test_both_contenders_train_and_are_scored_on_the_same_windows(tmp_path, builtin_corpus, micro_config,
                                                                    restore_threads, capsys):
    (tmp_path / "user").mkdir()
    config = micro_config(tmp_path / "user", builtin_corpus, steps=10, ckpt=10)
    cfg = load_config(config)
    stages.stage_training_inputs(cfg, plan_artifacts(cfg))  # a workdir with its shards built, not yet trained
    out = tmp_path / "vs.json"
    assert main(["-c", str(config), "--scratch", str(tmp_path / "copy"), "--max-steps", "6",
                 "--out", str(out)]) == 0

    result = json.loads(out.read_text())
    ours, base = result["contenders"]
    assert ours["steps"] == 6 and base["steps"] >= 1  # the baseline gets ours' training seconds, whatever they are
    assert base["budget_s"] == ours["train_s"] > 0
    assert ours["val_loss"].keys() == base["val_loss"].keys() == result["difference"].keys()
    assert {"code", "mean"} <= ours["val_loss"].keys()
    assert all(math.isfinite(v) for r in (ours, base) for v in r["val_loss"].values())
    assert result["difference"]["mean"] == pytest.approx(base["val_loss"]["mean"] - ours["val_loss"]["mean"])
    assert "| difference (baseline - scratchlm) |" in capsys.readouterr().out
    assert not plan_artifacts(cfg)["train"].dir.exists()  # the user's workdir was only read
    assert Path(ours["train_dir"]).is_relative_to(tmp_path / "copy")


def test_a_workdir_without_shards_is_a_one_line_error(tmp_path, builtin_corpus, micro_config, capsys):
    (tmp_path / "user").mkdir()
    config = micro_config(tmp_path / "user", builtin_corpus)
    assert main(["-c", str(config), "--scratch", str(tmp_path / "copy")]) == 1
    assert "run `scratchlm run -c" in capsys.readouterr().err
