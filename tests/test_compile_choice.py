"""The trainer's machine choices come from measurements: bf16 on a CPU (model/device.py) and torch.compile
(train/compile_choice.py). The timers are replaced here: no test asserts a timing."""
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


@pytest.mark.parametrize("fp32,bf16,picked", [(0.010, 0.005, "bf16"), (0.010, 0.009, "fp32"), (0.010, 0.150, "fp32")])
def test_cpu_bf16_only_when_measured_clearly_faster(fresh_precision, fp32, bf16, picked):
    fresh_precision.setattr(dev, "cpu_has_bf16", lambda: True)
    fresh_precision.setattr(dev, "time_cpu_linear", lambda: {"fp32_seconds": fp32, "bf16_seconds": bf16})
    assert dev.pick_precision("auto", torch.device("cpu")) == picked
    assert "measured" in dev.cpu_precision()[1]
    assert dev.pick_precision("fp32", torch.device("cpu")) == "fp32"  # an explicit choice is not second-guessed


def test_cpu_without_the_bf16_flag_is_fp32_without_measuring(fresh_precision):
    def no_timing():
        raise AssertionError("measured although the flag is missing")

    fresh_precision.setattr(dev, "cpu_has_bf16", lambda: False)
    fresh_precision.setattr(dev, "time_cpu_linear", no_timing)
    assert dev.cpu_precision() == ("fp32", "no avx512_bf16/amx_bf16 in /proc/cpuinfo: bf16 would be emulated")


def test_the_measurement_is_taken_once(fresh_precision):
    calls = []
    fresh_precision.setattr(dev, "cpu_has_bf16", lambda: True)
    fresh_precision.setattr(dev, "time_cpu_linear",
                            lambda: calls.append(1) or {"fp32_seconds": 0.01, "bf16_seconds": 0.004})
    for _ in range(3):
        dev.pick_precision("auto", torch.device("cpu"))
    assert len(calls) == 1


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
