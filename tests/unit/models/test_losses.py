"""The common objective's lam scales: mean (f) and sum (the summed loss)."""

import numpy as np
import pytest

from ppml.config import ParamError
from ppml.models.losses import OBJECTIVES, logistic_objective, mean_form_lam


def test_sum_scale_is_f_with_lam_over_n():
    rng = np.random.default_rng(0)
    n, lam = 50, 0.3
    scores, w = rng.normal(size=n), rng.normal(size=4)
    y = rng.integers(0, 2, size=n)
    b = 2.0 * y - 1.0
    summed = float(np.sum(np.logaddexp(0.0, -b * scores)) + 0.5 * lam * w @ w)
    lam_mean = mean_form_lam(lam, objective="sum", n_samples=n)
    assert lam_mean == lam / n
    assert n * logistic_objective(scores, y, w, lam_mean) == pytest.approx(summed, rel=1e-12)
    assert mean_form_lam(lam, objective="mean", n_samples=n) == lam
    assert OBJECTIVES == ("mean", "sum")


@pytest.mark.parametrize("objective, n, message", [
    ("total", 10, r"objective must be one of \['mean', 'sum'\], got 'total'"),
    ("sum", 0, "n_samples must be an integer >= 1, got 0"),
])
def test_bad_values_are_named(objective, n, message):
    with pytest.raises((ParamError, ValueError), match=message):
        mean_form_lam(1e-3, objective=objective, n_samples=n)
