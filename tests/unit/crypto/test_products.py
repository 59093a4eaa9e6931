"""Encrypted matrix products by shared subset-product tables and by value buckets: the same ciphertext
integers as the bucket method (per slot position, joined by Horner's rule), for signed, zero, outlying and
short-last-group inputs; the plan sends each column the cheaper way and never changes a result, nor does the
way two processes share a product."""

from __future__ import annotations

import gmpy2
import numpy as np
import pytest

from ppml.crypto import costs, products
from ppml.crypto.paillier import EncryptedVector


def bucket_reference(bases: list, E: np.ndarray, width: int, nsq) -> list[int]:
    """prod_k (prod_l bases[l]^E[k, l, j])^(2^((t - 1 - k) width)) by one gmpy2.powmod per entry."""
    out = []
    for j in range(E.shape[2]):
        acc = gmpy2.mpz(1)
        for k in range(E.shape[0]):
            acc = gmpy2.powmod(acc, 1 << width, nsq) if k else acc
            for b, e in zip(bases, E[k, :, j].tolist()):
                acc = acc * gmpy2.powmod(b if e >= 0 else gmpy2.invert(b, nsq), abs(e), nsq) % nsq
        out.append(int(acc))
    return out


def exponents(rng, slots: int, n: int, columns: int) -> np.ndarray:
    E = np.rint(rng.normal(scale=2.0**14, size=(slots, n, columns))).astype(np.int64)
    E[:, :, 0] = 0  # a column of zeros
    E[0, 0, 1] = 2**26 + 5  # rare large exponents of both signs: kept apart from the offset rows
    E[-1, n - 1, 1] = -(2**25) - 3
    E[:, -1, 2] = 0  # a short last group: positions beyond the last row are zeros
    return E


@pytest.mark.parametrize("slots, n", [(1, 37), (3, 20), (5, 9), (4, 1)])
def test_tables_give_the_bucket_method_ciphertexts(djn_pair, slots, n):
    pk, _ = djn_pair
    rng = np.random.default_rng(slots * 100 + n)
    vector = pk.encrypt(rng.normal(size=n), frac_bits=20)
    bases = [gmpy2.mpz(c) for c in vector.ciphertexts.tolist()]
    E = exponents(rng, slots, n, 4)
    width = 40
    nsq = gmpy2.mpz(pk.nsquare)
    assert [int(c) for c in products.table_matvec(bases, E, width=width, modulus=nsq)] == \
        bucket_reference(bases, E, width, nsq)


def test_rows_wider_than_a_slot_are_refused_and_priced_out(djn_pair):
    pk, _ = djn_pair
    vector = pk.encrypt(np.ones(3), frac_bits=0)
    E = np.full((2, 3, 1), 2**20, dtype=np.int64)
    with pytest.raises(ValueError, match="do not fit 8-bit slots"):
        products.table_matvec([gmpy2.mpz(c) for c in vector.ciphertexts.tolist()], E, width=8,
                              modulus=gmpy2.mpz(pk.nsquare))
    assert costs.table_cost(E, 8) == float("inf")


def test_the_dispatch_changes_the_method_not_the_ciphertexts(djn_pair, monkeypatch):
    pk, sk = djn_pair
    rng = np.random.default_rng(7)
    X = rng.normal(size=(100, 30))  # many columns: the tables are estimated cheaper
    vector = pk.encrypt(rng.normal(size=100), frac_bits=20)
    E = np.rint(np.ldexp(X, 16)).astype(np.int64)[None]
    assert costs.table_cost(E, 0) < costs.bucket_cost(E, 0)
    by_tables = vector.matvec(X, frac_bits=16)
    monkeypatch.setattr(EncryptedVector, "matvec_planned", lambda self, *a, **k: None)
    by_buckets = vector.matvec(X, frac_bits=16)
    assert by_tables.ciphertexts.tolist() == by_buckets.ciphertexts.tolist()
    assert by_tables.frac_bits == by_buckets.frac_bits == 36
    np.testing.assert_allclose(sk.decrypt(by_tables), X.T @ pk.decode(
        sk.decrypt_encoded(vector), frac_bits=20), rtol=1e-4)


def test_few_columns_stay_with_the_bucket_method(djn_pair):
    pk, _ = djn_pair
    vector = pk.encrypt(np.ones(500), frac_bits=0)
    X = np.random.default_rng(1).normal(size=(500, 1))
    E = np.rint(np.ldexp(X, 16)).astype(np.int64)[None]
    assert costs.table_cost(E, 0) > costs.bucket_cost(E, 0)  # one column: nothing to share
    assert vector.matvec_planned(X, frac_bits=16) is None


def discrete(rng, slots: int, n: int, columns: int) -> np.ndarray:
    """Exponents of few distinct values (categorical features), signed, with zeros and one rare value."""
    levels = np.rint(rng.normal(scale=2.0**15, size=6)).astype(np.int64)
    E = rng.choice(levels, size=(slots, n, columns))
    E[:, ::3, 0] = 0
    E[0, 0, 1] = 2**27 + 1  # a value no other row has
    E[:, :, 2] = 5  # one positive value only
    E[:, :, 3] = -(2**16)  # one negative value only
    return E


@pytest.mark.parametrize("slots, n", [(1, 37), (3, 20), (7, 9), (4, 1)])
def test_value_buckets_give_the_bucket_method_ciphertexts(djn_pair, slots, n):
    pk, _ = djn_pair
    rng = np.random.default_rng(slots * 10 + n)
    bases = [gmpy2.mpz(c) for c in pk.encrypt(rng.normal(size=n), frac_bits=20).ciphertexts.tolist()]
    nsq = gmpy2.mpz(pk.nsquare)
    for E in (discrete(rng, slots, n, 5), exponents(rng, slots, n, 4)):  # few values, and continuous ones
        assert [int(c) for c in products.value_matvec(bases, E, width=40, modulus=nsq)] == \
            bucket_reference(bases, E, 40, nsq)


def test_the_plan_sends_few_valued_columns_to_buckets_and_keeps_the_ciphertexts(djn_pair):
    pk, _ = djn_pair
    rng = np.random.default_rng(3)
    slots, n, width = 5, 60, 64
    bases = [gmpy2.mpz(c) for c in pk.encrypt(rng.normal(size=n), frac_bits=20).ciphertexts.tolist()]
    nsq = gmpy2.mpz(pk.nsquare)
    continuous = np.rint(rng.normal(scale=2.0**16, size=(slots, n, 12))).astype(np.int64)
    binary = rng.choice(np.array([-40000, 52000]), size=(slots, n, 3))
    E = np.concatenate([continuous[:, :, :6], binary, continuous[:, :, 6:]], axis=2)
    chosen = costs.plan(E, width)
    assert chosen.values == (6, 7, 8) and chosen.tables == (*range(6), *range(9, 15))
    assert chosen.cost < costs.table_cost(E, width)  # cheaper than every column by tables
    assert [int(c) for c in products.planned_matvec(bases, E, chosen, width=width, modulus=nsq)] == \
        [int(c) for c in products.table_matvec(bases, E, width=width, modulus=nsq)]


def test_a_product_of_few_valued_columns_is_shared_by_columns_and_of_continuous_ones_by_rows():
    rng = np.random.default_rng(5)
    slots, n, width = 7, 429, 152
    binary = rng.choice(np.array([-40000, 52000]), size=(slots, n, 10))
    theirs = costs.split_product(binary, width)  # no tables to build twice: the columns, balanced
    assert theirs is not None and len(theirs) == 5
    continuous = np.rint(rng.normal(scale=2.0**16, size=(slots, n, 12))).astype(np.int64)
    assert costs.split_product(continuous, width) is None  # one set of tables each: the ciphertexts
    assert costs.split_product(continuous[:, :1], width) is not None  # one ciphertext: the columns
