"""Tests of ppml.crypto.paillier: exactness against integer references, phe interoperability, rejections.

512-bit keys (below the production minimum, allowed here by lowering MIN_KEY_BITS for this module) keep the
file fast; one slow-marked test uses a 2048-bit key.
"""

from __future__ import annotations

import warnings

import gmpy2
import numpy as np
import phe
import pytest
import scipy.sparse as sp

from ppml import network
from ppml.crypto import costs, multibuffer, paillier, products
from ppml.crypto.paillier import (CiphertextError, EncodingOverflowError, EncryptedVector, KeyLengthWarning,
                                  PublicKey, generate_keypair, receive_vector)

BITS = 512


@pytest.fixture(scope="module")
def keys():
    """One 512-bit key pair per scheme, sharing the modulus between djn and textbook."""
    with pytest.MonkeyPatch.context() as mp, warnings.catch_warnings():
        mp.setattr(paillier, "MIN_KEY_BITS", 256)
        warnings.simplefilter("ignore", KeyLengthWarning)
        djn_pk, djn_sk = generate_keypair(BITS, scheme="djn")
        plain_pk, plain_sk = generate_keypair(BITS, scheme="plaintext")
        textbook_pk = PublicKey(djn_pk.n, scheme="textbook")
        yield {"djn": (djn_pk, djn_sk), "textbook": (textbook_pk, djn_sk), "plaintext": (plain_pk, plain_sk)}


def _values(rng, size):
    """Floats of every kind: signs, zero, large, tiny."""
    v = rng.normal(size=size) * 10.0 ** rng.integers(-6, 7, size=size)
    v[:4] = [0.0, 1e12, -3e-9, -123456.789]
    return v


def _exact(ints, frac_bits):
    return np.array([m / (1 << frac_bits) for m in ints])


SCHEMES = ["djn", "textbook", "plaintext"]


@pytest.mark.parametrize("scheme", SCHEMES)
def test_roundtrip(keys, scheme):
    pk, sk = keys[scheme]
    v = _values(np.random.default_rng(1), 40)
    enc = pk.encrypt(v, frac_bits=48)
    out = sk.decrypt(enc)
    assert out.dtype == np.float64 and len(enc) == 40
    np.testing.assert_allclose(out, v, rtol=0, atol=2.0**-49)
    np.testing.assert_array_equal(out, _exact(pk.encode(v, frac_bits=48), 48))
    assert list(sk.decrypt_encoded(enc)) == list(pk.encode(v, frac_bits=48))
    assert sk.decrypt(pk.encrypt(2.5, frac_bits=0)).tolist() == [2.0]  # round half to even


@pytest.mark.parametrize("scheme", SCHEMES)
def test_arithmetic_is_exact_in_the_encoding(keys, scheme):
    pk, sk = keys[scheme]
    rng = np.random.default_rng(2)
    a, b, w = rng.normal(size=(3, 30))
    ea, eb = pk.encrypt(a, frac_bits=30), pk.encrypt(b, frac_bits=20)
    ma, mb = pk.encode(a, frac_bits=30), pk.encode(b, frac_bits=20)
    mw = pk.encode(w, frac_bits=16)
    shift = 1 << 10  # eb is rescaled to ea's 30 fractional bits
    cases = {
        "add": (ea + eb, ma + mb * shift, 30),
        "sub": (ea - eb, ma - mb * shift, 30),
        "neg": (-ea, -ma, 30),
        "add plain": (ea + w, ma + pk.encode(w, frac_bits=30), 30),
        "radd scalar": (1.5 + ea, ma + (3 << 29), 30),
        "rsub plain": (w - ea, pk.encode(w, frac_bits=30) - ma, 30),
        "mul vector": (ea.mul(w, frac_bits=16), ma * mw, 46),
        "mul negative scalar": (eb.mul(-0.75, frac_bits=2), mb * -3, 22),
        "mul zero": (ea.mul(0.0, frac_bits=8), ma * 0, 38),
        "sum": (ea.sum(), np.array([ma.sum()], dtype=object), 30),
        "slice": (ea[3:9], ma[3:9], 30),
        "index array": (ea[np.array([5, 0, 5])], ma[[5, 0, 5]], 30),
        "concat": (EncryptedVector.concat([eb[:2], ea[:3]]), np.concatenate([mb[:2] * shift, ma[:3]]), 30),
    }
    for name, (enc, expected, frac_bits) in cases.items():
        assert enc.frac_bits == frac_bits, name
        assert list(sk.decrypt_encoded(enc)) == list(expected), name
    np.testing.assert_allclose(sk.decrypt(ea.mul(w, frac_bits=16)), a * w, atol=1e-4)
    np.testing.assert_allclose(sk.decrypt(ea - eb), a - b, atol=1e-6)


def _matrix(rng, shape, density=0.6):
    X = rng.normal(size=shape) * 4.0
    X[rng.random(shape) > density] = 0.0
    return X


@pytest.mark.parametrize("scheme", SCHEMES)
@pytest.mark.parametrize("rows", [1, 7, 90])
def test_matvec_matches_integer_reference(keys, scheme, rows):
    pk, sk = keys[scheme]
    rng = np.random.default_rng(rows)
    v = rng.normal(size=rows)
    X = _matrix(rng, (rows, 4))
    X[:, 3] = 0.0  # an all-zero column: the encrypted zero
    enc = pk.encrypt(v, frac_bits=24)
    dense = enc.matvec(X, frac_bits=20)
    mv = pk.encode(v, frac_bits=24)
    E = np.array([pk.encode(col, frac_bits=20) for col in X.T])
    assert dense.frac_bits == 44 and len(dense) == 4
    assert list(sk.decrypt_encoded(dense)) == [int(np.dot(e, mv)) for e in E]
    np.testing.assert_allclose(sk.decrypt(dense), X.T @ v, atol=rows * 1e-5)
    # Same encodings, same multi-exponentiation: the sparse path gives the very same ciphertexts.
    sparse = enc.matvec(sp.csr_array(X), frac_bits=20)
    assert list(sparse.ciphertexts) == list(dense.ciphertexts)


def test_matvec_with_long_exponents(keys):
    """Encodings beyond int64 take the object-array path."""
    pk, sk = keys["djn"]
    rng = np.random.default_rng(3)
    v, X = rng.normal(size=12), _matrix(rng, (12, 3)) * 1e6
    out = pk.encrypt(v, frac_bits=10).matvec(X, frac_bits=62)
    E = np.array([pk.encode(col, frac_bits=62) for col in X.T])
    assert list(sk.decrypt_encoded(out)) == [int(np.dot(e, pk.encode(v, frac_bits=10))) for e in E]


@pytest.mark.parametrize("window", [1, 3, 8])
def test_bucket_multiexp_against_pow(keys, window):
    pk, _ = keys["djn"]
    rng = np.random.default_rng(window)
    bases = [gmpy2.mpz(int(c)) for c in pk.encrypt(rng.normal(size=25), frac_bits=8).ciphertexts]
    exps = rng.integers(0, 2**40, size=25)
    exps[::4] = 0
    reference = 1
    for b, e in zip(bases, exps):
        reference = reference * pow(int(b), int(e), pk.nsquare) % pk.nsquare
    got = products._pippenger(bases, exps, gmpy2.mpz(pk.nsquare), exp_bits=40, window=window)
    assert int(got) == reference
    assert int(products.multiexp(bases, exps, gmpy2.mpz(pk.nsquare))) == reference


def test_multiexp_cuts_rare_large_exponents_and_stays_exact(keys):
    """Standardized features with a few outliers: most exponents 14 bits, three of 30. The cut at a lower
    bit (low parts by buckets, the few high parts apart) gives the exact product."""
    pk, _ = keys["djn"]
    rng = np.random.default_rng(11)
    bases = [gmpy2.mpz(int(c)) for c in pk.encrypt(rng.normal(size=300), frac_bits=8).ciphertexts]
    exps = rng.integers(0, 2**14, size=300)
    exps[[5, 77, 250]] = [2**30 - 1, 2**29 + 12345, 2**25]
    bits, _ = costs.split_bits(exps, 30)
    assert bits < 30  # the cost model does cut here
    reference = 1
    for b, e in zip(bases, exps):
        reference = reference * pow(int(b), int(e), pk.nsquare) % pk.nsquare
    assert int(products.multiexp(bases, exps, gmpy2.mpz(pk.nsquare))) == reference


@pytest.mark.parametrize("scheme", ["djn", "textbook"])
def test_ciphertexts_decrypt_with_phe(keys, scheme):
    pk, sk = keys[scheme]
    v = _values(np.random.default_rng(4), 10)
    enc = pk.encrypt(v, frac_bits=40)
    expected = [int(m) % pk.n for m in pk.encode(v, frac_bits=40)]
    assert [sk.phe_key.raw_decrypt(int(c)) for c in enc.ciphertexts] == expected
    # and the other way: a phe ciphertext (integer 5 carries phe exponent 0) decrypts here
    phe_ct = phe.PaillierPublicKey(pk.n).encrypt(5).ciphertext()
    assert list(sk.decrypt_encoded(EncryptedVector(pk, [phe_ct], 0))) == [5]


def test_djn_and_textbook_combine_under_one_key(keys):
    (djn_pk, sk), (textbook_pk, _) = keys["djn"], keys["textbook"]
    total = djn_pk.encrypt([1.25], frac_bits=4) + textbook_pk.encrypt([2.5], frac_bits=4)
    assert sk.decrypt(total).tolist() == [3.75]


@pytest.mark.parametrize("scheme", ["djn", "textbook"])
def test_fresh_randomness(keys, scheme):
    pk, sk = keys[scheme]
    a, b = pk.encrypt(np.ones(6), frac_bits=8), pk.encrypt(np.ones(6), frac_bits=8)
    cs = list(a.ciphertexts) + list(b.ciphertexts)
    assert len(set(cs)) == 12
    r = a.rerandomize()
    assert not set(r.ciphertexts) & set(cs)
    assert sk.decrypt(r).tolist() == [1.0] * 6
    pk.precompute(4)
    assert pk.pooled == 4
    c = pk.encrypt(np.ones(3), frac_bits=8)
    assert pk.pooled == 1
    d = pk.encrypt(np.ones(3), frac_bits=8)  # the last pooled obfuscator, then new ones
    assert pk.pooled == 0
    assert len(set(c.ciphertexts) | set(d.ciphertexts) | set(cs)) == 18


@pytest.mark.parametrize("table", ["crypto_mb", "gmpy2"])
@pytest.mark.parametrize("window", [1, 5, 8, 12])
def test_djn_obfuscator_is_h_s_to_the_drawn_alpha(keys, window, table, monkeypatch):
    pk, sk = keys["djn"]
    if table == "gmpy2":
        monkeypatch.setattr(paillier, "fixed_base", lambda *args, **kwargs: None)
    elif not multibuffer.enabled():
        pytest.skip("crypto_mb cannot run here")
    key = PublicKey(pk.n, scheme="djn", h_s=pk.h_s)
    key.build_table(window)
    assert isinstance(key._djn_table, multibuffer.FixedBase) == (table == "crypto_mb")
    rows = key._djn_table.rows if table == "crypto_mb" else len(key._djn_table)
    assert rows * window >= (pk.bits + 1) // 2  # alpha has at least ceil(bits/2) bits
    drawn, real = [], paillier._random_digits

    def spy(count, rows, width):
        out = real(count, rows, width)
        drawn.extend(out.tolist())
        return out

    monkeypatch.setattr(paillier, "_random_digits", spy)
    rhos = key._fresh_obfuscators(3)
    assert len(drawn) == 3
    for rho, digits in zip(rhos, drawn):
        assert all(0 <= d < 1 << window for d in digits)
        alpha = sum(d << (window * i) for i, d in enumerate(digits))
        assert rho == gmpy2.powmod(pk.h_s, alpha, pk.nsquare)
    assert sk.decrypt(key.encrypt([1.5, -2.0], frac_bits=8)).tolist() == [1.5, -2.0]


def test_random_digits_are_uniform():
    digits = np.array(paillier._random_digits(6000, 3, 3))  # 9 random bits each, read as 3 digits
    assert digits.shape == (6000, 3) and digits.min() == 0 and digits.max() == 7
    counts = np.bincount(digits.ravel(), minlength=8)
    expected = digits.size / 8
    chi2 = float(((counts - expected) ** 2 / expected).sum())
    assert chi2 < 40  # 7 degrees of freedom: P(chi2 > 40) < 2e-6


def test_table_window_is_checked(keys):
    pk, _ = keys["djn"]
    for bad in (0, 17, 2.0, True, None):
        with pytest.raises(ValueError, match="table window"):
            pk.build_table(bad)
    keys["textbook"][0].build_table(12)  # a no-op for schemes without a table
    assert keys["textbook"][0]._djn_table is None


def test_plaintext_scheme_is_bit_identical(keys):
    rng = np.random.default_rng(5)
    v, w, X = rng.normal(size=20), rng.normal(size=20), _matrix(rng, (20, 3))

    def pipeline(scheme):
        pk, sk = keys[scheme]
        e = pk.encrypt(v, frac_bits=32)
        d = (e.mul(0.25, frac_bits=8) + w - pk.encrypt(w, frac_bits=16)).rerandomize()
        outs = [d, d.matvec(X, frac_bits=24), (-d).sum(), EncryptedVector.concat([d[:2], e[5:]])]
        return [sk.decrypt(o) for o in outs], [list(sk.decrypt_encoded(o)) for o in outs]

    plain_floats, plain_ints = pipeline("plaintext")
    enc_floats, enc_ints = pipeline("djn")
    assert plain_ints == enc_ints
    for a, b in zip(plain_floats, enc_floats):
        np.testing.assert_array_equal(a, b)
    assert keys["plaintext"][0].max_int == keys["djn"][0].max_int


def test_foreign_key_ciphertexts_are_rejected(keys, djn_pair):
    (pk, sk), (opk, _) = keys["djn"], djn_pair
    mine, theirs = pk.encrypt([1.0, 2.0], frac_bits=8), opk.encrypt([1.0, 2.0], frac_bits=8)
    with pytest.raises(CiphertextError, match="do not belong"):
        mine + theirs
    with pytest.raises(CiphertextError, match="do not belong"):
        sk.decrypt(theirs)
    with pytest.raises(CiphertextError, match="do not belong"):
        EncryptedVector.concat([mine, theirs])
    with pytest.raises(CiphertextError, match="do not belong"):
        keys["plaintext"][1].decrypt(mine)
    with pytest.raises(CiphertextError, match="received ciphertexts under key"):
        receive_vector(network.decode(network.encode(theirs)[0]), pk)
    with pytest.raises(CiphertextError, match="received ciphertexts under key"):
        receive_vector(mine.to_wire(), keys["textbook"][0])


def test_values_outside_the_group_are_rejected(keys):
    pk, sk = keys["djn"]
    p = sk.phe_key.p
    wire = pk.encrypt([1.0, 2.0], frac_bits=8).to_wire()
    for bad in (0, pk.nsquare, pk.nsquare + 5, -3, p * 7, pk.n):
        c = wire["c"].copy()
        c[1] = bad
        with pytest.raises(CiphertextError):
            receive_vector({**wire, "c": c}, pk)
    for bad in (3.0, True, "17", None):
        with pytest.raises(CiphertextError, match="must be an integer"):
            EncryptedVector(pk, [int(wire["c"][0]), bad], 8)
    with pytest.raises(CiphertextError, match="residue must lie"):
        EncryptedVector(keys["plaintext"][0], [keys["plaintext"][0].n], 0)


def test_tampered_ciphertext_fails_to_decrypt(keys):
    pk, sk = keys["djn"]
    wire = network.decode(network.encode(pk.encrypt([0.5, -0.5], frac_bits=20))[0])
    c = wire["c"].copy()
    c[0] = (int(c[0]) + 1) % pk.nsquare
    tampered = receive_vector({**wire, "c": c}, pk)  # still in Z*_{n^2}: only decryption can tell
    with pytest.raises(EncodingOverflowError, match="tampered"):
        sk.decrypt(tampered)


@pytest.mark.parametrize("scheme", SCHEMES)
def test_overflow_is_detected(keys, scheme):
    pk, sk = keys[scheme]
    assert pk.max_int == 2 ** (BITS - paillier.GUARD_BITS) - 1
    with pytest.raises(EncodingOverflowError):
        pk.encrypt([2.0 ** (BITS - paillier.GUARD_BITS)], frac_bits=0)
    with pytest.raises(EncodingOverflowError):
        pk.encrypt([1.0], frac_bits=BITS)
    with pytest.raises(EncodingOverflowError):
        pk.encrypt_encoded([pk.max_int + 1])
    assert sk.decrypt(pk.encrypt([2.0 ** 440], frac_bits=0)).tolist() == [2.0 ** 440]
    grown = pk.encrypt([2.0 ** 440], frac_bits=0).mul(2.0 ** 10, frac_bits=0)  # past the safe range, below n
    with pytest.raises(EncodingOverflowError, match="safe range"):
        sk.decrypt(grown)
    wrapped = grown.mul(2.0 ** 100, frac_bits=0)  # past n: wraps around
    with pytest.raises(EncodingOverflowError):
        sk.decrypt(wrapped)


def test_bad_arguments(keys):
    pk, sk = keys["djn"]
    enc = pk.encrypt([1.0, 2.0, 3.0], frac_bits=8)
    with pytest.raises(ValueError, match="frac_bits"):
        pk.encrypt([1.0], frac_bits=-1)
    with pytest.raises(ValueError, match="finite"):
        pk.encrypt([np.nan], frac_bits=8)
    with pytest.raises(ValueError, match="scalar or a vector"):
        pk.encrypt(np.ones((2, 2)), frac_bits=8)
    with pytest.raises(ValueError, match="length 3"):
        enc + np.ones(2)
    with pytest.raises(ValueError, match=r"shape \(3, k\)"):
        enc.matvec(np.ones((2, 2)), frac_bits=8)
    with pytest.raises(ValueError, match="lengths 3 and 2"):
        enc + enc[:2]
    with pytest.raises(TypeError, match="real numbers"):
        enc + np.array([1, 2, 3], dtype=object)
    with pytest.raises(ValueError, match="scheme"):
        generate_keypair(BITS, scheme="rsa")
    with pytest.raises(ValueError, match="h_s"):
        PublicKey(pk.n, scheme="djn")
    with pytest.raises(ValueError, match="count"):
        pk.precompute(-1)
    with pytest.raises(ValueError):
        enc.ciphertexts[0] = 5  # read-only


def test_key_length_policy(monkeypatch):
    monkeypatch.setattr(paillier, "MIN_KEY_BITS", 1024)
    with pytest.raises(ValueError, match="bits must be >= 1024, got 512"):
        generate_keypair(512)
    with pytest.raises(ValueError, match=">= 1024"):
        PublicKey.from_wire({"n": (1 << 512) - 1, "scheme": "plaintext", "h_s": None})
    with pytest.warns(KeyLengthWarning, match="1024-bit"):
        pk, sk = generate_keypair(1024, scheme="djn")
    assert pk.bits == 1024 and sk.decrypt(pk.encrypt([-1.5], frac_bits=4)).tolist() == [-1.5]


def test_wire_roundtrip(keys):
    for scheme in SCHEMES:
        pk, sk = keys[scheme]
        v = np.random.default_rng(6).normal(size=5)
        enc = pk.encrypt(v, frac_bits=30)
        data, n_ciphertexts = network.encode({"grad": enc, "pk": pk})
        got = network.decode(data)
        assert n_ciphertexts == 5
        assert got["pk"] == pk and got["pk"] is not pk
        assert set(got["grad"]) == {"n", "scheme", "frac_bits", "c"}
        back = receive_vector(got["grad"], got["pk"])
        assert back.frac_bits == 30 and list(back.ciphertexts) == list(enc.ciphertexts)
        np.testing.assert_array_equal(sk.decrypt(back), sk.decrypt(enc))
        np.testing.assert_array_equal(sk.decrypt(EncryptedVector.from_wire(got["grad"], pk)), sk.decrypt(enc))


def test_private_key_cannot_cross_the_network(keys):
    with pytest.raises(network.WireError):
        network.encode(keys["djn"][1])


@pytest.mark.slow
def test_full_size_key():
    pk, sk = generate_keypair(2048)
    rng = np.random.default_rng(7)
    v, X = rng.normal(size=60), _matrix(rng, (60, 3))
    enc = pk.encrypt(v, frac_bits=40)
    np.testing.assert_allclose(sk.decrypt(enc), v, atol=2.0**-41)
    assert sk.phe_key.raw_decrypt(int(enc.ciphertexts[0])) == int(pk.encode(v[:1], frac_bits=40)[0]) % pk.n
    out = enc.matvec(X, frac_bits=24)
    E = np.array([pk.encode(col, frac_bits=24) for col in X.T])
    assert list(sk.decrypt_encoded(out)) == [int(np.dot(e, pk.encode(v, frac_bits=40))) for e in E]
