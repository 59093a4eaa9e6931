"""Local models of FDML: finite-difference gradient checks for the linear and the two-layer model."""

import numpy as np
import pytest
import scipy.sparse as sp
from scipy.special import expit

from ppml.models.local import LinearModel, MLPModel, l2_penalty, make_local_model
from ppml.models.losses import logistic_objective


def _data(rng, *, n=17, d=6, sparse=False):
    X = rng.normal(size=(n, d))
    if sparse:
        X[rng.random(X.shape) < 0.6] = 0.0
        return sp.csr_array(X)
    return X


def _numeric_gradient(f, theta, h=1e-6):
    grad = np.empty_like(theta)
    for k in range(theta.size):
        e = np.zeros_like(theta)
        e[k] = h
        grad[k] = (f(theta + e) - f(theta - e)) / (2 * h)
    return grad


MODELS = [
    pytest.param(LinearModel(n_features=6), id="lr"),
    pytest.param(LinearModel(n_features=6, bias=True), id="lr-bias"),
    pytest.param(MLPModel(n_features=6, hidden=5), id="nn"),
    pytest.param(MLPModel(n_features=6, hidden=5, bias=True), id="nn-bias"),
]


@pytest.mark.parametrize("sparse", [False, True], ids=["dense", "csr"])
@pytest.mark.parametrize("model", MODELS)
def test_backward_is_the_vector_jacobian_product(model, sparse):
    rng = np.random.default_rng(0)
    X = _data(rng, sparse=sparse)
    theta = rng.normal(scale=0.5, size=model.n_params)
    g = rng.normal(size=X.shape[0])

    def weighted_output(t):
        return float(g @ model.forward(t, X)[0])

    alpha, cache = model.forward(theta, X)
    analytic = model.backward(theta, X, cache, g)
    numeric = _numeric_gradient(weighted_output, theta)
    assert alpha.shape == (X.shape[0],)
    np.testing.assert_allclose(analytic, numeric, rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("model", MODELS)
def test_regularized_logistic_gradient_through_the_model(model):
    """The gradient FDML's worker forms (residual through backward, plus lam*theta) is that of f."""
    rng = np.random.default_rng(1)
    X = _data(rng)
    y = (rng.random(X.shape[0]) < 0.5).astype(np.int8)
    lam = 0.03
    theta = rng.normal(scale=0.5, size=model.n_params)

    def objective(t):
        return logistic_objective(model.forward(t, X)[0], y, t, lam)

    alpha, cache = model.forward(theta, X)
    residual = expit(alpha) - y
    penalty, penalty_grad = l2_penalty(theta, lam)
    analytic = model.backward(theta, X, cache, residual / len(y)) + penalty_grad
    np.testing.assert_allclose(analytic, _numeric_gradient(objective, theta), rtol=1e-6, atol=1e-9)
    assert objective(theta) == pytest.approx(np.mean(np.logaddexp(0, alpha) - y * alpha) + penalty, rel=1e-12)


def test_linear_model_is_an_affine_map():
    rng = np.random.default_rng(2)
    X = _data(rng)
    model = LinearModel(n_features=6, bias=True)
    theta = rng.normal(size=7)
    np.testing.assert_allclose(model.forward(theta, X)[0], X @ theta[:6] + theta[6], rtol=1e-14)


def test_mlp_forward_matches_an_explicit_network():
    rng = np.random.default_rng(3)
    X = _data(rng)
    model = MLPModel(n_features=6, hidden=4, bias=True)
    theta = rng.normal(size=model.n_params)
    W, b, v, c = theta[:24].reshape(6, 4), theta[24:28], theta[28:32], theta[32]
    expected = np.array([v @ np.tanh(W.T @ x + b) + c for x in X])
    np.testing.assert_allclose(model.forward(theta, X)[0], expected, rtol=1e-13)


def test_initialization_is_seeded_and_random():
    model = MLPModel(n_features=6, hidden=4)
    a = model.init(np.random.default_rng(5))
    b = model.init(np.random.default_rng(5))
    c = model.init(np.random.default_rng(6))
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, c)
    lin = LinearModel(n_features=6, bias=True).init(np.random.default_rng(5))
    assert lin[-1] == 0.0 and np.all(lin[:-1] != 0.0)


def test_make_local_model_dispatch_and_errors():
    assert make_local_model("lr", n_features=3, hidden=8, bias=True) == LinearModel(3, bias=True)
    assert make_local_model("nn", n_features=3, hidden=8, bias=False) == MLPModel(3, 8)
    with pytest.raises(ValueError, match="local_model must be one of"):
        make_local_model("svm", n_features=3, hidden=8, bias=False)
    with pytest.raises(ValueError, match="theta must have shape"):
        LinearModel(3).forward(np.zeros(4), np.zeros((2, 3)))
