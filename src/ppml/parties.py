"""A party: what one participant holds, and nothing else.

Vertical datasets give each party its own block of columns for the same (aligned) entities; only the label
holder keeps the labels. Horizontal datasets give each agent its own rows with their labels. An algorithm's
role functions receive one `Party` and a network endpoint, never another party's object.

Labels are stored as 0/1 (`int8`); algorithms that use the ±1 convention call `signed_labels`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Union

import numpy as np
import scipy.sparse as sp

from ppml.config import ParamError

Matrix = Union[np.ndarray, sp.csr_array, sp.csr_matrix]


@dataclass(frozen=True, eq=False)
class Party:
    """One party's own data.

    Parameters
    ----------
    name : str
        The party's name (``party1``, ``guest``, ``agent3``, ...). Network addresses use it.
    columns : tuple of str
        Names of this party's feature columns, in the order of ``X``'s columns.
    ids : ndarray of str
        Entity ids of the training rows, in row order (aligned across parties for vertical data).
    X : ndarray or CSR matrix, shape (n, d)
        Training features.
    y : ndarray of int8 in {0, 1}, or None
        Training labels; only the label holder has them.
    test_ids, X_test, y_test
        The same for the held-out rows (vertical data: this party's columns of the test entities).
    """

    name: str
    columns: tuple[str, ...]
    ids: np.ndarray
    X: Matrix
    y: np.ndarray | None = None
    test_ids: np.ndarray | None = None
    X_test: Matrix | None = None
    y_test: np.ndarray | None = None

    def __post_init__(self) -> None:
        n, d = self.X.shape
        if len(self.ids) != n:
            raise ValueError(f"party {self.name!r}: {len(self.ids)} ids for {n} rows")
        if d != len(self.columns):
            raise ValueError(f"party {self.name!r}: {len(self.columns)} column names for {d} columns")
        if self.y is not None and len(self.y) != n:
            raise ValueError(f"party {self.name!r}: {len(self.y)} labels for {n} rows")
        if self.X_test is not None:
            if self.X_test.shape[1] != d:
                raise ValueError(f"party {self.name!r}: test has {self.X_test.shape[1]} columns, train {d}")
            if self.test_ids is not None and len(self.test_ids) != self.X_test.shape[0]:
                raise ValueError(f"party {self.name!r}: test ids and test rows differ in number")
            if self.y_test is not None and len(self.y_test) != self.X_test.shape[0]:
                raise ValueError(f"party {self.name!r}: test labels and test rows differ in number")

    @property
    def is_label_holder(self) -> bool:
        return self.y is not None

    @property
    def n_samples(self) -> int:
        return self.X.shape[0]

    @property
    def n_features(self) -> int:
        return self.X.shape[1]


def signed_labels(y01: np.ndarray) -> np.ndarray:
    """Map 0/1 labels to -1/+1 floats."""
    return 2.0 * np.asarray(y01, dtype=float) - 1.0


def label_holder(parties: list[Party]) -> Party:
    """The unique party holding labels; an error if there is none or more than one."""
    holders = [p for p in parties if p.is_label_holder]
    if len(holders) != 1:
        names = [p.name for p in holders]
        raise ParamError(f"dataset must give labels to exactly one party, found label holders {names}")
    return holders[0]
