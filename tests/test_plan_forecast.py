"""A forecast that holds still (issue 44): the probe's step time is its fastest window, so a machine busy for part
of the probe gives the same forecast and verdict; a second plan reuses the saved timings; the compile time is kept.
The probe's step timings are scripted here (the real steps run, their measured seconds are replaced): no test
asserts a timing of this machine."""
import functools

import pytest

from scratchlm.plan import make, probe
from scratchlm.plan.probe import window_medians
from scratchlm.plan.saved_probe import settle_compile_seconds
from scratchlm.plan.verdicts import busy_verdict
from scratchlm.stages import load_config, plan_artifacts, stage_training_inputs

TIMED = 20  # timed steps of each scripted probe
MICRO, OPTIMIZER = 0.1, 0.01  # scripted seconds of an undisturbed micro-batch and optimizer step


@pytest.fixture(scope="module")
def built(builtin_corpus, micro_config, tmp_path_factory):
    path = micro_config(tmp_path_factory.mktemp("forecast"), builtin_corpus, steps=1000, ckpt=500)
    cfg = load_config(path)
    stage_training_inputs(cfg, plan_artifacts(cfg))
    return cfg


def _scripted(monkeypatch, slow_steps: range, factor: float = 4.0):
    """The probe runs TIMED timed steps; those in `slow_steps` take `factor` x as long, as on a busy machine."""
    real_step, calls = probe._step, []

    def step(*a, **kw):
        done = real_step(*a, **kw)
        i = len(calls) - probe.MEMORY_STEPS  # the peak-memory window's steps come first, untimed
        calls.append(i)
        slow = factor if i in slow_steps else 1.0
        return done._replace(micro_times=[MICRO * slow] * len(done.micro_times), optimizer_seconds=OPTIMIZER * slow)

    monkeypatch.setattr(probe, "_step", step)
    monkeypatch.setattr(probe, "run_probe", functools.partial(probe.run_probe, min_steps=TIMED))
    monkeypatch.setattr(probe, "OtherLoad", _NoOtherLoad)  # the real one reads this machine's load


class _NoOtherLoad:
    share = None

    def so_far(self):
        return None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return None


def _plan(cfg, **kw):
    plan = make.make_plan(cfg, plan_artifacts(cfg), probe_seconds=0.001, **kw)
    return plan, {v["name"]: v for v in plan["verdicts"]}


def test_windows_are_consecutive_equal_runs():
    assert window_medians([1, 2, 3, 4, 5, 6, 7, 8, 9, 10]) == [1.5, 3.5, 5.5, 7.5, 9.5]
    assert window_medians([3.0, 1.0]) == [3.0, 1.0]  # fewer steps than windows: one step a window


def test_a_machine_busy_for_most_of_the_probe_gives_the_same_forecast_and_verdict(built, monkeypatch):
    _scripted(monkeypatch, range(0))
    quiet, quiet_verdicts = _plan(built, remeasure=True)
    hours = 1.5 * quiet["time"]["total_seconds"] / 3600  # the quiet forecast fits; 4x slower steps would not
    _, quiet_verdicts = _plan(built, budget_hours=hours)  # reused: judged against the budget
    _scripted(monkeypatch, range(12))  # 3 of 5 windows busy: a median over all steps is a busy step
    busy, busy_verdicts = _plan(built, remeasure=True, budget_hours=hours)
    assert busy["probe"]["step_seconds"] == pytest.approx(quiet["probe"]["step_seconds"], rel=0.10)
    assert busy_verdicts["time"]["level"] == quiet_verdicts["time"]["level"] == "ok"
    assert busy["probe"]["spread"] == pytest.approx(3.0)
    assert busy_verdicts["busy"]["level"] == "warning" and "300% between the fastest and the slowest of 5 " \
        "windows" in busy_verdicts["busy"]["summary"]
    assert "busy" not in quiet_verdicts


def test_a_second_plan_reuses_the_timings_unless_asked_to_remeasure(built, monkeypatch, capsys):
    _scripted(monkeypatch, range(0))
    first, _ = _plan(built, remeasure=True)

    def never(*a, **kw):
        raise AssertionError("measured again")

    monkeypatch.setattr(probe, "run_probe", never)
    again, _ = _plan(built)
    assert again["probe"] == first["probe"] and again["time"] == first["time"]
    assert "step timings of " in capsys.readouterr().err
    with pytest.raises(AssertionError, match="measured again"):
        _plan(built, remeasure=True)
    built.train.threads = 1  # another condition: the saved timings do not apply
    try:
        with pytest.raises(AssertionError, match="measured again"):
            _plan(built)
    finally:
        built.train.threads = 2


def test_the_first_compile_time_measured_is_kept(tmp_path):
    key = {"model": {"n_layer": 2}, "device": "cpu"}
    cold = {"eager_step_seconds": 0.3, "compiled_step_seconds": 0.1, "compile_seconds": 78.0}
    assert settle_compile_seconds(tmp_path, key, cold) == cold
    warm = settle_compile_seconds(tmp_path, key, {**cold, "compile_seconds": 5.3})  # the inductor cache is warm
    assert warm["compile_seconds"] == 78.0 and warm["compile_seconds_now"] == 5.3
    other = settle_compile_seconds(tmp_path, {**key, "model": {"n_layer": 4}}, {**cold, "compile_seconds": 9.0})
    assert other["compile_seconds"] == 9.0  # another model compiles on its own
    failed = {"error": "no C++ compiler"}
    assert settle_compile_seconds(tmp_path, key, failed) == failed


def test_a_machine_busy_all_along_is_said_from_the_other_processes_load():
    """A process spinning the whole probe slows every window alike: the spread is small, the load is not."""
    probe_dict = {"spread": 0.05, "other_load": 0.45, "window_micro_seconds": [1.0] * 5}
    assert "other processes used 45% of the CPUs" in busy_verdict(probe_dict).summary
    assert busy_verdict({**probe_dict, "other_load": 0.05}) is None
    assert busy_verdict({**probe_dict, "other_load": None}) is None  # not Linux: unknown, not busy
