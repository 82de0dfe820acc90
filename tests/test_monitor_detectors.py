"""Each detector fires on a crafted scenario made to trigger it, and stays quiet on a healthy one."""
import math
import random

import pytest
import torch

from scratchlm.config import MonitorConfig, ModelConfig, TrainConfig
from scratchlm.model import GPT
from scratchlm.monitor.detectors import (DomainDegradation, LoaderStall, LossSpike, Overconfidence, Repetition,
                                         WeightGrowth)
from scratchlm.monitor.logits import LogitStats
from scratchlm.monitor.norms import UpdateRatio, grad_norms, grouped_parameters, weight_norms
from scratchlm.monitor.sample_diff import repeated_ngram_rate, text_diff
from scratchlm.monitor.sinks import TensorBoardSink, flatten
from scratchlm.monitor.throughput import flops_per_token


def _healthy_losses(n=120, seed=0):
    rng = random.Random(seed)
    return [6.0 * math.exp(-i / 40) + 2.0 + rng.gauss(0, 0.03) for i in range(n)]


def _run(detector, rows):
    return [a for row in rows for a in detector.check(row)]


def test_loss_spike_fires_on_a_spike_only():
    losses = _healthy_losses()
    assert _run(LossSpike(MonitorConfig()), [{"step": i, "loss": v} for i, v in enumerate(losses)]) == []
    losses[90] += 1.5
    alerts = _run(LossSpike(MonitorConfig()), [{"step": i, "loss": v} for i, v in enumerate(losses)])
    assert [a.step for a in alerts] == [90] and "standard deviations" in alerts[0].message


def test_loss_spike_waits_for_history():
    rows = [{"step": i, "loss": v} for i, v in enumerate([5.0, 5.0, 50.0])]
    assert _run(LossSpike(MonitorConfig()), rows) == []


def _eval_row(step, losses, logit_max=None, entropy=None):
    return {"step": step, "eval": {d: {"loss": v, "logit_max_mean": (logit_max or {}).get(d, 3.0),
                                       "entropy": (entropy or {}).get(d, 4.0)} for d, v in losses.items()}}


def test_domain_degradation_names_the_domain():
    rows = [_eval_row(100, {"code": 3.0, "docs": 3.5, "web": 4.0}),
            _eval_row(200, {"code": 2.6, "docs": 3.2, "web": 4.2})]
    alerts = _run(DomainDegradation(MonitorConfig()), rows)
    assert len(alerts) == 1 and alerts[0].subject == "web" and "`web`" in alerts[0].message


def test_domain_degradation_quiet_when_every_domain_improves_or_all_get_worse():
    improving = [_eval_row(100, {"code": 3.0, "web": 4.0}), _eval_row(200, {"code": 2.8, "web": 3.9})]
    assert _run(DomainDegradation(MonitorConfig()), improving) == []
    all_worse = [_eval_row(100, {"code": 3.0, "web": 4.0}), _eval_row(200, {"code": 3.1, "web": 4.2})]
    assert _run(DomainDegradation(MonitorConfig()), all_worse) == []  # not one domain: the loss spike's job


def test_loader_stall_threshold():
    rows = [{"step": 10, "data_wait_share": 0.02}, {"step": 20, "data_wait_share": 0.05}]
    assert _run(LoaderStall(MonitorConfig()), rows) == []
    alerts = _run(LoaderStall(MonitorConfig()), [{"step": 30, "data_wait_share": 0.7}])
    assert len(alerts) == 1 and "70%" in alerts[0].message


def _sqrt_growth(n0: float, a: float, steps: range) -> list[float]:
    """AdamW without weight decay at a constant LR: each update adds about the same to the squared norm."""
    return [(n0 * n0 + a * t) ** 0.5 for t in steps]


def test_weight_growth_fires_on_steady_growth_only():
    steps = range(10, 610, 10)
    inflating = _sqrt_growth(10.0, 4.0, steps)
    settling = [10 + 15 * (1 - math.exp(-t / 150)) for t in steps]  # grows as much, early, then flattens
    rows = _norm_rows({"block0": inflating, "block1": settling, "embedding": [5.0] * len(steps)})
    alerts = _run(WeightGrowth(MonitorConfig()), rows)
    assert alerts and {a.subject for a in alerts} == {"block0"}
    assert alerts[0].step == 380  # the later half of the run so far first holds weight_growth_window (20) rows
    assert "not slowing down" in alerts[0].message and "from step 190 to 380" in alerts[0].message


def test_weight_growth_skips_the_norm_gains_and_a_slow_growth():
    steps = range(10, 610, 10)
    rows = _norm_rows({"final_norm": _sqrt_growth(10.0, 4.0, steps),  # gains: no weight decay, no effective LR
                       "block0": _sqrt_growth(40.0, 4.0, steps)})  # steady, but 12% over half the run
    assert _run(WeightGrowth(MonitorConfig()), rows) == []


def test_weight_growth_judges_a_long_run_on_the_later_half():
    steps = range(1, 4001)  # past MAX_POINTS rows in the span: the slopes are fitted to a sample of it
    detector = WeightGrowth(MonitorConfig())
    alerts = _run(detector, _norm_rows({"block0": _sqrt_growth(10.0, 4.0, steps)}, every=1))
    assert len(detector.history["block0"]) == 2001  # what came before the later half is dropped
    assert alerts[-1].step == 4000 and "from step 2000 to 4000" in alerts[-1].message


# Weight norms the quickstart logged every 10 steps of its 600 (warmup 50, cosine LR, weight decay 0.1): the
# embedding leaves its initialization fast and settles; block2 starts slowly, speeds up mid-run, then settles.
QUICKSTART_NORMS = {
    "embedding": [17.7, 18.6, 20.9, 23.5, 26.2, 28.6, 30.6, 32.3, 33.9, 35.4, 36.7, 38.0, 39.3, 40.5, 41.6, 42.7,
                  43.7, 44.7, 45.7, 46.6, 47.4, 48.2, 49.0, 49.7, 50.4, 51.1, 51.7, 52.4, 52.9, 53.4, 53.9, 54.3,
                  54.7, 55.0, 55.4, 55.8, 56.1, 56.3, 56.5, 56.8, 56.9, 57.1, 57.3, 57.5, 57.6, 57.7, 57.7, 57.8,
                  57.9, 58.0, 58.0, 58.0, 58.1, 58.1, 58.1, 58.2, 58.2, 58.2, 58.2, 58.3],
    "block2": [24.1, 24.1, 24.2, 24.4, 24.7, 24.9, 25.2, 25.4, 25.6, 25.9, 26.2, 26.6, 26.9, 27.2, 27.6, 27.9, 28.3,
               28.7, 29.0, 29.4, 29.8, 30.1, 30.5, 30.9, 31.2, 31.5, 31.8, 32.1, 32.4, 32.6, 32.8, 33.1, 33.3, 33.5,
               33.6, 33.8, 33.9, 34.1, 34.2, 34.4, 34.5, 34.6, 34.6, 34.7, 34.8, 34.9, 34.9, 35.0, 35.0, 35.1, 35.1,
               35.1, 35.2, 35.2, 35.2, 35.2, 35.3, 35.3, 35.3, 35.3],
}
QUICKSTART_TRAIN = TrainConfig(max_steps=600, warmup_steps=50)


def _norm_rows(series: dict[str, list[float]], every: int = 10) -> list[dict]:
    n = len(next(iter(series.values())))
    return [{"step": every * (i + 1), "weight_norm": {g: v[i] for g, v in series.items()}} for i in range(n)]


def test_weight_growth_ignores_a_norm_settling_early_in_the_run():
    rows = _norm_rows(QUICKSTART_NORMS)
    assert _run(WeightGrowth(MonitorConfig(), QUICKSTART_TRAIN), rows) == []
    # judged from step 0, the embedding's first fast climb reads as a trend: the run's phase is what silences it
    assert {a.subject for a in _run(WeightGrowth(MonitorConfig(weight_growth_window=5)), rows)} == {"embedding"}


def test_weight_growth_fires_on_steady_growth_late_in_the_run():
    # AdamW without weight decay at a long constant LR: the norm keeps its pace to the end
    steady = {"embedding": [20 * (1 + 0.004 * 10 * (i + 1)) for i in range(60)]}
    alerts = _run(WeightGrowth(MonitorConfig(), QUICKSTART_TRAIN), _norm_rows(steady))
    assert alerts and alerts[0].step >= 300  # never in the first half (weight_growth_after), while norms settle
    assert "not slowing down" in alerts[0].message
    # settling first, then growing again at a steady pace: fires on the late growth only
    late = {"embedding": QUICKSTART_NORMS["embedding"][:30] + [53.4 * 1.015 ** k for k in range(1, 31)]}
    alerts = _run(WeightGrowth(MonitorConfig(), QUICKSTART_TRAIN), _norm_rows(late))
    assert alerts and alerts[0].step > 300


def _micro_training_norms(weight_decay: float, schedule: str, steps: int = 400, every: int = 10) -> list[dict]:
    import inspect as source

    from scratchlm.train.optim import build_optimizer
    from scratchlm.train.schedule import lr_factor

    torch.manual_seed(0)
    data = torch.tensor(list(open(source.__file__, "rb").read()), dtype=torch.long)
    model = GPT(ModelConfig(n_layer=2, d_model=32, n_head=4, seq_len=32), 256)
    opt = build_optimizer(model, "adamw", 3e-3, weight_decay)
    groups = grouped_parameters(model)
    rows = []
    for step in range(steps):
        for g in opt.param_groups:
            g["lr"] = g["initial_lr"] * lr_factor(step, steps, 20, schedule, 0.1)
        starts = torch.randint(0, len(data) - 33, (8,))
        x = torch.stack([data[i:i + 32] for i in starts])
        y = torch.stack([data[i + 1:i + 33] for i in starts])
        _, loss = model(x, y)
        loss.backward()
        opt.step()
        opt.zero_grad()
        if (step + 1) % every == 0:
            rows.append({"step": step + 1, "weight_norm": weight_norms(groups)})
    return rows


def test_weight_growth_on_micro_trainings():
    cfg, train = MonitorConfig(weight_growth=0.1), TrainConfig(max_steps=400, warmup_steps=20)
    inflating = {a.subject for a in _run(WeightGrowth(cfg, train), _micro_training_norms(0.0, "constant"))}
    assert {"embedding", "block0", "block1"} <= inflating
    decayed = {a.subject for a in _run(WeightGrowth(cfg, train), _micro_training_norms(0.1, "cosine"))}
    assert not decayed & {"embedding", "block0", "block1"}  # norm gains (final_norm) are never decayed, by design


def test_overconfidence_fires_when_sharper_but_not_better():
    worse = [_eval_row(100, {"code": 3.0}, {"code": 5.0}, {"code": 3.0}),
             _eval_row(200, {"code": 3.05}, {"code": 7.0}, {"code": 2.2})]
    alerts = _run(Overconfidence(MonitorConfig()), worse)
    assert len(alerts) == 1 and alerts[0].subject == "code"
    learning = [_eval_row(100, {"code": 3.0}, {"code": 5.0}, {"code": 3.0}),
                _eval_row(200, {"code": 2.5}, {"code": 7.0}, {"code": 2.2})]  # sharper and right: learning
    assert _run(Overconfidence(MonitorConfig()), learning) == []


def test_repetition_of_samples():
    looped = "the cat sat on the mat " * 10
    varied = "a quick brown fox jumps over the lazy dog while seven wizards box jolly quails at dawn"
    assert repeated_ngram_rate(looped, 4) > 0.8 and repeated_ngram_rate(varied, 4) == 0.0
    assert repeated_ngram_rate("too short", 4) is None
    row = {"step": 5, "repetition": [repeated_ngram_rate(varied, 4), repeated_ngram_rate(looped, 4), None]}
    alerts = _run(Repetition(MonitorConfig()), [row])
    assert [a.subject for a in alerts] == ["prompt 1"]


def test_text_diff_shows_old_and_new_completion():
    prev = [{"prompt": "p", "completion": "old answer"}]
    cur = [{"prompt": "p", "completion": "new answer"}]
    diff = text_diff(prev, cur, "step 10", "step 20")
    assert "-old answer" in diff and "+new answer" in diff and "--- step 10" in diff
    assert "(unchanged)" in text_diff(cur, cur, "a", "b")


def test_logit_stats_match_direct_computation():
    z = torch.randn(2, 7, 33) * 4
    stats = LogitStats()
    stats.update(z[:1])
    stats.update(z[1:])
    r = stats.result()
    logp = torch.log_softmax(z, -1)
    assert r["logit_max"] == pytest.approx(float(z.max()))
    assert r["logit_max_mean"] == pytest.approx(float(z.max(-1).values.mean()), rel=1e-5)
    assert r["logit_std"] == pytest.approx(float(z.std(unbiased=False)), rel=1e-4)
    assert r["entropy"] == pytest.approx(float(-(logp.exp() * logp).sum(-1).mean()), rel=1e-4)


def _tiny_model():
    return GPT(ModelConfig(n_layer=2, d_model=32, n_head=4, seq_len=16), 64)


def test_norms_per_layer_group_and_update_ratio():
    model = _tiny_model()
    groups = grouped_parameters(model)
    assert set(groups) == {"embedding", "block0", "block1", "final_norm"}  # tied head: counted once
    x = torch.randint(0, 64, (2, 16))
    model(x, x)[1].backward()
    g = grad_norms(groups)
    total = torch.nn.utils.clip_grad_norm_(model.parameters(), float("inf"))
    assert math.sqrt(sum(v * v for v in g.values())) == pytest.approx(float(total), rel=1e-4)
    ratio = UpdateRatio()
    ratio.snapshot(groups)
    before = weight_norms(groups)
    with torch.no_grad():
        for p in groups["block0"]:
            p.mul_(1.01)
    measured = ratio.measure(groups)
    assert measured["block0"] == pytest.approx(0.01 / 1.01, rel=1e-3) and measured["block1"] == 0.0
    assert weight_norms(groups)["block0"] == pytest.approx(before["block0"] * 1.01, rel=1e-4)


def test_flops_per_token_counts_matmuls_and_attention():
    model = _tiny_model()
    c = model.cfg
    assert flops_per_token(model) == 6 * model.num_params() + 12 * c.n_layer * c.d_model * c.seq_len


class _FakeWriter:
    def __init__(self, log_dir, purge_step):
        self.events, self.closed, self.purge_step = [], False, purge_step

    def add_scalar(self, tag, value, step):
        self.events.append((tag, value, step))

    def close(self):
        self.closed = True


def test_tensorboard_sink_publishes_flattened_scalars(tmp_path):
    sink = TensorBoardSink(tmp_path, start_step=0, writer_cls=_FakeWriter)
    row = {"step": 10, "loss": 2.5, "grad_norm_groups": {"block0": 0.5}, "memory_kind": "rss",
           "eval": {"code": {"top1": 0.25}}}
    sink.publish(10, flatten(row))
    sink.close()
    assert sorted(sink.writer.events) == [("eval/code/top1", 0.25, 10), ("grad_norm_groups/block0", 0.5, 10),
                                          ("loss", 2.5, 10)]
    assert sink.writer.closed


def test_real_tensorboard_writer_when_installed(tmp_path):
    pytest.importorskip("torch.utils.tensorboard", reason="tensorboard is not installed (optional sink)")
    sink = TensorBoardSink(tmp_path, start_step=0)
    sink.publish(1, {"loss": 1.0})
    sink.close()
    assert list(tmp_path.glob("events.out.tfevents.*"))


def test_report_and_dashboard_show_update_over_weight_literally(tmp_path):
    import json
    import re

    from scratchlm.monitor.dashboard import write_dashboard
    from scratchlm.monitor.detectors import ALL_NAMES
    from scratchlm.monitor.report import monitoring_section

    steady = {"block0": [10 * 1.03 ** i for i in range(40)]}
    alert = _run(WeightGrowth(MonitorConfig()), _norm_rows(steady))[0]
    assert "|update|/|weight|" in alert.message
    detectors = {n: {"checks": 1, "fired": 0, "verdict": "ok", "first_step": None, "last_step": None, "message": ""}
                 for n in ALL_NAMES}
    detectors["weight_growth"].update(fired=1, verdict="warning", first_step=alert.step, last_step=alert.step,
                                      message=alert.message)
    (tmp_path / "monitor.json").write_text(json.dumps({"detectors": detectors}))
    (tmp_path / "alerts.jsonl").write_text(json.dumps(alert.to_dict()) + "\n")
    (tmp_path / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in _norm_rows(steady)))
    md = monitoring_section(tmp_path, tmp_path / "out")
    header = next(line for line in md if line.startswith("| detector |"))
    row = next(line for line in md if line.startswith("| weight_growth |"))
    cells = [c.strip().replace("\\|", "|") for c in re.split(r"(?<!\\)\|", row)[1:-1]]  # GFM: `\|` stays in a cell
    assert len(cells) == header.count("|") - 1 and cells[-1] == alert.message
    html = (write_dashboard(tmp_path, tmp_path / "out")).read_text()
    assert "|update|/|weight|" in html and "/update///weight/" not in html
