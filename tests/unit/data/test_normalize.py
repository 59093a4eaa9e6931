"""Normalization: block rows (ADMM sharing), max-abs + row clipping (PP-ADMM), z-scores from training rows."""

import numpy as np
import pytest
import scipy.sparse as sp

from ppml.data.normalize import HORIZONTAL, VERTICAL, block_rows, clip_rows, max_abs_scale, zscore


@pytest.fixture
def dense():
    X = np.random.default_rng(0).normal(size=(40, 6)) * [1, 10, 0.1, 3, 1, 100]
    X[[3, 17]] = 0.0
    return X


def test_block_rows_gives_unit_rows_in_the_same_direction(dense):
    out = block_rows(dense)
    norms = np.linalg.norm(out, axis=1)
    nonzero = np.linalg.norm(dense, axis=1) > 0
    np.testing.assert_allclose(norms[nonzero], 1.0)
    assert np.all(out[~nonzero] == 0)
    np.testing.assert_allclose(out[nonzero] * np.linalg.norm(dense[nonzero], axis=1)[:, None], dense[nonzero])


def test_block_rows_keeps_csr_sparse_and_matches_dense():
    X = sp.random_array((50, 30), density=0.1, format="csr", rng=1)
    out = block_rows(X)
    assert isinstance(out, sp.csr_array)
    assert out.nnz == X.nnz and np.array_equal(out.indices, X.indices)
    np.testing.assert_allclose(out.toarray(), block_rows(X.toarray()))
    assert X.data.max() > 0 and np.array_equal(X.toarray() != 0, out.toarray() != 0)


def test_block_rows_does_not_modify_its_input():
    X = sp.csr_array(np.array([[3.0, 4.0], [0.0, 2.0]]))
    block_rows(X)
    assert X.toarray().tolist() == [[3.0, 4.0], [0.0, 2.0]]


def test_clip_rows_only_shrinks_long_rows():
    X = np.array([[0.3, 0.4], [3.0, 4.0], [0.0, 0.0], [0.6, 0.8]])
    np.testing.assert_allclose(clip_rows(X), [[0.3, 0.4], [0.6, 0.8], [0.0, 0.0], [0.6, 0.8]])


def test_zscore_uses_training_statistics_for_test_rows(dense):
    train, test = dense[:30], dense[30:]
    z_train, z_test = zscore(train, test)
    np.testing.assert_allclose(z_train.mean(axis=0), 0.0, atol=1e-12)
    np.testing.assert_allclose(z_train.std(axis=0), 1.0)
    np.testing.assert_allclose(z_test, (test - train.mean(axis=0)) / train.std(axis=0))


def test_zscore_centres_constant_columns_instead_of_dividing_by_zero():
    train = np.array([[1.0, 5.0], [3.0, 5.0]])
    z_train, z_test = zscore(train, np.array([[2.0, 7.0]]))
    assert z_train[:, 1].tolist() == [0.0, 0.0]
    assert z_test.tolist() == [[0.0, 2.0]]


def test_zscore_refuses_sparse_input():
    with pytest.raises(TypeError, match="densify"):
        zscore(sp.csr_array(np.eye(3)), sp.csr_array(np.eye(3)))


def test_max_abs_rows_bounds_attributes_and_rows_with_training_statistics():
    train = np.array([[2.0, -10.0, 0.0], [-4.0, 5.0, 0.0], [1.0, 1.0, 0.0]])
    test = np.array([[8.0, 0.0, 3.0]])
    scaled_train, scaled_test = max_abs_scale(train, test)
    np.testing.assert_allclose(np.abs(scaled_train).max(axis=0), [1.0, 1.0, 0.0])
    np.testing.assert_allclose(scaled_test, [[2.0, 0.0, 3.0]])  # training peaks, so test may exceed 1
    out_train, out_test = HORIZONTAL["max_abs_rows"](train, test)
    assert np.all(np.linalg.norm(out_train, axis=1) <= 1 + 1e-12)
    np.testing.assert_allclose(np.linalg.norm(out_test, axis=1), 1.0)
    np.testing.assert_allclose(out_train, clip_rows(scaled_train))


def test_vertical_methods_bound_every_block_row(dense):
    train, test = dense[:30], dense[30:]
    for name in ("block_rows", "zscore_block_rows"):
        out_train, out_test = VERTICAL[name](train, test)
        for out in (out_train, out_test):
            assert np.all(np.linalg.norm(out, axis=1) <= 1 + 1e-12)
    out_train, out_test = VERTICAL["fate_zscore"](train, test)
    assert out_train is train and out_test is test

