import numpy as np
import pytest

from ppml.algorithms import centralized, local
from ppml.models.losses import solve_l2_logistic, with_bias
from ppml.network import Network
from ppml.parties import Party


def _vertical(rng, n=400, d=(4, 3)):
    X = rng.normal(size=(n + 100, sum(d)))
    w = rng.normal(size=sum(d))
    y = (rng.random(n + 100) < 1 / (1 + np.exp(-X @ w))).astype(np.int8)
    ids = np.array([str(i) for i in range(n)])
    tids = np.array([str(i) for i in range(n, n + 100)])
    cols = np.split(np.arange(sum(d)), np.cumsum(d)[:-1])
    parties = [Party(name=f"party{k + 1}", columns=tuple(f"f{j}" for j in c), ids=ids, X=X[:n, c],
                     y=y[:n] if k == 0 else None, test_ids=tids, X_test=X[n:, c], y_test=y[n:] if k == 0 else None)
               for k, c in enumerate(cols)]
    return parties, X, y, n


def test_centralized_reaches_reference_optimum():
    rng = np.random.default_rng(0)
    parties, X, y, n = _vertical(rng)
    params = centralized.Params(lam=1e-2)
    h = centralized.fit(parties, Network([p.name for p in parties]), params, rng=rng)
    w_ref = solve_l2_logistic(with_bias(X[:n]), y[:n], 1e-2)
    ref = centralized.logistic_objective(with_bias(X[:n]) @ w_ref, y[:n], w_ref, 1e-2)
    assert h.converged is True
    assert h.final["train_objective"] == pytest.approx(ref, rel=1e-8)
    assert h.final["n_features"] == 8


def test_local_uses_only_the_label_holders_features():
    rng = np.random.default_rng(1)
    parties, X, y, n = _vertical(rng)
    h_local = local.fit(parties, None, centralized.Params(lam=1e-2), rng=rng)
    h_central = centralized.fit(parties, None, centralized.Params(lam=1e-2), rng=rng)
    assert h_local.final["n_features"] == 5
    assert h_local.final["train_objective"] > h_central.final["train_objective"]
