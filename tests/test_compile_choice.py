"""The trainer's machine choices: bf16 from the hardware's facts (model/device.py), torch.compile from
measurements (train/compile_choice.py). The timers are replaced here: no test asserts a timing."""
import os

import pytest
import torch

from scratchlm import stages
from scratchlm.config import config_from_dict, validate
from scratchlm.config_template import EXAMPLE_SOURCES, render_config
from scratchlm.errors import UserError
from scratchlm.ids import write_json
from scratchlm.model import device as dev
from scratchlm.pipeline import plan_path
from scratchlm.plan import make as plan_make
from scratchlm.plan import probe as probe_mod
from scratchlm.plan.extrapolate import extrapolate
from scratchlm.plan.render import render_plan
from scratchlm.stages import load_config, plan_artifacts
from scratchlm.train import compile_choice
from scratchlm.train.compile_choice import decide_compile, resolve_compile

SOURCES = {"sources": [{"name": "a", "domain": "a", "path": "x"}]}
MEASURED = {"eager_step_seconds": 0.30, "compiled_step_seconds": 0.10, "compile_seconds": 20.0}


def _config(**train):
    cfg = config_from_dict({"data": SOURCES, "train": train}, "c.toml")
    validate(cfg, "c.toml")
    return cfg


# --- precision -------------------------------------------------------------------------------------------------

@pytest.fixture
def fresh_precision(monkeypatch):
    dev.cpu_precision.cache_clear()
    yield monkeypatch
    dev.cpu_precision.cache_clear()


@pytest.mark.parametrize("flag,aten,onednn,picked", [
    (True, "AVX512", None, "bf16"), (True, "AMX", "AVX512_CORE_AMX", "bf16"),
    (True, "AVX2", None, "fp32"), (True, "AVX512", "AVX2", "fp32"), (False, "AVX512", None, "fp32")])
def test_cpu_bf16_from_the_cpu_and_the_limits_set_on_torch(fresh_precision, flag, aten, onednn, picked):
    fresh_precision.setattr(dev, "cpu_has_bf16", lambda: flag)
    fresh_precision.setattr(torch.backends.cpu, "get_cpu_capability", lambda: aten)
    fresh_precision.delenv("DNNL_MAX_CPU_ISA", raising=False)
    if onednn is None:
        fresh_precision.delenv("ONEDNN_MAX_CPU_ISA", raising=False)
    else:
        fresh_precision.setenv("ONEDNN_MAX_CPU_ISA", onednn)
    assert dev.pick_precision("auto", torch.device("cpu")) == picked
    assert dev.pick_precision("fp32", torch.device("cpu")) == "fp32"  # an explicit choice is not second-guessed


def test_a_busy_machine_decides_as_an_idle_one(fresh_precision):
    """No stopwatch: the decision reads facts, so a process started under load decides like any other."""
    import time

    fresh_precision.setattr(time, "perf_counter", lambda: (_ for _ in ()).throw(AssertionError("timed")))
    first = dev.cpu_precision_facts()
    dev.cpu_precision.cache_clear()
    assert dev.cpu_precision() == first


@pytest.mark.parametrize("capability,picked", [((9, 0), "bf16"), ((8, 0), "bf16"), ((7, 0), "fp16"), ((7, 5), "fp16")])
def test_cuda_bf16_from_compute_capability_8(monkeypatch, capability, picked):
    """torch.cuda.is_bf16_supported() also counts a V100's or T4's emulated bf16; the capability does not."""
    seen = []
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda d: seen.append(d) or capability)
    assert dev.pick_precision("auto", torch.device("cuda:1")) == picked
    assert seen == [torch.device("cuda:1")]  # the device used, not the current one


def test_a_run_recorded_precision_is_kept_on_the_same_kind_of_device(monkeypatch):
    monkeypatch.setattr(dev, "cpu_precision", lambda: ("fp32", "decided now"))
    meta = {"precision": "bf16", "device": "cpu", "precision_reason": "native bf16"}
    assert dev.recorded_precision("auto", meta, torch.device("cpu"))[0] == "bf16"
    assert dev.recorded_precision("fp16", meta, torch.device("cpu"))[0] == "fp16"  # explicit config wins
    assert dev.recorded_precision("auto", {**meta, "device": "cuda:0"}, torch.device("cpu"))[0] == "fp32"


# --- the config key ---------------------------------------------------------------------------------------------

def test_compile_is_auto_true_or_false():
    assert _config().train.compile == "auto"
    assert _config(compile=True).train.compile is True and _config(compile=False).train.compile is False
    for bad in ("yes", 1):
        with pytest.raises(UserError, match="c.toml: `train.compile` must be") as e:
            _config(compile=bad)
        assert "\n" not in str(e.value)


def test_the_template_writes_auto_and_loads_it_back(tmp_path):
    text = render_config(EXAMPLE_SOURCES)
    assert '\ncompile = "auto"  # auto | true | false' in text
    (tmp_path / "c.toml").write_text(text)
    assert load_config(tmp_path / "c.toml").train.compile == "auto"


# --- the decision -----------------------------------------------------------------------------------------------

def test_auto_compiles_iff_the_saving_over_the_planned_steps_exceeds_the_compile():
    pays = decide_compile("auto", MEASURED, 101)  # 0.2 s x 101 = 20.2 s > 20 s
    assert pays["compile"] and pays["total_saving"] == pytest.approx(20.2) and "> compile 20.0 s" in pays["reason"]
    short = decide_compile("auto", MEASURED, 99)
    assert not short["compile"] and "<= compile 20.0 s" in short["reason"]
    slower = decide_compile("auto", {**MEASURED, "compiled_step_seconds": 0.4}, 10_000)
    assert not slower["compile"] and slower["saving_per_step"] < 0


def test_forced_values_and_failures():
    assert decide_compile(True, MEASURED, 1)["compile"] and not decide_compile(False, None, 10**6)["compile"]
    failed = decide_compile("auto", {"error": "InvalidCxxCompiler: no working C++ compiler found"}, 10**6)
    assert not failed["compile"] and "InvalidCxxCompiler" in failed["reason"]
    assert "failed" in decide_compile(True, {"error": "X: y"}, 5)["reason"]  # forced on, and told it failed
    assert not decide_compile("auto", None, 10**6)["compile"]


def test_the_time_plan_uses_the_chosen_mode():
    cfg = _config(max_steps=200, checkpoint_every=100, eval_every=100)
    probe = {"step_seconds": 0.30, "checkpoint_seconds": 0.0, "eval_batch_seconds": 0.0, "micro_batch": 16,
             "decode_token_seconds": 0.0, "restore_seconds": 0.0, "build_seconds": 0.0, "checkpoint_bytes": 1}
    eager = extrapolate(cfg, probe, 1, 1, compile_decision=decide_compile("auto", MEASURED, 50))
    compiled = extrapolate(cfg, probe, 1, 1, compile_decision=decide_compile("auto", MEASURED, 200))
    assert eager["train_seconds"] == pytest.approx(200 * 0.30) and eager["compile_seconds"] == 0
    assert compiled["train_seconds"] == pytest.approx(200 * 0.10 + 20.0)
    assert compiled["restart_seconds"] == pytest.approx(100 * 0.10 + 20.0)  # a restarted process compiles again


def _write_plan(path, plan):
    path.parent.mkdir(parents=True, exist_ok=True)
    write_json(path, plan)


# --- the plan and the trainer -----------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def built(builtin_corpus, micro_config, tmp_path_factory):
    path = micro_config(tmp_path_factory.mktemp("compile"), builtin_corpus, steps=4, ckpt=4)
    path.write_text(path.read_text().replace("compile = false", 'compile = "auto"\nprecision = "fp32"'))
    cfg = load_config(path)
    stages.stage_training_inputs(cfg, plan_artifacts(cfg))
    return path


def test_the_plan_measures_decides_and_prints(built, monkeypatch):
    monkeypatch.setattr(probe_mod, "_measure_compile", lambda *args, **kwargs: dict(MEASURED))
    cfg = load_config(built)
    plan = plan_make.make_plan(cfg, plan_artifacts(cfg), probe_seconds=0.2, save=False)
    assert plan["compile"]["compile"] is False and plan["compile"]["planned_steps"] == 4  # 0.8 s saved < 20 s
    text = render_plan(plan)
    assert "compile" in text and "saves 200.0 ms/step x 4 steps = 0.8 s <= compile 20.0 s" in text
    assert plan["time"]["compile_seconds"] == 0


def test_train_follows_the_plan_of_its_train_id(built, monkeypatch, capsys):
    cfg = load_config(built)
    art = plan_artifacts(cfg)
    compiled = []
    monkeypatch.setattr(torch, "compile", lambda model: compiled.append(model) or model)
    decision = decide_compile("auto", MEASURED, 10_000)
    _write_plan(plan_path(cfg.workdir, art["train"].id),
                {"probe": {"device": "cpu", "precision": "fp32"}, "compile": decision})
    id_before = art["train"].id
    stages.stage_train(cfg, art, force=True)
    assert len(compiled) == 1 and plan_artifacts(cfg)["train"].id == id_before
    assert "train: compile: yes (auto, from the plan: saves 200.0 ms/step" in capsys.readouterr().err


def test_train_without_a_plan_stays_eager_and_says_why(tmp_path):
    why = "auto without a plan measured on this device and precision; `scratchlm plan` measures it"
    assert resolve_compile("auto", None) == (False, why)
    assert resolve_compile(True, None)[0] and not resolve_compile(False, decide_compile("auto", MEASURED, 10**6))[0]
    cpu = torch.device("cpu")
    assert compile_choice.plan_decision(tmp_path, "nothere", cpu, "fp32") is None
    _write_plan(plan_path(tmp_path, "gpu"),
                {"probe": {"device": "cuda", "precision": "bf16"}, "compile": {"compile": True}})
    assert compile_choice.plan_decision(tmp_path, "gpu", cpu, "bf16") is None  # measured on another device
    _write_plan(plan_path(tmp_path, "bf16"),
                {"probe": {"device": "cpu", "precision": "bf16"}, "compile": {"compile": True}})
    assert compile_choice.plan_decision(tmp_path, "bf16", cpu, "fp32") is None  # at another precision
    assert compile_choice.plan_decision(tmp_path, "bf16", cpu, "bf16") == {"compile": True}


def test_a_failing_compile_in_the_probe_is_the_reason_to_stay_eager(monkeypatch):
    def no_compiler(model):
        def fails(*args, **kwargs):
            raise RuntimeError("InvalidCxxCompiler: no working C++ compiler found\nmore detail")
        return fails

    monkeypatch.setattr(torch, "compile", no_compiler)
    cfg = config_from_dict({"data": SOURCES, "model": {"n_layer": 1, "d_model": 64, "n_head": 4, "seq_len": 32},
                            "train": {"batch_size": 2, "precision": "fp32"}})
    probe = probe_mod.run_probe(cfg, 128, torch.device("cpu"), "fp32", 2, 1, False, None, seconds=0.05,
                                min_steps=1)
    assert probe["compile"] == {"error": "RuntimeError: InvalidCxxCompiler: no working C++ compiler found"}
    decision = decide_compile("auto", probe["compile"], 10**6)
    assert not decision["compile"] and "no working C++ compiler" in decision["reason"]


def test_cuda_allocator_grows_segments_unless_the_user_chose_otherwise():
    import subprocess
    import sys

    code = "import os, scratchlm.model.device; print(os.environ['PYTORCH_CUDA_ALLOC_CONF'])"
    env = {k: v for k, v in os.environ.items() if k != "PYTORCH_CUDA_ALLOC_CONF"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout
    assert out.strip() == "expandable_segments:True"
    mine = subprocess.run([sys.executable, "-c", code], env={**env, "PYTORCH_CUDA_ALLOC_CONF": "max_split_size_mb:64"},
                          capture_output=True, text=True, check=True).stdout
    assert mine.strip() == "max_split_size_mb:64"
