"""Statistics of an ablation: mean and spread over seeds, Welch's t-test, its confidence interval, and the seeds
a difference would need. Standard library only (math): Student's t distribution is computed here, not imported.

The t CDF goes through the regularized incomplete beta function, evaluated by its continued fraction (Numerical
Recipes, 3rd ed., 6.4); the quantiles invert the CDFs by bisection. tests/test_experiments_stats.py checks them
against scipy.stats.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass

ALPHA = 0.05  # two-sided significance level of every test and interval here
POWER = 0.8  # the power the "seeds needed" estimate is for
_EPS = 1e-15  # continued fraction: relative size of the last factor at which it has converged
_TINY = 1e-300  # Lentz's method: stands in for a zero denominator
_MAX_TERMS = 10_000


def mean_std(values: list[float]) -> tuple[float, float]:
    """Mean and sample standard deviation (n - 1 in the denominator); the deviation of one value is 0."""
    n = len(values)
    mean = math.fsum(values) / n
    if n < 2:
        return mean, 0.0
    return mean, math.sqrt(math.fsum((v - mean) ** 2 for v in values) / (n - 1))


def describe(values: list[float]) -> dict:
    """n, mean and std of the finite values: a diverged seed (NaN) is left out, not averaged in."""
    values = [v for v in values if math.isfinite(v)]
    if not values:  # every run of an arm diverged
        return {"n": 0, "mean": None, "std": None}
    mean, std = mean_std(values)
    return {"n": len(values), "mean": mean, "std": std}


def _beta_continued_fraction(a: float, b: float, x: float) -> float:
    """The continued fraction of I_x(a, b) (NR 6.4.5), by the modified Lentz method; converges fast for
    x < (a + 1) / (a + b + 2)."""
    c, d = 1.0, 1.0 - (a + b) * x / (a + 1)
    d = 1.0 / (d if abs(d) > _TINY else _TINY)
    h = d
    for m in range(1, _MAX_TERMS):
        # the even term d_2m, then the odd term d_2m+1 of NR 6.4.6
        for num in (m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m)),
                    -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1))):
            d = 1.0 + num * d
            d = 1.0 / (d if abs(d) > _TINY else _TINY)
            c = 1.0 + num / c
            c = c if abs(c) > _TINY else _TINY
            h *= d * c
        if abs(d * c - 1.0) < _EPS:
            return h
    raise ArithmeticError(f"incomplete beta: continued fraction did not converge (a={a}, b={b}, x={x})")


def regularized_beta(a: float, b: float, x: float, one_minus_x: float | None = None) -> float:
    """I_x(a, b) = B(x; a, b) / B(a, b) for a, b > 0 and 0 <= x <= 1 (NR 6.4.1); uses the symmetry
    I_x(a, b) = 1 - I_(1-x)(b, a) where the continued fraction would converge slowly. one_minus_x: 1 - x
    computed without cancellation, when the caller can (x close to 1)."""
    y = 1.0 - x if one_minus_x is None else one_minus_x
    if x <= 0.0:
        return 0.0
    if y <= 0.0:
        return 1.0
    log_front = math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log(y)
    if x < (a + 1) / (a + b + 2):
        return math.exp(log_front) * _beta_continued_fraction(a, b, x) / a
    return 1.0 - math.exp(log_front) * _beta_continued_fraction(b, a, y) / b


def t_two_sided(t: float, df: float) -> float:
    """P(|T| > |t|) for Student's t with df > 0 degrees of freedom (df need not be an integer):
    I_(df / (df + t^2))(df / 2, 1 / 2) (Abramowitz & Stegun 26.7.1 with 26.5.27)."""
    if math.isinf(t):
        return 0.0
    return regularized_beta(df / 2, 0.5, df / (df + t * t), t * t / (df + t * t))


def t_cdf(t: float, df: float) -> float:
    """P(T <= t), from the two-sided tail by the symmetry of T."""
    tail = 0.5 * t_two_sided(t, df)
    return 1.0 - tail if t > 0 else tail


def normal_cdf(z: float) -> float:
    return 0.5 * math.erfc(-z / math.sqrt(2))


def _invert(cdf, p: float) -> float:
    """The x with cdf(x) = p, for an increasing cdf over the real line: bracket by doubling, then bisect."""
    if not 0.0 < p < 1.0:
        raise ValueError(f"a quantile needs 0 < p < 1, got {p}")
    lo, hi = -1.0, 1.0
    while cdf(lo) > p:
        lo *= 2
    while cdf(hi) < p:
        hi *= 2
    for _ in range(200):  # each halves the bracket; stops once it is at the resolution of a float
        mid = (lo + hi) / 2
        if mid in (lo, hi):
            break
        if cdf(mid) < p:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


def t_quantile(p: float, df: float) -> float:
    """The t with t_cdf(t, df) = p."""
    return _invert(lambda t: t_cdf(t, df), p)


def normal_quantile(p: float) -> float:
    return _invert(normal_cdf, p)


@dataclass(frozen=True)
class Welch:
    """Welch's unequal-variance t-test of variant - base (Welch 1947): the difference of the means, its standard
    error sqrt(s_b^2/n_b + s_v^2/n_v), the Welch-Satterthwaite degrees of freedom
    df = (s_b^2/n_b + s_v^2/n_v)^2 / ((s_b^2/n_b)^2/(n_b - 1) + (s_v^2/n_v)^2/(n_v - 1)),
    t = diff / se, the two-sided p-value 2 P(T_df > |t|), and the interval diff +- t_(1 - alpha/2, df) se."""

    diff: float
    se: float
    df: float
    t: float
    p: float
    ci_low: float
    ci_high: float


def welch_test(base: list[float], variant: list[float], alpha: float = ALPHA) -> Welch | None:
    """None where no test is possible: an arm with one value (no spread measured), or no spread in either."""
    if len(base) < 2 or len(variant) < 2:
        return None
    (mb, sb), (mv, sv) = mean_std(base), mean_std(variant)
    vb, vv = sb * sb / len(base), sv * sv / len(variant)
    se = math.sqrt(vb + vv)
    if se == 0:
        return None
    df = (vb + vv) ** 2 / (vb * vb / (len(base) - 1) + vv * vv / (len(variant) - 1))
    diff = mv - mb
    t = diff / se
    p = t_two_sided(t, df)  # not 2 (1 - cdf): that cancels to 0 for a large t
    half = t_quantile(1 - alpha / 2, df) * se
    return Welch(diff, se, df, t, p, diff - half, diff + half)


def seeds_needed(diff: float, std_base: float, std_variant: float, alpha: float = ALPHA,
                 power: float = POWER) -> int | None:
    """Seeds per arm for a two-sided Welch test at `alpha` to detect `diff` with probability `power`, taking the
    observed deviations as the true ones: the smallest n >= 2 with
    n >= (t_(1 - alpha/2, df) + t_(power, df))^2 (s_b^2 + s_v^2) / diff^2, df the Welch-Satterthwaite degrees of
    freedom at n seeds per arm (the usual central-t approximation of the power of a t-test; Chow, Shao & Wang,
    Sample Size Calculations in Clinical Research, 3.2). None when diff or both deviations are 0."""
    var = std_base ** 2 + std_variant ** 2
    if not all(map(math.isfinite, (diff, std_base, std_variant))) or diff == 0 or var == 0:
        return None
    ratio = var / diff ** 2
    # the normal-quantile n is a lower bound (t quantiles are larger); the t one is at most a few seeds above it
    n = max(2, math.ceil((normal_quantile(1 - alpha / 2) + normal_quantile(power)) ** 2 * ratio))
    spread4 = std_base ** 4 + std_variant ** 4
    while True:
        df = var ** 2 * (n - 1) / spread4
        if n >= (t_quantile(1 - alpha / 2, df) + t_quantile(power, df)) ** 2 * ratio:
            return n
        n += 1


def compare_arms(base: list[float], variant: list[float], alpha: float = ALPHA, power: float = POWER) -> dict:
    """Everything the ablation reports on one metric of one variant, as plain data (ablation.json); the verdict
    and the seeds-needed note are decided here, once, for every place that shows them. A non-finite value (a run
    that diverged) is left out of the statistics, which then say so in the verdict."""
    lost = {"base": sum(not math.isfinite(v) for v in base), "variant": sum(not math.isfinite(v) for v in variant)}
    counts = {"base": len(base), "variant": len(variant)}
    base, variant = [v for v in base if math.isfinite(v)], [v for v in variant if math.isfinite(v)]
    if not base or not variant:
        side = "base" if not base else "variant"
        return {"base": describe(base), "variant": describe(variant), "diff": None, "test": None, "alpha": alpha,
                "power": power, "verdict": diverged_verdict(lost, counts) + f": no finite {side} loss",
                "seeds_needed": None, "seeds_needed_note": "cannot estimate", "diverged": lost}
    n = min(len(base), len(variant))
    (mb, sb), (mv, sv) = mean_std(base), mean_std(variant)
    test = welch_test(base, variant, alpha)
    if n < 2:
        verdict, needed, needed_note = "no test possible with 1 seed", None, "cannot estimate with 1 seed"
    elif test is None:
        verdict, needed, needed_note = f"no test possible: no spread over {n} seeds", None, "cannot estimate"
    else:
        if test.p < alpha:
            verdict = "better" if test.diff < 0 else "worse"  # a lower loss is better
        else:
            verdict = f"no difference detectable with {n} seeds"
        needed = seeds_needed(test.diff, sb, sv, alpha, power)
        needed_note = f"{needed:,}" if needed is not None else "cannot estimate"
    if any(lost.values()):
        verdict = f"{diverged_verdict(lost, counts)}; on the finite ones: {verdict}"
    return {"base": describe(base), "variant": describe(variant), "diff": mv - mb,
            "test": asdict(test) if test else None, "alpha": alpha, "power": power,
            "verdict": verdict, "seeds_needed": needed, "seeds_needed_note": needed_note, "diverged": lost}


def diverged_verdict(lost: dict[str, int], counts: dict[str, int]) -> str:
    """"diverged (k of n seeds)", for the variant and, if any of its seeds diverged too, the base."""
    parts = [f"{'' if arm == 'variant' else 'base '}diverged ({lost[arm]} of {counts[arm]} seeds)"
             for arm in ("variant", "base") if lost[arm]]
    return ", ".join(parts)
