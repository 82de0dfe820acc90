"""The per-step spike rule (StepSpikes, OLMo-core's), the detectors that read its verdicts from log rows, and the
bound on rollbacks, without training."""
from pathlib import Path

import pytest

from scratchlm.config import Config, MonitorConfig
from scratchlm.monitor.detectors import GradNormSpike, SpikeAction, StepSpikes
from scratchlm.train.loop import TrainingHalted, _roll_back
from scratchlm.train.spikes import RollingBack, SpikeRecord


def _steady(rule: StepSpikes, n: int, start: int = 1) -> None:
    """n ordinary steps: loss about 3, gradient norm about 1, a little noise."""
    for i in range(n):
        rule.add(3.0 + 0.01 * (i % 5), 1.0 + 0.02 * (i % 3))


def test_a_step_far_above_its_window_spikes_and_one_within_it_does_not():
    rule = StepSpikes(window=20, z=6.0)
    _steady(rule, 20)
    assert rule.judge(21, 3.02, 1.02) is None
    spike = rule.judge(21, 3.02, 5.0)  # the loss ordinary, the gradient norm not
    assert spike["grad_norm_z"] > 6 and spike["loss_z"] < 6 and spike["window"] == 20
    assert spike["action"] == "none" and spike["grad_norm_mean"] == pytest.approx(1.02, abs=0.01)
    assert rule.judge(21, 9.0, 1.0)["loss_z"] > 6


def test_nothing_is_judged_before_half_a_window_nor_a_value_that_is_not_finite():
    rule = StepSpikes(window=128, z=6.0)  # OLMo-core's defaults: judged from 64 steps on
    _steady(rule, 63)
    assert rule.judge(64, 100.0, 100.0) is None
    _steady(rule, 1)
    assert rule.judge(65, 100.0, 100.0) is not None
    assert rule.judge(65, float("nan"), 1.0) is None and rule.judge(65, 3.0, float("inf")) is None


def test_a_flat_window_judges_nothing():
    rule = StepSpikes(window=10, z=6.0)
    for _ in range(10):
        rule.add(2.0, 1.0)
    assert rule.judge(11, 50.0, 50.0) is None


def test_spikes_enter_the_window_so_a_lasting_change_of_level_is_taken_in():
    """OLMo-core keeps every value: a loss that steps up for good (a harder data phase) stops counting as a spike
    after a few steps, where a window that kept spikes out would flag every step after it."""
    rule = StepSpikes(window=128, z=6.0)
    _steady(rule, 128)
    flagged = []
    for step in range(129, 160):
        flagged.append(rule.judge(step, 4.0, 1.0) is not None)
        rule.add(4.0, 1.0)
    assert flagged[0] and not any(flagged[10:]), flagged


def test_windows_survive_a_checkpoint():
    rule = StepSpikes(window=8, z=6.0)
    _steady(rule, 12)
    again = StepSpikes(window=8, z=6.0)
    again.load_state_dict(rule.state_dict())
    assert again.judge(13, 3.5, 1.1) == rule.judge(13, 3.5, 1.1)
    again.load_state_dict(None)  # a checkpoint from before the windows existed
    assert len(again.loss) == 0


def _spike(step: int, action: str = "none", **extra) -> dict:
    return {"step": step, "loss": 3.0, "grad_norm": 9.0, "loss_z": 0.5, "grad_norm_z": 12.0, "loss_mean": 3.0,
            "grad_norm_mean": 1.0, "window": 128, "action": action, "documents": ["web:3", "code:7"],
            "documents_total": 11, **extra}


def test_the_gradient_norm_detector_reads_the_rows_spikes():
    detector = GradNormSpike(MonitorConfig())
    assert detector.check({"step": 10, "loss": 3.0}) == []
    assert detector.check({"step": 10, "spikes": [_spike(8, grad_norm_z=2.0, loss_z=9.0)]}) == []  # a loss spike
    alert, = detector.check({"step": 10, "spikes": [_spike(7), _spike(8, grad_norm_z=20.0)]})
    assert alert.step == 8 and alert.subject == "gradient norm"
    assert alert.message.startswith("gradient norm 9 at step 8 is 20.0 standard deviations above the mean 1 of the "
                                    "last 128 steps (2 steps of this log interval spiked)")
    assert "web:3, code:7 and 9 more" in alert.message and "spikes.json" not in alert.message  # warn records nothing


def test_each_action_is_an_alert_of_its_own():
    detector = SpikeAction(MonitorConfig())
    assert detector.check({"step": 10, "spikes": [_spike(8)]}) == []  # warn: no action
    skipped, remembered = detector.check({"step": 10, "spikes": [_spike(8, "skipped"),
                                                                 _spike(9, "rolled back", remembered=True)]})
    assert skipped.subject == "step 8" and remembered.subject == "step 9"
    assert skipped.message.startswith("step 8: its update was skipped (train.on_spike): its gradient norm 9 is 12.0 "
                                      "standard deviations above")
    assert "and 9 more (spikes.json lists all)" in skipped.message
    assert remembered.message.startswith("step 9's update was skipped: it spiked when first trained, and training "
                                         "went back to the last checkpoint to skip it")


def test_rollbacks_are_bounded(tmp_path: Path):
    cfg = Config()
    cfg.monitor.spike_rollbacks = 2
    record = SpikeRecord(tmp_path / "spikes.json")
    restart = {"resume": True, "resume_from": tmp_path / "checkpoints" / "step_0000050", "step": 50}
    closed = []

    def close_attempt(quiet: bool = False) -> None:
        closed.append(quiet)

    for found_at in (60, 70):
        with pytest.raises(RollingBack) as back:
            _roll_back([_spike(found_at, "rolled back", loss_z=9.0)], found_at, restart, record, cfg, True,
                       close_attempt)
        assert back.value.resume_from == restart["resume_from"] and back.value.record is record
    with pytest.raises(TrainingHalted) as halt:
        _roll_back([_spike(80, "rolled back", loss_z=9.0)], 80, restart, record, cfg, True, close_attempt)
    message = str(halt.value)
    assert "\n" not in message and message.startswith("training stopped at step 80: step 80's loss 3 is 9.0 standard")
    assert "after 2 rollbacks (monitor.spike_rollbacks = 2)" in message and "lower train.learning_rate" in message
    assert closed == [True, True, False]  # quiet for a rollback; the halt says the verdicts
    saved = SpikeRecord.resumed(record.path, 50)  # what `--resume` will skip: all three
    assert saved.skip == {60: "rolled back", 70: "rolled back", 80: "rolled back"} and len(saved.rollbacks) == 2
