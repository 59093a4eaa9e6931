"""Modular exponentiations eight at a time on cores with AVX-512 IFMA, through Intel's crypto_mb library.

The Intel Cryptography Primitives Library (the ``ipp-crypto`` wheel) ships ``crypto_mb``, whose public
``mbx_exp_mb8`` computes eight independent x_i^(e_i) mod m_i at once, one per 52-bit lane of the AVX-512 IFMA
multiply-add instructions. A call costs the same for one busy lane as for eight, and about a fifth of eight
``gmpy2.powmod`` calls: measured on this project's 2-core machine, eight half-decryptions of a 2048-bit key
(modulo p^2, 2048 bits, exponent p - 1 of 1024 bits) took 3.2 ms against 22.3 ms through gmpy2, and eight
134-bit squaring chains modulo n^2 (4096 bits) 2.2 ms against 11.3 ms. The results are the same integers
(``tests/unit/crypto/test_multibuffer.py`` checks them against gmpy2).

:func:`powmod_list` takes that way when it can and gmpy2's otherwise:

- the library or its runtime (the ``intel-cmplr-lib-rt`` wheel) is not installed, or the processor lacks the
  instructions (``mbx_is_crypto_mb_applicable``), or ``PPML_MULTIBUFFER=0`` is set;
- the modulus is not of a size the library has (1024, 2048, 3072 or 4096 bits, or at most 63 bits less);
- an exponent is longer than the modulus, or a base is not below it;
- for a group of eight, gmpy2 is estimated faster: a call has a fixed cost (the library derives the
  modulus's Montgomery constants in every call), about 80 of gmpy2's per-bit steps, so short exponents or few
  of them stay with gmpy2 (:func:`_faster`).

Fixed-base exponentiations (:class:`FixedBase`). The DJN obfuscators h_s^alpha of every encryption are
products of one entry per base-2^w digit of alpha from a table of h_s^(d 2^(w i)). The library exports its
eight-lane almost-Montgomery multiplication (``ifma_amm52x{20,40,60,79}_mb8``, the step of its own
exponentiation) beside the public functions; :class:`FixedBase` keeps the table in Montgomery form, 52-bit
digits, and multiplies the entries of eight obfuscators at once: at 4096 bits one call for eight products
took 22 us where one ``gmpy2`` multiply-and-reduce took 6.3 us (in one run); with the table look-ups an
obfuscator of a 2048-bit key (12-bit digits) cost 270 us against 646 us from the ``gmpy2`` table, and the
table was built in 1.4 s against 2.4 s. The result of the same digits is the same integer as
``gmpy2.powmod(h_s, alpha, m)`` (the tests check it). These symbols are not in the library's documented
interface: :func:`fixed_base` looks them up and returns None when one is missing, and the caller keeps its
``gmpy2`` table.

Only public ciphertexts, public exponents, the public key's own base and the key holder's own decryption go
through it: it computes exponentiations, it does not see which party's values they carry.
"""

from __future__ import annotations

import ctypes
import importlib.metadata
import logging
import os
import threading
from collections.abc import Sequence

import gmpy2
import numpy as np
from gmpy2 import mpz

__all__ = ["LANES", "FixedBase", "enabled", "fixed_base", "powmod_list"]

log = logging.getLogger(__name__)

#: Exponentiations per library call.
LANES = 8
# Modulus sizes of the library's exponentiation (bits; a modulus up to 63 bits shorter uses the same words),
# each with the cost of one call in units of one exponent bit of gmpy2.powmod at that size: (fixed, per bit of
# the longest exponent). Measured on this project's machine, the two side by side: at 4096 bits a call took
# 956 us + 13 us per exponent bit where gmpy2 took 11.5 us per bit; at 2048 bits 256 us + 2.3 us per bit
# against 3.3 us; at 1024 bits 179 us + 0.61 us per bit against 1.0 us.
_COSTS = {1024: (180.0, 0.65), 2048: (80.0, 0.75), 3072: (85.0, 0.95), 4096: (85.0, 1.15)}
# The runtime libraries crypto_mb links against, loaded first so that the dynamic loader finds them by name.
_RUNTIME = ("libintlc.so.5", "libimf.so", "libsvml.so", "libirng.so")
_P8 = ctypes.c_void_p * LANES

_lock = threading.Lock()
_library: ctypes.CDLL | None = None
_loaded = False
_scratch = threading.local()


def _locate(distribution: str, name: str) -> str | None:
    try:
        files = importlib.metadata.distribution(distribution).files or []
    except importlib.metadata.PackageNotFoundError:
        return None
    for f in files:
        if f.name == name:
            return str(f.locate())
    return None


def _load() -> ctypes.CDLL | None:
    """The crypto_mb library when installed and usable on this processor, else None (once per process)."""
    global _library, _loaded
    if _loaded:
        return _library
    with _lock:
        if _loaded:
            return _library
        _loaded = True
        if os.environ.get("PPML_MULTIBUFFER", "1") == "0":
            return None
        path = _locate("ipp-crypto", "libcrypto_mb.so.13")
        runtime = [_locate("intel-cmplr-lib-rt", name) for name in _RUNTIME]
        if path is None or None in runtime:
            return None
        try:
            for dep in runtime:
                ctypes.CDLL(dep, mode=ctypes.RTLD_GLOBAL)
            lib = ctypes.CDLL(path)
            lib.mbx_is_crypto_mb_applicable.argtypes = [ctypes.c_uint64]
            lib.mbx_is_crypto_mb_applicable.restype = ctypes.c_int
            if not lib.mbx_is_crypto_mb_applicable(0):
                log.info("crypto_mb: this processor lacks AVX-512 IFMA; exponentiations through gmpy2")
                return None
            lib.mbx_exp_BufferSize.argtypes = [ctypes.c_int]
            lib.mbx_exp_BufferSize.restype = ctypes.c_int
            lib.mbx_exp_mb8.argtypes = [_P8, _P8, _P8, ctypes.c_int, _P8, ctypes.c_int, ctypes.c_void_p,
                                        ctypes.c_int]
            lib.mbx_exp_mb8.restype = ctypes.c_uint64
        except (OSError, AttributeError) as exc:
            log.info("crypto_mb not usable (%s); exponentiations through gmpy2", exc)
            return None
        _library = lib
        return lib


def enabled() -> bool:
    """Whether exponentiations may go through crypto_mb in this process."""
    return _load() is not None


def _size(modulus: int) -> int | None:
    bits = int(modulus).bit_length()
    return next((size for size in _COSTS if size - 64 < bits <= size), None) if modulus % 2 == 1 else None


def _faster(size: int, exp_bits: list[int]) -> bool:
    """Whether one call for these (at most eight) exponent lengths is estimated faster than gmpy2."""
    fixed, per_bit = _COSTS[size]
    return fixed + per_bit * max(exp_bits) < sum(exp_bits)


def _buffer(lib: ctypes.CDLL, bits: int) -> ctypes.Array:
    """This thread's scratch space for `bits`-bit moduli (a call's working memory; threads never share it)."""
    cache = getattr(_scratch, "buffers", None)
    if cache is None:
        cache = _scratch.buffers = {}
    buf = cache.get(bits)
    if buf is None:
        buf = cache[bits] = ctypes.create_string_buffer(lib.mbx_exp_BufferSize(bits))
    return buf


def _lanes(words: np.ndarray, nbytes: int) -> ctypes.Array:
    """The eight lane pointers into `words` (eight numbers of `nbytes` bytes each, one after the other)."""
    return _P8(*[words.ctypes.data + lane * nbytes for lane in range(LANES)])


def _words(values: Sequence, nbytes: int) -> np.ndarray:
    return np.frombuffer(b"".join(mpz(v).to_bytes(nbytes, "little") for v in values), dtype=np.uint64).copy()


def powmod_list(bases: Sequence, exps: Sequence, modulus) -> list:
    """[b^e mod modulus for b, e in zip(bases, exps)] as mpz, eight at a time when crypto_mb can (else gmpy2).

    Exponents must be non-negative. The same integers either way.
    """
    if len(bases) != len(exps):
        raise ValueError(f"{len(bases)} bases for {len(exps)} exponents")
    modulus = mpz(modulus)
    count = len(bases)
    bits = modulus.bit_length()
    size = _size(modulus) if enabled() else None
    lengths = [mpz(e).bit_length() for e in exps]
    if (size is None or any(e < 0 for e in exps) or max(lengths, default=0) > bits
            or any(not 0 <= b < modulus for b in bases)):
        return [gmpy2.powmod(b, e, modulus) for b, e in zip(bases, exps)]
    lib = _load()
    words = -(-bits // 64)
    nbytes = 8 * words
    mod = None
    out = []
    for start in range(0, count, LANES):
        chunk_b = list(bases[start:start + LANES])
        chunk_e = list(exps[start:start + LANES])
        if not _faster(size, lengths[start:start + LANES]):
            out.extend(gmpy2.powmod(b, e, modulus) for b, e in zip(chunk_b, chunk_e))
            continue
        if mod is None:
            buf = _buffer(lib, bits)
            mod = _words([modulus] * LANES, nbytes)
            mod_p = _lanes(mod, nbytes)
        busy = len(chunk_b)
        chunk_b += [chunk_b[-1]] * (LANES - busy)  # idle lanes repeat the last one: every lane valid
        chunk_e += [chunk_e[-1]] * (LANES - busy)
        exp_bits = max(1, max(lengths[start:start + LANES]))
        b_arr, e_arr = _words(chunk_b, nbytes), _words(chunk_e, nbytes)
        o_arr = np.zeros(LANES * words, dtype=np.uint64)
        status = lib.mbx_exp_mb8(_lanes(o_arr, nbytes), _lanes(b_arr, nbytes), _lanes(e_arr, nbytes),
                                 exp_bits, mod_p, bits, buf, len(buf))
        if status:
            raise RuntimeError(f"crypto_mb mbx_exp_mb8 failed with status {status:#x} ({bits}-bit modulus, "
                               f"{exp_bits}-bit exponents)")
        raw = o_arr.tobytes()
        out.extend(mpz.from_bytes(raw[lane * nbytes:(lane + 1) * nbytes], "little") for lane in range(busy))
    return out


# ---------------------------------------------------------------------------------------------------------
# fixed-base exponentiations: Montgomery products eight at a time

#: 52-bit digits of the library's Montgomery multiplication for each modulus size (bits).
_DIGITS = {1024: 20, 2048: 40, 3072: 60, 4096: 79}
_RADIX = 52
_DIGIT_MASK = np.uint64((1 << _RADIX) - 1)


def _amm(digits: int):
    """The library's eight-lane almost-Montgomery product for `digits` 52-bit digits, or None."""
    lib = _load()
    fn = None if lib is None else getattr(lib, f"ifma_amm52x{digits}_mb8", None)
    if fn is not None:
        fn.argtypes = [ctypes.c_void_p] * 5
        fn.restype = None
    return fn


def to_digits(values: Sequence, count: int) -> np.ndarray:
    """The non-negative integers `values` (each below 2^(52 count)) as rows of `count` 52-bit digits (uint64,
    least significant first)."""
    pairs = -(-count // 2)  # two digits are 13 bytes
    raw = b"".join(mpz(v).to_bytes(13 * pairs, "little") for v in values)
    n = len(values)
    grouped = np.frombuffer(raw, dtype=np.uint8).reshape(n, pairs, 13)
    low = np.zeros((n, pairs, 8), dtype=np.uint8)
    low[..., :7] = grouped[..., :7]
    high = np.zeros((n, pairs, 8), dtype=np.uint8)
    high[..., :7] = grouped[..., 6:]
    low = low.view(np.uint64)[..., 0] & _DIGIT_MASK
    high = high.view(np.uint64)[..., 0] >> np.uint64(4)
    return np.stack([low, high], axis=-1).reshape(n, 2 * pairs)[:, :count]


def from_digits(digits: np.ndarray) -> list:
    """The inverse of :func:`to_digits`: rows of 52-bit digits as mpz."""
    n, count = digits.shape
    if (digits >> np.uint64(_RADIX)).any():
        raise ValueError("a digit of 52 bits or more")
    pairs = -(-count // 2)
    padded = np.zeros((n, 2 * pairs), dtype=np.uint64)
    padded[:, :count] = digits
    low, high = padded[:, 0::2], padded[:, 1::2]
    out = np.empty((n, pairs, 13), dtype=np.uint8)
    out[..., :8] = (low | (high << np.uint64(_RADIX))).reshape(n, pairs, 1).view(np.uint8)
    out[..., 8:] = (high >> np.uint64(64 - _RADIX)).reshape(n, pairs, 1).view(np.uint8)[..., :5]
    raw, size = out.tobytes(), 13 * pairs
    return [mpz.from_bytes(raw[i * size:(i + 1) * size], "little") for i in range(n)]


class FixedBase:
    """base^alpha mod `modulus` for many alphas given by their base-2^window digits, eight per library call.

    The table holds base^(d 2^(window i)) for every digit value d and position i < `rows`, in Montgomery form
    (times R = 2^(52 L) mod the modulus, L 52-bit digits); an exponentiation is the product of one entry per
    digit, eight exponentiations side by side, then one product by 1 to leave the Montgomery form. Memory:
    rows 2^window L 8 bytes (222 MiB for 86 rows of 12-bit digits modulo a 4096-bit n^2).

    Build it with :func:`fixed_base`, which returns None where the library cannot.
    """

    def __init__(self, base, modulus, *, rows: int, window: int, digits: int, amm) -> None:
        m = mpz(modulus)
        self.modulus, self.rows, self.window = m, int(rows), int(window)
        self._amm, self._digits = amm, digits
        radix = mpz(1) << _RADIX
        self._k0 = np.full(LANES, int((-gmpy2.invert(m, radix)) % radix), dtype=np.uint64)
        self._mod = np.ascontiguousarray(np.repeat(to_digits([m], digits).T, LANES, axis=1))
        self._one = np.zeros((digits, LANES), dtype=np.uint64)
        self._one[0] = 1
        r = (mpz(1) << (_RADIX * digits)) % m
        power, firsts = mpz(base) % m, []
        for _ in range(self.rows):  # base^(2^(window i)) in Montgomery form
            firsts.append(power * r % m)
            power = gmpy2.powmod(power, 1 << self.window, m)
        table = np.empty((self.rows, 1 << self.window, digits), dtype=np.uint64)
        table[:, 0, :] = to_digits([r], digits)[0]
        table[:, 1, :] = to_digits(firsts, digits)
        mod, k0 = self._mod.ctypes.data, self._k0.ctypes.data
        for start in range(0, self.rows, LANES):  # eight rows at a time: entry d = entry d - 1 times entry 1
            busy = min(LANES, self.rows - start)
            step = np.empty((digits, LANES), dtype=np.uint64)
            step[:, :busy] = table[start:start + busy, 1, :].T
            step[:, busy:] = step[:, :1]
            acc = step.copy()
            for d in range(2, 1 << self.window):
                amm(acc.ctypes.data, acc.ctypes.data, step.ctypes.data, mod, k0)
                table[start:start + busy, d, :] = acc[:, :busy].T
        self._table = table
        self._positions = np.arange(self.rows)[:, None]

    def powers(self, digits: np.ndarray) -> list:
        """base^alpha for each row of `digits` (shape (count, rows), alpha = sum_i digits[:, i] 2^(window i)),
        as mpz below the modulus."""
        digits = np.asarray(digits)
        if digits.ndim != 2 or digits.shape[1] != self.rows:
            raise ValueError(f"digits of shape (count, {self.rows}) expected, got {digits.shape}")
        if digits.size and not (0 <= digits.min() and digits.max() < (1 << self.window)):
            raise ValueError(f"digits must lie in [0, 2^{self.window})")
        mod, k0, one = self._mod.ctypes.data, self._k0.ctypes.data, self._one.ctypes.data
        stride = self._digits * LANES * 8
        out: list = []
        for start in range(0, len(digits), LANES):
            chunk = digits[start:start + LANES]
            busy = len(chunk)
            if busy < LANES:  # idle lanes repeat the last one
                chunk = np.concatenate([chunk, np.repeat(chunk[-1:], LANES - busy, axis=0)])
            # entries[i]: the eight lanes' entries of digit position i, digit-major (the library's layout)
            entries = np.ascontiguousarray(self._table[self._positions, chunk.T].transpose(0, 2, 1))
            acc = entries.ctypes.data
            for i in range(1, self.rows):
                self._amm(acc, acc, acc + i * stride, mod, k0)
            self._amm(acc, acc, one, mod, k0)  # out of the Montgomery form (below 2 m: reduced below)
            out.extend(v % self.modulus for v in from_digits(np.ascontiguousarray(entries[0].T[:busy])))
        return out


def fixed_base(base, modulus, *, rows: int, window: int) -> FixedBase | None:
    """A :class:`FixedBase` for `base` modulo `modulus`, or None where the library cannot compute it (not
    installed or not applicable, an even modulus or one of another size, or its multiplication not
    exported)."""
    size = _size(mpz(modulus)) if enabled() else None
    amm = None if size is None else _amm(_DIGITS[size])
    if amm is None:
        return None
    return FixedBase(base, modulus, rows=rows, window=window, digits=_DIGITS[size], amm=amm)
