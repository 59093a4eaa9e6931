"""The seeded logistic generator: shapes, seeding, and labels that follow the stated model."""

import numpy as np
import pytest
from sklearn.linear_model import LogisticRegression

from ppml.data.synthetic import N_STRONG, logistic_dataset, true_weights


def test_shapes_types_and_ids():
    ids, X, y = logistic_dataset(n=120, d=7, rng=np.random.default_rng(0))
    assert X.shape == (120, 7) and X.dtype == np.float64
    assert y.dtype == np.int8 and set(np.unique(y)) <= {0, 1}
    assert ids[0] == "s001" and ids[-1] == "s120"
    assert np.array_equal(ids, np.sort(ids)) and len(set(ids)) == 120


def test_seeded():
    a = logistic_dataset(n=50, d=20, rng=np.random.default_rng(5))
    b = logistic_dataset(n=50, d=20, rng=np.random.default_rng(5))
    c = logistic_dataset(n=50, d=20, rng=np.random.default_rng(6))
    assert all(np.array_equal(x, y) for x, y in zip(a, b))
    assert not np.array_equal(a[1], c[1])


def test_true_weights_have_evenly_spread_strong_and_small_weak_coefficients():
    w = true_weights(1000, rng=np.random.default_rng(1))
    strong = np.flatnonzero(np.abs(w) == 1.0)
    assert strong.tolist() == [0, 200, 400, 600, 800]
    weak = np.delete(w, strong)
    assert abs(np.sum(weak ** 2) - 1.0) < 0.15  # weak logit variance about 1
    assert np.abs(weak).max() < 0.2
    assert np.count_nonzero(np.abs(true_weights(3, rng=np.random.default_rng(1))) == 1.0) == 3 < N_STRONG


def test_labels_follow_the_logistic_model():
    # The generator draws w* first from the same stream, so the weights can be recomputed and a nearly
    # unregularized logistic regression on many rows must recover them.
    ids, X, y = logistic_dataset(n=20000, d=8, rng=np.random.default_rng(2))
    w = true_weights(8, rng=np.random.default_rng(2))
    model = LogisticRegression(C=1e6, max_iter=1000).fit(X, y)
    np.testing.assert_allclose(model.coef_.ravel(), w, atol=0.08)
    assert abs(model.intercept_[0]) < 0.05


def test_invalid_sizes():
    with pytest.raises(ValueError, match="n must be a positive number of rows"):
        logistic_dataset(n=0, d=3, rng=np.random.default_rng(0))
    with pytest.raises(ValueError, match="d must be a positive number of features"):
        logistic_dataset(n=3, d=0, rng=np.random.default_rng(0))
