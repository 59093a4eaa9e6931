import re

import numpy as np
import pytest

from ppml.algorithms import centralized, local
from ppml.config import ParamError, build
from ppml.history import ConvergenceWarning
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
                     y=y[:n] if k == 0 else None, test_ids=tids, X_test=X[n:, c],
                     y_test=y[n:] if k == 0 else None)
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


@pytest.mark.parametrize("module, n_features", [(centralized, 8), (local, 5)])
def test_sum_objective_is_the_mean_objective_with_lam_over_n(module, n_features):
    rng = np.random.default_rng(2)
    parties, X, y, n = _vertical(rng)
    lam_sum = 0.5
    summed = module.fit(parties, None, centralized.Params(lam=lam_sum, objective="sum"), rng=rng)
    mean = module.fit(parties, None, centralized.Params(lam=lam_sum / n), rng=rng)
    Xb = with_bias(X[:n, :n_features - 1])  # the label holder's columns (all, centralized) and the bias
    w_ref = solve_l2_logistic(Xb, y[:n], lam_sum / n)
    ref = centralized.logistic_objective(Xb @ w_ref, y[:n], w_ref, lam_sum / n)
    assert summed.final["lam_mean"] == pytest.approx(lam_sum / n, rel=1e-15)
    assert mean.final["lam_mean"] == pytest.approx(lam_sum / n, rel=1e-15)
    assert summed.final["train_objective"] == pytest.approx(ref, rel=1e-8)
    assert summed.final["train_objective"] == pytest.approx(mean.final["train_objective"], rel=1e-10)
    assert summed.final["test_logloss"] == pytest.approx(mean.final["test_logloss"], rel=1e-6)


def test_objective_is_validated_with_its_key_path():
    with pytest.raises(ParamError, match=r"experiments\.centralized-a9a\.objective must be one of "
                                         r"\['mean', 'sum'\], got 'total'"):
        build(centralized.Params, {"objective": "total"}, "experiments.centralized-a9a")


@pytest.mark.parametrize("module", [centralized, local])
def test_final_metrics_carry_the_majority_class_error_and_the_log_loss_spread(module):
    rng = np.random.default_rng(3)
    parties, X, y, n = _vertical(rng)
    h = module.fit(parties, None, centralized.Params(lam=1e-2), rng=rng)
    y_test = y[n:]
    majority = int(y[:n].mean() > 0.5)
    assert h.final["test_majority_error"] == np.mean(y_test != majority)
    assert h.final["n_test"] == 100
    # the SD of the per-row losses whose mean is test_logloss: recover the losses from the fitted model
    cols = X.shape[1] if module is centralized else 4
    w_ref = solve_l2_logistic(with_bias(X[:n, :cols]), y[:n], 1e-2)
    rows = np.logaddexp(0.0, -(2.0 * y_test - 1) * (with_bias(X[n:, :cols]) @ w_ref))
    assert h.final["test_logloss"] == pytest.approx(rows.mean(), rel=1e-6)
    assert h.final["test_logloss_sd"] == pytest.approx(rows.std(ddof=1), rel=1e-5)


# --- issue 18: a model L-BFGS never moved is a failed run, with the reason ----------------------------------


@pytest.mark.filterwarnings("ignore::ppml.history.ConvergenceWarning")
@pytest.mark.parametrize("module", [centralized, local])
def test_a_model_that_never_moved_is_a_failed_run(module):
    rng = np.random.default_rng(4)
    parties, X, y, n = _vertical(rng)
    h = module.fit(parties, None, centralized.Params(lam=1e-2, tol=1e3), rng=rng)  # tol above the gradient
    assert h.converged is False
    assert h.final["status"] == f"failed: {h.stop_reason}"
    assert re.fullmatch(r"lbfgs stopped after 0 iterations without moving the model from its zero start: the "
                        r"largest gradient entry at w = 0 is 0\.\d+ \(tol = 1000\)", h.stop_reason)
    moved = module.fit(parties, None, centralized.Params(lam=1e-2), rng=rng)
    assert "status" not in moved.final and moved.converged is True


def test_features_too_large_for_a_finite_gradient_fail_the_run_with_the_reason():
    rng = np.random.default_rng(5)
    parties, X, y, n = _vertical(rng)
    parties[1].X[:, 0] = 1e308
    with pytest.warns(ConvergenceWarning, match="without moving the model from its zero start"):
        h = centralized.fit(parties, None, centralized.Params(lam=1e-2), rng=rng)
    assert h.final["status"] == ("failed: lbfgs stopped after 0 iterations without moving the model from its "
                                 "zero start: the gradient at w = 0 is not finite (features too large to "
                                 "train on; scale the data)")
