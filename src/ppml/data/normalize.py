"""Feature normalization, following each paper's preprocessing.

Every method takes a party's training block and its test block and returns both normalized; statistics
(means, scales, maxima) come from the training rows only and are applied unchanged to the test rows, and a
party only ever looks at its own columns.

- ``block_rows`` (vertical papers): each party scales its own block of every row to unit L2 norm (rows that
  are zero in the block stay zero), so that every block satisfies ``||x_{i,m}|| <= 1``, ADMM sharing's
  Assumption 2.3 behind the sensitivity of the shared values. Sparse blocks stay sparse.
- ``zscore_block_rows`` (dense vertical data without a paper-given scaling: MADELON, ARCENE, synthetic):
  z-score each column with the training mean and standard deviation, then ``block_rows``.
- ``fate_zscore`` (the credit sets): FATE distributes them already z-scored; they are kept as given, so
  that the features are those of the paper's experiments (FATE's statistics are over all rows, test rows
  included: the one exception to the rule above).
- ``max_abs_rows`` (the horizontal paper): scale each attribute to maximum absolute value 1 over the
  training rows, then every row with L2 norm above 1 onto the unit sphere (PP-ADMM's ``||x_i|| <= 1``,
  which its sensitivity bounds assume).

References
----------
.. [1] Y. Hu, D. Niu, J. Yang, S. Zhou, "Learning Privately over Distributed Features: an ADMM Sharing
   Approach", AAAI 2020, Assumption 2.3.
.. [2] J. Ding, J. Wang, G. Liang, J. Bi, M. Pan, "Towards Plausible Differentially Private ADMM Based
   Distributed Machine Learning", CIKM 2020 (experimental setup: feature and row scaling).
"""

from __future__ import annotations

from typing import Callable

import numpy as np
import scipy.sparse as sp

from ppml.parties import Matrix

__all__ = ["block_rows", "zscore", "max_abs_scale", "clip_rows", "VERTICAL", "HORIZONTAL"]


def _row_norms(X: Matrix) -> np.ndarray:
    if sp.issparse(X):
        X = sp.csr_array(X)
        return np.sqrt(np.asarray(X.multiply(X).sum(axis=1), dtype=np.float64).ravel())
    return np.linalg.norm(X, axis=1)


def _scale_rows(X: Matrix, factors: np.ndarray) -> Matrix:
    """Multiply row i of `X` by ``factors[i]`` (a new matrix; CSR stays CSR)."""
    if sp.issparse(X):
        X = sp.csr_array(X, copy=True)
        X.data *= np.repeat(factors, np.diff(X.indptr))
        return X
    return X * factors[:, None]


def block_rows(X: Matrix) -> Matrix:
    """Scale every nonzero row of `X` to unit L2 norm; zero rows stay zero.

    Parameters
    ----------
    X : ndarray or CSR matrix, shape (n, d)
        One party's block of columns.

    Returns
    -------
    ndarray or CSR matrix
        The same type as `X`; sparse input is never densified.
    """
    norms = _row_norms(X)
    factors = np.divide(1.0, norms, out=np.ones_like(norms), where=norms > 0)
    return _scale_rows(X, factors)


def clip_rows(X: Matrix) -> Matrix:
    """Scale the rows of `X` whose L2 norm exceeds 1 onto the unit sphere; shorter rows are unchanged."""
    norms = _row_norms(X)
    return _scale_rows(X, 1.0 / np.maximum(norms, 1.0))


def zscore(X_train: np.ndarray, X_test: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Standardize columns with the training mean and population standard deviation.

    Columns that are constant on the training rows are only centred (their scale is taken as 1), since
    dividing by zero would turn them into NaN; ARCENE has such columns.
    """
    if sp.issparse(X_train):
        raise TypeError("z-scoring would densify a sparse matrix; use block_rows for sparse data")
    mean = X_train.mean(axis=0)
    std = X_train.std(axis=0)
    std[std == 0] = 1.0
    return (X_train - mean) / std, (X_test - mean) / std


def max_abs_scale(X_train: np.ndarray, X_test: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Divide each column by its maximum absolute value over the training rows (all-zero columns: by 1).

    Test values may exceed 1 in absolute value afterwards; :func:`clip_rows` still bounds their rows.
    """
    if sp.issparse(X_train):
        raise TypeError("max-abs scaling is implemented for dense attribute tables only")
    peak = np.abs(X_train).max(axis=0, initial=0.0)
    peak[peak == 0] = 1.0
    return X_train / peak, X_test / peak


def _block_rows(X_train: Matrix, X_test: Matrix) -> tuple[Matrix, Matrix]:
    return block_rows(X_train), block_rows(X_test)


def _zscore_block_rows(X_train: Matrix, X_test: Matrix) -> tuple[Matrix, Matrix]:
    return _block_rows(*zscore(X_train, X_test))


def _fate_zscore(X_train: Matrix, X_test: Matrix) -> tuple[Matrix, Matrix]:
    return X_train, X_test


def _max_abs_rows(X_train: Matrix, X_test: Matrix) -> tuple[Matrix, Matrix]:
    X_train, X_test = max_abs_scale(X_train, X_test)
    return clip_rows(X_train), clip_rows(X_test)


#: ``method(X_train, X_test) -> (X_train, X_test)``, statistics from the training rows only.
Normalizer = Callable[[Matrix, Matrix], tuple[Matrix, Matrix]]

#: Methods for vertical data: called once per party on its own block of columns.
VERTICAL: dict[str, Normalizer] = {
    "block_rows": _block_rows,
    "zscore_block_rows": _zscore_block_rows,
    "fate_zscore": _fate_zscore,
}
#: Methods for horizontal data: called once on the pooled training rows of all agents (the paper
#: preprocesses the whole data set before dealing it out) and the evaluator's test rows.
HORIZONTAL: dict[str, Normalizer] = {"max_abs_rows": _max_abs_rows}
