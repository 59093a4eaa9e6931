"""The products' cost model, computed for all columns at once, against a plain per-column reference: the same
offsets, outliers and prices, and the same plan (which columns by value buckets, which by tables) and split,
on exponents with zeros, outliers, few values, one slot and many."""

from __future__ import annotations

import math

import numpy as np
import pytest

from ppml.crypto import costs


def ref_bits(a) -> int:
    return int(np.max(np.abs(a))).bit_length() if np.size(a) else 0


def ref_profile(e: np.ndarray) -> tuple[int, int, int]:
    """(L, outliers, top) of one column's exponents e (slots, n), by trying every L."""
    slots, n = e.shape
    top, best = ref_bits(e), None
    for L in range(max(0, top - 8), top + 1):
        outliers = int(np.count_nonzero((e < -(1 << L)) | (e >= (1 << L))))
        cost = slots * (L + 1) * (n / 8) + outliers * costs.POWMOD_PER_BIT * top
        if best is None or cost < best[0]:
            best = (cost, L, outliers)
    return best[1], best[2], top


def ref_buckets(count: int, bits: int) -> float:
    return 0.0 if count == 0 else min(costs.best_pippenger(count, bits)[0], costs.POWMOD_PER_BIT * count * bits)


def ref_value_cost(e: np.ndarray, width: int) -> float:
    cost = (e.shape[0] - 1) * (1 + costs.POWMOD_SQUARING * width)
    for row in e:
        live = row[row != 0]
        if live.size:
            values = np.unique(live)
            cut = int(np.searchsorted(values, 0))
            cost += live.size - values.size + ref_buckets(len(values) - cut, ref_bits(values[cut:]))
            if cut:
                cost += ref_buckets(cut, ref_bits(values[:cut])) + 4
    return cost


def ref_tables_cost(n: int, slots: int, width: int, profiles: list) -> float:
    if not profiles:
        return 0.0
    if slots > 1 and any(L + 1 > width for L, _, _ in profiles):
        return math.inf
    g = costs.group_size(n, sum(slots * (L + 1) for L, _, _ in profiles))
    groups = math.ceil(n / g)
    cost = groups * ((1 << g) - g - 1) + n
    for L, outliers, top in profiles:
        cost += (slots * (L + 1) * groups + outliers * costs.POWMOD_PER_BIT * top + slots * (L + 1)
                 + costs.POWMOD_SQUARING * (slots - 1) * max(0, width - L - 1))
    return cost


def ref_plan(E: np.ndarray, width: int) -> tuple[tuple, tuple, float]:
    """Every split of the columns into buckets and tables along the order of their savings, each priced anew."""
    slots, n, columns = E.shape
    profiles = [ref_profile(E[:, :, j]) for j in range(columns)]
    by_values = [ref_value_cost(E[:, :, j], width) for j in range(columns)]
    groups = math.ceil(n / costs.group_size(n, sum(slots * (L + 1) for L, _, _ in profiles)))
    own = [slots * (L + 1) * groups + o * costs.POWMOD_PER_BIT * t + slots * (L + 1)
           + costs.POWMOD_SQUARING * (slots - 1) * max(0, width - L - 1) for L, o, t in profiles]
    fits = [slots == 1 or L + 1 <= width for L, _, _ in profiles]
    order = sorted(range(columns), key=lambda j: (fits[j], by_values[j] - own[j]))
    best = None
    for m in range(columns + 1):
        values, tables = sorted(order[:m]), sorted(order[m:])
        cost = sum(by_values[j] for j in values) + ref_tables_cost(n, slots, width, [profiles[j] for j in tables])
        if best is None or cost < best[2]:
            best = (tuple(values), tuple(tables), cost)
    return best


def cases():
    rng = np.random.default_rng(11)
    continuous = np.rint(rng.normal(scale=2.0**16, size=(7, 143, 12))).astype(np.int64)
    continuous[:, :, 0] = 0  # a column of zeros
    continuous[0, 3, 1] = 2**27 + 9  # outliers of both signs
    continuous[5, 7, 1] = -(2**26)
    levels = np.rint(rng.normal(scale=2.0**15, size=5)).astype(np.int64)
    discrete = rng.choice(levels, size=(7, 143, 6))
    discrete[:, ::4, 2] = 0
    discrete[:, :, 3] = 7  # one positive value
    discrete[:, :, 4] = -(2**16)  # one negative value
    mixed = np.concatenate([continuous[:, :, :5], discrete, continuous[:, :, 5:]], axis=2)
    one_slot = np.rint(rng.normal(scale=2.0**14, size=(1, 300, 9))).astype(np.int64)
    wide = np.rint(rng.normal(scale=2.0**18, size=(3, 40, 30))).astype(np.int64)
    return [(mixed, 144), (continuous, 144), (discrete, 60), (one_slot, 0), (wide, 144), (wide, 12),
            (mixed[:, :1], 144)]


@pytest.mark.parametrize("case", range(len(cases())))
def test_profiles_and_prices_match_the_per_column_reference(case):
    E, width = cases()[case]
    profiles = costs.column_profiles(E)
    for j in range(E.shape[2]):
        assert (int(profiles.offset[j]), int(profiles.outliers[j]), int(profiles.top[j])) == \
            ref_profile(E[:, :, j]), f"column {j}"
    assert costs.value_costs(E, width).tolist() == [ref_value_cost(E[:, :, j], width) for j in range(E.shape[2])]
    expected = 0.0
    for k in range(E.shape[0]):
        for j in range(E.shape[2]):
            if np.count_nonzero(E[k, :, j]):
                expected += costs.best_pippenger(int(np.count_nonzero(E[k, :, j])), ref_bits(E[k, :, j]))[0]
    assert costs.bucket_cost(E, width) == expected + costs.POWMOD_SQUARING * (E.shape[0] - 1) * width * E.shape[2]
    reference = ref_tables_cost(E.shape[1], E.shape[0], width,
                                [ref_profile(E[:, :, j]) for j in range(E.shape[2])])
    assert costs.table_cost(E, width) == pytest.approx(reference, rel=1e-12)


@pytest.mark.parametrize("case", range(len(cases())))
def test_the_plan_matches_the_reference_that_prices_every_split_anew(case):
    E, width = cases()[case]
    chosen = costs.plan(E, width)
    values, tables, cost = ref_plan(E, width)
    assert (chosen.values, chosen.tables) == (values, tables)
    assert chosen.cost == pytest.approx(cost, rel=1e-12)
    assert sum(chosen.column_costs) + chosen.shared == pytest.approx(cost, rel=1e-12)


def test_bit_lengths_are_exact_near_powers_of_two():
    values = [0, 1, 2, 3, 2**53 - 1, 2**53, 2**53 + 1, 2**61 - 1, 2**61, 2**62 - 1]
    assert costs.bit_lengths(np.array(values, dtype=np.int64)).tolist() == [v.bit_length() for v in values]

