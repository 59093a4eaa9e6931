"""The l2-regularized logistic objective shared by every algorithm, and its centralized optimum.

All algorithms report the same training objective so that runs can be compared:

    f(w) = (1/n) sum_i log(1 + exp(-y_i x_i^T w)) + (lam / 2) ||w||^2,   y_i in {-1, +1},

with the intercept, where a model has one, carried as a constant feature (so it is regularized too, as in
the ADMM-sharing prototype's bias column).
"""

from __future__ import annotations

import numpy as np
import scipy.optimize
import scipy.sparse as sp
from scipy.special import expit


def logistic_objective(scores: np.ndarray, y01: np.ndarray, w: np.ndarray, lam: float) -> float:
    """f from precomputed scores s = X w (so that split models can report it without joining X)."""
    y = 2.0 * np.asarray(y01, dtype=float) - 1.0
    return float(np.mean(np.logaddexp(0.0, -y * scores)) + 0.5 * lam * float(np.dot(w, w)))


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
