"""Paillier encryption of fixed-point vectors, vectorized over python-paillier keys and gmpy2.

Keys come from :func:`phe.generate_paillier_keypair` (operating-system randomness); the private key object
stays with whoever called :func:`generate_keypair` (the coordinator of a protocol) and cannot cross the
network. Everything else works on whole vectors of raw ciphertexts (Python ints in numpy object arrays)
instead of one :class:`phe.EncryptedNumber` per value:

- encoding: a real v is the integer m = round(v 2^f) for an explicit number of fractional bits f, stored mod n
  (negatives as n - |m|). The safe range is |m| <= 2^(bits - 64): after decryption a value outside it means
  an overflow (or a tampered ciphertext), detected except with probability below 2^-62, and reported as
  :class:`EncodingOverflowError`. Encoding checks the same bound.
- encryption with g = n + 1: c = (1 + m n) rho mod n^2 with a fresh obfuscator rho per ciphertext, either
  ``textbook`` (rho = r^n, r uniform in Z*_n, as phe does) or ``djn`` (default; rho = h_s^alpha with a
  published h_s = (-x^2)^n mod n^2 and a short uniform alpha, computed from a fixed-base table with about
  bits/(2w) multiplications for w-bit digits of alpha (bits/16 by default) instead of a full-length modular
  exponentiation; see :meth:`PublicKey.build_table`; eight at a time through crypto_mb's Montgomery
  multiplication where :mod:`ppml.crypto.multibuffer` runs). Obfuscators come from :mod:`secrets`, never from
  a seeded generator; :meth:`PublicKey.precompute` may fill a pool ahead of time, and each pooled obfuscator
  is used once.
- decryption by the Chinese remainder theorem over p^2 and q^2, as phe does, one call per vector.
- homomorphic operations: sums (ciphertext products), products with fixed-point plaintexts (short
  exponents; negative factors through modular inverses, batch-inverted with one extended gcd per vector),
  and the encrypted matrix-vector product sum_i [v_i] X_ij for every column j, each column by subset-product
  tables shared by the columns, by value buckets (columns of few distinct values), or by a bucket (Pippenger)
  multi-exponentiation, whichever is estimated cheaper (:mod:`ppml.crypto.products`; all give the same
  ciphertexts).
- ``plaintext`` scheme: the same API, encoding, overflow checks and message flow, with the identity in
  place of encryption ("ciphertexts" are the residues m mod n). Protocols use it for their
  ``encrypted: false`` mode; decoded results are bit-identical to the encrypted scheme's.

Vectors cross the network as ``{"n", "scheme", "frac_bits", "c"}`` and are rebuilt by the receiver against
its own copy of the public key (:func:`receive_vector`); a modulus or scheme mismatch, a value outside
Z*_{n^2}, or a ``frac_bits`` outside [0, :data:`MAX_FRAC_BITS`] raises :class:`CiphertextError`.

Every public key is checked when it is built, in particular when it arrives over the network
(:meth:`PublicKey.from_wire`), and a failure raises :class:`PublicKeyError` naming the defect: the modulus
must be odd, of at least :data:`MIN_KEY_BITS` and at most :data:`MAX_KEY_BITS` bits (checked first, before any
arithmetic on it: a 2^20-bit modulus would stall every party that encrypts under it), and not within
2^(bits - GUARD_BITS) of a power of two (there 2^k mod n is small, so overflows wrap onto the safe range
undetected; 2^1024 + 1 is such a modulus). For the Paillier schemes it must also not be a perfect power, nor
have a prime factor below :data:`_SMALL_PRIME_BOUND`, nor be prime (Miller-Rabin; for a prime n,
phi(n) = n - 1 is public and anyone decrypts), and the DJN base must be a unit of Z*_{n^2} of large order:
1 < h_s < n^2, gcd(h_s, n) = 1, h_s^2 != 1 and h_s^k != 1 for every k dividing lcm(1, ...,
:data:`_SMALL_PRIME_BOUND`) (h_s = n^2 - 1, of order 2, would make every "encryption" readable), and the same
for h_s mod n: h_s mod n is neither 1 nor n - 1 and h_s^k mod n != 1 for those k. Modulo n^2 a large order
alone is not enough: a base h_s = y (1 + n)^t with y of small order (h_s = n + 1, -(n + 1), (n + 1)^t) has
order about n, yet its "obfuscators" y^alpha (1 + n)^(t alpha) = y^alpha (1 + t alpha n) turn an encryption
of m into y^j (1 + (m + t alpha) n): anyone who tries the few values of y^j reads m + t alpha in the clear,
hence m mod t (all of m for a t beyond its range). These checks cannot prove that n is a product of two large
primes; they refuse the keys a careless or hostile key holder could most easily send. A receiver also checks a
key against what it expects itself (the scheme and the length its own parameters name: see
:mod:`ppml.algorithms._hetero_lr`). Paillier ciphertexts are malleable: these checks catch mistakes and crude
tampering, they do not authenticate messages.

References
----------
P. Paillier, "Public-key cryptosystems based on composite degree residuosity classes", EUROCRYPT 1999.
I. Damgård, M. Jurik, J. B. Nielsen, "A generalization of Paillier's public-key system with applications to
electronic voting", International Journal of Information Security 9(6), 2010. The ``djn`` obfuscator
rho = h_s^alpha, h_s = (-x^2)^n mod n^2, alpha of ceil(k/2) bits for a k-bit modulus, is their faster
encryption; its semantic security rests on the decisional composite residuosity assumption together with
their assumption that h_s^alpha for such a short alpha cannot be told apart from a uniform element of the
subgroup h_s generates.
python-paillier (``phe``), CSIRO Data61: key generation, CRT decryption, ``g = n + 1``.
N. Pippenger, "On the evaluation of powers and related problems", FOCS 1976: the bucket method of
multi-exponentiation used by :meth:`EncryptedVector.matvec`.
P. L. Montgomery, "Speeding the Pollard and elliptic curve methods of factorization", Mathematics of
Computation 48(177), 1987: simultaneous inversion (one inverse and three products per element).
"""

from __future__ import annotations

import hashlib
import math
import secrets
import warnings
from collections import deque
from typing import Any, Iterable

import gmpy2
import numpy as np
import phe
import scipy.sparse as sp
from gmpy2 import mpz

from ppml.crypto.multibuffer import FixedBase, fixed_base, powmod_list
from ppml.crypto.costs import bucket_cost, plan
from ppml.crypto.products import batch_invert, multiexp, planned_matvec
from ppml.network import register_wire_type

__all__ = [
    "MIN_KEY_BITS", "DEFAULT_KEY_BITS", "MAX_KEY_BITS", "SCHEMES", "GUARD_BITS", "MAX_FRAC_BITS",
    "KeyLengthWarning", "PublicKeyError", "CiphertextError", "EncodingOverflowError",
    "generate_keypair", "PublicKey", "PrivateKey", "EncryptedVector", "receive_vector",
]

# Tests lower MIN_KEY_BITS (monkeypatch) to use 512-bit keys; every check reads it at call time.
MIN_KEY_BITS = 1024
DEFAULT_KEY_BITS = 2048
# Longest modulus a key may have (own or received): an 8192-bit key already makes each encryption about 64
# times as slow as a 2048-bit one; a received 2^20-bit modulus would stall every party encrypting under it.
MAX_KEY_BITS = 8192
# Largest fixed-point scale a vector may carry (own or received): the protocols stay below 128 bits, and a
# larger shift would only cost time and memory (a received frac_bits of 10^9 means a 10^9-bit rescaling).
MAX_FRAC_BITS = 1024
SCHEMES = ("djn", "textbook", "plaintext")
# Bits between the safe plaintext range and the modulus: an overflowed or garbled plaintext is uniform-ish
# mod n, so it falls inside the safe range with probability about 2^(1 - GUARD_BITS).
GUARD_BITS = 64
# Default window (bits per digit of alpha) of the DJN fixed-base table. A w-bit window costs about
# ceil(bits / 2w) products per obfuscator and a table of 2^w ceil(bits / 2w) elements of Z_{n^2}: for 2048-bit
# keys w = 8 is 128 products and 16 MiB, w = 12 is 85 products and 180 MiB (222 MiB in crypto_mb's Montgomery
# form; see PublicKey.build_table).
_DJN_WINDOW = 8
MAX_DJN_WINDOW = 16
_INTEGER_TYPES = (int, np.integer, type(mpz(0)))


class KeyLengthWarning(UserWarning):
    """A key shorter than :data:`DEFAULT_KEY_BITS` bits (allowed from :data:`MIN_KEY_BITS`, but weaker)."""


class PublicKeyError(ValueError):
    """A public key that is malformed or unsafe: a short, even, perfect-power or structured modulus, or a DJN
    base h_s that is not a unit of large order in Z*_{n^2}."""


class CiphertextError(ValueError):
    """A ciphertext from another key or scheme, outside Z*_{n^2}, or not an integer."""


class EncodingOverflowError(OverflowError):
    """A fixed-point value that does not fit the safe plaintext range |m| <= 2^(bits - GUARD_BITS)."""


# ---------------------------------------------------------------------------------------------------------
# keys


def generate_keypair(bits: int = DEFAULT_KEY_BITS, *,
                     scheme: str = "djn") -> tuple["PublicKey", "PrivateKey"]:
    """A fresh key pair from operating-system randomness.

    Parameters
    ----------
    bits : int, default 2048
        Length of the modulus n. Below :data:`MIN_KEY_BITS` is refused; below :data:`DEFAULT_KEY_BITS` warns
        with :class:`KeyLengthWarning` (except for the ``plaintext`` scheme, which encrypts nothing).
    scheme : {"djn", "textbook", "plaintext"}
        How encryptions are randomized (see the module docstring); ``plaintext`` makes keys of the same API
        whose "encryption" is the identity on residues mod n. There n is a random odd `bits`-bit number:
        decoded results do not depend on n (the safe range depends on `bits` only), and a structureless n
        detects overflows as well as a Paillier modulus (2^bits - 1 would wrap powers of two onto small ones).

    Returns
    -------
    public_key, private_key : PublicKey, PrivateKey
        Give the private key only to the role that may decrypt.
    """
    _check_bits(bits)
    _check_scheme(scheme)
    if bits < DEFAULT_KEY_BITS and scheme != "plaintext":  # no encryption, so no key strength to warn about
        warnings.warn(f"a {bits}-bit Paillier key is below the default of {DEFAULT_KEY_BITS} bits",
                      KeyLengthWarning, stacklevel=2)
    if scheme == "plaintext":
        public_key = PublicKey(secrets.randbits(bits) | (1 << (bits - 1)) | 1, scheme=scheme)
        return public_key, PrivateKey(public_key, None)
    phe_public, phe_private = phe.generate_paillier_keypair(n_length=bits)
    n = phe_public.n
    h_s = _djn_base(n) if scheme == "djn" else None
    public_key = PublicKey(n, scheme=scheme, h_s=h_s)
    return public_key, PrivateKey(public_key, phe_private)


def _djn_base(n: int) -> int:
    """h_s = (-x^2)^n mod n^2 for a fresh uniform x in Z*_n: the public base of DJN obfuscators.

    The key holder draws x, publishes h_s with the public key and forgets x.
    """
    n = mpz(n)
    x = _unit_below(n)
    return int(gmpy2.powmod(n - x * x % n, n, n * n))


def _check_bits(bits: Any) -> None:
    if not isinstance(bits, (int, np.integer)) or isinstance(bits, bool):
        raise ValueError(f"key length bits must be an integer, got {bits!r}")
    if bits < MIN_KEY_BITS:
        raise ValueError(f"key length bits must be >= {MIN_KEY_BITS}, got {bits}")
    if bits > MAX_KEY_BITS:
        raise ValueError(f"key length bits must be <= {MAX_KEY_BITS}, got {bits}")


def _check_scheme(scheme: Any) -> None:
    if scheme not in SCHEMES:
        raise ValueError(f"scheme must be one of {', '.join(SCHEMES)}, got {scheme!r}")


def _check_frac_bits(frac_bits: Any) -> int:
    if not _is_int(frac_bits) or not 0 <= frac_bits <= MAX_FRAC_BITS:
        raise ValueError(f"frac_bits must be an integer in [0, {MAX_FRAC_BITS}], got {_abbrev(frac_bits)}")
    return int(frac_bits)


def _is_int(v: Any) -> bool:
    return isinstance(v, _INTEGER_TYPES) and not isinstance(v, (bool, np.bool_))


def _abbrev(v: Any) -> str:
    """A value for an error message: big integers as their leading and trailing hex digits and bit length."""
    if _is_int(v) and abs(int(v)).bit_length() > 64:
        h = hex(int(v))
        return f"{h[:10]}...{h[-6:]} ({abs(int(v)).bit_length()} bits)"
    return f"{v!r:.60}"


# Paillier moduli have no prime factor below this bound, and a DJN base no order dividing
# lcm(1, ..., bound): a gcd and one short exponentiation each.
_SMALL_PRIME_BOUND = 1024
_SMALL_PRIMES = [p for p in range(2, _SMALL_PRIME_BOUND) if gmpy2.is_prime(p)]
_SMALL_PRIMORIAL = math.prod(_SMALL_PRIMES)
# lcm(1, ..., bound): every prime power below the bound
_SMOOTH_EXPONENT = math.prod(p ** int(math.log(_SMALL_PRIME_BOUND - 1, p)) for p in _SMALL_PRIMES)


def _check_public_key(n: Any, scheme: Any, h_s: Any) -> None:
    """PublicKeyError unless (n, scheme, h_s) passes the checks of the module docstring."""
    if scheme not in SCHEMES:
        raise PublicKeyError(f"the public key's scheme must be one of {', '.join(SCHEMES)}, got {scheme!r:.60}")
    if not _is_int(n) or n < 3 or n % 2 == 0:
        raise PublicKeyError(f"the modulus n must be an odd integer > 2, got {_abbrev(n)}")
    n = int(n)
    bits = n.bit_length()
    if bits < MIN_KEY_BITS:
        raise PublicKeyError(f"the modulus n = {_abbrev(n)} is too short: key length bits must be "
                             f">= {MIN_KEY_BITS}, got {bits}")
    if bits > MAX_KEY_BITS:  # before any arithmetic on n: every check below costs more on a longer modulus
        raise PublicKeyError(f"the modulus n = {_abbrev(n)} is too long: key length bits must be "
                             f"<= {MAX_KEY_BITS}, got {bits}")
    r = pow(2, bits, n)  # 2^bits mod n, as a signed residue below: small iff n is close to 2^bits or 2^(bits-1)
    if min(r, n - r) < 1 << (bits - GUARD_BITS):
        raise PublicKeyError(f"the modulus n = {_abbrev(n)} lies within 2^{bits - GUARD_BITS} of a power of two: "
                             "overflows would wrap onto small values undetected")
    if scheme == "plaintext":
        if h_s is not None:
            raise PublicKeyError(f"h_s is only part of a djn key, not of a {scheme} key, got {_abbrev(h_s)}")
        return
    if gmpy2.is_power(n):
        raise PublicKeyError(f"the modulus n = {_abbrev(n)} is a perfect power, not a Paillier modulus")
    small = int(gmpy2.gcd(n, _SMALL_PRIMORIAL))
    if small != 1:
        raise PublicKeyError(f"the modulus n = {_abbrev(n)} has the small factor {small}, not a Paillier modulus")
    # Miller-Rabin: a composite n fails its first round (one exponentiation); only a prime pays for all 25.
    if gmpy2.is_prime(n):
        raise PublicKeyError(f"the modulus n = {_abbrev(n)} is prime, not a Paillier modulus: "
                             "phi(n) = n - 1 is public, so anyone can decrypt")
    if scheme != "djn":
        if h_s is not None:
            raise PublicKeyError(f"h_s is only part of a djn key, not of a {scheme} key, got {_abbrev(h_s)}")
        return
    if h_s is None:
        raise PublicKeyError("the djn scheme needs the public base h_s, got None")
    if not _is_int(h_s):
        raise PublicKeyError(f"h_s must be an integer, got {type(h_s).__name__} {h_s!r:.40}")
    nsq = n * n
    if not 1 < h_s < nsq:
        raise PublicKeyError(f"h_s must lie in (1, n^2), got {_abbrev(h_s)}")
    if gmpy2.gcd(h_s, n) != 1:
        raise PublicKeyError(f"h_s = {_abbrev(h_s)} shares a factor with n: not a unit of Z*_{{n^2}}")
    if gmpy2.powmod(h_s, 2, nsq) == 1:
        raise PublicKeyError(f"h_s = {_abbrev(h_s)} has order 2 (h_s^2 = 1 mod n^2): its obfuscators hide nothing")
    if gmpy2.powmod(h_s, _SMOOTH_EXPONENT, nsq) == 1:
        raise PublicKeyError(f"h_s = {_abbrev(h_s)} has a small order (dividing lcm(1, ..., "
                             f"{_SMALL_PRIME_BOUND})): its obfuscators take few values")
    # Modulo n too (see the module docstring): h_s = +-(1 + n)^t, or y (1 + n)^t for y of small order, passes
    # the checks above, yet an encryption with h_s^alpha shows m + t alpha in the clear.
    residue = h_s % n
    if residue in (1, n - 1):
        raise PublicKeyError(f"h_s = {_abbrev(h_s)} is {'' if residue == 1 else '-'}1 mod n: it lies in the "
                             "subgroup generated by 1 + n (up to sign), whose powers 1 + a n shift the "
                             "plaintext instead of masking it")
    if gmpy2.powmod(residue, _SMOOTH_EXPONENT, n) == 1:
        raise PublicKeyError(f"h_s = {_abbrev(h_s)} has a small order mod n (dividing lcm(1, ..., "
                             f"{_SMALL_PRIME_BOUND})): its obfuscators are few values times powers of 1 + n, "
                             "which do not mask")


def _unit_below(n: mpz) -> mpz:
    """Uniform element of Z*_n from the OS generator (a draw sharing a factor with n would factor n)."""
    while True:
        r = mpz(secrets.randbelow(int(n) - 1) + 1)
        if gmpy2.gcd(r, n) == 1:
            return r


def _textbook_obfuscators(n: mpz, count: int) -> list[mpz]:
    """r^n mod n^2 for fresh uniform r in Z*_n (phe's obfuscation): one full-length exponentiation each."""
    nsq = n * n
    return [gmpy2.powmod(_unit_below(n), n, nsq) for _ in range(count)]


def _djn_rows(bits: int, window: int) -> int:
    """Base-2^window digits of an alpha of at least ceil(bits/2) bits."""
    return -(-((bits + 1) // 2) // window)


def _djn_table(h_s: mpz, nsq: mpz, bits: int, window: int) -> list[list]:
    """table[i][d] = h_s^(d 2^(window i)), d < 2^window, i over the base-2^window digits of an alpha of at
    least ceil(bits/2) bits."""
    table = []
    base = h_s
    for _ in range(_djn_rows(bits, window)):
        row = [mpz(1), base]
        for _ in range(2, 1 << window):
            row.append(row[-1] * base % nsq)
        table.append(row)
        base = row[-1] * base % nsq  # h_s^(2^(window (i+1)))
    return table


def _random_digits(count: int, rows: int, window: int) -> np.ndarray:
    """`count` uniform alphas of rows * window bits from the OS generator, each as its `rows` base-2^window
    digits (least significant first), shape (count, rows)."""
    nbytes = -(-rows * window // 8)
    raw = np.frombuffer(secrets.token_bytes(count * nbytes), dtype=np.uint8).reshape(count, nbytes)
    bits = np.unpackbits(raw, axis=1, bitorder="little")[:, :rows * window].reshape(count, rows, window)
    return bits.astype(np.int64) @ (np.int64(1) << np.arange(window, dtype=np.int64))


def _djn_obfuscators(table: list[list], nsq: mpz, count: int, window: int) -> list[mpz]:
    """h_s^alpha for fresh uniform alpha: rho = prod_i table[i][digit_i], one multiplication per digit."""
    out = []
    for digits in _random_digits(count, len(table), window).tolist():
        acc = None
        for row, digit in zip(table, digits):
            if digit:
                acc = row[digit] if acc is None else acc * row[digit] % nsq
        out.append(mpz(1) if acc is None else acc)
    return out


class PublicKey:
    """The public half: encode, encrypt, and the modulus every ciphertext is checked against.

    Parameters
    ----------
    n : int
        The modulus (for Paillier schemes the product of two primes from phe).
    scheme : {"djn", "textbook", "plaintext"}
        The obfuscation scheme (see the module docstring).
    h_s : int, optional
        The DJN base (required for ``djn``, absent otherwise).

    Attributes
    ----------
    n, nsquare : int
        The modulus and its square.
    bits : int
        Bit length of n.
    scheme : str
    h_s : int or None
    max_int : int
        Largest |m| of the safe plaintext range, 2^(bits - GUARD_BITS) - 1.
    """

    __slots__ = ("n", "nsquare", "bits", "scheme", "h_s", "max_int", "_n", "_nsq", "_pool", "_djn_table",
                 "_djn_window")

    def __init__(self, n: int, *, scheme: str = "djn", h_s: int | None = None) -> None:
        _check_public_key(n, scheme, h_s)
        n = int(n)
        self.n = n
        self.nsquare = n * n
        self.bits = n.bit_length()
        self.scheme = scheme
        self.max_int = (1 << (self.bits - GUARD_BITS)) - 1
        self._n = mpz(n)
        self._nsq = mpz(self.nsquare)
        self._pool: deque = deque()
        self._djn_table: list | FixedBase | None = None
        self._djn_window = _DJN_WINDOW
        self.h_s = None if h_s is None else int(h_s)

    @property
    def encrypted(self) -> bool:
        """False for the plaintext (identity) scheme."""
        return self.scheme != "plaintext"

    @property
    def fingerprint(self) -> str:
        """A short digest of n, for error messages and logs."""
        return hashlib.sha256(str(self.n).encode()).hexdigest()[:12]

    def __repr__(self) -> str:
        return f"PublicKey(bits={self.bits}, scheme={self.scheme!r}, fingerprint={self.fingerprint!r})"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, PublicKey):
            return NotImplemented
        return (self.n, self.scheme, self.h_s) == (other.n, other.scheme, other.h_s)

    def __hash__(self) -> int:
        return hash((self.n, self.scheme, self.h_s))

    def compatible(self, other: "PublicKey") -> bool:
        """Whether ciphertexts of `other` can be combined with this key's (same n, both encrypted or not)."""
        return self.n == other.n and self.encrypted == other.encrypted

    # -- encoding ------------------------------------------------------------------------------------------

    def encode(self, values: Any, *, frac_bits: int) -> np.ndarray:
        """Fixed-point encodings round(v 2^frac_bits) as an object array of signed Python ints.

        Raises
        ------
        ValueError
            For non-finite values or a `values` array of more than one dimension.
        EncodingOverflowError
            When some |encoding| exceeds :attr:`max_int`.
        """
        frac_bits = _check_frac_bits(frac_bits)
        arr = np.asarray(values, dtype=np.float64)
        if arr.ndim > 1:
            raise ValueError(f"values must be a scalar or a vector, got shape {arr.shape}")
        return _encode_array(np.atleast_1d(arr), frac_bits, self.max_int, name="values")

    def decode(self, ints: Iterable[int], *, frac_bits: int) -> np.ndarray:
        """float64 values m / 2^frac_bits of signed encodings, after checking the safe range."""
        frac_bits = _check_frac_bits(frac_bits)
        ints = list(ints)
        self._check_range(ints)
        scale = 1 << frac_bits
        try:
            # Python's int / int rounds once, correctly, whatever the sizes.
            return np.array([m / scale for m in ints], dtype=np.float64)
        except OverflowError as exc:
            raise EncodingOverflowError(
                f"a decoded value does not fit a float64 at frac_bits={frac_bits}") from exc

    def _check_range(self, ints: list[int]) -> None:
        if ints:
            worst = max(abs(m) for m in ints)
            if worst > self.max_int:
                raise EncodingOverflowError(
                    f"plaintext magnitude 2^{math.log2(worst):.1f} exceeds the safe range "
                    f"2^{self.bits - GUARD_BITS} of this {self.bits}-bit key: an overflow in the homomorphic "
                    "computation, or a tampered ciphertext")

    # -- encryption ----------------------------------------------------------------------------------------

    def encrypt(self, values: Any, *, frac_bits: int) -> "EncryptedVector":
        """Encrypt a float vector (or scalar, as a length-1 vector) at `frac_bits` fractional bits."""
        encoded = self.encode(values, frac_bits=frac_bits)
        return EncryptedVector._trusted(self, self._encrypt_residues([m % self.n for m in encoded]),
                                        int(frac_bits))

    def encrypt_encoded(self, ints: Any, *, frac_bits: int = 0) -> "EncryptedVector":
        """Encrypt already-encoded signed integers (Python ints in a list or object array).

        `frac_bits` is the scale the integers carry (0 for plain integers).
        """
        frac_bits = _check_frac_bits(frac_bits)
        arr = np.atleast_1d(np.asarray(ints, dtype=object))
        if arr.ndim != 1:
            raise ValueError(f"ints must be a scalar or a vector, got shape {arr.shape}")
        encoded = [_as_int(v, "ints") for v in arr]
        if encoded and max(abs(m) for m in encoded) > self.max_int:
            raise EncodingOverflowError(f"an encoded integer exceeds the safe range "
                                        f"2^{self.bits - GUARD_BITS} of this {self.bits}-bit key")
        return EncryptedVector._trusted(self, self._encrypt_residues([m % self.n for m in encoded]),
                                        frac_bits)

    def precompute(self, count: int) -> None:
        """Compute `count` fresh obfuscators now, to be consumed (each once) by later encryptions.

        A no-op for the plaintext scheme. (To overlap this work with other computation, encrypt zeros in
        another process: ``encrypt(np.zeros(k), frac_bits=0)`` are fresh obfuscators, and adding a plaintext
        to one is a fresh encryption of it.)
        """
        if not isinstance(count, (int, np.integer)) or isinstance(count, bool) or count < 0:
            raise ValueError(f"count must be a non-negative integer, got {count!r}")
        if self.encrypted:
            self._pool.extend(self._fresh_obfuscators(int(count)))

    @property
    def pooled(self) -> int:
        """Obfuscators waiting in the pool."""
        return len(self._pool)

    def _obfuscators(self, count: int) -> list[mpz]:
        """`count` obfuscators never used before: the pool first (each popped, so never reused), then new."""
        taken = [self._pool.popleft() for _ in range(min(count, len(self._pool)))]
        return taken + self._fresh_obfuscators(count - len(taken))

    def _fresh_obfuscators(self, count: int) -> list[mpz]:
        if self.scheme == "textbook":
            return _textbook_obfuscators(self._n, count)
        if self._djn_table is None:
            self.build_table(self._djn_window)
        if isinstance(self._djn_table, FixedBase):
            return self._djn_table.powers(_random_digits(count, self._djn_table.rows, self._djn_window))
        return _djn_obfuscators(self._djn_table, self._nsq, count, self._djn_window)

    def build_table(self, window: int = _DJN_WINDOW) -> None:
        """Build the fixed-base table of the ``djn`` scheme now, with `window`-bit digits of alpha.

        Otherwise the first encryption builds it with the default window (8). A process that encrypts a lot
        (a protocol's background worker) gains from a wider one: 12 bits cut the products per obfuscator by a
        third for a table of about 200 MiB (2048-bit key) that takes one to three seconds to build. Where
        :func:`~ppml.crypto.multibuffer.fixed_base` can, the table is crypto_mb's (Montgomery form, eight
        obfuscators per product call), else a list of gmpy2 integers: the same integers for the same digits.
        The obfuscators' law is the same for every window (alpha uniform over at least ceil(bits/2) bits). A
        no-op for the other schemes.
        """
        if not isinstance(window, (int, np.integer)) or isinstance(window, bool) or \
                not 1 <= window <= MAX_DJN_WINDOW:
            raise ValueError(f"the table window must be an integer in [1, {MAX_DJN_WINDOW}] bits, "
                             f"got {window!r}")
        if self.scheme != "djn":
            return
        if self._djn_table is None or self._djn_window != window:
            window = int(window)
            rows = _djn_rows(self.bits, window)
            self._djn_table = (fixed_base(self.h_s, self._nsq, rows=rows, window=window)
                               or _djn_table(mpz(self.h_s), self._nsq, self.bits, window))
            self._djn_window = window

    def _encrypt_residues(self, residues: list[int]) -> list[int]:
        """Ciphertexts of residues in [0, n): (1 + m n) rho mod n^2, or the residues themselves."""
        if not self.encrypted:
            return list(residues)
        n, nsq = self._n, self._nsq
        # (1 + m n) rho = rho + n (m rho mod n) mod n^2: one half-size product instead of a full one.
        rhos = self._obfuscators(len(residues))
        return [int((rho + n * (m * rho % n)) % nsq) for m, rho in zip(residues, rhos)]

    # -- wire ----------------------------------------------------------------------------------------------

    def to_wire(self) -> dict:
        """The public key as plain values: ``{"n", "scheme", "h_s"}``."""
        return {"n": self.n, "scheme": self.scheme, "h_s": self.h_s}

    @staticmethod
    def from_wire(d: dict) -> "PublicKey":
        """Rebuild a public key sent with :meth:`to_wire`, with every check of the module docstring.

        Raises
        ------
        PublicKeyError
            For a malformed payload or an unsafe key (the message names the defect and the value).
        """
        if not isinstance(d, dict) or set(d) != {"n", "scheme", "h_s"}:
            raise PublicKeyError(f"a public key on the wire is a dict with keys n, scheme, h_s; got {d!r:.200}")
        return PublicKey(d["n"], scheme=d["scheme"], h_s=d["h_s"])


class PrivateKey:
    """The decryption capability; only the key holder's role may have it.

    Parameters
    ----------
    public_key : PublicKey
    phe_key : phe.PaillierPrivateKey or None
        The python-paillier private key for n (None for the plaintext scheme).
    """

    __slots__ = ("public_key", "_phe", "_crt")

    def __init__(self, public_key: PublicKey, phe_key: phe.PaillierPrivateKey | None) -> None:
        if not isinstance(public_key, PublicKey):
            raise TypeError(f"public_key must be a PublicKey, got {type(public_key).__name__}")
        if public_key.encrypted:
            if not isinstance(phe_key, phe.PaillierPrivateKey) or phe_key.public_key.n != public_key.n:
                raise ValueError("phe_key must be the phe.PaillierPrivateKey of public_key's modulus")
            self._crt = tuple(mpz(v) for v in (phe_key.p, phe_key.q, phe_key.psquare, phe_key.qsquare,
                                               phe_key.hp, phe_key.hq, phe_key.p_inverse))
        elif phe_key is not None:
            raise ValueError("a plaintext-scheme key has no phe private key")
        else:
            self._crt = None
        self.public_key = public_key
        self._phe = phe_key

    @property
    def phe_key(self) -> phe.PaillierPrivateKey | None:
        """The underlying python-paillier private key (interoperability and reference checks)."""
        return self._phe

    def __repr__(self) -> str:
        return f"PrivateKey(for {self.public_key!r})"

    def decrypt_encoded(self, enc: "EncryptedVector") -> np.ndarray:
        """The signed fixed-point integers of `enc` (object array), range-checked.

        Raises
        ------
        CiphertextError
            When `enc` was made under another key or scheme.
        EncodingOverflowError
            When a plaintext lies outside the safe range (overflow, or a tampered ciphertext).
        """
        if not isinstance(enc, EncryptedVector):
            raise TypeError(f"expected an EncryptedVector, got {type(enc).__name__}")
        _require_compatible(self.public_key, enc.public_key, "decrypt")
        residues = self._residues(list(enc.ciphertexts))
        n, half = self.public_key.n, self.public_key.n // 2
        signed = [m - n if m > half else m for m in residues]
        self.public_key._check_range(signed)
        out = np.empty(len(signed), dtype=object)
        out[:] = signed
        return out

    def decrypt(self, enc: "EncryptedVector") -> np.ndarray:
        """The float64 values of `enc` (see :meth:`decrypt_encoded` for the checks)."""
        return self.public_key.decode(self.decrypt_encoded(enc), frac_bits=enc.frac_bits)

    def _residues(self, cs: list[int]) -> list[int]:
        """m = D(c) in [0, n) by CRT: m_p = L_p(c^(p-1) mod p^2) h_p mod p, likewise for q (as phe)."""
        if self._crt is None:
            return [int(c) for c in cs]
        p, q, psq, qsq, hp, hq, p_inv = self._crt
        # Two half-size exponentiations per ciphertext (as phe), eight at a time where crypto_mb runs.
        xp = powmod_list([c % psq for c in cs], [p - 1] * len(cs), psq)
        xq = powmod_list([c % qsq for c in cs], [q - 1] * len(cs), qsq)
        out = []
        for a, b in zip(xp, xq):
            mp = (a - 1) // p * hp % p
            mq = (b - 1) // q * hq % q
            out.append(int(mp + (mq - mp) * p_inv % q * p))
        return out


# ---------------------------------------------------------------------------------------------------------
# encoding helpers


def _as_int(v: Any, name: str) -> int:
    if isinstance(v, (bool, np.bool_)) or not isinstance(v, _INTEGER_TYPES):
        raise TypeError(f"{name} must hold integers, got {type(v).__name__} {v!r:.40}")
    return int(v)


def _encode_array(arr: np.ndarray, frac_bits: int, max_int: int, *, name: str) -> np.ndarray:
    """round(arr 2^frac_bits) elementwise as Python ints (object array of arr's shape), range-checked."""
    scaled = _scaled(arr, frac_bits, max_int, name=name)
    out = np.empty(arr.shape, dtype=object)
    out.ravel()[:] = [int(x) for x in scaled.ravel().tolist()]
    return out


def _scaled(arr: np.ndarray, frac_bits: int, max_int: int, *, name: str) -> np.ndarray:
    """round(arr 2^frac_bits) as float64 (integral values), checked against the safe range."""
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} must be finite, got {arr[~np.isfinite(arr)].ravel()[:3]}")
    with np.errstate(over="ignore"):
        scaled = np.rint(np.ldexp(arr, frac_bits))  # exact: a power-of-two scaling, then one rounding
    peak = float(np.max(np.abs(scaled))) if scaled.size else 0.0
    # max_int + 1 is a power of two, exact as a float unless it exceeds every finite float.
    limit = float(max_int + 1) if max_int.bit_length() < 1024 else math.inf
    if peak >= limit:
        raise EncodingOverflowError(
            f"{name} scaled by 2^{frac_bits} reach {peak:.3g}, beyond the safe range {float(max_int):.3g}")
    return scaled


# ---------------------------------------------------------------------------------------------------------
# encrypted vectors


def _require_compatible(mine: PublicKey, theirs: PublicKey, what: str) -> None:
    if not mine.compatible(theirs):
        raise CiphertextError(
            f"cannot {what}: ciphertexts under key {theirs.fingerprint} ({theirs.scheme}) do not belong to "
            f"key {mine.fingerprint} ({mine.scheme})")


class EncryptedVector:
    """An immutable vector of ciphertexts sharing one key and one fixed-point scale.

    Parameters
    ----------
    public_key : PublicKey
    ciphertexts : array-like of int
        Raw ciphertexts, each checked to lie in Z*_{n^2} (or in [0, n) for the plaintext scheme).
    frac_bits : int
        Fractional bits of the encoded plaintexts.

    Notes
    -----
    Plaintext operands (floats, numeric arrays) are encoded at the vector's own `frac_bits`. Operations on two
    vectors of different scales first rescale the one with fewer fractional bits (a product by 2^k).
    Results of homomorphic operations are deterministic functions of their inputs; call :meth:`rerandomize`
    before sending one to a party that knows those inputs.
    """

    __slots__ = ("_pk", "_c", "_f")
    # numpy must not broadcast over a vector's elements: ``array - vector`` goes to __rsub__.
    __array_ufunc__ = None

    def __init__(self, public_key: PublicKey, ciphertexts: Any, frac_bits: int) -> None:
        if not isinstance(public_key, PublicKey):
            raise TypeError(f"public_key must be a PublicKey, got {type(public_key).__name__}")
        arr = np.atleast_1d(np.asarray(ciphertexts, dtype=object))
        if arr.ndim != 1:
            raise CiphertextError(f"ciphertexts must form a vector, got shape {arr.shape}")
        cs = []
        for c in arr:
            if isinstance(c, (bool, np.bool_)) or not isinstance(c, _INTEGER_TYPES):
                raise CiphertextError(f"a ciphertext must be an integer, got {type(c).__name__} {c!r:.40}")
            cs.append(int(c))
        _validate_ciphertexts(public_key, cs)
        self._init(public_key, cs, _check_frac_bits(frac_bits))

    def _init(self, public_key: PublicKey, cs: list[int], frac_bits: int) -> None:
        c = np.empty(len(cs), dtype=object)
        c[:] = cs
        c.setflags(write=False)
        self._pk = public_key
        self._c = c
        self._f = frac_bits

    @classmethod
    def _trusted(cls, public_key: PublicKey, cs: list, frac_bits: int) -> "EncryptedVector":
        """A vector from ciphertexts this module computed (valid by construction)."""
        out = cls.__new__(cls)
        out._init(public_key, [int(c) for c in cs], frac_bits)
        return out

    public_key = property(lambda self: self._pk, doc="The key of the ciphertexts.")
    ciphertexts = property(lambda self: self._c, doc="Read-only object array of Python ints.")
    frac_bits = property(lambda self: self._f, doc="Fractional bits of the encoded plaintexts.")

    def __len__(self) -> int:
        return len(self._c)

    def __repr__(self) -> str:
        return f"EncryptedVector(len={len(self)}, frac_bits={self._f}, key={self._pk!r})"

    def __getitem__(self, index: Any) -> "EncryptedVector":
        """A sub-vector (a slice, an index array or a boolean mask; an int gives a length-1 vector)."""
        picked = self._c[index]
        if not isinstance(picked, np.ndarray):
            picked = [picked]
        return EncryptedVector._trusted(self._pk, list(picked), self._f)

    # -- arithmetic ----------------------------------------------------------------------------------------

    def _plain_operand(self, values: Any, frac_bits: int) -> np.ndarray:
        """Encode a scalar or a vector of len(self) at `frac_bits`, as one signed int per element."""
        arr = np.asarray(values)
        if arr.dtype == object or arr.dtype.kind not in "biuf":
            raise TypeError(f"plaintext operands must be real numbers, got dtype {arr.dtype}")
        if arr.ndim > 1 or (arr.ndim == 1 and len(arr) != len(self)):
            raise ValueError(f"a plaintext operand must be a scalar or a vector of length {len(self)}, "
                             f"got shape {arr.shape}")
        encoded = _encode_array(np.atleast_1d(arr.astype(np.float64)), frac_bits, self._pk.max_int,
                                name="values")
        return np.repeat(encoded, len(self)) if arr.ndim == 0 else encoded

    def _aligned(self, other: "EncryptedVector") -> tuple[list, list, int]:
        _require_compatible(self._pk, other._pk, "combine vectors")
        if len(other) != len(self):
            raise ValueError(f"cannot combine encrypted vectors of lengths {len(self)} and {len(other)}")
        f = max(self._f, other._f)
        return self._rescaled(f), other._rescaled(f), f

    def _rescaled(self, frac_bits: int) -> list:
        """Ciphertexts of m 2^(frac_bits - self.frac_bits): a power of two, i.e. squarings."""
        shift = frac_bits - self._f
        if shift == 0:
            return list(self._c)
        if not self._pk.encrypted:
            return [(c << shift) % self._pk.n for c in self._c]
        return powmod_list(list(self._c), [mpz(1) << shift] * len(self._c), self._pk._nsq)

    def __add__(self, other: Any) -> "EncryptedVector":
        pk = self._pk
        if isinstance(other, EncryptedVector):
            a, b, f = self._aligned(other)
            if pk.encrypted:
                nsq = pk._nsq
                return EncryptedVector._trusted(pk, [x * y % nsq for x, y in zip(a, b)], f)
            return EncryptedVector._trusted(pk, [(x + y) % pk.n for x, y in zip(a, b)], f)
        return self._add_encoded(self._plain_operand(other, self._f))

    __radd__ = __add__

    def add_encoded(self, ints: Any) -> "EncryptedVector":
        """Add signed integers already encoded at this vector's scale (one per element; e.g. packed slots).

        Raises
        ------
        EncodingOverflowError
            When an integer exceeds the safe range :attr:`PublicKey.max_int`.
        """
        encoded = [_as_int(v, "ints") for v in np.atleast_1d(np.asarray(ints, dtype=object))]
        if len(encoded) != len(self):
            raise ValueError(f"add_encoded needs {len(self)} integers, got {len(encoded)}")
        if encoded and max(abs(m) for m in encoded) > self._pk.max_int:
            raise EncodingOverflowError(f"an encoded integer exceeds the safe range "
                                        f"2^{self._pk.bits - GUARD_BITS} of this {self._pk.bits}-bit key")
        return self._add_encoded(encoded)

    def _add_encoded(self, encoded: np.ndarray) -> "EncryptedVector":
        """Add signed integers already encoded at this vector's scale."""
        pk = self._pk
        if pk.encrypted:
            # c (1 + m n) = c + n (m c mod n) mod n^2: adding a known plaintext needs no new randomness.
            n, nsq = pk._n, pk._nsq
            cs = [(c + n * (m * c % n)) % nsq for c, m in zip(self._c, encoded)]
        else:
            cs = [(c + m) % pk.n for c, m in zip(self._c, encoded)]
        return EncryptedVector._trusted(pk, cs, self._f)

    def __neg__(self) -> "EncryptedVector":
        pk = self._pk
        if pk.encrypted:
            return EncryptedVector._trusted(pk, batch_invert([mpz(c) for c in self._c], pk._nsq), self._f)
        return EncryptedVector._trusted(pk, [(-c) % pk.n for c in self._c], self._f)

    def __sub__(self, other: Any) -> "EncryptedVector":
        if isinstance(other, EncryptedVector):
            return self + (-other)
        return self._add_encoded(-self._plain_operand(other, self._f))

    def __rsub__(self, other: Any) -> "EncryptedVector":
        return (-self)._add_encoded(self._plain_operand(other, self._f))

    def mul(self, values: Any, *, frac_bits: int) -> "EncryptedVector":
        """Elementwise product with plaintexts (a scalar or a vector) encoded at `frac_bits`.

        The result carries ``self.frac_bits + frac_bits`` fractional bits. A negative factor k acts as
        (c^-1)^|k|, so exponents stay short.
        """
        frac_bits = _check_frac_bits(frac_bits)
        factors = self._plain_operand(values, frac_bits)
        pk = self._pk
        f = self._f + frac_bits
        if not pk.encrypted:
            return EncryptedVector._trusted(pk, [c * k % pk.n for c, k in zip(self._c, factors)], f)
        nsq = pk._nsq
        bases = [mpz(c) for c in self._c]
        negative = [i for i, k in enumerate(factors) if k < 0]
        for i, inv in zip(negative, batch_invert([bases[i] for i in negative], nsq)):
            bases[i] = inv
        return EncryptedVector._trusted(pk, powmod_list(bases, [abs(int(k)) for k in factors], nsq), f)

    def matvec(self, X: Any, *, frac_bits: int) -> "EncryptedVector":
        """The encrypted X^T v: for each column j, sum_i [v_i] X_ij, with X encoded at `frac_bits`.

        Parameters
        ----------
        X : ndarray or scipy.sparse matrix, shape (len(self), k)
            Plaintext matrix; zero entries (structural or after rounding) cost nothing.
        frac_bits : int
            Fractional bits of X's encoding; the result carries ``self.frac_bits + frac_bits``.

        Returns
        -------
        EncryptedVector
            k ciphertexts.
        """
        frac_bits = _check_frac_bits(frac_bits)
        _check_matrix(X, len(self))
        planned = self.matvec_planned(X, frac_bits=frac_bits)
        if planned is not None:
            return planned
        columns = _encoded_columns(X, n_rows=len(self), frac_bits=frac_bits, max_int=self._pk.max_int)
        pk = self._pk
        f = self._f + frac_bits
        if not pk.encrypted:
            sums = [int(np.dot(self._c[rows], e.astype(object))) if len(rows) else 0 for rows, e in columns]
            return EncryptedVector._trusted(pk, [m % pk.n for m in sums], f)
        nsq = pk._nsq
        bases = [mpz(c) for c in self._c]
        # Rows with a negative entry anywhere need c_i^-1; one batch inversion serves every column.
        neg_rows = sorted({int(i) for rows, e in columns for i in rows[e < 0]})
        inverse = dict(zip(neg_rows, batch_invert([bases[i] for i in neg_rows], nsq)))
        out = []
        for rows, e in columns:
            chosen = [inverse[i] if k < 0 else bases[i] for i, k in zip(rows.tolist(), e.tolist())]
            out.append(multiexp(chosen, np.abs(e), nsq))
        return EncryptedVector._trusted(pk, out, f)

    def exponents(self, X: Any, *, frac_bits: int, slots: int = 1) -> np.ndarray | None:
        """The signed integer exponents E of X^T v, shape (slots, len(self), columns), E[k, l, j] = the encoded
        X[l t + k, j] (rows beyond X's last count as zeros); None where :meth:`matvec_planned` does not apply
        (plaintext scheme, sparse X, encodings beyond int64)."""
        pk = self._pk
        if not pk.encrypted or sp.issparse(X) or len(self) == 0:
            return None
        frac_bits = _check_frac_bits(frac_bits)
        _check_matrix(X, None)
        dense = np.asarray(X, dtype=np.float64)
        if not 0 < dense.shape[0] <= slots * len(self):
            raise ValueError(f"X must have between 1 and {slots * len(self)} rows to multiply this vector, "
                             f"got shape {dense.shape}")
        scaled = _scaled(dense, frac_bits, pk.max_int, name="X")
        if scaled.size == 0 or np.max(np.abs(scaled)) >= 2.0**62:
            return None
        padded = np.zeros((slots * len(self), dense.shape[1]), dtype=np.int64)
        padded[:dense.shape[0]] = scaled.astype(np.int64)
        return padded.reshape(len(self), slots, dense.shape[1]).transpose(1, 0, 2)

    def matvec_planned(self, X: Any, *, frac_bits: int, slots: int = 1,
                       width: int = 0) -> "EncryptedVector | None":
        """X^T v with each column by shared subset-product tables or by value buckets, whichever the cost
        model prices lower (:func:`ppml.crypto.costs.plan`), or None where neither applies (see
        :meth:`exponents`) or the bucket method per column is estimated cheaper: the caller then runs the
        bucket method, which gives the same ciphertexts.

        With ``slots = t > 1`` the vector is packed: ciphertext l carries rows l t, ..., l t + t - 1 of X,
        and each column's product is joined over the slot positions k as prod_k F_k^(2^((t - 1 - k) width))
        (:meth:`ppml.crypto.packing.Layout.matvec`). X has at most ``t len(self)`` rows; those beyond its
        last row count as zeros.
        """
        E = self.exponents(X, frac_bits=frac_bits, slots=slots)
        if E is None:
            return None
        chosen = plan(E, width)
        if chosen.cost >= bucket_cost(E, width):
            return None
        pk = self._pk
        out = planned_matvec([mpz(c) for c in self._c], E, chosen, width=width, modulus=pk._nsq)
        return EncryptedVector._trusted(pk, out, self._f + _check_frac_bits(frac_bits))

    def sum(self) -> "EncryptedVector":
        """The length-1 vector of the encrypted sum of all elements."""
        pk = self._pk
        if not pk.encrypted:
            return EncryptedVector._trusted(pk, [sum(self._c) % pk.n], self._f)
        nsq = pk._nsq
        acc = mpz(1)
        for c in self._c:
            acc = acc * c % nsq
        return EncryptedVector._trusted(pk, [acc], self._f)

    def rerandomize(self) -> "EncryptedVector":
        """The same plaintexts under fresh obfuscators (unchanged values for the plaintext scheme)."""
        pk = self._pk
        if not pk.encrypted:
            return self
        nsq = pk._nsq
        rhos = pk._obfuscators(len(self))
        return EncryptedVector._trusted(pk, [c * rho % nsq for c, rho in zip(self._c, rhos)], self._f)

    @staticmethod
    def concat(parts: Iterable["EncryptedVector"]) -> "EncryptedVector":
        """One vector of all `parts` in order, at the largest of their scales."""
        parts = list(parts)
        if not parts:
            raise ValueError("concat needs at least one EncryptedVector")
        if not all(isinstance(p, EncryptedVector) for p in parts):
            raise TypeError("concat takes EncryptedVector parts only")
        first = parts[0]
        for p in parts[1:]:
            _require_compatible(first._pk, p._pk, "concatenate vectors")
        f = max(p._f for p in parts)
        return EncryptedVector._trusted(first._pk, [c for p in parts for c in p._rescaled(f)], f)

    # -- wire ----------------------------------------------------------------------------------------------

    def to_wire(self) -> dict:
        """``{"n", "scheme", "frac_bits", "c"}``: the modulus travels only to be checked by the receiver."""
        return {"n": self._pk.n, "scheme": self._pk.scheme, "frac_bits": self._f, "c": self._c.copy()}

    @staticmethod
    def from_wire(d: dict, public_key: PublicKey) -> "EncryptedVector":
        """Rebuild a received vector against the receiver's own `public_key` (see :func:`receive_vector`)."""
        return receive_vector(d, public_key)


def _validate_ciphertexts(public_key: PublicKey, cs: list[int]) -> None:
    """Each c in Z*_{n^2} (in [0, n) for the plaintext scheme), else CiphertextError."""
    if not public_key.encrypted:
        bad = next((c for c in cs if not 0 <= c < public_key.n), None)
        if bad is not None:
            raise CiphertextError(f"a plaintext-scheme residue must lie in [0, n), got {bad!r:.60}")
        return
    n, nsq = public_key._n, public_key.nsquare
    # gcd(c, n) = 1 for every c iff the product of all c mod n is a unit (n = pq): one gcd per vector.
    product = mpz(1)
    for c in cs:
        if not 0 < c < nsq:
            raise CiphertextError(f"a ciphertext must lie in [1, n^2) of key {public_key.fingerprint}, "
                                  f"got {c!r:.60}")
        product = product * (c % n) % n
    if gmpy2.gcd(product, n) != 1:
        raise CiphertextError(
            f"a ciphertext shares a factor with the modulus of key {public_key.fingerprint}")


def _check_matrix(X: Any, n_rows: int | None) -> None:
    """A TypeError unless X is a real (dense or sparse) matrix, a ValueError unless it has `n_rows` rows
    (any number when None)."""
    if sp.issparse(X):
        shape = X.shape
    else:
        dtype = np.asarray(X).dtype
        if dtype == object or dtype.kind not in "biuf":
            raise TypeError(f"X must be a real matrix, got dtype {dtype}")
        shape = np.shape(X)
    if len(shape) != 2 or (n_rows is not None and shape[0] != n_rows):
        raise ValueError(f"X must have shape ({n_rows if n_rows is not None else 'n'}, k) to multiply this "
                         f"vector, got {shape}")


def _encoded_columns(X: Any, *, n_rows: int, frac_bits: int,
                     max_int: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """Per column of X: (row indices, signed encodings) of its entries that are non-zero after encoding.

    Encodings are int64 when they fit, else Python ints in an object array.
    """
    _check_matrix(X, n_rows)
    if sp.issparse(X):
        csc = sp.csc_array(X)
        csc.sum_duplicates()
        scaled = _scaled(csc.data.astype(np.float64), frac_bits, max_int, name="X")
        rows, starts = csc.indices.astype(np.int64), csc.indptr
    else:
        dense = np.asarray(X)
        scaled = _scaled(dense.astype(np.float64).T.ravel(), frac_bits, max_int, name="X")
        rows = np.tile(np.arange(n_rows, dtype=np.int64), dense.shape[1])
        starts = np.arange(dense.shape[1] + 1) * n_rows
    if scaled.size and np.max(np.abs(scaled)) < 2.0**62:
        encoded = scaled.astype(np.int64)  # exact: integral floats below 2^62
    else:
        encoded = np.empty(scaled.size, dtype=object)
        encoded[:] = [int(x) for x in scaled.tolist()]
    out = []
    for a, b in zip(starts[:-1], starts[1:]):
        live = a + np.flatnonzero(scaled[a:b])
        out.append((rows[live], encoded[live]))
    return out


def receive_vector(payload: dict, public_key: PublicKey) -> EncryptedVector:
    """An :class:`EncryptedVector` from a received wire dict, bound to the receiver's own `public_key`.

    Raises
    ------
    CiphertextError
        When the sender's modulus or scheme differs from `public_key`'s, a ciphertext lies outside
        Z*_{n^2} or is not an integer, or frac_bits lies outside [0, :data:`MAX_FRAC_BITS`].
    """
    _wire_payload(payload)
    if payload["n"] != public_key.n or payload["scheme"] != public_key.scheme:
        sender = hashlib.sha256(str(payload["n"]).encode()).hexdigest()[:12]
        raise CiphertextError(f"received ciphertexts under key {sender} ({payload['scheme']}), but this "
                              f"party's key is {public_key.fingerprint} ({public_key.scheme})")
    return EncryptedVector(public_key, payload["c"], payload["frac_bits"])


def _wire_payload(d: Any) -> dict:
    """What the network hands the receiver: the checked dict, to be bound with :func:`receive_vector`."""
    if not isinstance(d, dict) or set(d) != {"n", "scheme", "frac_bits", "c"}:
        raise CiphertextError("an encrypted vector on the wire is a dict with keys n, scheme, frac_bits, c")
    f = d["frac_bits"]
    if not _is_int(f) or not 0 <= f <= MAX_FRAC_BITS:
        raise CiphertextError(f"an encrypted vector on the wire must carry frac_bits in [0, {MAX_FRAC_BITS}], "
                              f"got {_abbrev(f)}")
    return d


register_wire_type(EncryptedVector, "ppml.paillier.EncryptedVector", EncryptedVector.to_wire, _wire_payload)
register_wire_type(PublicKey, "ppml.paillier.PublicKey", PublicKey.to_wire, PublicKey.from_wire)
