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
  included: the one exception to the rule above). Being an identity, it only fits data that are z-scores
  already, and it refuses a block with a value no z-score can have (:data:`ZSCORE_BOUND`,
  :class:`NotZScoredError`): a user's raw file given this method would otherwise reach training unscaled
  (a value of 1e308 overflows the Paillier protocols' fixed-point encoding).
- ``max_abs_rows`` (the horizontal paper): scale each attribute to maximum absolute value 1 over the
  training rows, then every row with L2 norm above 1 onto the unit sphere (PP-ADMM's ``||x_i|| <= 1``,
  which its sensitivity bounds assume).

No method overflows or underflows on finite input: where the plain formula would (a row norm or a column
variance of values near 1e308 is infinite, one of values near 1e-170 is zero), that row or column is first
divided by its maximum absolute value. Rows and columns the plain formula handles are computed exactly as
before, so prepared data does not change. :func:`collapse` then checks a normalized block: every value
finite, and no row or column turned to zero that was not zero before.

References
----------
.. [1] Y. Hu, D. Niu, J. Yang, S. Zhou, "Learning Privately over Distributed Features: an ADMM Sharing
   Approach", AAAI 2020, Assumption 2.3.
.. [2] J. Ding, J. Wang, G. Liang, J. Bi, M. Pan, "Towards Plausible Differentially Private ADMM Based
   Distributed Machine Learning", CIKM 2020 (experimental setup: feature and row scaling).
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np
import scipy.sparse as sp

from ppml.parties import Matrix

__all__ = ["block_rows", "zscore", "max_abs_scale", "clip_rows", "collapse", "VERTICAL", "HORIZONTAL",
           "ZSCORE_BOUND", "NotZScoredError"]

#: Row norms below this may have lost precision to underflow (squares of values under ~1.5e-154 are
#: subnormal); such rows of nonzero values take the rescaled path.
_TINY_NORM = 1e-146

#: Largest magnitude ``fate_zscore`` accepts as a z-score. A column z-scored over N rows has every value
#: within sqrt(N - 1) of 0 (population standard deviation; (N - 1) / sqrt(N) with the sample one), so a value
#: beyond 2^20 would need more than 2^40 (10^12) rows, far more than any table this pipeline holds. The bound
#: is on N, not on the rows a party keeps (alignment drops some of the rows the statistics were taken over),
#: so no z-scored table is refused. The credit sets stay below 230 (give_credit, N = 150000).
ZSCORE_BOUND = 2.0**20


class NotZScoredError(ValueError):
    """``fate_zscore`` was given a block with a value no z-score can have.

    Attributes
    ----------
    column : int
        Index of the offending column in the party's block.
    value : float
        The offending value.
    """

    def __init__(self, column: int, value: float, *, rows: str) -> None:
        self.column = int(column)
        self.value = float(value)
        super().__init__(
            f"fate_zscore keeps the values as given, so they must be z-scores already, but column "
            f"{self.column} of this party's block holds {self.value:g} on a {rows} row, beyond "
            f"{ZSCORE_BOUND:.0f} (a z-score over N rows is at most sqrt(N - 1) in magnitude): these data "
            "are not z-scored; choose normalize: zscore_block_rows, or scale the file")


def _row_norms(X: Matrix) -> np.ndarray:
    """L2 norm of every row by the plain formula: infinite (or 0) where the squares overflow (underflow),
    which the callers detect."""
    with np.errstate(over="ignore", under="ignore"):
        return _plain_row_norms(X)


def _plain_row_norms(X: Matrix) -> np.ndarray:
    if sp.issparse(X):
        X = sp.csr_array(X)
        return np.sqrt(np.asarray(X.multiply(X).sum(axis=1), dtype=np.float64).ravel())
    return np.linalg.norm(X, axis=1)


def _row_peaks(X: Matrix) -> np.ndarray:
    """Maximum absolute value of every row (0 for an empty row)."""
    if sp.issparse(X):
        X = sp.csr_array(X)
        peaks = np.zeros(X.shape[0])
        np.maximum.at(peaks, np.repeat(np.arange(X.shape[0]), np.diff(X.indptr)), np.abs(X.data))
        return peaks
    return np.abs(X).max(axis=1, initial=0.0)


def _unit_rows(X: Matrix, factors: np.ndarray, unsafe: np.ndarray) -> Matrix:
    """Rows of `X` times `factors`, except the `unsafe` rows, which are scaled to unit norm.

    The unsafe rows (whose plain norm overflowed or underflowed) are first divided by their maximum
    absolute value, so that their norm, now between 1 and sqrt(d), is exact. The other rows are divided
    by 1, which is exact, so they are bit for bit those of the plain formula.
    """
    if not unsafe.any():
        return _scale_rows(X, factors)
    peaks = np.where(unsafe, _row_peaks(X), 1.0)
    Y = _divide_rows(X, peaks)
    scaled_norms = _row_norms(Y)
    return _scale_rows(Y, np.where(unsafe, 1.0 / np.where(unsafe, scaled_norms, 1.0), factors))


def _divide_rows(X: Matrix, divisors: np.ndarray) -> Matrix:
    """Divide row i of `X` by ``divisors[i]`` (dividing, not multiplying by the reciprocal, which may
    overflow for a subnormal divisor)."""
    if sp.issparse(X):
        X = sp.csr_array(X, copy=True)
        X.data /= np.repeat(divisors, np.diff(X.indptr))
        return X
    return X / divisors[:, None]


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
    peaks = _row_peaks(X)
    unsafe = np.isfinite(peaks) & (peaks > 0) & (np.isinf(norms) | (norms < _TINY_NORM))
    return _unit_rows(X, factors, unsafe)


def clip_rows(X: Matrix) -> Matrix:
    """Scale the rows of `X` whose L2 norm exceeds 1 onto the unit sphere; shorter rows are unchanged."""
    norms = _row_norms(X)
    # Rows too long for their norm to be finite are certainly longer than 1: rescaled onto the sphere.
    unsafe = np.isinf(norms) & np.isfinite(_row_peaks(X))
    return _unit_rows(X, 1.0 / np.maximum(norms, 1.0), unsafe)


def zscore(X_train: np.ndarray, X_test: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Standardize columns with the training mean and population standard deviation.

    Columns that are constant on the training rows are only centred (their scale is taken as 1), since
    dividing by zero would turn them into NaN; ARCENE has such columns. A column whose mean or standard
    deviation overflows, or whose variance underflows to zero although it is not constant, is divided by its
    maximum absolute value over the training rows first (a z-score does not change under scaling); the
    other columns are computed by the plain formula.
    """
    if sp.issparse(X_train):
        raise TypeError("z-scoring would densify a sparse matrix; use block_rows for sparse data")
    with np.errstate(over="ignore", under="ignore", invalid="ignore"):
        mean = X_train.mean(axis=0)
        std = X_train.std(axis=0)
        scale = np.where(std == 0, 1.0, std)
        out_train, out_test = (X_train - mean) / scale, (X_test - mean) / scale
    unsafe = ~np.isfinite(mean) | ~np.isfinite(std)
    unsafe |= (std == 0) & (X_train.max(axis=0, initial=-np.inf) != X_train.min(axis=0, initial=np.inf))
    # X - mean itself may overflow (1e308 - -1e308) while mean and std are finite.
    unsafe |= ~np.isfinite(out_train).all(axis=0)
    unsafe &= np.isfinite(X_train).all(axis=0)  # NaN or infinite input is for collapse() to report
    if unsafe.any():
        peak = np.abs(X_train[:, unsafe]).max(axis=0)
        scaled_train, scaled_test = X_train[:, unsafe] / peak, X_test[:, unsafe] / peak
        mean, std = scaled_train.mean(axis=0), scaled_train.std(axis=0)
        std[std == 0] = 1.0
        out_train[:, unsafe] = (scaled_train - mean) / std
        out_test[:, unsafe] = (scaled_test - mean) / std
    return out_train, out_test


def max_abs_scale(X_train: np.ndarray, X_test: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Divide each column by its maximum absolute value over the training rows (all-zero columns: by 1).

    Test values may exceed 1 in absolute value afterwards; :func:`clip_rows` still bounds their rows.
    """
    if sp.issparse(X_train):
        raise TypeError("max-abs scaling is implemented for dense attribute tables only")
    peak = np.abs(X_train).max(axis=0, initial=0.0)
    peak[peak == 0] = 1.0
    return X_train / peak, X_test / peak


def collapse(before: Matrix, after: Matrix, *, train: bool) -> tuple[str, int] | None:
    """The first defect of a normalized block, or None.

    Parameters
    ----------
    before, after : ndarray or CSR matrix, shape (n, d)
        A block of rows before and after normalization.
    train : bool
        Whether these are training rows, over which the column statistics were taken; then a column that
        was not constant must not be all zero afterwards (a constant column may be: z-scoring centres it).

    Returns
    -------
    (kind, index) or None
        ``("non-finite row", i)``, ``("zero row", i)`` (row i had a nonzero value, now has none) or
        ``("zero column", j)``.
    """
    if after.shape[0] == 0:
        return None
    if sp.issparse(after):
        after = sp.csr_array(after)
        finite = np.ones(after.shape[0], dtype=bool)
        np.logical_and.at(finite, np.repeat(np.arange(after.shape[0]), np.diff(after.indptr)),
                          np.isfinite(after.data))
    else:
        finite = np.isfinite(after).all(axis=1)
    if not finite.all():
        return "non-finite row", int(np.argmin(finite))
    zero_now = _row_peaks(after) == 0
    zero_before = _row_peaks(before) == 0
    if (zero_now & ~zero_before).any():
        return "zero row", int(np.argmax(zero_now & ~zero_before))
    if train:
        low_before, low_after = _dense(before.min(axis=0)), _dense(after.min(axis=0))
        high_before, high_after = _dense(before.max(axis=0)), _dense(after.max(axis=0))
        collapsed = (low_after == 0) & (high_after == 0) & (low_before != high_before)
        if collapsed.any():
            return "zero column", int(np.argmax(collapsed))
    return None


def _dense(v: Any) -> np.ndarray:
    """A column statistic of a dense or sparse matrix as a flat float array."""
    return np.asarray(v.toarray() if sp.issparse(v) else v, dtype=np.float64).ravel()


def _block_rows(X_train: Matrix, X_test: Matrix) -> tuple[Matrix, Matrix]:
    return block_rows(X_train), block_rows(X_test)


def _zscore_block_rows(X_train: Matrix, X_test: Matrix) -> tuple[Matrix, Matrix]:
    return _block_rows(*zscore(X_train, X_test))


def _fate_zscore(X_train: Matrix, X_test: Matrix) -> tuple[Matrix, Matrix]:
    for X, rows in ((X_train, "training"), (X_test, "test")):
        _check_zscores(X, rows=rows)
    return X_train, X_test


def _check_zscores(X: Matrix, *, rows: str) -> None:
    """:class:`NotZScoredError` for the first finite value of `X` beyond :data:`ZSCORE_BOUND` (NaN and
    infinities are :func:`collapse`'s to report)."""
    if sp.issparse(X):
        coo = sp.coo_array(X)
        values, columns = coo.data, coo.col
    else:
        values = np.asarray(X)
        columns = None
    beyond = np.isfinite(values) & (np.abs(values) > ZSCORE_BOUND)
    if beyond.any():
        k = tuple(np.argwhere(beyond)[0])
        raise NotZScoredError(k[-1] if columns is None else columns[k], values[k], rows=rows)


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
