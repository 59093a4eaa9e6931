"""The cost model of the encrypted products: which method computes X^T [v] the cheapest, estimated in
multiply-and-reduce steps mod n^2, and how two processes share one product.

:mod:`ppml.crypto.products` computes a product three ways that give the same ciphertext integers: a bucket
multi-exponentiation per column and slot position, shared subset-product tables, and value buckets for
columns of few distinct values. This module prices them from the exponents alone (never from the
ciphertexts), so its choices change the time of a product, never its result.

Every price is computed for all columns of an exponent array E (slots, n, columns) at once with numpy; the
only Python loops run over the (slot, column) pairs, each a few cached lookups, and over the splits of the
plan, each constant time (suffix sums). At FATE's benchmark shape (300 columns, 334 packed ciphertexts) a
plan costs about 10 ms, where the per-column model took about 0.1 s and the split of a product between
two processes (three plans) about 0.4 s, a third of the product's own time.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np

__all__ = ["Plan", "bucket_cost", "column_profiles", "plan", "split_product", "table_cost", "value_costs"]

# Largest group of ciphertexts whose subset products are tabulated (2^12 entries of 512 bytes at 2048 bits)
MAX_GROUP = 12
# A squaring inside gmpy2.powmod costs about this many Python-level multiply-and-reduce steps (measured on
# 2048-bit keys: 5.9 against 8.9 microseconds)
POWMOD_SQUARING = 0.66
# Measured on 2048-bit keys: gmpy2.powmod costs about this many Python-level multiply-and-reduce steps per
# exponent bit; the cost models compare methods in those units.
POWMOD_PER_BIT = 1.2
# The offset bits L of a column are searched this far below its widest exponent
_OFFSET_SEARCH = 8


def bit_lengths(a: np.ndarray) -> np.ndarray:
    """int.bit_length of every entry of a non-negative int64 array, exactly (through float64 and one fix-up:
    above 2^53 a value may round up to the next power of two)."""
    a = np.asarray(a, dtype=np.int64)
    bits = np.frexp(a.astype(np.float64))[1].astype(np.int64)
    return bits - ((bits > 0) & ((np.int64(1) << np.maximum(bits - 1, 0)) > a))


# ---------------------------------------------------------------------------------------------------------
# one multi-exponentiation: the bucket (Pippenger) method


def _pippenger_cost(count: int, exp_bits: int, window: int) -> float:
    """Multiplications of the bucket method: per window one per entry (the first entry of a bucket is free)
    plus two per bucket to combine them, about count + 2^w in all; and the w squarings between windows."""
    return math.ceil(exp_bits / window) * (count + (1 << window)) + exp_bits


@functools.lru_cache(maxsize=4096)
def best_pippenger(count: int, exp_bits: int) -> tuple[float, int]:
    """(cost, window) of the cheapest bucket method for `count` exponents of `exp_bits` bits."""
    return min((_pippenger_cost(count, exp_bits, w), w) for w in range(1, 17))


def split_bits(exps: np.ndarray, exp_bits: int) -> tuple[int, float]:
    """The bit b at which to cut int64 exponents into low (b bits, every entry) and high (the few entries at or
    above 2^b) parts, and the estimated cost; b = exp_bits means no cut.

    Features are mostly small with rare large values (standardized data with outliers): the bucket method's
    passes follow the largest exponent, so a handful of entries of 24 bits among thousands of 18 would cost a
    pass more over all of them. Cut there, they cost a second small multi-exponentiation and b squarings.
    """
    best_cost, best_bits = best_pippenger(len(exps), exp_bits)[0], exp_bits
    if exps.dtype == object:
        return best_bits, best_cost
    for bits in range(max(1, exp_bits - 12), exp_bits):
        high = int(np.count_nonzero(exps >> bits))
        cost = (best_pippenger(len(exps), bits)[0] + bits
                + min(best_pippenger(high, exp_bits - bits)[0], POWMOD_PER_BIT * high * (exp_bits - bits)))
        if cost < best_cost:
            best_cost, best_bits = cost, bits
    return best_bits, best_cost


@functools.lru_cache(maxsize=65536)
def _buckets_cost(count: int, exp_bits: int) -> float:
    """A multi-exponentiation over `count` buckets of exponents below 2^exp_bits (the two ways of
    :func:`ppml.crypto.products.multiexp`, without its cut of rare large exponents)."""
    if count == 0:
        return 0.0
    return min(best_pippenger(count, exp_bits)[0], POWMOD_PER_BIT * count * exp_bits)


def bucket_cost(E: np.ndarray, width: int) -> float:
    """Estimated steps of a bucket multi-exponentiation per (slot, column), joined by Horner's rule."""
    slots, _, columns = E.shape
    live = np.count_nonzero(E, axis=1).tolist()
    bits = bit_lengths(np.abs(E).max(axis=1, initial=0)).tolist()
    cost = 0.0
    for k in range(slots):
        for j in range(columns):
            if live[k][j]:
                cost += best_pippenger(live[k][j], bits[k][j])[0]
    return cost + POWMOD_SQUARING * (slots - 1) * width * columns


# ---------------------------------------------------------------------------------------------------------
# shared subset-product tables


@dataclass(frozen=True)
class Profiles:
    """What the table method needs of each column of E (slots, n, columns), as int64 arrays over the columns.

    Attributes
    ----------
    offset : ndarray
        L: the column's rows hold L + 1 bits (exponents offset by 2^L into [0, 2^(L + 1))).
    outliers : ndarray
        Entries beyond [-2^L, 2^L), each kept apart as one exponentiation of its rest.
    top : ndarray
        Bits of the column's largest exponent in magnitude.
    """

    offset: np.ndarray
    outliers: np.ndarray
    top: np.ndarray


def column_profiles(E: np.ndarray) -> Profiles:
    """Each column's offset bits L, chosen among the top bits and the 8 below by the cost of its rows
    (slots (L + 1) n / 8 steps) and of its outliers (an exponentiation of `top` bits each): the first minimum."""
    slots, n, columns = E.shape
    top = bit_lengths(np.abs(E).max(axis=(0, 1), initial=0))
    if columns == 0:
        return Profiles(top, top, top)
    groups = n / 8
    best_cost = np.full(columns, np.inf)
    offset = np.zeros(columns, dtype=np.int64)
    outliers = np.zeros(columns, dtype=np.int64)
    for L in range(max(0, int(top.min()) - _OFFSET_SEARCH), int(top.max()) + 1):
        beyond = np.count_nonzero((E < -(1 << L)) | (E >= (1 << L)), axis=(0, 1))
        cost = slots * (L + 1) * groups + beyond * POWMOD_PER_BIT * top
        better = (L >= top - _OFFSET_SEARCH) & (L <= top) & (cost < best_cost)
        best_cost = np.where(better, cost, best_cost)
        offset = np.where(better, L, offset)
        outliers = np.where(better, beyond, outliers)
    return Profiles(offset, outliers, top)


def group_size(n: int, rows: int) -> int:
    """g minimising the tables (2^g per group) plus the rows (one entry per group each)."""
    return min(range(1, MAX_GROUP + 1), key=lambda g: math.ceil(n / g) * ((1 << g) + rows))


def _table_terms(profiles: Profiles, slots: int, width: int) -> tuple[np.ndarray, np.ndarray]:
    """Per column (a, b): its steps besides the shared tables are a * groups + b (its rows' entries, one per
    group; its outliers' exponentiations, its bits' squarings and its Horner shifts between slots)."""
    rows = slots * (profiles.offset + 1)
    rest = (profiles.outliers * POWMOD_PER_BIT * profiles.top + rows
            + POWMOD_SQUARING * (slots - 1) * np.maximum(0, width - profiles.offset - 1))
    return rows, rest


def _shared_cost(n: int, rows: int) -> tuple[int, float]:
    """(groups, steps of the tables and of prod c) for tables serving columns of `rows` rows in all."""
    g = group_size(n, rows)
    groups = math.ceil(n / g)
    return groups, float(groups * ((1 << g) - g - 1) + n)


def table_cost(E: np.ndarray, width: int) -> float:
    """Estimated multiply-and-reduce steps of the table method for exponents E (slots, n, columns)."""
    slots, n, columns = E.shape
    if columns == 0:
        return 0.0
    profiles = column_profiles(E)
    if slots > 1 and np.any(profiles.offset + 1 > width):
        return math.inf  # rows wider than a slot: not by tables
    rows, rest = _table_terms(profiles, slots, width)
    groups, shared = _shared_cost(n, int(rows.sum()))
    return shared + float(np.sum(rows * groups + rest))


# ---------------------------------------------------------------------------------------------------------
# columns of few distinct values: value buckets


def value_costs(E: np.ndarray, width: int) -> np.ndarray:
    """Estimated steps of :func:`ppml.crypto.products.value_matvec` for each column of E (slots, n, columns):
    per slot position, one product per live entry beyond the first of its value, a multi-exponentiation over
    the positive values and one over the negative ones (with its share of a batch inversion); and the Horner
    chain over the slots."""
    slots, n, columns = E.shape
    if n == 0:
        return np.full(columns, (slots - 1) * (1 + POWMOD_SQUARING * width))
    ordered = np.sort(E, axis=1)
    first = np.ones(ordered.shape, dtype=bool)
    first[:, 1:] = ordered[:, 1:] != ordered[:, :-1]
    distinct = first & (ordered != 0)
    live = np.count_nonzero(ordered, axis=1).tolist()
    values = np.count_nonzero(distinct, axis=1).tolist()
    negative = np.count_nonzero(distinct & (ordered < 0), axis=1).tolist()
    positive_bits = bit_lengths(np.maximum(ordered[:, -1], 0)).tolist()
    negative_bits = bit_lengths(np.maximum(-ordered[:, 0], 0)).tolist()
    out = np.empty(columns)
    for j in range(columns):
        cost = (slots - 1) * (1 + POWMOD_SQUARING * width)
        for k in range(slots):
            if live[k][j] == 0:
                continue
            cut = negative[k][j]
            cost += live[k][j] - values[k][j] + _buckets_cost(values[k][j] - cut, positive_bits[k][j])
            if cut:
                cost += _buckets_cost(cut, negative_bits[k][j]) + 4  # its share of the batch inversion, a product
        out[j] = cost
    return out


# ---------------------------------------------------------------------------------------------------------
# each column its way; two processes sharing one product


@dataclass(frozen=True)
class Plan:
    """Which columns of a product go by value buckets and which by shared tables, and the estimated steps.

    Attributes
    ----------
    values, tables : tuple of int
        Column indices for value buckets and for the shared tables.
    cost : float
        Estimated multiply-and-reduce steps of the whole product.
    column_costs : tuple of float
        Each column's own steps (for a table column, without the tables it shares).
    shared : float
        The tables' own steps (0 without table columns).
    """

    values: tuple[int, ...]
    tables: tuple[int, ...]
    cost: float
    column_costs: tuple[float, ...]
    shared: float


def plan(E: np.ndarray, width: int) -> Plan:
    """Each column of E (slots, n, columns) by value buckets or by tables, whichever the cost model prices
    lower for the product as a whole: columns are moved to buckets in order of what they save against their
    own table rows, and the cheapest of those splits is kept (the first of equal ones)."""
    slots, n, columns = E.shape
    profiles = column_profiles(E)
    by_values = value_costs(E, width)
    fits = (slots == 1) | (profiles.offset + 1 <= width)
    rows, rest = _table_terms(profiles, slots, width)
    groups, _ = _shared_cost(n, int(rows.sum()))
    own = rows * groups + rest
    order = sorted(range(columns), key=lambda j: (bool(fits[j]), by_values[j] - own[j]))
    # the splits m = 0 .. columns: the first m of `order` by buckets, the rest by tables (suffix sums)
    ordered_rows = rows[order]
    suffix_rows = np.concatenate([np.cumsum(ordered_rows[::-1])[::-1], [0]]).tolist()
    suffix_rest = np.concatenate([np.cumsum(rest[order][::-1])[::-1], [0.0]]).tolist()
    prefix_values = np.concatenate([[0.0], np.cumsum(by_values[order])]).tolist()
    unfit = np.concatenate([np.cumsum(~fits[order][::-1])[::-1], [0]]).tolist()
    best = None
    for m in range(columns + 1):
        if m == columns:
            tables_cost = 0.0
        elif unfit[m]:
            tables_cost = math.inf
        else:
            shared_groups, shared = _shared_cost(n, suffix_rows[m])
            tables_cost = shared + suffix_rows[m] * shared_groups + suffix_rest[m]
        cost = prefix_values[m] + tables_cost
        if best is None or cost < best[0]:
            best = (cost, m)
    cost, m = best
    values, tables = sorted(order[:m]), sorted(order[m:])
    shared, column_costs = 0.0, by_values.copy()
    if tables:
        shared_groups, shared = _shared_cost(n, int(rows[tables].sum()))
        column_costs[tables] = rows[tables] * shared_groups + rest[tables]
    return Plan(tuple(values), tuple(tables), float(cost), tuple(column_costs.tolist()), shared)


def split_product(E: np.ndarray, width: int) -> tuple[int, ...] | None:
    """How two processes share one product over the same ciphertexts: None to take half of the ciphertexts
    each (their partial products multiply to the whole; each runs its per-column work for every column), else
    the columns the second process takes (each builds the tables of every ciphertext for its table columns).
    Whichever leaves the busier process the least work by the cost model; either way the ciphertexts are the
    same."""
    slots, n, columns = E.shape
    by_rows = math.inf
    if n > 1:
        by_rows = max(plan(E[:, :n // 2], width).cost, plan(E[:, n // 2:], width).cost)
    if columns < 2:
        return None
    whole = plan(E, width)
    tabled_columns = set(whole.tables)
    load, theirs, tabled = [0.0, 0.0], [], [False, False]
    for j in sorted(range(columns), key=lambda j: -whole.column_costs[j]):  # the largest first, to the lighter
        extra = [whole.column_costs[j] + (whole.shared if j in tabled_columns and not tabled[s] else 0.0)
                 for s in (0, 1)]
        side = 0 if load[0] + extra[0] <= load[1] + extra[1] else 1
        load[side] += extra[side]
        tabled[side] = tabled[side] or j in tabled_columns
        if side == 1:
            theirs.append(j)
    if not theirs or len(theirs) == columns or by_rows <= max(load):
        return None if n > 1 else tuple(range(columns // 2))
    return tuple(sorted(theirs))
