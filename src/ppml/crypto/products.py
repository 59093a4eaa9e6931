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
tables cost about |S| b / g (b exponent bits, g the group size). :func:`ppml.crypto.costs.plan` sends each
column the cheaper way, by the cost model, and :func:`planned_matvec` runs both.

The result is the same element of Z*_{n^2}, hence the same ciphertext integers, as the bucket method
(:meth:`ppml.crypto.paillier.EncryptedVector.matvec` per slot position, joined by Horner's rule): which
method runs is a matter of cost only (:mod:`ppml.crypto.costs`).
"""

from __future__ import annotations

import math

import gmpy2
import numpy as np
from gmpy2 import mpz

from ppml.crypto.costs import POWMOD_PER_BIT, Plan, best_pippenger, column_profiles, group_size, split_bits
from ppml.crypto.multibuffer import powmod_list

__all__ = ["batch_invert", "multiexp", "planned_matvec", "table_matvec", "value_matvec"]

# ---------------------------------------------------------------------------------------------------------
# one product: bucket (Pippenger) multi-exponentiation


def multiexp(bases: list, exps: np.ndarray, modulus: mpz) -> mpz:
    """prod_i bases[i]^exps[i] mod modulus for non-negative exponents (int64 or object array).

    Chooses between one exponentiation per base (eight at a time where :mod:`ppml.crypto.multibuffer` runs)
    and the bucket method by their estimated costs; the bucket method may first cut rare large exponents off
    (:func:`~ppml.crypto.costs.split_bits`).
    """
    if len(bases) == 0:
        return mpz(1)
    exp_bits = int(np.max(exps)).bit_length()
    if exp_bits == 0:
        return mpz(1)
    bits, cost = split_bits(exps, exp_bits)
    naive_cost = POWMOD_PER_BIT * sum(int(e).bit_length() for e in exps)
    if naive_cost <= cost:
        acc = mpz(1)
        for power in powmod_list(bases, [int(e) for e in exps], modulus):
            acc = acc * power % modulus
        return acc
    if bits == exp_bits:
        return _pippenger(bases, exps, modulus, exp_bits=exp_bits, window=best_pippenger(len(bases), bits)[1])
    # prod b^e = prod b^(e mod 2^bits) * (prod_{e >= 2^bits} b^(e >> bits))^(2^bits)
    low = exps & ((1 << bits) - 1)
    rows = np.flatnonzero(exps >> bits)
    high = multiexp([bases[i] for i in rows.tolist()], exps[rows] >> bits, modulus)
    acc = _pippenger(bases, low, modulus, exp_bits=bits, window=best_pippenger(len(bases), bits)[1])
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


# ---------------------------------------------------------------------------------------------------------
# columns of few distinct values: value buckets


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


def planned_matvec(bases: list, E: np.ndarray, chosen: Plan, *, width: int, modulus: mpz) -> list:
    """Every column's product by the method `chosen` gives it (:func:`~ppml.crypto.costs.plan`), in the
    columns' order."""
    out: list = [None] * E.shape[2]
    for columns, method in ((chosen.values, value_matvec), (chosen.tables, table_matvec)):
        if columns:
            for j, c in zip(columns, method(bases, E[:, :, list(columns)], width=width, modulus=modulus)):
                out[j] = c
    return out


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
    Ls = column_profiles(E).offset.tolist()
    for j, L in enumerate(Ls):
        if slots > 1 and L + 1 > width:
            raise ValueError(f"column {j}: {L + 1}-bit rows do not fit {width}-bit slots")
    g = group_size(n, sum(slots * (L + 1) for L in Ls))
    groups = math.ceil(n / g)
    flat = _tables(bases, g, modulus)

    q = bases[0]
    for c in bases[1:]:
        q = q * c % modulus
    # the rests of exponents beyond their column's offset range: (slot, column) -> [(base index, rest)]
    half = np.int64(1) << np.array(Ls, dtype=np.int64)  # 2^L per column
    clipped = np.clip(E, -half, half - 1)
    rest = E - clipped
    outliers: dict[tuple[int, int], list] = {}
    for k, i, j in zip(*(axis.tolist() for axis in np.nonzero(rest))):
        outliers.setdefault((k, j), []).append((i, int(rest[k, i, j])))
    negative = sorted({i for pairs in outliers.values() for i, r in pairs if r < 0})
    inverses = batch_invert([q] + [bases[i] for i in negative], modulus)
    q_inv, inverse = inverses[0], dict(zip(negative, inverses[1:]))
    unoffset = {L: gmpy2.powmod(q_inv, 1 << L, modulus) for L in set(Ls)}  # (prod c)^(-2^L)

    # rows[b]: for every (column, slot) in turn, the table entries of the groups whose ciphertexts have bit b
    # set in that slot's offset exponent (one per group with a non-zero pattern), and where each one starts
    low = np.zeros((slots, groups * g, columns), dtype=np.int64)
    low[:, :n] = clipped + half
    grouped = low.reshape(slots, groups, g, columns)
    weights = np.int64(1) << np.arange(g, dtype=np.int64)
    first = np.arange(groups, dtype=np.int64)[None, None, :] << g
    rows = []
    for b in range(max(Ls, default=-1) + 1):
        patterns = np.einsum("kgic,i->ckg", (grouped >> b) & 1, weights)  # (column, slot, group)
        live = patterns != 0
        starts = np.zeros(columns * slots + 1, dtype=np.int64)
        np.cumsum(np.count_nonzero(live, axis=2).ravel(), out=starts[1:])
        rows.append(((first + patterns)[live].tolist(), starts.tolist()))
    accs: list = [None] * columns
    for k in range(slots):
        _shift_all(accs, [width - L - 1 for L in Ls], modulus)  # the Horner step between slots
        for j, L in enumerate(Ls):
            acc, at = accs[j], j * slots + k
            for b in range(L, -1, -1):
                if acc is not None:
                    acc = acc * acc % modulus
                entries, starts = rows[b]
                for i in entries[starts[at]:starts[at + 1]]:
                    acc = flat[i] if acc is None else acc * flat[i] % modulus
            acc = unoffset[L] if acc is None else acc * unoffset[L] % modulus
            for i, r in outliers.get((k, j), ()):
                acc = acc * gmpy2.powmod(inverse[i] if r < 0 else bases[i], abs(r), modulus) % modulus
            accs[j] = acc
    return accs
