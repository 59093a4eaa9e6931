"""Centralized baseline: scikit-learn logistic regression on all parties' features (or rows) joined.

This is the non-private reference of every paper: a trusted curator holds everything. No message crosses a
network. It is therefore not written as role programs: by definition one function sees every party's shard
(and, on horizontal data, the held-out rows), which no protocol role may. It minimizes the project's common objective f(w) = mean logistic loss + lam/2 ||w||^2 with the
intercept carried as a constant feature (regularized, like ADMM sharing's bias column), i.e. scikit-learn's
``LogisticRegression(C=1/(n lam), fit_intercept=False)`` on ``[X, 1]``. With ``objective: sum`` the given
``lam`` weighs the summed loss instead (f with lam/n, :func:`ppml.models.losses.mean_form_lam`), as in the
ADMM-sharing paper; ``lam_mean`` in the metrics is the weight of f actually used. The metrics also carry the
majority-class test error (``test_majority_error``, the trivial baseline every error is shown beside), the
number of test rows and the spread of the per-row test log loss, from which the report states its margins.
A model L-BFGS never moved from its zero start (it stopped after 0 iterations: a tolerance looser than the
gradient at 0, or features too large for a finite gradient) is no reference: its final metrics say
``status: "failed: <why>"`` and it is not converged.

References
----------
Hu, Niu, Yang, Zhou, "Learning Privately over Distributed Features: An ADMM Sharing Approach", AAAI 2020
(the "centralized" reference lines of Fig. 3).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp
from sklearn.exceptions import ConvergenceWarning as SklearnConvergenceWarning
from sklearn.linear_model import LogisticRegression

from ppml.algorithms._majority import majority_error
from ppml.history import History
from ppml.models.losses import Objective, logistic_objective, mean_form_lam, with_bias
from ppml.parties import Party

MESSAGES: tuple = ()  # no protocol: a curator holds all the data


@dataclass(frozen=True)
class Params:
    """Parameters of the scikit-learn baselines (centralized and local).

    Attributes
    ----------
    lam : float
        l2 weight, on the scale `objective` names.
    objective : {"mean", "sum"}
        ``mean``: minimize f = mean loss + lam/2 ||w||^2; ``sum``: sum of losses + lam/2 ||w||^2 (f with
        lam/n, n the run's training rows).
    max_iter : int
        L-BFGS iteration cap.
    tol : float
        L-BFGS tolerance.
    """

    lam: float = field(default=1e-3, metadata={"gt": 0})
    objective: Objective = "mean"
    max_iter: int = field(default=5000, metadata={"gt": 0})
    tol: float = field(default=1e-10, metadata={"gt": 0})


def _stack(blocks: list, *, horizontal: bool):
    if any(sp.issparse(b) for b in blocks):
        return sp.csr_array(sp.hstack(blocks, format="csr") if horizontal else sp.vstack(blocks, format="csr"))
    return np.hstack(blocks) if horizontal else np.vstack(blocks)


def joined_data(parties: list[Party], evaluation: Party | None):
    """(X_train, y_train, X_test, y_test) with all features (vertical) or all rows (horizontal)."""
    if evaluation is not None:  # horizontal: every agent holds rows with labels
        X = _stack([p.X for p in parties], horizontal=False)
        y = np.concatenate([p.y for p in parties])
        X_test, y_test = test_rows(evaluation)
        return X, y, X_test, y_test
    holder = next(p for p in parties if p.is_label_holder)
    X = _stack([p.X for p in parties], horizontal=True)
    X_test = _stack([p.X_test for p in parties], horizontal=True) if holder.X_test is not None else None
    return X, holder.y, X_test, holder.y_test


def test_rows(evaluation: Party):
    """The evaluator's held-out rows (stored as its test split, or as its only split)."""
    if evaluation.X_test is not None:
        return evaluation.X_test, evaluation.y_test
    return evaluation.X, evaluation.y


def train_logistic(X, y, params: Params) -> dict:
    """Fit f on [X, 1]: the model, its objective and scores on the training rows, how the solver ended."""
    Xb = with_bias(X)
    lam = mean_form_lam(params.lam, objective=params.objective, n_samples=Xb.shape[0])
    clf = LogisticRegression(C=1.0 / (Xb.shape[0] * lam), fit_intercept=False, solver="lbfgs",
                             max_iter=params.max_iter, tol=params.tol)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", SklearnConvergenceWarning)
        clf.fit(Xb, y)
    converged = not any(issubclass(w.category, SklearnConvergenceWarning) for w in caught)
    w = clf.coef_.ravel()
    train_scores = np.asarray(Xb @ w)
    fitted = {"w": w, "lam": lam, "objective": logistic_objective(train_scores, y, w, lam),
              "train_scores": train_scores, "n_iter": int(clf.n_iter_[0]), "converged": converged,
              "n_features": int(Xb.shape[1]), "n_samples": int(Xb.shape[0])}
    if not np.any(w):  # L-BFGS never moved: say why (logistic_history fails the run)
        fitted["stuck"] = _stuck_reason(Xb, y, n_iter=fitted["n_iter"], tol=params.tol)
    return fitted


def _stuck_reason(Xb, y, *, n_iter: int, tol: float) -> str:
    """Why L-BFGS left the model at its zero start, from the gradient of f there: X^T (sigmoid(0) - y) / n."""
    with np.errstate(over="ignore", invalid="ignore"):
        gradient = np.asarray(Xb.T @ (0.5 - np.asarray(y, dtype=np.float64))).ravel() / Xb.shape[0]
    what = f"lbfgs stopped after {n_iter} iterations without moving the model from its zero start"
    if not np.all(np.isfinite(gradient)):
        return f"{what}: the gradient at w = 0 is not finite (features too large to train on; scale the data)"
    largest = float(np.max(np.abs(gradient), initial=0.0))
    return f"{what}: the largest gradient entry at w = 0 is {largest:.3g} (tol = {tol:g})"


def logistic_history(fitted: dict, y, X_test, y_test, *, algorithm: str) -> History:
    """The run record of a :func:`train_logistic` model, scored on the test rows (when there are any).

    A model L-BFGS never moved from its zero start is no baseline: the run is not converged and its final
    metrics carry ``status: "failed: <reason>"`` (the reason :func:`train_logistic` gave).
    """
    history = History(algorithm)
    n_iter, objective, w = fitted["n_iter"], fitted["objective"], fitted["w"]
    history.log(epoch=n_iter, train_objective=objective)
    stuck = fitted.get("stuck")
    if stuck is None:
        history.stop(converged=fitted["converged"], reason=f"lbfgs stopped after {n_iter} iterations")
    else:
        history.stop(converged=False, reason=stuck)
    test_scores = np.asarray(with_bias(X_test) @ w) if X_test is not None else None
    history.finish(train_objective=objective, y_train=y, train_scores=fitted["train_scores"], y_test=y_test,
                   test_scores=test_scores, epochs=n_iter, n_features=fitted["n_features"],
                   n_samples=fitted["n_samples"], lam_mean=fitted["lam"], **_test_spread(y, y_test, test_scores))
    if stuck is not None:
        history.final["status"] = f"failed: {stuck}"
    return history


def fit_logistic(X, y, X_test, y_test, params: Params, *, algorithm: str) -> History:
    """Fit f on [X, 1] and record the final metrics."""
    return logistic_history(train_logistic(X, y, params), y, X_test, y_test, algorithm=algorithm)


def _test_spread(y_train, y_test, test_scores) -> dict:
    """The majority-class error beside the model's, and what a reader needs for a margin on its test metrics.

    ``test_logloss_sd`` is the standard deviation of the per-row test log loss (its mean is ``test_logloss``),
    so ``test_logloss_sd / sqrt(n_test)`` is the standard error of the test log loss.
    """
    if y_test is None or test_scores is None:
        return {}
    y = 2.0 * np.asarray(y_test, dtype=float) - 1.0
    row_loss = np.logaddexp(0.0, -y * np.asarray(test_scores, dtype=float))
    return {"test_majority_error": majority_error(y_train, y_test), "n_test": int(len(y_test)),
            "test_logloss_sd": float(np.std(row_loss, ddof=1)) if len(y_test) > 1 else float("nan")}


def fit(parties: list[Party], network, params: Params, *, rng: np.random.Generator,
        evaluation: Party | None = None) -> History:
    """Centralized logistic regression on everything the parties hold together."""
    X, y, X_test, y_test = joined_data(parties, evaluation)
    return fit_logistic(X, y, X_test, y_test, params, algorithm="centralized")
