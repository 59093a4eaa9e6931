"""Encrypted matrix products X^T [v] for every column at once, from subset-product tables the columns share.

The protocols' product X^T [v] needs, for each column j (and, on packed ciphertexts, each slot position k),
F_jk = prod_l c_l^(e_ljk) over the same n ciphertexts c_l with short signed exponents e_ljk (fixed-point
features). A bucket multi-exponentiation per (j, k) costs about n b / w products for b-bit exponents and
w-bit windows, w near log2 n; on packed vectors n is small (|S| / t) and there are many (j, k).

Here the ciphertexts are split into groups of g and, per group, the products of all 2^g subsets are formed
once (2^g - g - 1 products per group). For one column, slot position and exponent bit, the product of the
ciphertexts whose exponent has that bit set is then one table entry per group ("four Russians"): about n / g
products per (column, slot, bit), the tables shared by all of them. The bits and the slots are joined by one
Horner chain per column, acc <- acc^2 * row for each bit, and acc <- acc^(2^(B - bits)) between slots, so the
packed product lands where :meth:`ppml.crypto.packing.Layout.matvec` puts it (slot k of F_jk in slot t - 1).

Signed exponents: each is offset by 2^L into [0, 2^(L + 1)), and the offset is taken back once per slot by
the factor (prod_l c_l)^(-2^L). An exponent beyond [-2^L, 2^L) keeps its rest e - clip(e) apart, as one
exponentiation of c_l (or of its inverse) joined at its slot; L is chosen per column by the cost model, so a
handful of outliers does not lengthen every row.

Columns of few distinct values (categorical or integer features: 2 to 79 values on the credit data) take
another way, by value buckets (:func:`value_matvec`): per slot position, the ciphertexts whose exponent is the
same value are multiplied together first (about one product per ciphertext), and the product over the buckets,
one base per distinct value, is a small multi-exponentiation. A column then costs about |S| products where the
tables cost about |S| b / g (b exponent bits, g the group size). :func:`plan` sends each column the cheaper
way, by the cost model, and :func:`planned_matvec` runs both.

The result is the same element of Z*_{n^2}, hence the same ciphertext integers, as the bucket method
(:meth:`ppml.crypto.paillier.EncryptedVector.matvec` per slot position, joined by Horner's rule): which
method runs is a matter of cost only (:func:`plan` against :func:`bucket_cost`).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import gmpy2
import numpy as np
from gmpy2 import mpz

from ppml.crypto.multibuffer import powmod_list

__all__ = ["Plan", "batch_invert", "bucket_cost", "multiexp", "plan", "planned_matvec", "split_product", "table_cost",
           "table_matvec", "value_cost", "value_matvec"]

# Largest group of ciphertexts whose subset products are tabulated (2^12 entries of 512 bytes at 2048 bits)
MAX_GROUP = 12
# A squaring inside gmpy2.powmod costs about this many Python-level multiply-and-reduce steps (measured on
# 2048-bit keys: 5.9 against 8.9 microseconds)
_POWMOD_SQUARING = 0.66
# Measured on 2048-bit keys: gmpy2.powmod costs about this many Python-level multiply-and-reduce steps per
# exponent bit; the cost models compare methods in those units.
_POWMOD_PER_BIT = 1.2


# ---------------------------------------------------------------------------------------------------------
# one product: bucket (Pippenger) multi-exponentiation


def _pippenger_cost(count: int, exp_bits: int, window: int) -> float:
    """Multiplications of the bucket method: per window one per entry (the first entry of a bucket is free)
    plus two per bucket to combine them, about count + 2^w in all; and the w squarings between windows."""
    return math.ceil(exp_bits / window) * (count + (1 << window)) + exp_bits


@functools.lru_cache(maxsize=4096)
def _best_pippenger(count: int, exp_bits: int) -> tuple[float, int]:
    """(cost, window) of the cheapest bucket method for `count` exponents of `exp_bits` bits."""
    return min((_pippenger_cost(count, exp_bits, w), w) for w in range(1, 17))


def _split_bits(exps: np.ndarray, exp_bits: int) -> tuple[int, float]:
    """The bit b at which to cut int64 exponents into low (b bits, every entry) and high (the few entries at or
    above 2^b) parts, and the estimated cost; b = exp_bits means no cut.

    Features are mostly small with rare large values (standardized data with outliers): the bucket method's
    passes follow the largest exponent, so a handful of entries of 24 bits among thousands of 18 would cost a
    pass more over all of them. Cut there, they cost a second small multi-exponentiation and b squarings.
    """
    best_cost, best_bits = _best_pippenger(len(exps), exp_bits)[0], exp_bits
    if exps.dtype == object:
        return best_bits, best_cost
    for bits in range(max(1, exp_bits - 12), exp_bits):
        high = int(np.count_nonzero(exps >> bits))
        cost = (_best_pippenger(len(exps), bits)[0] + bits
                + min(_best_pippenger(high, exp_bits - bits)[0], _POWMOD_PER_BIT * high * (exp_bits - bits)))
        if cost < best_cost:
            best_cost, best_bits = cost, bits
    return best_bits, best_cost


def multiexp(bases: list, exps: np.ndarray, modulus: mpz) -> mpz:
    """prod_i bases[i]^exps[i] mod modulus for non-negative exponents (int64 or object array).

    Chooses between one exponentiation per base (eight at a time where :mod:`ppml.crypto.multibuffer` runs)
    and the bucket method by their estimated costs; the bucket method may first cut rare large exponents off
    (:func:`_split_bits`).
    """
    if len(bases) == 0:
        return mpz(1)
    exp_bits = int(np.max(exps)).bit_length()
    if exp_bits == 0:
        return mpz(1)
    bits, cost = _split_bits(exps, exp_bits)
    naive_cost = _POWMOD_PER_BIT * sum(int(e).bit_length() for e in exps)
    if naive_cost <= cost:
        acc = mpz(1)
        for power in powmod_list(bases, [int(e) for e in exps], modulus):
            acc = acc * power % modulus
        return acc
    if bits == exp_bits:
        return _pippenger(bases, exps, modulus, exp_bits=exp_bits, window=_best_pippenger(len(bases), bits)[1])
    # prod b^e = prod b^(e mod 2^bits) * (prod_{e >= 2^bits} b^(e >> bits))^(2^bits)
    low = exps & ((1 << bits) - 1)
    rows = np.flatnonzero(exps >> bits)
    high = multiexp([bases[i] for i in rows.tolist()], exps[rows] >> bits, modulus)
    acc = _pippenger(bases, low, modulus, exp_bits=bits, window=_best_pippenger(len(bases), bits)[1])
    return acc * gmpy2.powmod(high, 1 << bits, modulus) % modulus


def _pippenger(bases: list, exps: np.ndarray, modulus: mpz, *, exp_bits: int, window: int) -> mpz:
    """Bucket method: per w-bit window, bucket d holds the product of the bases whose digit is d, and
    prod_d B_d^d is formed with running products (2 per bucket); windows are joined by w squarings."""
    n_windows = math.ceil(exp_bits / window)
    mask = (1 << window) - 1
    acc = None
    for t in range(n_windows - 1, -1, -1):
        if acc is not None:
            acc = gmpy2.powmod(acc, 1 << window, modulus)
        digits = ((exps >> (window * t)) & mask).astype(np.int64)
        live = np.flatnonzero(digits)
        buckets: list = [None] * (mask + 1)
        for i, d in zip(live.tolist(), digits[live].tolist()):
            b = buckets[d]
            buckets[d] = bases[i] if b is None else b * bases[i] % modulus
        running = total = None
        for b in reversed(buckets[1:]):
            if b is not None:
                running = b if running is None else running * b % modulus
            if running is not None:
                total = running if total is None else total * running % modulus
        if total is not None:
            acc = total if acc is None else acc * total % modulus
    return mpz(1) if acc is None else acc


# ---------------------------------------------------------------------------------------------------------
# many products over the same ciphertexts: subset-product tables


def _bits(a: np.ndarray) -> int:
    return int(np.max(np.abs(a))).bit_length() if a.size else 0


def _offset_bits(e: np.ndarray, groups: float) -> tuple[int, float]:
    """(L, cost) for one column's exponents e (all slots): rows of L + 1 bits, outliers apart."""
    top = _bits(e)
    best = None
    for L in range(max(0, top - 8), top + 1):
        outliers = int(np.count_nonzero((e < -(1 << L)) | (e >= (1 << L))))
        cost = e.shape[0] * (L + 1) * groups + outliers * _POWMOD_PER_BIT * top
        if best is None or cost < best[1]:
            best = (L, cost)
    return best


def _group_size(n: int, rows: int) -> int:
    """g minimising the tables (2^g per group) plus the rows (one entry per group each)."""
    return min(range(1, MAX_GROUP + 1), key=lambda g: math.ceil(n / g) * ((1 << g) + rows))


def _column_profile(e: np.ndarray, n: int) -> tuple[int, int, int]:
    """(L, outliers, top) of one column's exponents e (all slots) as :func:`table_matvec` uses them: rows of
    L + 1 bits, `outliers` entries beyond [-2^L, 2^L) kept apart, `top` bits at most."""
    L, _ = _offset_bits(e, n / 8)
    outliers = int(np.count_nonzero((e < -(1 << L)) | (e >= (1 << L))))
    return L, outliers, _bits(e)


def _table_column_cost(profile: tuple[int, int, int], slots: int, width: int, groups: int) -> float:
    """One column's steps in :func:`table_matvec` besides the shared tables: its rows' entries, its outliers'
    exponentiations, its Horner chain."""
    L, outliers, top = profile
    return (slots * (L + 1) * groups + outliers * _POWMOD_PER_BIT * top + slots * (L + 1)
            + _POWMOD_SQUARING * (slots - 1) * max(0, width - L - 1))


def _table_shape(n: int, slots: int, profiles: list) -> tuple[int, int, float]:
    """(g, groups, cost of the tables and of prod c) for tables serving the columns of `profiles`."""
    g = _group_size(n, sum(slots * (L + 1) for L, _, _ in profiles))
    groups = math.ceil(n / g)
    return g, groups, groups * ((1 << g) - g - 1) + n


def _tables_cost(n: int, slots: int, width: int, profiles: list) -> float:
    if not profiles:
        return 0.0
    if slots > 1 and any(L + 1 > width for L, _, _ in profiles):
        return math.inf  # rows wider than a slot: not by tables
    _, groups, shared = _table_shape(n, slots, profiles)
    return shared + sum(_table_column_cost(p, slots, width, groups) for p in profiles)


def table_cost(E: np.ndarray, width: int) -> float:
    """Estimated multiply-and-reduce steps of :func:`table_matvec` for exponents E (slots, n, columns)."""
    slots, n, columns = E.shape
    return _tables_cost(n, slots, width, [_column_profile(E[:, :, j], n) for j in range(columns)])


def bucket_cost(E: np.ndarray, width: int) -> float:
    """Estimated steps of a bucket multi-exponentiation per (slot, column), joined by Horner's rule."""
    slots, n, columns = E.shape
    cost = 0.0
    for k in range(slots):
        for j in range(columns):
            e = E[k, :, j]
            live = int(np.count_nonzero(e))
            if live:
                cost += _best_pippenger(live, _bits(e))[0]
    return cost + _POWMOD_SQUARING * (slots - 1) * width * columns


# ---------------------------------------------------------------------------------------------------------
# columns of few distinct values: value buckets


def value_cost(e: np.ndarray, width: int) -> float:
    """Estimated steps of :func:`value_matvec` for one column's exponents e (slots, n)."""
    slots = e.shape[0]
    cost = (slots - 1) * (1 + _POWMOD_SQUARING * width)  # the Horner chain over the slots
    for row in e:
        live = row[row != 0]
        if live.size == 0:
            continue
        values = np.unique(live)
        cut = int(np.searchsorted(values, 0))
        cost += live.size - values.size + _buckets_cost(len(values) - cut, _bits(values[cut:]))
        if cut:
            cost += _buckets_cost(cut, _bits(values[:cut])) + 4  # its share of the batch inversion, a product
    return cost


def _buckets_cost(count: int, exp_bits: int) -> float:
    """The multi-exponentiation over `count` buckets of exponents below 2^exp_bits (:func:`multiexp`'s two
    ways, without its cut of rare large exponents)."""
    if count == 0:
        return 0.0
    return min(_best_pippenger(count, exp_bits)[0], _POWMOD_PER_BIT * count * exp_bits)


def _value_buckets(bases: list, e: np.ndarray, modulus: mpz) -> tuple[mpz | None, mpz | None]:
    """(prod_{e_l > 0} c_l^(e_l), prod_{e_l < 0} c_l^(-e_l)), None for an empty product: the ciphertexts of
    each distinct exponent multiplied together first, then one multi-exponentiation over those buckets."""
    live = np.flatnonzero(e)
    if live.size == 0:
        return None, None
    values, inverse, counts = np.unique(e[live], return_inverse=True, return_counts=True)
    members = live[np.argsort(inverse, kind="stable")].tolist()
    buckets, start = [], 0
    for count in counts.tolist():
        acc = bases[members[start]]
        for i in members[start + 1:start + count]:
            acc = acc * bases[i] % modulus
        buckets.append(acc)
        start += count
    cut = int(np.searchsorted(values, 0))  # values ascend: the negative ones first
    positive = multiexp(buckets[cut:], values[cut:], modulus) if cut < len(values) else None
    negative = multiexp(buckets[:cut], -values[:cut], modulus) if cut else None
    return positive, negative


def value_matvec(bases: list, E: np.ndarray, *, width: int, modulus: mpz) -> list:
    """The same products as :func:`table_matvec` (every column of E), by value buckets: per slot position,
    the ciphertexts of equal exponents multiplied together, then one multi-exponentiation over the distinct
    values; negative values through one batch inversion for all; the slots joined by Horner's rule."""
    slots, n, columns = E.shape
    if n != len(bases):
        raise ValueError(f"{len(bases)} ciphertexts for exponents of {n}")
    parts = [_value_buckets(bases, E[k, :, j], modulus) for j in range(columns) for k in range(slots)]
    inverses = iter(batch_invert([neg for _, neg in parts if neg is not None], modulus))
    for j in range(columns):  # each negative part times its inverse, in the order batch_invert took them
        for k in range(slots):
            positive, negative = parts[j * slots + k]
            if negative is not None:
                inverse = next(inverses)
                parts[j * slots + k] = (inverse if positive is None else positive * inverse % modulus), None
    accs: list = [None] * columns
    for k in range(slots):
        _shift_all(accs, [width] * columns, modulus)
        for j in range(columns):
            positive = parts[j * slots + k][0]
            if positive is not None:
                accs[j] = positive if accs[j] is None else accs[j] * positive % modulus
    return [mpz(1) if acc is None else acc for acc in accs]


def _shift_all(accs: list, shifts: list, modulus: mpz) -> None:
    """accs[j] <- accs[j]^(2^shifts[j]) in place for every accumulator that is set and every shift > 0: the
    columns' Horner steps between two slots, in one batch of exponentiations."""
    live = [j for j, acc in enumerate(accs) if acc is not None and shifts[j] > 0]
    for j, power in zip(live, powmod_list([accs[j] for j in live], [mpz(1) << shifts[j] for j in live], modulus)):
        accs[j] = power


# ---------------------------------------------------------------------------------------------------------
# each column its way; two processes sharing one product


@dataclass(frozen=True)
class Plan:
    """Which columns of a product go by value buckets and which by shared tables, and the estimated steps.

    Attributes
    ----------
    values, tables : tuple of int
        Column indices for :func:`value_matvec` and for :func:`table_matvec`.
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
    own table rows, and the cheapest of those splits is kept."""
    slots, n, columns = E.shape
    profiles = [_column_profile(E[:, :, j], n) for j in range(columns)]
    by_values = [value_cost(E[:, :, j], width) for j in range(columns)]
    fits = [slots == 1 or L + 1 <= width for L, _, _ in profiles]
    _, groups, _ = _table_shape(n, slots, profiles)
    own = [_table_column_cost(p, slots, width, groups) for p in profiles]
    order = sorted(range(columns), key=lambda j: (fits[j], by_values[j] - own[j]))
    best = None
    for m in range(columns + 1):
        values, tables = sorted(order[:m]), sorted(order[m:])
        cost = sum(by_values[j] for j in values) + _tables_cost(n, slots, width, [profiles[j] for j in tables])
        if best is None or cost < best[0]:
            best = (cost, values, tables)
    cost, values, tables = best
    shared, column_costs = 0.0, list(by_values)
    if tables:
        _, groups, shared = _table_shape(n, slots, [profiles[j] for j in tables])
        for j in tables:
            column_costs[j] = _table_column_cost(profiles[j], slots, width, groups)
    return Plan(tuple(values), tuple(tables), cost, tuple(column_costs), shared)


def planned_matvec(bases: list, E: np.ndarray, chosen: Plan, *, width: int, modulus: mpz) -> list:
    """Every column's product by the method `chosen` gives it (:func:`plan`), in the columns' order."""
    out: list = [None] * E.shape[2]
    for columns, method in ((chosen.values, value_matvec), (chosen.tables, table_matvec)):
        if columns:
            for j, c in zip(columns, method(bases, E[:, :, list(columns)], width=width, modulus=modulus)):
                out[j] = c
    return out


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
    load, theirs, tabled = [0.0, 0.0], [], [False, False]
    for j in sorted(range(columns), key=lambda j: -whole.column_costs[j]):  # the largest first, to the lighter
        extra = [whole.column_costs[j] + (whole.shared if j in whole.tables and not tabled[s] else 0.0)
                 for s in (0, 1)]
        side = 0 if load[0] + extra[0] <= load[1] + extra[1] else 1
        load[side] += extra[side]
        tabled[side] = tabled[side] or j in whole.tables
        if side == 1:
            theirs.append(j)
    if not theirs or len(theirs) == columns or by_rows <= max(load):
        return None if n > 1 else tuple(range(columns // 2))
    return tuple(sorted(theirs))


def _tables(bases: list, g: int, modulus: mpz) -> list:
    """Flat list: entry gi 2^g + p is the product of the bases of group gi whose bit is set in p."""
    flat: list = []
    for start in range(0, len(bases), g):
        group = bases[start:start + g]
        table = [mpz(1)] * (1 << g)
        for p in range(1, 1 << len(group)):
            low = p & -p
            rest = p ^ low
            base = group[low.bit_length() - 1]
            table[p] = base if rest == 0 else table[rest] * base % modulus
        flat.extend(table)
    return flat


def batch_invert(values: list, modulus: mpz) -> list:
    """Modular inverses of many units with one extended gcd (Montgomery's trick: 3 products per value)."""
    if not values:
        return []
    prefix = [values[0]]
    for v in values[1:]:
        prefix.append(prefix[-1] * v % modulus)
    inv = gmpy2.invert(prefix[-1], modulus)
    out = [None] * len(values)
    for i in range(len(values) - 1, 0, -1):
        out[i] = inv * prefix[i - 1] % modulus
        inv = inv * values[i] % modulus
    out[0] = inv
    return out


def table_matvec(bases: list, E: np.ndarray, *, width: int, modulus: mpz) -> list:
    """prod_k (prod_l bases[l]^E[k, l, j])^(2^((t - 1 - k) width)) mod `modulus`, for every column j.

    Parameters
    ----------
    bases : list of mpz
        The n ciphertexts (units mod `modulus`).
    E : ndarray of int64, shape (t, n, columns)
        Signed exponents; E[k, l, j] is the factor of slot position k of ciphertext l in column j.
    width : int
        B, bits per slot (ignored when t = 1); at least every column's offset bits.
    modulus : mpz

    Returns
    -------
    list of mpz
        One ciphertext per column.
    """
    slots, n, columns = E.shape
    if n != len(bases):
        raise ValueError(f"{len(bases)} ciphertexts for exponents of {n}")
    Ls, outliers = [], []
    for j in range(columns):
        L, _ = _offset_bits(E[:, :, j], n / 8)
        if slots > 1 and L + 1 > width:
            raise ValueError(f"column {j}: {L + 1}-bit rows do not fit {width}-bit slots")
        Ls.append(L)
    g = _group_size(n, sum(slots * (L + 1) for L in Ls))
    groups = math.ceil(n / g)
    flat = _tables(bases, g, modulus)

    q = bases[0]
    for c in bases[1:]:
        q = q * c % modulus
    # the rests of exponents beyond their column's offset range: (slot, column) -> [(base index, rest)]
    for j, L in enumerate(Ls):
        e = E[:, :, j]
        rest = e - np.clip(e, -(1 << L), (1 << L) - 1)
        outliers.append({k: list(zip(np.flatnonzero(rest[k]).tolist(), rest[k][rest[k] != 0].tolist()))
                         for k in range(slots) if rest[k].any()})
    negative = sorted({i for per in outliers for pairs in per.values() for i, r in pairs if r < 0})
    inverses = batch_invert([q] + [bases[i] for i in negative], modulus)
    q_inv, inverse = inverses[0], dict(zip(negative, inverses[1:]))
    unoffset = {L: gmpy2.powmod(q_inv, 1 << L, modulus) for L in set(Ls)}  # (prod c)^(-2^L)

    padded = groups * g
    weights = (1 << np.arange(g, dtype=np.int64))
    rows = []
    for j, L in enumerate(Ls):
        low = np.zeros((slots, padded), dtype=np.int64)
        low[:, :n] = np.clip(E[:, :, j], -(1 << L), (1 << L) - 1) + (1 << L)
        # patterns[k, b, gi]: which ciphertexts of group gi have bit b set in slot k's exponent
        bits = (low.reshape(slots, groups, g)[..., None] >> np.arange(L + 1, dtype=np.int64)) & 1
        patterns = np.einsum("kgib,i->kbg", bits, weights)
        entries = (np.arange(groups, dtype=np.int64) << g) + patterns
        rows.append([[entries[k, b][patterns[k, b] != 0].tolist() for b in range(L + 1)] for k in range(slots)])
    accs: list = [None] * columns
    for k in range(slots):
        _shift_all(accs, [width - L - 1 for L in Ls], modulus)  # the Horner step between slots
        for j, L in enumerate(Ls):
            acc = accs[j]
            for b in range(L, -1, -1):
                if acc is not None:
                    acc = acc * acc % modulus
                for i in rows[j][k][b]:
                    acc = flat[i] if acc is None else acc * flat[i] % modulus
            acc = unoffset[L] if acc is None else acc * unoffset[L] % modulus
            for i, r in outliers[j].get(k, ()):
                acc = acc * gmpy2.powmod(inverse[i] if r < 0 else bases[i], abs(r), modulus) % modulus
            accs[j] = acc
    return accs
