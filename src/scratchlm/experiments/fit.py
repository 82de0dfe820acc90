"""Validation loss against training compute over a ladder of model sizes, fitted with numpy.

Two forms, both fitted to log L so that every rung weighs by its relative error:
  power:       L(C) = A * C^-alpha           a straight line in log-log: linear least squares, exact.
  saturating:  L(C) = E + A * C^-alpha       E is the loss no amount of compute removes. E is profiled on a grid
               in [0, min L) (for each E, log(L - E) against log C is a straight line), then all three parameters
               are refined by damped Gauss-Newton on the log L residuals.

Which form is decided by the number of points: a law with k parameters through n points leaves n - k degrees of
freedom to estimate the noise, and the prediction band needs at least 2 (with 1, the 95% t quantile is 12.7 and
the band says nothing: `scratchlm ladder` warns, and its default is 4 rungs). So 3 or 4 rungs get the power law,
5 or more the saturating one.

The band around a prediction is the 95% prediction interval of a new run in log L: the fitted value
+- t(0.975, n - k) * s * sqrt(1 + g' (J'J)^-1 g), with s the residual standard deviation, J the Jacobian of the
fit at the rungs and g its gradient at the new compute (the delta method; for the power law this is exactly the
prediction interval of the log-log linear regression).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .stats import t_quantile

BAND_LEVEL = 0.95  # two-sided level of the prediction band
SATURATING_MIN_POINTS = 5  # 3 parameters + 2 degrees of freedom for the noise
MIN_POINTS = 3  # 2 parameters + 1 degree of freedom
E_GRID = 400  # grid points of the profile over E
GN_ITERATIONS = 200
NO_FLOOR = 1e-3  # an E below this share of the lowest loss changes no prediction: taken as 0


@dataclass(frozen=True)
class Fit:
    form: str  # "power" | "saturating"
    why: str  # one sentence: why this form
    E: float  # irreducible loss; 0 for the power law
    A: float
    alpha: float
    log_c_ref: float  # the parameters are fitted on u = ln C - log_c_ref (centred: a well-conditioned J'J)
    inv_jtj: list[list[float]]  # (J'J)^-1 over (b, alpha) or (E, b, alpha), with b = ln A - alpha * log_c_ref
    dof: int
    s: float  # residual standard deviation of ln L
    r2_log: float  # share of the variance of ln L over the rungs the curve explains
    max_rel_residual: float  # max over rungs of |L / L_fit - 1|
    points: int

    @property
    def predicts(self) -> bool:
        """Whether the curve may be carried to another compute: only where the loss falls with compute."""
        return self.alpha > 0

    @property
    def params(self) -> np.ndarray:
        b = math.log(self.A) - self.alpha * self.log_c_ref
        return np.array([self.E, b, self.alpha] if self.form == "saturating" else [b, self.alpha])

    def predict(self, compute) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Fitted loss at each compute, and the band's low and high ends."""
        u = np.log(np.asarray(compute, dtype=float)) - self.log_c_ref
        y, g = _model(self.form, self.params, u)
        spread = np.sqrt(1.0 + np.einsum("ij,jk,ik->i", g, np.array(self.inv_jtj), g))
        half = t_quantile(0.5 + BAND_LEVEL / 2, self.dof) * self.s * spread
        return np.exp(y), np.exp(y - half), np.exp(y + half)

    def as_dict(self) -> dict:
        return {"form": self.form, "why": self.why, "E": self.E, "A": self.A, "alpha": self.alpha,
                "dof": self.dof, "predicts": self.predicts, "residual_std_log": self.s, "r2_log": self.r2_log,
                "max_rel_residual": self.max_rel_residual, "points": self.points, "band_level": BAND_LEVEL,
                "formula": formula(self)}


def formula(fit: Fit) -> str:
    law = f"{fit.A:.4g} * C^-{fit.alpha:.4g}"
    return f"L(C) = {fit.E:.4g} + {law}" if fit.form == "saturating" else f"L(C) = {law}"


def _model(form: str, theta: np.ndarray, u: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """ln L at u and its gradient over the parameters (one row per point)."""
    if form == "power":
        b, alpha = theta
        return b - alpha * u, np.stack([np.ones_like(u), -u], axis=1)
    e, b, alpha = theta
    p = np.exp(b - alpha * u)
    loss = e + p
    return np.log(loss), np.stack([1 / loss, p / loss, -u * p / loss], axis=1)


def _line(u: np.ndarray, z: np.ndarray) -> tuple[float, float]:
    """Least squares z = b - alpha * u: (b, alpha)."""
    slope, intercept = np.polyfit(u, z, 1)
    return float(intercept), float(-slope)


def _sse(form: str, theta: np.ndarray, u: np.ndarray, y: np.ndarray) -> float:
    return float(np.sum((y - _model(form, theta, u)[0]) ** 2))


def _fit_saturating(u: np.ndarray, y: np.ndarray) -> np.ndarray:
    """(E, b, alpha): the best E of the profile, then damped Gauss-Newton with E kept in [0, min L)."""
    top = float(np.exp(y).min())
    best = None
    # E from 0 up to just under min L, denser near min L where log(L - E) changes fastest
    for e in top * (1.0 - np.geomspace(1.0, 1e-4, E_GRID)):
        b, alpha = _line(u, np.log(np.exp(y) - e))
        theta = np.array([e, b, alpha])
        sse = _sse("saturating", theta, u, y)
        if best is None or sse < best[0]:
            best = (sse, theta)
    sse, theta = best
    damping = 1e-3
    for _ in range(GN_ITERATIONS):
        yhat, jac = _model("saturating", theta, u)
        jtj = jac.T @ jac
        step = np.linalg.pinv(jtj + damping * np.diag(np.diag(jtj))) @ (jac.T @ (y - yhat))
        trial = theta + step
        trial[0] = min(max(trial[0], 0.0), top * (1 - 1e-9))
        trial_sse = _sse("saturating", trial, u, y) if np.all(np.isfinite(trial)) else math.inf
        if trial_sse < sse:
            converged = sse - trial_sse <= 1e-14 * max(sse, 1e-300)
            theta, sse, damping = trial, trial_sse, damping / 3
            if converged:
                break
        else:
            damping *= 4
            if damping > 1e12:
                break
    return theta


def choose_form(points: int) -> tuple[str, str]:
    if points >= SATURATING_MIN_POINTS:
        return "saturating", (f"{points} rungs: the saturating law E + A*C^-alpha (3 parameters) leaves "
                              f"{points - 3} degrees of freedom for the noise")
    return "power", (f"{points} rungs: a pure power law A*C^-alpha (2 parameters, a line in log-log), leaving "
                     f"{points - 2} degree(s) of freedom; the saturating E + A*C^-alpha needs at least "
                     f"{SATURATING_MIN_POINTS} rungs (3 parameters through 3 points are exactly determined and "
                     "leave no error estimate)")


def fit_loss_curve(compute, loss) -> Fit:
    """compute: training FLOPs of each rung; loss: its validation loss. At least MIN_POINTS distinct computes."""
    c = np.asarray(compute, dtype=float)
    loss = np.asarray(loss, dtype=float)
    if len(c) != len(loss) or len(np.unique(c)) < MIN_POINTS:
        raise ValueError(f"a loss curve needs at least {MIN_POINTS} rungs of different compute, got {len(c)}")
    if np.any(c <= 0) or np.any(loss <= 0) or not np.all(np.isfinite(loss)):
        raise ValueError("compute and loss must be positive and finite")
    y = np.log(loss)
    log_c_ref = float(np.mean(np.log(c)))
    u = np.log(c) - log_c_ref
    form, why = choose_form(len(c))
    if form == "saturating":
        theta = _fit_saturating(u, y)
        if theta[0] < NO_FLOOR * loss.min():  # the profile's best E is its lower end: the points show no floor
            form, why = "power", (f"{len(c)} rungs, fitted with the saturating law E + A*C^-alpha, but its best "
                                  "E is 0 (the points show no floor): the pure power law A*C^-alpha")
            theta = np.array(_line(u, y))
    else:
        theta = np.array(_line(u, y))
    yhat, jac = _model(form, theta, u)
    dof = len(c) - len(theta)
    sse = float(np.sum((y - yhat) ** 2))
    sst = float(np.sum((y - y.mean()) ** 2))
    r2 = 1.0 - sse / sst if sst > 0 else (1.0 if sse == 0 else 0.0)
    b, alpha = theta[-2], theta[-1]
    return Fit(form=form, why=why, E=float(theta[0]) if form == "saturating" else 0.0,
               A=float(math.exp(b + alpha * log_c_ref)), alpha=float(alpha), log_c_ref=log_c_ref,
               inv_jtj=np.linalg.pinv(jac.T @ jac).tolist(), dof=dof, s=math.sqrt(sse / dof), r2_log=r2,
               max_rel_residual=float(np.max(np.abs(loss / np.exp(yhat) - 1))), points=len(c))
