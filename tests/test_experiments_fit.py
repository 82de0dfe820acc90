"""The ladder's loss-against-compute fit (experiments/fit.py) and its verdicts (experiments/ladder_report.py)."""
import math

import numpy as np
import pytest

from scratchlm.experiments.fit import SATURATING_MIN_POINTS, fit_loss_curve
from scratchlm.experiments.ladder import predict
from scratchlm.experiments.ladder_report import FAR_FACTOR, ladder_verdicts
from scratchlm.experiments.stats import t_quantile


def power(c, a=200.0, alpha=0.08):
    return a * np.asarray(c) ** -alpha


def saturating(c, e=1.8, a=60.0, alpha=0.15):
    return e + a * np.asarray(c) ** -alpha


def noisy(loss, sigma, seed=0):
    return loss * np.exp(np.random.default_rng(seed).normal(0, sigma, len(loss)))


def test_power_law_through_exact_points_is_recovered():
    c = np.geomspace(1e12, 1e15, 3)
    fit = fit_loss_curve(c, power(c))
    assert fit.form == "power" and fit.E == 0
    assert fit.A == pytest.approx(200.0, rel=1e-9) and fit.alpha == pytest.approx(0.08, rel=1e-9)
    assert fit.r2_log == pytest.approx(1.0) and fit.max_rel_residual < 1e-12
    assert fit.predict([1e18])[0][0] == pytest.approx(power(1e18), rel=1e-9)


def test_saturating_law_through_exact_points_is_recovered():
    c = np.geomspace(1e12, 1e16, 5)
    fit = fit_loss_curve(c, saturating(c))
    assert fit.form == "saturating"
    assert fit.E == pytest.approx(1.8, rel=1e-5)
    assert fit.A == pytest.approx(60.0, rel=1e-4) and fit.alpha == pytest.approx(0.15, rel=1e-5)


def test_noisy_power_law_is_recovered_and_the_truth_lies_in_the_band():
    c = np.geomspace(1e12, 1e15, 4)
    fit = fit_loss_curve(c, noisy(power(c), 0.003))
    assert fit.form == "power" and fit.dof == 2
    assert fit.alpha == pytest.approx(0.08, abs=0.005)
    loss, low, high = (v[0] for v in fit.predict([1e16]))
    assert low < power(1e16) < high and low < loss < high
    assert 0 < fit.max_rel_residual < 0.01 and fit.r2_log > 0.95


def test_noisy_saturating_law_is_recovered():
    c = np.geomspace(1e12, 1e18, 7)
    fit = fit_loss_curve(c, noisy(saturating(c), 0.002, seed=1))
    assert fit.form == "saturating" and fit.dof == 4
    assert fit.E == pytest.approx(1.8, abs=0.15) and fit.alpha == pytest.approx(0.15, abs=0.03)
    _, low, high = (v[0] for v in fit.predict([1e19]))
    assert low < saturating(1e19) < high


def test_the_form_follows_the_number_of_points_and_says_why():
    c = np.geomspace(1e12, 1e16, 5)
    for n in (3, 4):
        fit = fit_loss_curve(c[:n], saturating(c[:n]))
        assert fit.form == "power" and f"at least {SATURATING_MIN_POINTS} rungs" in fit.why
    # five points on a pure power law: the saturating law's best floor is 0, so the power law is fitted
    fit = fit_loss_curve(c, power(c))
    assert fit.form == "power" and "E is 0" in fit.why and fit.dof == 3
    with pytest.raises(ValueError):
        fit_loss_curve(c[:2], power(c[:2]))


def test_power_band_is_the_textbook_prediction_interval():
    c = np.geomspace(1e12, 1e15, 4)
    loss = noisy(power(c), 0.01, seed=3)
    fit = fit_loss_curve(c, loss)
    x, y = np.log(c), np.log(loss)
    slope, intercept = np.polyfit(x, y, 1)
    s = math.sqrt(np.sum((y - (intercept + slope * x)) ** 2) / (len(x) - 2))
    x0 = math.log(1e17)
    se = s * math.sqrt(1 + 1 / len(x) + (x0 - x.mean()) ** 2 / np.sum((x - x.mean()) ** 2))
    mid = intercept + slope * x0
    half = t_quantile(0.975, len(x) - 2) * se
    _, low, high = fit.predict([1e17])
    assert low[0] == pytest.approx(math.exp(mid - half), rel=1e-9)
    assert high[0] == pytest.approx(math.exp(mid + half), rel=1e-9)


def test_saturating_fit_matches_scipy_curve_fit():
    optimize = pytest.importorskip("scipy.optimize")
    c = np.geomspace(1e12, 1e18, 6)
    loss = noisy(saturating(c), 0.003, seed=2)
    fit = fit_loss_curve(c, loss)
    u = np.log(c) - fit.log_c_ref
    ref, _ = optimize.curve_fit(lambda u, e, b, a: np.log(e + np.exp(b - a * u)), u, np.log(loss),
                                p0=fit.params, bounds=([0, -np.inf, -np.inf], [loss.min(), np.inf, np.inf]))
    assert fit.params == pytest.approx(ref, rel=1e-4, abs=1e-6)


def _levels(fit, ratio):
    return {v.name: v.level for v in ladder_verdicts(fit, ratio * 1e15, 1e15, 20.0, [])}


def test_verdicts_fire_on_a_poor_fit_a_far_target_and_a_rising_loss():
    c = np.geomspace(1e12, 1e15, 4)
    good = fit_loss_curve(c, noisy(power(c), 0.001))
    assert _levels(good, 10) == {"falling": "ok", "fit": "ok", "band": "ok", "reach": "ok", "ratio": "ok"}
    assert _levels(good, FAR_FACTOR * 2)["reach"] == "warning"
    zigzag = power(c) * np.array([1.0, 1.05, 0.95, 1.0])
    assert _levels(fit_loss_curve(c, zigzag), 10)["fit"] == "warning"
    rising = fit_loss_curve(c, power(c, alpha=-0.02))
    assert _levels(rising, 10)["falling"] == "error"
    # one rule, read by ladder.predict, the verdict and the plot: a rising loss is not carried anywhere
    assert not rising.predicts and rising.as_dict()["predicts"] is False and good.predicts
    assert predict(rising, 1e18) is None and predict(good, 1e18)["loss"] > 0


def test_three_rungs_warn_that_the_band_says_nothing():
    c = np.geomspace(1e12, 1e15, 3)
    three = fit_loss_curve(c, noisy(power(c), 0.001))
    band = {v.name: v for v in ladder_verdicts(three, 1e16, 1e15, 20.0, [])}["band"]
    assert three.dof == 1 and band.level == "warning"
    assert band.summary == "3 rungs leave 1 degree of freedom: the band is ±t=12.7 residual sds; add a rung"
