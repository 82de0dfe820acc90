"""Each detector on real (micro) training runs: it fires on a run where its failure happens and stays silent on a
healthy control. The failures are made as they happen to a user (bench/detector_runs.py, which prints the same
pairs at a larger scale for docs/benchmarks.md): AdamW without weight decay at a constant LR, a batch of junk, an
LR jump, a data source slower than the step, a source no longer drawn from, a corpus that is one boilerplate line."""
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
from detector_runs import (
    Run,
    boilerplate,
    junk_batches,
    line_ids,
    lr_jump,
    prepare,
    slow_loader,
    source_dropped,
    train_run,
)

STEPS = 300  # at log_every 5: 60 log rows, enough history for the spike detector and the norms' later half
LR = 0.01  # twice the micro config's: the norms move within 300 steps


@pytest.fixture(scope="module")
def prepared(core_corpus, tmp_path_factory):
    """The micro config with data, tokenizer and shards built, and its vocabulary size; each test trains variants.
    On the corpus that does not change with the environment's optional packages: a loss spike or the norms'
    growth in 300 steps of a tiny model depends on the data."""
    return prepare(tmp_path_factory.mktemp("detector_runs"), core_corpus, d_model=64, log_every=5, lr=LR)


def _fired(result: dict, detector: str) -> int:
    return result["monitor"][detector]["fired"]


EVALUATED = {"max_steps": STEPS, "eval_every": 50}  # the evaluation detectors compare consecutive evaluations


def test_healthy_run_is_silent(prepared):
    path, _ = prepared
    r = train_run(path, Run("healthy", "all", False, EVALUATED))  # cosine LR, weight decay 0.1: the defaults
    fired = {d: s["fired"] for d, s in r["monitor"].items()}
    # weight_growth is judged by its own control below: 300 steps at these defaults are a sixth of weight decay's
    # time scale, 1/(lr * wd) = 1000 steps, where healthy growth and inflation look alike (its docstring); measured
    # on the same corpus and seed, this run's block1 stayed under the threshold with AMX and crossed it with AVX2.
    assert {d: n for d, n in fired.items() if d != "weight_growth"} == dict.fromkeys(set(fired) - {"weight_growth"}, 0)
    logged = [row for row in r["rows"] if "loss" in row]
    assert logged[-1]["weight_norm"]["block1"] > 1.2 * logged[0]["weight_norm"]["block1"]  # the norms did move
    assert len([row for row in r["rows"] if "eval" in row]) == STEPS // 50


def test_weight_growth_is_silent_once_weight_decay_has_acted(prepared):
    """The control of the inflating run below: the same LR, where weight decay has had time to pull the norms
    towards equilibrium, as in a real run (sum of lr * wd over the run ~3, as 3e-4 * 0.1 over 100K steps). Measured
    (the growth and pace ratio nearest to firing, as a share of their thresholds): about 0.3 with AMX and with
    AVX2, where the inflating run reaches 1.1 to 1.5 on every layer."""
    path, _ = prepared
    r = train_run(path, Run("decayed", "weight_growth", False, {"max_steps": 2 * STEPS, "weight_decay": 1.0}))
    assert _fired(r, "weight_growth") == 0, [a for a in r["alerts"] if a["detector"] == "weight_growth"]
    logged = [row for row in r["rows"] if "loss" in row]
    assert logged[-1]["weight_norm"]["block1"] > logged[0]["weight_norm"]["block1"]  # it grew, then settled


def test_weight_growth_fires_on_adamw_without_weight_decay_at_a_constant_lr(prepared):
    path, _ = prepared
    r = train_run(path, Run("inflating", "weight_growth", True,
                            {"max_steps": STEPS, "schedule": "constant", "weight_decay": 0.0}))
    assert _fired(r, "weight_growth") > 20, r["monitor"]["weight_growth"]
    assert any(a["subject"].startswith("block") for a in r["alerts"] if a["detector"] == "weight_growth")
    first = r["monitor"]["weight_growth"]["first_step"]
    assert first >= STEPS * r["cfg"].monitor.weight_growth_after  # never while the norms settle
    assert "not slowing down" in r["monitor"]["weight_growth"]["message"]
    # loss_spike is not judged here: this run's step-170 batch sits 0.42-0.63 nats above the trend in every
    # environment measured (AMX, AVX2, CI), and at constant LR without decay CI's crossed the spike threshold, a
    # true reading. Its silence on a healthy run is test_healthy_run_is_silent's claim.
    assert _fired(r, "loader_stall") == 0


@pytest.mark.parametrize("failure", ["junk", "lr_jump"])
def test_loss_spike_fires_at_the_injected_step(prepared, failure):
    path, vocab = prepared
    at = STEPS // 2  # a log step: the row logs that step's loss
    inject = (lambda: junk_batches({at}, vocab)) if failure == "junk" else (lambda: lr_jump(at - 2, 5, 20.0))
    r = train_run(path, Run(failure, "loss_spike", True, {"max_steps": STEPS}, inject))
    spikes = [a for a in r["alerts"] if a["detector"] == "loss_spike"]
    assert spikes and at <= spikes[0]["step"] <= at + 10, spikes
    assert "standard deviations above" in spikes[0]["message"]


def test_loader_stall_fires_on_a_slow_data_source(prepared):
    path, _ = prepared
    r = train_run(path, Run("slow", "loader_stall", True, {"max_steps": 30}, lambda: slow_loader(0.3)))
    assert r["monitor"]["loader_stall"]["verdict"] == "warning"  # the default threshold, 20% of the step
    # most intervals, not all: one failed this on a loaded machine (CI beside a benchmark), where an interval's
    # compute can outweigh its 0.3 s waits
    shares = [row["data_wait_share"] for row in r["rows"] if "loss" in row]
    assert sum(share > r["cfg"].monitor.stall_share for share in shares) > len(shares) / 2, shares


def test_domain_degradation_and_overconfidence_fire_on_a_source_dropped_mid_run(prepared):
    path, _ = prepared
    # `code` (the standard library: the same text wherever the tests run) is the domain dropped. A prose domain
    # kept improving from the other prose after its drop in some environments: `docs` went 5.116 -> 5.081 at the
    # next evaluation with this machine's installed packages as the web domain, where `code` rose by 0.28.
    r = train_run(path, Run("dropped", "domain_degradation", True, EVALUATED, lambda: source_dropped("code", 100)))
    alerts = {}
    for a in r["alerts"]:
        alerts.setdefault(a["detector"], a)
    # the first evaluation after the drop: `code` got worse while the mean improved, and sharper while worse
    assert alerts["domain_degradation"]["subject"] == "code" and alerts["domain_degradation"]["step"] == 150
    assert alerts["overconfidence"]["subject"] == "code" and alerts["overconfidence"]["step"] == 150


def test_repetition_fires_on_a_corpus_of_one_boilerplate_line_and_not_on_the_normal_corpus(prepared):
    path, _ = prepared
    train, samples = {"max_steps": 60, "eval_every": 30}, {"max_new_tokens": 64}  # room for a 4-gram to repeat
    looped = train_run(path, Run("boilerplate", "repetition", True, train,
                                 lambda: boilerplate(line_ids(path), 1.0), eval=samples))
    control = train_run(path, Run("normal corpus", "repetition", False, train, eval=samples))  # all else the same
    assert _fired(looped, "repetition"), [row["repetition"] for row in looped["rows"] if "eval" in row]
    assert "of its word 4-grams are repeats" in looped["monitor"]["repetition"]["message"]
    rates = [rate for row in control["rows"] if "eval" in row for rate in row["repetition"]]
    assert _fired(control, "repetition") == 0 and len(rates) == 6, rates
    assert max(r or 0.0 for r in rates) <= looped["cfg"].monitor.repetition_rate
