"""The ablation's statistics: Student's t by hand against closed forms and scipy, Welch's test, seeds needed."""
import math
import random

import pytest

from scratchlm.experiments.stats import (
    compare_arms,
    mean_std,
    normal_quantile,
    regularized_beta,
    seeds_needed,
    t_cdf,
    t_quantile,
    welch_test,
)


def test_incomplete_beta_closed_forms():
    for x in (0.01, 0.3, 0.5, 0.77, 0.999):
        assert regularized_beta(2.5, 1, x) == pytest.approx(x ** 2.5, rel=1e-12)  # I_x(a, 1) = x^a
        assert regularized_beta(1, 3.5, x) == pytest.approx(1 - (1 - x) ** 3.5, rel=1e-12)
        assert regularized_beta(4, 7, x) == pytest.approx(1 - regularized_beta(7, 4, 1 - x), abs=1e-13)
    assert regularized_beta(3, 2, 0.0) == 0.0 and regularized_beta(3, 2, 1.0) == 1.0


def test_t_distribution_closed_forms():
    for t in (-30.0, -2.0, -0.3, 0.0, 0.7, 4.0, 100.0):
        assert t_cdf(t, 1) == pytest.approx(0.5 + math.atan(t) / math.pi, abs=1e-13)  # Cauchy
        assert t_cdf(t, 2) == pytest.approx(0.5 + t / (2 * math.sqrt(2 + t * t)), abs=1e-13)
    for p in (0.001, 0.2, 0.5, 0.975):
        assert t_quantile(p, 2) == pytest.approx((2 * p - 1) / math.sqrt(2 * p * (1 - p)), abs=1e-9)
    assert t_quantile(0.975, 10) == pytest.approx(2.228138851986, abs=1e-9)  # the table value
    assert normal_quantile(0.975) == pytest.approx(1.959963984540, abs=1e-9)
    assert t_cdf(-1e-300, 5) == pytest.approx(0.5)


def test_t_distribution_matches_scipy():
    st = pytest.importorskip("scipy.stats")
    rng = random.Random(0)
    for _ in range(400):
        df = rng.choice([0.7, 1, 1.5, 2, 2.9, 4, 7.3, 15, 60, 1000])
        t = rng.uniform(-30, 30) * rng.random() ** 3
        ours, ref = t_cdf(t, df), st.t.cdf(t, df)
        assert ours == pytest.approx(ref, rel=1e-9, abs=1e-13)
        p = rng.uniform(0.0005, 0.9995)
        assert t_quantile(p, df) == pytest.approx(st.t.ppf(p, df), rel=1e-9, abs=1e-9)


def test_welch_matches_scipy():
    st = pytest.importorskip("scipy.stats")
    rng = random.Random(1)
    for n_base, n_variant in ((2, 2), (3, 3), (3, 5), (8, 4)):
        for _ in range(10):
            base = [rng.gauss(3.0, rng.uniform(0.01, 0.2)) for _ in range(n_base)]
            variant = [rng.gauss(3.0 + rng.uniform(-0.3, 0.3), rng.uniform(0.01, 0.2)) for _ in range(n_variant)]
            ours = welch_test(base, variant)
            ref = st.ttest_ind(variant, base, equal_var=False)
            ci = ref.confidence_interval(0.95)
            assert ours.t == pytest.approx(ref.statistic, rel=1e-10)
            assert ours.df == pytest.approx(ref.df, rel=1e-10)
            assert ours.p == pytest.approx(ref.pvalue, rel=1e-8, abs=1e-14)
            assert (ours.ci_low, ours.ci_high) == pytest.approx((ci.low, ci.high), rel=1e-8)


def test_welch_worked_example():
    """Three seeds each: means 3.2 and 3.0, sd 0.1 and 0.05: se = sqrt(0.01/3 + 0.0025/3), df = 2.94."""
    test = welch_test([3.1, 3.3, 3.2], [3.0, 2.95, 3.05])
    assert test.diff == pytest.approx(-0.2)
    assert test.se == pytest.approx(math.sqrt(0.0125 / 3))
    assert test.df == pytest.approx((0.0125 / 3) ** 2 / ((0.01 / 3) ** 2 / 2 + (0.0025 / 3) ** 2 / 2))
    assert 0.05 < test.p < 0.06 and test.ci_low < 0 < test.ci_high


def test_seeds_needed_is_the_smallest_with_80_percent_power():
    """Equal deviations make Welch's df = 2n - 2, where the exact power is the noncentral t's."""
    st = pytest.importorskip("scipy.stats")

    def power(n, diff, sd):
        df, crit = 2 * n - 2, st.t.ppf(0.975, 2 * n - 2)
        shift = diff / (sd * math.sqrt(2 / n))
        return 1 - st.nct.cdf(crit, df, shift) + st.nct.cdf(-crit, df, shift)

    for diff in (0.02, 0.05, 0.1, 0.2, 0.5):
        n = seeds_needed(diff, 0.1, 0.1)
        assert power(n, diff, 0.1) >= 0.8
        if n > 2:
            assert power(n - 1, diff, 0.1) < 0.8


def test_seeds_needed_sanity():
    assert seeds_needed(0.05, 0.1, 0.1) == seeds_needed(-0.05, 0.1, 0.1)  # the direction does not matter
    small, large = seeds_needed(0.01, 0.1, 0.1), seeds_needed(0.1, 0.1, 0.1)
    assert small > large >= 2
    assert small == pytest.approx(100 * large, rel=0.15)  # ~ 1 / diff^2 once t is close to normal
    assert seeds_needed(0.1, 0.1, 0.3) > seeds_needed(0.1, 0.1, 0.1)  # more noise, more seeds
    assert seeds_needed(10.0, 0.01, 0.01) == 2  # a test needs two values per arm, however large the effect
    assert seeds_needed(0.0, 0.1, 0.1) is None and seeds_needed(0.1, 0.0, 0.0) is None


def test_verdicts():
    base = [3.00, 3.02, 2.98]
    assert compare_arms(base, [2.80, 2.82, 2.78])["verdict"] == "better"  # lower loss
    assert compare_arms(base, [3.20, 3.22, 3.18])["verdict"] == "worse"
    same = compare_arms(base, [3.01, 2.97, 3.03])
    assert same["verdict"] == "no difference detectable with 3 seeds" and same["test"]["p"] > 0.05
    assert same["seeds_needed"] > 3 and same["seeds_needed_note"] == f"{same['seeds_needed']:,}"


def test_edge_cases():
    one = compare_arms([3.0], [2.9])
    assert one["verdict"] == "no test possible with 1 seed" and one["test"] is None
    assert one["seeds_needed"] is None and "1 seed" in one["seeds_needed_note"]
    assert one["diff"] == pytest.approx(-0.1) and mean_std([3.0]) == (3.0, 0.0)
    flat = compare_arms([3.0, 3.0], [2.9, 2.9])  # no spread: no standard error, no test
    assert flat["test"] is None and flat["verdict"].startswith("no test possible")
    assert flat["seeds_needed_note"] == "cannot estimate"
    equal_means = compare_arms([3.0, 3.1], [3.1, 3.0])
    assert equal_means["test"]["p"] == pytest.approx(1.0)
    assert equal_means["seeds_needed"] is None and equal_means["seeds_needed_note"] == "cannot estimate"
    assert mean_std([1.0, 2.0, 3.0]) == (2.0, 1.0)


def test_non_finite_losses_are_left_out_and_counted():
    import math

    from scratchlm.experiments.stats import compare_arms, seeds_needed

    some = compare_arms([1.0, math.nan, 2.0], [1.0, 2.0, 3.0])
    assert some["base"]["n"] == 2 and some["test"] is not None
    assert some["verdict"].startswith("base diverged (1 of 3 seeds); on the finite ones: ")
    assert some["diverged"] == {"base": 1, "variant": 0}
    one_left = compare_arms([1.0, 2.0], [math.inf, 2.5])
    assert one_left["verdict"] == "diverged (1 of 2 seeds); on the finite ones: no test possible with 1 seed"
    none_left = compare_arms([1.0, 2.0], [math.nan, math.nan])
    assert none_left["verdict"] == "diverged (2 of 2 seeds): no finite variant loss" and none_left["diff"] is None
    assert seeds_needed(math.nan, 0.1, 0.1) is None and seeds_needed(0.1, math.inf, 0.1) is None


def test_describe_leaves_diverged_seeds_out():
    from scratchlm.experiments.stats import describe

    assert describe([1.0, float("nan"), 3.0]) == {"n": 2, "mean": 2.0, "std": describe([1.0, 3.0])["std"]}
    assert describe([float("nan")]) == {"n": 0, "mean": None, "std": None}
