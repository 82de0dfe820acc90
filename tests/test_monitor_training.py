"""The monitor inside real (micro) training runs: NaN halts with a diagnosis, a slow loader is reported."""
import json
import re
import time

import pytest

from scratchlm import stages
from scratchlm.cli import main
from scratchlm.ids import read_json
from scratchlm.model import GPT
from scratchlm.train.loader import MixtureLoader
from scratchlm.train.loop import TrainingHalted
from scratchlm.stages import load_config, plan_artifacts

from test_cli import scratchlm


@pytest.fixture(scope="module")
def prepared(builtin_corpus, micro_config, tmp_path_factory):
    """A config whose data, tokenizer and shards are built; each test trains its own variant."""
    d = tmp_path_factory.mktemp("monitor")
    path = micro_config(d, builtin_corpus, steps=20, ckpt=20, extra="[monitor]\npeak_flops = 1e12\n")
    cfg = load_config(path)
    art = plan_artifacts(cfg)
    stages.stage_training_inputs(cfg, art)
    return path


def _variant(path, name, **train):
    text = path.read_text()
    for key, value in train.items():
        text = text.replace("[train]\n", f"[train]\n{key} = {value}\n", 1)
    lines, seen = [], set()
    for line in text.splitlines():  # the first occurrence of a [train] key wins: drop the template's
        key = line.split("=")[0].strip()
        if key in train and key in seen:
            continue
        seen.add(key)
        lines.append(line)
    variant = path.with_name(f"{name}.toml")
    variant.write_text("\n".join(lines) + "\n")
    return load_config(variant)


def test_a_diverging_run_halts_with_a_diagnosis(prepared):
    # Weights of 1e30: the norms' fp32 sums of squares overflow and the first gradient is not finite. (It was a
    # learning rate of 1e30 until the config refused learning rates above 1.)
    path = _variant(prepared, "huge_init", grad_clip="0.0").path
    path.write_text(path.read_text().replace("[model]\n", "[model]\ninit_std = 1e30\n", 1))
    cfg = load_config(path)
    r = scratchlm("train", "-c", str(cfg.path))
    assert r.returncode == 2, r.stderr
    errors = [line for line in r.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "not finite (loss " in errors[0] and "diagnosis.json" in errors[0]
    assert not re.search(r"\d\.\d{5,}", errors[0]), errors[0]  # finite numbers rounded
    assert "Traceback" not in r.stderr
    train_dir = plan_artifacts(cfg)["train"].dir
    d = read_json(train_dir / "diagnosis.json")  # strict JSON: no bare NaN
    assert d["nonfinite_grads"] and d["lr"] == cfg.train.learning_rate / cfg.train.warmup_steps  # the first step's
    # no checkpoint yet: the advice is the learning rate and a fresh start of the fixed config, not --resume
    assert "lower train.learning_rate" in d["next"] and "gradient clipping is off" in d["next"]
    assert f"start over with `scratchlm train -c {cfg.path}`" in d["next"] and "--resume" not in d["next"]
    assert len(d["batch"]) == cfg.train.batch_size and all(row["doc_ids"] for row in d["batch"])
    assert not (train_dir / "manifest.json").exists()  # a halted run is not a finished artifact
    alerts = [json.loads(line) for line in (train_dir / "alerts.jsonl").read_text().splitlines()]
    assert alerts[-1]["detector"] == "nonfinite" and alerts[-1]["verdict"] == "error"


def test_poisoned_forward_halts_at_that_step_naming_the_batch(prepared, monkeypatch):
    # A learning rate at which the logged steps are steady whatever the precision: at the micro config's 0.005 the
    # grad norm doubles from step 5 to 10 in fp32 (0.618 -> 1.226) and triples in bf16, which the diagnosis
    # rightly reads as the learning rate (RISE = 2); at 0.001 it is 0.6 -> 0.66 in both.
    cfg = _variant(prepared, "poisoned", max_steps=30, checkpoint_every=10, learning_rate=0.001,
                   precision='"fp32"')
    poison_at = 12

    class Poisoned(GPT):
        calls = 0

        def forward(self, idx, targets=None, **kw):
            logits, loss = super().forward(idx, targets, **kw)
            if self.training and targets is not None:
                Poisoned.calls += 1
                if Poisoned.calls > poison_at:
                    loss = loss * float("nan")
            return logits, loss

    monkeypatch.setattr("scratchlm.train.loop.GPT", Poisoned)
    art = plan_artifacts(cfg)
    with pytest.raises(TrainingHalted, match=f"step {poison_at}"):
        stages.stage_train(cfg, art)
    d = read_json(art["train"].dir / "diagnosis.json")
    assert d["step"] == poison_at and d["loss"] == "nan"
    assert d["explanation"].startswith(f"at step {poison_at} the loss and the grad norm are not finite (loss nan, "
                                       f"grad norm nan); ")
    # steady logged steps, then one step failed: the data; the command names this run's checkpoint
    assert f"step {poison_at} alone failed" in d["next"] and "lower train.learning_rate" not in d["next"]
    step_10 = art["train"].dir / "checkpoints" / "step_0000010"
    assert f"`scratchlm train -c {cfg.path} --resume-from {step_10}`" in d["next"]
    assert d["last_metrics"]["step"] == 10 and "weight_norm" in d["last_metrics"]
    loader = MixtureLoader(art["shards"].dir, cfg.model.seq_len, cfg.train.batch_size, cfg.train.seed)
    which, starts = loader.positions(poison_at)
    assert [r["source"] for r in d["batch"]] == [loader.sources[s] for s in which]
    assert [r["token_offset"] for r in d["batch"]] == starts.tolist()
    for row in d["batch"]:
        source, doc = row["doc_ids"][0].split(":")
        shard = loader.shards[loader.sources.index(source)]
        assert shard.docs[int(doc), 0] == row["token_offset"] - row["offset_in_first_doc"]


def test_slow_loader_triggers_the_stall_warning_and_the_dashboard_shows_it(prepared, monkeypatch, tmp_path):
    cfg = _variant(prepared, "slow", max_steps=10, eval_every=10, checkpoint_every=10)
    cfg.monitor.stall_share = 0.05  # a healthy in-memory loader waits ~1% of the step on this machine
    original = MixtureLoader.draw_rows  # what the prefetch thread (or, without it, the trainer) calls

    def slow_draw(self, step, micro=0, pin=False):
        time.sleep(0.3)  # the micro model's step takes milliseconds (a second on a loaded machine)
        return original(self, step, micro, pin)

    monkeypatch.setattr(MixtureLoader, "draw_rows", slow_draw)
    art = plan_artifacts(cfg)
    summary = stages.stage_train(cfg, art)
    assert summary["monitor"]["loader_stall"]["verdict"] == "warning"
    rows = [json.loads(line) for line in (art["train"].dir / "metrics.jsonl").read_text().splitlines()]
    logged = [r for r in rows if "loss" in r]
    assert all(r["data_wait_share"] > cfg.monitor.stall_share for r in logged)
    assert {"grad_norm_groups", "weight_norm", "update_ratio", "mfu", "memory_bytes"} <= set(logged[-1])
    evals = [r for r in rows if "eval" in r]
    assert {"logit_max", "logit_max_mean", "logit_std", "entropy", "top1", "top10"} <= set(
        next(iter(evals[-1]["eval"].values())))
    assert (art["train"].dir / "samples" / "step_0000010.diff").exists()
    assert main(["report", str(cfg.workdir)]) == 0
    assert main(["report"]) == 2 and main(["report", str(cfg.workdir), "-c", str(cfg.path)]) == 2
    page = (cfg.workdir / "dashboard.html").read_text()
    assert "loader_stall" in page and 'class="chart"' in page and "waiting for data" in page


def test_a_rising_gradient_norm_points_at_the_learning_rate_and_a_new_run_from_the_checkpoint():
    from scratchlm.config import TrainConfig
    from scratchlm.monitor.diagnosis import next_steps

    rows = [{"step": s, "loss": 5.0, "grad_norm": g} for s, g in ((10, 1.5), (20, 0.9), (30, 2.5))]
    advice = next_steps({"step": 33, "lr": 0.004}, rows, TrainConfig(warmup_steps=10), "c.toml", "ck/step_0000030")
    assert "rose from 0.9 (step 20) to 2.5 (step 30)" in advice and "lower train.learning_rate" in advice
    assert "a new run (a new train ID: `--resume` finds nothing)" in advice
    assert "`scratchlm train -c c.toml --resume-from ck/step_0000030`" in advice
    steady = next_steps({"step": 33, "lr": 0.004}, rows[:2], TrainConfig(warmup_steps=10), "c.toml", None)
    assert "step 33 alone failed" in steady and "start over with `scratchlm train -c c.toml`" in steady
