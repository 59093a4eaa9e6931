"""Public keys and vectors arriving over the network are checked (issue 12, "Nothing silent").

A key holder who sends a weak key (h_s of order 2, a structured or perfect-power modulus, ...) or a vector
with an absurd scale is refused with a named error that shows the offending value. 512-bit keys keep it fast.
"""

from __future__ import annotations

import warnings

import gmpy2
import pytest

from ppml import network
from ppml.crypto import paillier
from ppml.crypto.paillier import (CiphertextError, KeyLengthWarning, PublicKey, PublicKeyError,
                                  generate_keypair, receive_vector)

BITS = 512


def _wire(n, scheme="djn", h_s=None):
    return {"n": n, "scheme": scheme, "h_s": h_s}


def _prime(bits: int, seed: int) -> int:
    return int(gmpy2.next_prime((1 << (bits - 1)) + seed * 7919 + (1 << (bits - 3))))


def test_a_genuine_key_is_accepted(djn_pair):
    pk, sk = djn_pair
    got = PublicKey.from_wire(pk.to_wire())
    assert got == pk
    assert network.decode(network.encode(pk)[0]) == pk
    assert sk.decrypt(got.encrypt([1.5, -2.25], frac_bits=8)).tolist() == [1.5, -2.25]
    textbook = PublicKey.from_wire(_wire(pk.n, "textbook"))
    assert textbook.scheme == "textbook"


@pytest.mark.parametrize("make_h_s, message", [
    (lambda pk, sk: pk.nsquare - 1, r"order 2 \(h_s\^2 = 1 mod n\^2\)"),  # -1: every value readable
    (lambda pk, sk: 1, r"h_s must lie in \(1, n\^2\), got 1"),
    (lambda pk, sk: pk.nsquare, r"h_s must lie in \(1, n\^2\), got 0x"),
    (lambda pk, sk: 0, r"h_s must lie in \(1, n\^2\), got 0"),
    (lambda pk, sk: sk.phe_key.p * 12345, "shares a factor with n"),
    (lambda pk, sk: float(pk.h_s), "h_s must be an integer"),
    (lambda pk, sk: str(pk.h_s), "h_s must be an integer"),
    (lambda pk, sk: None, "needs the public base h_s"),
])
def test_bad_djn_bases_are_refused(djn_pair, make_h_s, message):
    pk, sk = djn_pair
    with pytest.raises(PublicKeyError, match=message):
        PublicKey.from_wire(_wire(pk.n, h_s=make_h_s(pk, sk)))


def _order_three_unit() -> tuple[int, int]:
    """(n, y): a modulus n = p q with 3 | p - 1 and a unit y of order 3 mod n^2 (a cube root of 1 mod p^2, 1 mod
    q^2, joined by the CRT)."""
    p = _prime(256, seed=1)
    while p % 3 != 1:
        p = int(gmpy2.next_prime(p))
    q = _prime(256, seed=2)
    n, psq, qsq = p * q, p * p, q * q
    x = next(x for g in range(2, 50) if (x := pow(g, (p - 1) * p // 3, psq)) != 1)  # order 3 mod p^2
    return n, (x * qsq * int(gmpy2.invert(qsq, psq)) + psq * int(gmpy2.invert(psq, qsq))) % (n * n)


def test_small_order_base_is_refused():
    """h_s of order 3 (the cube roots of 1 mod p^2 exist when 3 | p - 1): obfuscators take 3 values."""
    n, h_s = _order_three_unit()
    assert pow(h_s, 3, n * n) == 1 and pow(h_s, 2, n * n) != 1
    with pytest.raises(PublicKeyError, match=r"has a small order \(dividing lcm\(1, \.\.\., 1024\)\)"):
        PublicKey.from_wire(_wire(n, h_s=h_s))
    genuine = paillier._djn_base(n)  # the same modulus with a base of large order is fine
    assert PublicKey.from_wire(_wire(n, h_s=genuine)).h_s == genuine


def test_modulus_next_to_a_power_of_two_is_refused(monkeypatch):
    monkeypatch.setattr(paillier, "MIN_KEY_BITS", 1024)
    n = (1 << 1024) + 1
    for scheme, h_s in (("djn", 5), ("textbook", None), ("plaintext", None)):
        with pytest.raises(PublicKeyError, match=r"n = 0x10000000\.\.\.000001 \(1025 bits\) lies within "
                                                 r"2\^961 of a power of two"):
            PublicKey.from_wire(_wire(n, scheme, h_s))
    with pytest.raises(PublicKeyError, match="power of two"):
        PublicKey.from_wire(_wire((1 << 1024) - 3, "textbook"))


@pytest.mark.parametrize("power", [2, 3])
def test_perfect_power_modulus_is_refused(power):
    p = _prime(600 // power + 8, seed=power)
    n = p ** power
    with pytest.raises(PublicKeyError, match=r"is a perfect power"):
        PublicKey.from_wire(_wire(n, "textbook"))
    with pytest.raises(PublicKeyError, match=r"is a perfect power"):
        PublicKey.from_wire(_wire(n, "djn", 4))


def test_modulus_with_a_small_factor_is_refused():
    n = 3 * _prime(600, seed=1)
    with pytest.raises(PublicKeyError, match=r"has the small factor 3"):
        PublicKey.from_wire(_wire(n, "textbook"))


def test_even_modulus_is_refused(djn_pair):
    pk, _ = djn_pair
    with pytest.raises(PublicKeyError, match=r"must be an odd integer > 2, got 0x"):
        PublicKey.from_wire(_wire(pk.n + 1, "textbook"))
    for bad in (True, 2.0 * 3, "12345", -pk.n):
        with pytest.raises(PublicKeyError, match="odd integer"):
            PublicKey.from_wire(_wire(bad, "textbook"))


def test_short_modulus_is_refused(djn_pair, monkeypatch):
    pk, _ = djn_pair
    monkeypatch.setattr(paillier, "MIN_KEY_BITS", 1024)
    with pytest.raises(PublicKeyError, match=r"too short: key length bits must be >= 1024, got 512"):
        PublicKey.from_wire(pk.to_wire())
    # through the codec: the key's own error, or the codec's error quoting it
    with pytest.raises((PublicKeyError, network.WireError), match="PublicKeyError|too short"):
        network.decode(network.encode(pk)[0])


def test_malformed_key_payloads_are_refused(djn_pair):
    pk, _ = djn_pair
    with pytest.raises(PublicKeyError, match="keys n, scheme, h_s"):
        PublicKey.from_wire({"n": pk.n, "scheme": "djn"})
    with pytest.raises(PublicKeyError, match="scheme must be one of"):
        PublicKey.from_wire(_wire(pk.n, "rsa"))
    with pytest.raises(PublicKeyError, match="only part of a djn key"):
        PublicKey.from_wire(_wire(pk.n, "textbook", pk.h_s))


@pytest.mark.parametrize("frac_bits", [10**9, paillier.MAX_FRAC_BITS + 1, -1, True, 3.0, "8"])
def test_absurd_frac_bits_on_the_wire_are_refused(djn_pair, frac_bits):
    pk, _ = djn_pair
    payload = pk.encrypt([1.0, 2.0], frac_bits=8).to_wire()
    payload["frac_bits"] = frac_bits
    with pytest.raises(CiphertextError, match=rf"frac_bits in \[0, {paillier.MAX_FRAC_BITS}\], got"):
        receive_vector(payload, pk)


def test_largest_frac_bits_is_accepted(djn_pair):
    pk, sk = djn_pair
    payload = pk.encrypt([0.0, 1.0], frac_bits=8).to_wire()
    payload["frac_bits"] = paillier.MAX_FRAC_BITS
    assert receive_vector(payload, pk).frac_bits == paillier.MAX_FRAC_BITS
    with pytest.raises(ValueError, match=r"frac_bits must be an integer in \[0, 1024\], got 1025"):
        pk.encrypt([1.0], frac_bits=paillier.MAX_FRAC_BITS + 1)


def test_plaintext_keys_do_not_warn_about_their_length():
    with warnings.catch_warnings():
        warnings.simplefilter("error", KeyLengthWarning)
        pk, sk = generate_keypair(BITS, scheme="plaintext")
    assert not pk.encrypted
    with pytest.warns(KeyLengthWarning):
        generate_keypair(BITS, scheme="djn")


# --- issue 18: bases in the (1 + n) subgroup, prime and over-long moduli ------------------------------------


@pytest.mark.parametrize("make_h_s, sign", [
    pytest.param(lambda n: n + 1, "", id="1+n"),  # (1 + n)^alpha = 1 + alpha n
    pytest.param(lambda n: n * n - n - 1, "-", id="-(1+n)"),
    pytest.param(lambda n: pow(n + 1, 5, n * n), "", id="(1+n)^5"),
    pytest.param(lambda n: pow(n + 1, (1 << 200) + 3, n * n), "", id="(1+n)^t, t beyond any plaintext"),
    pytest.param(lambda n: n * n - pow(n + 1, 7, n * n), "-", id="-(1+n)^7"),
])
def test_bases_in_the_one_plus_n_subgroup_are_refused(djn_pair, make_h_s, sign):
    """h_s = +-(1 + n)^t passes the order checks mod n^2 (its order is n), yet an encryption under it is
    1 + (m + t alpha) n: m + t alpha in the clear."""
    pk, _ = djn_pair
    h_s = make_h_s(pk.n)
    nsq = pk.nsquare
    assert pow(h_s, 2, nsq) != 1 and pow(h_s, paillier._SMOOTH_EXPONENT, nsq) != 1  # the old checks pass
    with pytest.raises(PublicKeyError, match=rf"h_s = 0x.* is {sign}1 mod n: it lies in the subgroup "
                                             r"generated by 1 \+ n \(up to sign\)"):
        PublicKey.from_wire(_wire(pk.n, h_s=h_s))


def test_base_of_small_order_mod_n_is_refused():
    """h_s = y (1 + n), y of order 3: of order 3n mod n^2 (passes those checks) but of order 3 mod n."""
    n, y = _order_three_unit()
    h_s = y * (n + 1) % (n * n)
    assert pow(h_s, paillier._SMOOTH_EXPONENT, n * n) != 1 and h_s % n not in (1, n - 1)
    with pytest.raises(PublicKeyError, match=r"has a small order mod n \(dividing lcm\(1, \.\.\., 1024\)\): "
                                             r"its obfuscators are few values times powers of 1 \+ n"):
        PublicKey.from_wire(_wire(n, h_s=h_s))


@pytest.mark.parametrize("scheme", ["djn", "textbook"])
def test_prime_modulus_is_refused(scheme):
    n = _prime(512, seed=3)
    h_s = 4 if scheme == "djn" else None
    with pytest.raises(PublicKeyError, match=r"n = 0x.* \(512 bits\) is prime, not a Paillier modulus: "
                                             r"phi\(n\) = n - 1 is public"):
        PublicKey.from_wire(_wire(n, scheme, h_s))


@pytest.mark.parametrize("scheme, h_s", [("djn", 4), ("textbook", None), ("plaintext", None)])
def test_over_long_modulus_is_refused_before_any_arithmetic(scheme, h_s):
    """A 2^20-bit modulus (encryption under it would stall the other parties) is refused at once."""
    import time

    n = (1 << (1 << 20) - 1) + (1 << 1000) + 1
    start = time.perf_counter()
    with pytest.raises(PublicKeyError, match=r"\(1048576 bits\) is too long: key length bits must be "
                                             r"<= 8192, got 1048576"):
        PublicKey.from_wire(_wire(n, scheme, h_s))
    with pytest.raises(network.WireError, match="too long"):  # arriving through the codec
        network.decode(network.encode(_forged(n, scheme, h_s))[0])
    assert time.perf_counter() - start < 1.0


def test_key_length_bounds_of_own_keys():
    n = paillier.secrets.randbits(paillier.MAX_KEY_BITS) | 1 << (paillier.MAX_KEY_BITS - 1) | (1 << 4000) | 1
    assert PublicKey(n, scheme="plaintext").bits == paillier.MAX_KEY_BITS == 8192  # the longest is fine
    with pytest.raises(PublicKeyError, match="too long"):
        PublicKey(n << 1 | 1, scheme="plaintext")
    with pytest.raises(ValueError, match=r"key length bits must be <= 8192, got 8193"):
        generate_keypair(paillier.MAX_KEY_BITS + 1, scheme="plaintext")


def _forged(n, scheme, h_s):
    """A PublicKey object whose fields were never checked, as a hostile key holder's program could send."""
    key = object.__new__(PublicKey)
    key.n, key.scheme, key.h_s = n, scheme, h_s
    return key
