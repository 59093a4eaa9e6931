"""Eight exponentiations per call through crypto_mb, and fixed-base ones through its Montgomery product: the
same integers as gmpy2.powmod, whichever way is taken."""

import warnings

import gmpy2
import numpy as np
import pytest
from gmpy2 import mpz

from ppml.crypto import multibuffer
from ppml.crypto.paillier import KeyLengthWarning, generate_keypair

needs_library = pytest.mark.skipif(not multibuffer.enabled(),
                                   reason="crypto_mb not installed or no AVX-512 IFMA on this processor")


def _odd_modulus(rng: np.random.Generator, bits: int) -> mpz:
    words = rng.integers(0, 2**63, size=-(-bits // 63)).tolist()
    value = sum(w << (63 * i) for i, w in enumerate(words)) & ((1 << bits) - 1)
    return mpz(value | (1 << (bits - 1)) | 1)


def _below(rng: np.random.Generator, modulus: mpz, count: int) -> list:
    bits = modulus.bit_length()
    return [_odd_modulus(rng, bits) % modulus for _ in range(count)]


@pytest.fixture
def always_batched(monkeypatch):
    """Every group of exponentiations through the library, whatever the cost model says."""
    monkeypatch.setattr(multibuffer, "_faster", lambda size, lengths: True)


@needs_library
@pytest.mark.parametrize("bits", [1000, 1024, 2047, 2048, 3072, 4095, 4096])
def test_batched_powers_equal_gmpy2(always_batched, bits):
    rng = np.random.default_rng(bits)
    modulus = _odd_modulus(rng, bits)
    for count in (1, 2, 7, 8, 9, 17):
        bases = _below(rng, modulus, count)
        exps = [mpz(int(rng.integers(0, 2**62))) << int(rng.integers(0, bits - 62)) for _ in range(count)]
        exps[0] = mpz(0)  # x^0 = 1
        if count > 1:
            exps[1] = mpz(1)
        assert multibuffer.powmod_list(bases, exps, modulus) == [gmpy2.powmod(b, e, modulus)
                                                                 for b, e in zip(bases, exps)]


@needs_library
def test_exponents_up_to_the_modulus_length(always_batched):
    rng = np.random.default_rng(5)
    modulus = _odd_modulus(rng, 2048)
    bases = _below(rng, modulus, 8)
    exps = [modulus - 1 - i for i in range(8)]  # as long as the modulus: still through the library
    assert multibuffer.powmod_list(bases, exps, modulus) == [gmpy2.powmod(b, e, modulus)
                                                             for b, e in zip(bases, exps)]


def test_outside_the_library_gmpy2_gives_the_same(always_batched):
    """Sizes the library lacks, even moduli, exponents longer than the modulus, bases not reduced: gmpy2."""
    rng = np.random.default_rng(11)
    cases = []
    m = _odd_modulus(rng, 1500)  # no such size
    cases.append((m, _below(rng, m, 8), [mpz(3) ** 40] * 8))
    m = _odd_modulus(rng, 2048) + 1  # even
    cases.append((m, _below(rng, m, 8), [mpz(12345)] * 8))
    m = _odd_modulus(rng, 1024)
    cases.append((m, _below(rng, m, 8), [m * m + 1] * 8))  # longer than the modulus
    cases.append((m, [b + m for b in _below(rng, m, 8)], [mpz(99)] * 8))  # bases >= modulus
    for modulus, bases, exps in cases:
        assert multibuffer.powmod_list(bases, exps, modulus) == [gmpy2.powmod(b, e, modulus)
                                                                 for b, e in zip(bases, exps)]


def test_switched_off_by_the_environment(monkeypatch):
    monkeypatch.setenv("PPML_MULTIBUFFER", "0")
    monkeypatch.setattr(multibuffer, "_loaded", False)
    monkeypatch.setattr(multibuffer, "_library", None)
    assert not multibuffer.enabled()
    rng = np.random.default_rng(3)
    modulus = _odd_modulus(rng, 2048)
    bases = _below(rng, modulus, 9)
    assert multibuffer.powmod_list(bases, [mpz(2**200 + 1)] * 9, modulus) == \
        [gmpy2.powmod(b, 2**200 + 1, modulus) for b in bases]


def test_mismatched_lengths_refused():
    with pytest.raises(ValueError, match="3 bases for 2 exponents"):
        multibuffer.powmod_list([mpz(2)] * 3, [mpz(1)] * 2, mpz(1 << 1023 | 1))


def test_cost_model_keeps_short_or_lone_exponents_with_gmpy2():
    assert not multibuffer._faster(4096, [20])  # one short exponent: the call's fixed cost dominates
    assert not multibuffer._faster(4096, [20, 20, 20])
    assert multibuffer._faster(4096, [133] * 6)  # the products' Horner steps between slots
    assert multibuffer._faster(2048, [1024])  # one half-decryption of a 2048-bit key


@needs_library
def test_decryption_through_the_library_equals_phe(always_batched):
    """The key holder's CRT decryptions (two exponentiations per ciphertext) go through the library."""
    rng = np.random.default_rng(2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", KeyLengthWarning)
        pk, sk = generate_keypair(1024)
    values = rng.normal(size=11)
    enc = pk.encrypt(values, frac_bits=30)
    phe_key = sk.phe_key
    expected = [phe_key.raw_decrypt(int(c)) for c in enc.ciphertexts]
    n = pk.n
    assert [int(m) % n for m in sk.decrypt_encoded(enc)] == expected


def _powers_by_gmpy2(base, modulus, digits, window):
    alphas = [sum(int(d) << (window * i) for i, d in enumerate(row)) for row in digits]
    return [gmpy2.powmod(base, alpha, modulus) for alpha in alphas]


@needs_library
@pytest.mark.parametrize("bits", [1000, 1024, 2048, 3072, 4033, 4096])
def test_fixed_base_powers_equal_gmpy2(bits):
    rng = np.random.default_rng(bits)
    modulus = _odd_modulus(rng, bits)
    base = _below(rng, modulus, 1)[0]
    for window, rows in ((1, 3), (4, 9), (7, 2)):
        table = multibuffer.fixed_base(base, modulus, rows=rows, window=window)
        assert table is not None and table.rows == rows
        for count in (0, 1, 7, 8, 9, 17):
            digits = rng.integers(0, 1 << window, size=(count, rows))
            assert table.powers(digits) == _powers_by_gmpy2(base, modulus, digits, window)
    extremes = np.array([[0, 0, 0], [127, 127, 127], [0, 127, 1]])  # alpha 0, the largest, mixed
    table = multibuffer.fixed_base(base, modulus, rows=3, window=7)
    assert table.powers(extremes) == _powers_by_gmpy2(base, modulus, extremes, 7)


@needs_library
def test_fixed_base_refuses_digits_outside_its_table():
    rng = np.random.default_rng(5)
    modulus = _odd_modulus(rng, 2048)
    table = multibuffer.fixed_base(mpz(3), modulus, rows=4, window=3)
    with pytest.raises(ValueError, match=r"shape \(count, 4\)"):
        table.powers(np.zeros((2, 5), dtype=np.int64))
    for bad in (8, -1):
        with pytest.raises(ValueError, match=r"\[0, 2\^3\)"):
            table.powers(np.full((1, 4), bad))


def test_fixed_base_none_where_the_library_cannot(monkeypatch):
    rng = np.random.default_rng(9)
    assert multibuffer.fixed_base(mpz(3), _odd_modulus(rng, 1500), rows=2, window=2) is None  # no such size
    assert multibuffer.fixed_base(mpz(3), _odd_modulus(rng, 2048) + 1, rows=2, window=2) is None  # even
    monkeypatch.setattr(multibuffer, "_amm", lambda digits: None)  # the multiplication not exported
    assert multibuffer.fixed_base(mpz(3), _odd_modulus(rng, 2048), rows=2, window=2) is None
    monkeypatch.undo()
    monkeypatch.setenv("PPML_MULTIBUFFER", "0")
    monkeypatch.setattr(multibuffer, "_loaded", False)
    monkeypatch.setattr(multibuffer, "_library", None)
    assert multibuffer.fixed_base(mpz(3), _odd_modulus(rng, 2048), rows=2, window=2) is None


def test_digits_round_trip():
    rng = np.random.default_rng(4)
    for count in (1, 20, 40, 79):
        values = [mpz(0), (mpz(1) << (52 * count)) - 1]
        values += [_odd_modulus(rng, 52 * count - 1) for _ in range(5)]
        digits = multibuffer.to_digits(values, count)
        assert digits.shape == (len(values), count) and int(digits.max()) < 1 << 52
        assert multibuffer.from_digits(digits) == values
    with pytest.raises(ValueError, match="52 bits"):
        multibuffer.from_digits(np.full((1, 2), 1 << 52, dtype=np.uint64))
