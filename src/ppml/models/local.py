"""Local models of FDML's composite model: each party's map from its own features to one scalar.

FDML (Hu, Niu, Yang) predicts ``p_i = sigmoid(sum_j alpha_j(x_j, xi_ij))``, where party ``j`` owns the
feature block ``xi_ij`` of sample ``i`` and the parameters ``x_j`` of its local model ``alpha_j``; only the
scalar local predictions ``alpha_j`` ever leave a party. Two local models are provided, as in the paper's
Table I: a linear one (``lr``) and a two-layer fully connected network (``nn``).

Every model works on a flat parameter vector ``theta`` (so that optimizers, snapshots and regularizers treat
all models alike) and exposes

- ``init(rng)``: random initial parameters;
- ``forward(theta, X) -> (alpha, cache)``: local predictions for the rows of ``X`` (dense or CSR);
- ``backward(theta, X, cache, grad_alpha)``: the vector-Jacobian product ``J(theta)^T grad_alpha``, i.e. the
  gradient of ``sum_i grad_alpha_i * alpha_i`` with respect to ``theta``.

The l2 regularizer ``lam/2 ||theta||^2`` covers every parameter, biases included (the ADMM-sharing
prototype's bias column is regularized the same way, see :mod:`ppml.models.losses`).

References
----------
Y. Hu, D. Niu, J. Yang, S. Zhou, "FDML: A Collaborative Machine Learning Framework for Distributed
Features", KDD 2019, and the preprint "Stochastic Distributed Optimization for Machine Learning from
Decentralized Features" (Table I: LR and NN local models).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Protocol

import numpy as np

__all__ = ["LocalModel", "LinearModel", "MLPModel", "LOCAL_MODELS", "make_local_model", "l2_penalty"]

# Standard deviation of the linear model's random initial weights. The paper initializes at random
# without giving the law (UNVERIFIED); a small scale starts the composite model next to the zero model
# (every prediction near 1/2), the ADMM-sharing prototype's start.
LINEAR_INIT_STD = 0.01


class LocalModel(Protocol):
    """What the FDML protocol needs from a party's local model."""

    n_features: int
    bias: bool

    @property
    def n_params(self) -> int: ...

    def init(self, rng: np.random.Generator) -> np.ndarray: ...

    def forward(self, theta: np.ndarray, X: Any) -> tuple[np.ndarray, Any]: ...

    def backward(self, theta: np.ndarray, X: Any, cache: Any, grad_alpha: np.ndarray) -> np.ndarray: ...


def _check_theta(theta: np.ndarray, n_params: int) -> None:
    if theta.shape != (n_params,):
        raise ValueError(f"theta must have shape ({n_params},), got {theta.shape}")


@dataclass(frozen=True)
class LinearModel:
    """Linear local model ``alpha(theta, xi) = xi^T w (+ b)``.

    Parameters
    ----------
    n_features : int
        Width of the party's feature block.
    bias : bool, default False
        Carry an intercept ``b`` (the label holder's model does, so the composite model has exactly one).

    Notes
    -----
    ``theta = [w, b]`` (``b`` only with `bias`). With linear local models the composite model is ordinary
    logistic regression on the joined features, which is what makes synchronous FDML checkable against
    centralized mini-batch SGD.
    """

    n_features: int
    bias: bool = False

    @property
    def n_params(self) -> int:
        return self.n_features + int(self.bias)

    def init(self, rng: np.random.Generator) -> np.ndarray:
        """Weights from N(0, LINEAR_INIT_STD^2), intercept 0."""
        theta = np.zeros(self.n_params)
        theta[: self.n_features] = rng.normal(0.0, LINEAR_INIT_STD, size=self.n_features)
        return theta

    def forward(self, theta: np.ndarray, X: Any) -> tuple[np.ndarray, None]:
        _check_theta(theta, self.n_params)
        alpha = np.asarray(X @ theta[: self.n_features], dtype=float).ravel()
        if self.bias:
            alpha = alpha + theta[-1]
        return alpha, None

    def backward(self, theta: np.ndarray, X: Any, cache: None, grad_alpha: np.ndarray) -> np.ndarray:
        _check_theta(theta, self.n_params)
        grad = np.empty(self.n_params)
        grad[: self.n_features] = np.asarray(X.T @ grad_alpha, dtype=float).ravel()
        if self.bias:
            grad[-1] = grad_alpha.sum()
        return grad


@dataclass(frozen=True)
class MLPModel:
    """Two-layer fully connected local model ``alpha(theta, xi) = v^T tanh(W^T xi + b) (+ c)``.

    Parameters
    ----------
    n_features : int
        Width of the party's feature block.
    hidden : int
        Number of hidden units.
    bias : bool, default False
        Carry an output intercept ``c`` (the label holder's model).

    Notes
    -----
    ``theta = [vec(W) (n_features x hidden, row-major), b, v, c]``. The hidden layer is tanh rather than
    ReLU because FDML's convergence analysis assumes Lipschitz-smooth local models; the width and activation
    of the paper's network are not stated (UNVERIFIED). Initialization is LeCun-normal (variance 1/fan-in)
    for ``W`` and ``v``, zero for the biases.
    """

    n_features: int
    hidden: int
    bias: bool = False

    def __post_init__(self) -> None:
        if self.hidden < 1:
            raise ValueError(f"hidden must be >= 1, got {self.hidden}")

    @property
    def n_params(self) -> int:
        return self.n_features * self.hidden + 2 * self.hidden + int(self.bias)

    def _split(self, theta: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Views ``W`` (d x h), ``b`` (h), ``v`` (h) into `theta` (the output intercept is ``theta[-1]``)."""
        d, h = self.n_features, self.hidden
        W = theta[: d * h].reshape(d, h)
        b = theta[d * h: d * h + h]
        v = theta[d * h + h: d * h + 2 * h]
        return W, b, v

    def init(self, rng: np.random.Generator) -> np.ndarray:
        theta = np.zeros(self.n_params)
        W, _, v = self._split(theta)
        W[:] = rng.normal(0.0, 1.0 / np.sqrt(self.n_features), size=W.shape)
        v[:] = rng.normal(0.0, 1.0 / np.sqrt(self.hidden), size=v.shape)
        return theta

    def forward(self, theta: np.ndarray, X: Any) -> tuple[np.ndarray, np.ndarray]:
        """Local predictions and the hidden activations (the cache for :meth:`backward`)."""
        _check_theta(theta, self.n_params)
        W, b, v = self._split(theta)
        H = np.tanh(np.asarray(X @ W, dtype=float) + b)
        alpha = H @ v
        if self.bias:
            alpha = alpha + theta[-1]
        return alpha, H

    def backward(self, theta: np.ndarray, X: Any, cache: np.ndarray, grad_alpha: np.ndarray) -> np.ndarray:
        _check_theta(theta, self.n_params)
        H = cache
        _, _, v = self._split(theta)
        grad = np.empty(self.n_params)
        gW, gb, gv = self._split(grad)
        # Back through the output layer, then through tanh (derivative 1 - tanh^2).
        delta = np.outer(grad_alpha, v) * (1.0 - H * H)
        gW[:] = np.asarray(X.T @ delta, dtype=float)
        gb[:] = delta.sum(axis=0)
        gv[:] = H.T @ grad_alpha
        if self.bias:
            grad[-1] = grad_alpha.sum()
        return grad


def _linear(n_features: int, hidden: int, bias: bool) -> LinearModel:
    return LinearModel(n_features=n_features, bias=bias)


def _mlp(n_features: int, hidden: int, bias: bool) -> MLPModel:
    return MLPModel(n_features=n_features, hidden=hidden, bias=bias)


# Local model key used in params.yaml (``local_model``) -> factory(n_features, hidden, bias).
LOCAL_MODELS: dict[str, Callable[[int, int, bool], LocalModel]] = {"lr": _linear, "nn": _mlp}


def make_local_model(kind: str, *, n_features: int, hidden: int, bias: bool) -> LocalModel:
    """The local model named `kind` (``lr`` or ``nn``) for a block of `n_features` columns.

    `hidden` is the NN's width and is ignored by the linear model.
    """
    if kind not in LOCAL_MODELS:
        raise ValueError(f"local_model must be one of {sorted(LOCAL_MODELS)}, got {kind!r}")
    return LOCAL_MODELS[kind](n_features, hidden, bias)


def l2_penalty(theta: np.ndarray, lam: float) -> tuple[float, np.ndarray]:
    """The regularizer ``lam/2 ||theta||^2`` and its gradient ``lam * theta``."""
    return 0.5 * lam * float(np.dot(theta, theta)), lam * theta
