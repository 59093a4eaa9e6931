"""Dealing a data set out to parties, and splitting it into training and test rows.

A :class:`Table` is a whole data set as its source files give it. Vertically, each party gets a consecutive
block of columns (:func:`column_blocks`) and holds its own table of entities (:func:`vertical_holdings`): its
own row order, and a few ids that only it has, so that the tables must be aligned by id before training
(:mod:`ppml.data.align`). Horizontally, each agent gets its own rows (:func:`deal_rows`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

from ppml.parties import Matrix

__all__ = ["Table", "Holding", "column_blocks", "vertical_holdings", "stratified_test_mask", "deal_rows"]


@dataclass(frozen=True, eq=False)
class Table:
    """A whole data set as its source gives it, before it is dealt out.

    Parameters
    ----------
    ids : ndarray of str, shape (n,)
        Unique entity ids.
    X : ndarray or CSR matrix, shape (n, d)
    columns : tuple of str
        Column names (unique within each party's block; FATE's files reuse ``x0, x1, ...`` per party).
    y : ndarray of int8 in {0, 1}, shape (n,)
    test : ndarray of bool, shape (n,), or None
        The rows the source designates as test rows (a9a.t, the NIPS 2003 validation files), or None when
        the source has no test split of its own.
    blocks : tuple of int, or None
        Column counts per party when the source itself is split by party (FATE's guest and host files), so
        that a different split can be refused.
    info : dict
        What the reader did that the manifest should record (rows dropped, the recipe applied).
    """

    ids: np.ndarray
    X: Matrix
    columns: tuple[str, ...]
    y: np.ndarray
    test: np.ndarray | None = None
    blocks: tuple[int, ...] | None = None
    info: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        n, d = self.X.shape
        if len(self.ids) != n or len(self.y) != n or (self.test is not None and len(self.test) != n):
            raise ValueError(f"table: {n} rows, but {len(self.ids)} ids and {len(self.y)} labels")
        if len(self.columns) != d:
            raise ValueError(f"table: {d} columns, but {len(self.columns)} column names")
        if self.blocks is not None and sum(self.blocks) != d:
            raise ValueError(f"table: party blocks {self.blocks} do not add up to its {d} columns")


@dataclass(frozen=True, eq=False)
class Holding:
    """The table one party holds before alignment.

    Only ids and row references are kept: alignment looks at ids alone, and the party's features are
    gathered from the source once the aligned order is known (so a wide matrix is copied once, not twice).

    Parameters
    ----------
    name : str
        The party.
    ids : ndarray of str
        The ids of the party's entities, in the party's own row order.
    rows : ndarray of int64
        ``rows[k]`` is the source-table row of the party's k-th entity.
    columns : slice
        The party's block of the source table's columns.
    """

    name: str
    ids: np.ndarray
    rows: np.ndarray
    columns: slice


def column_blocks(split: Sequence[int], n_columns: int) -> list[slice]:
    """Consecutive column ranges of the given sizes, which must add up to `n_columns`.

    >>> column_blocks([66, 57], 123)
    [slice(0, 66, None), slice(66, 123, None)]
    """
    if any(size < 1 for size in split):
        raise ValueError(f"column split {list(split)} has a block without columns")
    if sum(split) != n_columns:
        raise ValueError(f"column split {list(split)} adds up to {sum(split)}, "
                         f"but the data has {n_columns} columns")
    ends = np.cumsum(split)
    return [slice(int(end - size), int(end)) for size, end in zip(split, ends)]


def vertical_holdings(table: Table, *, parties: Sequence[str], split: Sequence[int], private_fraction: float,
                      rng: np.random.Generator) -> list[Holding]:
    """Each party's own table: its block of columns, its own row order, and ids only it has.

    For every party, ``round(private_fraction * n)`` entities are drawn (disjoint between parties) that
    only this party keeps: every other party drops them from its copy. Each party then shuffles its rows
    independently. So aligning by id must both find the shared entities and undo the different orders.

    Parameters
    ----------
    table : Table
        The whole data set.
    parties : sequence of str
        Party names, in the order of the column blocks.
    split : sequence of int
        Columns per party.
    private_fraction : float
        Fraction of the entities private to each party; ``private_fraction * len(parties)`` must be < 1.
    rng : numpy.random.Generator

    Returns
    -------
    list of Holding, in the order of `parties`.
    """
    if len(split) != len(parties):
        raise ValueError(f"{len(parties)} parties but {len(split)} column blocks")
    if not 0 <= private_fraction * len(parties) < 1:
        raise ValueError(f"private_fraction {private_fraction} leaves no entity shared by all "
                         f"{len(parties)} parties")
    n = len(table.ids)
    blocks = column_blocks(split, table.X.shape[1])
    n_private = int(round(private_fraction * n))
    drawn = rng.permutation(n)[:n_private * len(parties)]
    private_to = np.full(n, -1)
    private_to[drawn] = np.repeat(np.arange(len(parties)), n_private)
    holdings = []
    for k, (name, block) in enumerate(zip(parties, blocks)):
        kept = np.flatnonzero((private_to == -1) | (private_to == k))
        rows = kept[rng.permutation(len(kept))]
        holdings.append(Holding(name=name, ids=table.ids[rows], rows=rows, columns=block))
    return holdings


def stratified_test_mask(y: np.ndarray, *, test_fraction: float, rng: np.random.Generator) -> np.ndarray:
    """A seeded stratified train/test split: ``round(test_fraction * n_c)`` test rows of each class ``c``.

    Parameters
    ----------
    y : ndarray of int8 in {0, 1}
        Labels of the rows to split.
    test_fraction : float
        In (0, 1).
    rng : numpy.random.Generator

    Returns
    -------
    ndarray of bool
        True for test rows.
    """
    if not 0 < test_fraction < 1:
        raise ValueError(f"test_fraction must be in (0, 1), got {test_fraction!r}")
    test = np.zeros(len(y), dtype=bool)
    for label in np.unique(y):
        members = np.flatnonzero(y == label)
        test[rng.permutation(members)[:int(round(test_fraction * len(members)))]] = True
    return test


def deal_rows(n: int, *, train_rows: int, agents: int,
              rng: np.random.Generator) -> tuple[list[np.ndarray], np.ndarray]:
    """Horizontal split: `train_rows` random rows dealt out equally to the agents, the rest for testing.

    Agents get ``train_rows // agents`` rows each, the first ``train_rows % agents`` agents one more.

    Returns
    -------
    agent_rows : list of ndarray of int64
        Each agent's rows, in its own (random) order.
    test_rows : ndarray of int64
        The remaining rows, in source order.
    """
    if not agents <= train_rows < n:
        raise ValueError(f"train_rows must be at least the number of agents ({agents}) and below the "
                         f"{n} rows of the data, got {train_rows}")
    order = rng.permutation(n)
    return np.array_split(order[:train_rows], agents), np.sort(order[train_rows:])
