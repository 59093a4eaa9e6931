"""The l2-regularized logistic objective shared by every algorithm, and its centralized optimum.

All algorithms report the same training objective so that runs can be compared:

    f(w) = (1/n) sum_i log(1 + exp(-y_i x_i^T w)) + (lam / 2) ||w||^2,   y_i in {-1, +1},

with the intercept, where a model has one, carried as a constant feature (so it is regularized too, as in
the ADMM-sharing prototype's bias column).

Some papers state lam on the summed loss, sum_i log(1 + exp(-y_i x_i^T w)) + (lam / 2) ||w||^2, which is n
times f with lam / n. An experiment says which scale its ``lam`` is on with ``objective: mean`` (f, the
default) or ``objective: sum``; :func:`mean_form_lam` is the one place that converts, so every algorithm
optimizes and reports f with the same weight.
"""

from __future__ import annotations

import typing
from typing import Literal

import numpy as np
import scipy.optimize
import scipy.sparse as sp
from scipy.special import expit

from ppml.config import fail

#: The scale an experiment's ``lam`` is stated on: f itself ("mean") or the summed loss ("sum").
Objective = Literal["mean", "sum"]
OBJECTIVES: tuple[str, ...] = typing.get_args(Objective)


def mean_form_lam(lam: float, *, objective: str, n_samples: int) -> float:
    """The weight of f's regularizer equivalent to `lam` stated on the `objective` scale.

    Parameters
    ----------
    lam : float
        The l2 weight as the experiment states it.
    objective : {"mean", "sum"}
        ``"mean"``: `lam` is already f's weight. ``"sum"``: `lam` weighs the summed loss
        ``sum_i loss_i + lam/2 ||w||^2``, whose minimizer is f's with weight ``lam / n_samples``.
    n_samples : int
        Training rows of the run (the n of the sum).

    Returns
    -------
    float
        f's weight (reported as ``lam_mean``).
    """
    if objective not in OBJECTIVES:
        fail("objective", f"must be one of {list(OBJECTIVES)}, got {objective!r}")
    if isinstance(n_samples, bool) or not isinstance(n_samples, (int, np.integer)) or n_samples < 1:
        raise ValueError(f"n_samples must be an integer >= 1, got {n_samples!r}")
    return float(lam) if objective == "mean" else float(lam) / int(n_samples)


def logistic_objective(scores: np.ndarray, y01: np.ndarray, w: np.ndarray | None, lam: float, *,
                       sqnorm: float | None = None) -> float:
    """f from precomputed scores s = X w (so that split models can report it without joining X).

    A split model's holder may pass ``sqnorm`` = ||w||^2 (the sum of each party's ||w_m||^2) instead of `w`.
    """
    y = 2.0 * np.asarray(y01, dtype=float) - 1.0
    if sqnorm is None:
        sqnorm = float(np.dot(w, w))
    return float(np.mean(np.logaddexp(0.0, -y * scores)) + 0.5 * lam * float(sqnorm))


def objective_and_gradient(w: np.ndarray, X, y01: np.ndarray, lam: float) -> tuple[float, np.ndarray]:
    y = 2.0 * np.asarray(y01, dtype=float) - 1.0
    s = X @ w
    loss = float(np.mean(np.logaddexp(0.0, -y * s)) + 0.5 * lam * float(np.dot(w, w)))
    coef = -y * expit(-y * s) / len(y)
    grad = X.T @ coef + lam * w
    return loss, np.asarray(grad).ravel()


def with_bias(X):
    """X with a trailing column of ones (dense or sparse)."""
    ones = np.ones((X.shape[0], 1))
    if sp.issparse(X):
        return sp.csr_array(sp.hstack([X, sp.csr_array(ones)], format="csr"))
    return np.hstack([np.asarray(X, dtype=float), ones])


def solve_l2_logistic(X, y01: np.ndarray, lam: float, *, gtol: float = 1e-10, max_iter: int = 10_000) -> np.ndarray:
    """The minimizer of f to a tight tolerance (L-BFGS-B on the exact gradient), as a reference optimum."""
    if lam <= 0:
        raise ValueError(f"lam must be > 0 for a unique optimum, got {lam}")
    res = scipy.optimize.minimize(objective_and_gradient, np.zeros(X.shape[1]), args=(X, y01, lam), jac=True,
                                  method="L-BFGS-B",
                                  options={"gtol": gtol, "ftol": 1e-15, "maxiter": max_iter, "maxcor": 30})
    _, grad = objective_and_gradient(res.x, X, y01, lam)
    if np.linalg.norm(grad, np.inf) > max(gtol * 100, 1e-8):
        raise RuntimeError(f"reference solver did not converge: |grad|_inf = {np.linalg.norm(grad, np.inf):.3g}")
    return res.x
