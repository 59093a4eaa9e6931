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

Only public ciphertexts, public exponents and the key holder's own decryption go through it: it computes
exponentiations, it does not see which party's values they carry.
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

__all__ = ["LANES", "enabled", "powmod_list", "supports"]

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


def supports(modulus: int) -> bool:
    """Whether crypto_mb handles this modulus (odd, of a size it has) in this process."""
    return enabled() and _size(modulus) is not None


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
            mod_p = _P8(*[mod.ctypes.data + lane * nbytes for lane in range(LANES)])
        busy = len(chunk_b)
        chunk_b += [chunk_b[-1]] * (LANES - busy)  # idle lanes repeat the last one: every lane valid
        chunk_e += [chunk_e[-1]] * (LANES - busy)
        exp_bits = max(1, max(lengths[start:start + LANES]))
        b_arr, e_arr = _words(chunk_b, nbytes), _words(chunk_e, nbytes)
        o_arr = np.zeros(LANES * words, dtype=np.uint64)
        pointers = [_P8(*[a.ctypes.data + lane * nbytes for lane in range(LANES)]) for a in (o_arr, b_arr, e_arr)]
        status = lib.mbx_exp_mb8(pointers[0], pointers[1], pointers[2], exp_bits, mod_p, bits, buf, len(buf))
        if status:
            raise RuntimeError(f"crypto_mb mbx_exp_mb8 failed with status {status:#x} ({bits}-bit modulus, "
                               f"{exp_bits}-bit exponents)")
        raw = o_arr.tobytes()
        out.extend(mpz.from_bytes(raw[lane * nbytes:(lane + 1) * nbytes], "little") for lane in range(busy))
    return out
