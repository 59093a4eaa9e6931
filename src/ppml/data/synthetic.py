"""A seeded logistic-regression data set of any width, for scaling experiments over wide vertical data.

The papers' real data sets stop at a few thousand columns (gisette: 5000). To see how the vertical algorithms
scale with the number of features, ``synth_d100`` ... ``synth_d20000`` draw data from a known logistic
model, so that the best achievable loss is known and the width is the only thing that changes:

- rows ``x_i ~ N(0, I_d)``, independent;
- true weights ``w*``: ``n_strong = min(5, d)`` strong coefficients ``±1`` (random signs) at evenly spaced
  columns, so that every block of an equal column split holds some of them, and ``d - n_strong`` weak
  coefficients ``N(0, 1 / (d - n_strong))``, which together add a logit variance of about 1: a model that
  uses only a few columns cannot reach the Bayes rate, and the weak signal does not grow with ``d``;
- intercept ``b = 0`` (balanced classes);
- labels ``y_i ~ Bernoulli(sigmoid(x_i . w* + b))``.

The logit ``x . w*`` then has variance ``n_strong + 1`` (6 for ``d >= 5``): the classes overlap (a Bayes
error of about 0.19), so no model separates them and the logistic loss has a finite minimizer.
"""

from __future__ import annotations

import numpy as np
from scipy.special import expit

__all__ = ["N_STRONG", "true_weights", "logistic_dataset"]

#: Number of strong (``±1``) coefficients of the true weight vector (fewer when ``d`` is smaller).
N_STRONG = 5


def true_weights(d: int, *, rng: np.random.Generator) -> np.ndarray:
    """The true weight vector ``w*`` of the generator (see the module docstring).

    Parameters
    ----------
    d : int
        Number of features, at least 1.
    rng : numpy.random.Generator
        Draws the signs of the strong coefficients and the weak coefficients.
    """
    if d < 1:
        raise ValueError(f"d must be a positive number of features, got {d!r}")
    n_strong = min(N_STRONG, d)
    strong = np.linspace(0, d, n_strong, endpoint=False).astype(np.int64)
    weak = np.setdiff1d(np.arange(d), strong)
    w = np.empty(d)
    w[strong] = rng.choice([-1.0, 1.0], size=n_strong)
    w[weak] = rng.normal(0.0, 1.0 / np.sqrt(max(len(weak), 1)), size=len(weak))
    return w


def logistic_dataset(*, n: int, d: int,
                     rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Draw `n` rows of `d` features and their labels from the logistic model.

    Parameters
    ----------
    n : int
        Number of rows (entities).
    d : int
        Number of features.
    rng : numpy.random.Generator
        The only source of randomness: the same generator state gives the same data.

    Returns
    -------
    ids : ndarray of str, shape (n,)
        ``s0001``, ``s0002``, ... (zero-padded to one width, so that sorting them keeps the row order).
    X : ndarray of float64, shape (n, d)
        Filled in place, so a wide matrix (6000 x 20000 is about 1 GB) is never held twice.
    y : ndarray of int8 in {0, 1}, shape (n,)
    """
    if n < 1:
        raise ValueError(f"n must be a positive number of rows, got {n!r}")
    w = true_weights(d, rng=rng)
    X = np.empty((n, d))
    rng.standard_normal(out=X)
    y = (rng.random(n) < expit(X @ w)).astype(np.int8)
    width = len(str(n))
    ids = np.char.add("s", np.char.zfill(np.arange(1, n + 1).astype(str), width))
    return ids, X, y
