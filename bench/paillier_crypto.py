"""Throughput of ppml.crypto.paillier against element-by-element python-paillier, same key, one run.

Measures, on one key (default 2048 bits):

- encryption of a float vector: ours (``djn`` and ``textbook`` obfuscators) vs ``phe``'s
  ``PaillierPublicKey.encrypt`` per value; and the ``djn`` obfuscators alone from the same 8-bit table in
  crypto_mb's Montgomery form (eight per product call, :class:`ppml.crypto.multibuffer.FixedBase`, where the
  library runs) and as gmpy2 integers, for the same digits (the same integers, checked);
- decryption: ours (one CRT pass over the vector) vs ``PaillierPrivateKey.decrypt`` per EncryptedNumber;
- the encrypted matrix-vector product sum_i [v_i] X_ij (X of shape rows x cols, dense normal entries): ours
  (bucket multi-exponentiation) vs phe EncryptedNumber products and sums, and vs a plain gmpy2 loop of one
  modular exponentiation per entry (the "simple loop" the bucket method must beat).

Every method gets the same fixed-point encodings (phe's base-16 exponents are chosen to equal our scales:
16^-10 = 2^-40 for v, 16^-9 = 2^-36 for X), the products' decryptions are checked to agree exactly, and
the ratios are printed. Usage: ``python bench/paillier_crypto.py [--quick] [--bits 2048] [--rows 1000]
[--cols 10] [--encrypt 200]``; ``--quick`` (for the test suite) is ``--bits 1024 --rows 300 --cols 10
--encrypt 100``.
"""

from __future__ import annotations

import argparse
import time
import warnings

import gmpy2
import numpy as np
import phe

from ppml.crypto import multibuffer, paillier
from ppml.crypto.paillier import EncryptedVector, KeyLengthWarning, PublicKey, generate_keypair

V_FRAC_BITS, X_FRAC_BITS = 40, 36  # multiples of 4, so that phe's base-16 exponents give the same scales
QUICK = {"bits": 1024, "rows": 300, "cols": 10, "encrypt": 100}


def timed(fn):
    start = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - start


def phe_matvec(encrypted: list, X: np.ndarray, public_key: phe.PaillierPublicKey) -> list:
    """sum_i enc[i] * X[i, j] with one phe EncryptedNumber product and sum per entry."""
    out = []
    for column in X.T:
        acc = None
        for enc, x in zip(encrypted, column):
            if x != 0.0:
                term = enc * phe.EncodedNumber.encode(public_key, float(x), precision=2.0**-X_FRAC_BITS)
                acc = term if acc is None else acc + term
        out.append(acc)
    return out


def loop_matvec(enc: EncryptedVector, X: np.ndarray) -> list:
    """One gmpy2.powmod per non-zero entry (negative entries through the inverse ciphertext)."""
    pk = enc.public_key
    nsq = gmpy2.mpz(pk.nsquare)
    out = []
    for column in X.T:
        exps = pk.encode(column, frac_bits=X_FRAC_BITS)
        acc = gmpy2.mpz(1)
        for c, e in zip(enc.ciphertexts, exps):
            if e:
                acc = acc * gmpy2.powmod(c, int(e), nsq) % nsq  # powmod inverts c for e < 0
        out.append(int(acc))
    return out


def obfuscators(pk: PublicKey, *, count: int, window: int = 8) -> None:
    """DJN obfuscators h_s^alpha for the same digits of alpha: crypto_mb's table against gmpy2's (the module's
    own table and digit functions, reached here to set the two side by side)."""
    h_s, nsq = gmpy2.mpz(pk.h_s), gmpy2.mpz(pk.nsquare)
    rows = paillier._djn_rows(pk.bits, window)
    digits = paillier._random_digits(count, rows, window)
    table, t_build_gmpy2 = timed(lambda: paillier._djn_table(h_s, nsq, pk.bits, window))
    reference, t_gmpy2 = timed(lambda: [_product(table, row, nsq) for row in digits.tolist()])
    fast, t_build = timed(lambda: multibuffer.fixed_base(h_s, nsq, rows=rows, window=window))
    if fast is None:
        print(f"obfuscator gmpy2 table {t_gmpy2 / count * 1e3:6.3f} ms (crypto_mb cannot run here)")
        return
    got, t_fast = timed(lambda: fast.powers(digits))
    assert got == reference, "crypto_mb's obfuscators differ from gmpy2's"
    print(f"obfuscator gmpy2 table {t_gmpy2 / count * 1e3:6.3f} ms | crypto_mb table "
          f"{t_fast / count * 1e3:6.3f} ms (x{t_gmpy2 / t_fast:.1f}); {window}-bit tables built in "
          f"{t_build_gmpy2:.2f} s and {t_build:.2f} s")


def _product(table: list, digits: list, nsq) -> gmpy2.mpz:
    """prod_i table[i][digits[i]] mod n^2, as the gmpy2 path of PublicKey forms an obfuscator."""
    acc = gmpy2.mpz(1)
    for row, digit in zip(table, digits):
        acc = acc * row[digit] % nsq
    return acc


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small run for the test suite: " + " ".join(
        f"--{k} {v}" for k, v in QUICK.items()))
    parser.add_argument("--bits", type=int, default=2048)
    parser.add_argument("--rows", type=int, default=1000)
    parser.add_argument("--cols", type=int, default=10)
    parser.add_argument("--encrypt", type=int, default=200, help="values encrypted and decrypted per method")
    args = parser.parse_args(argv)
    if args.quick:
        parser.set_defaults(**QUICK)
        args = parser.parse_args(argv)  # the quick sizes, unless given explicitly
    rng = np.random.default_rng(0)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", KeyLengthWarning)  # a short key asked for, on purpose
        pk, sk = generate_keypair(args.bits, scheme="djn")
    textbook = PublicKey(pk.n, scheme="textbook")
    phe_pk, phe_sk = phe.PaillierPublicKey(pk.n), sk.phe_key
    v = rng.normal(size=args.encrypt)
    print(f"{args.bits}-bit key; {args.encrypt} values; matvec X of shape ({args.rows}, {args.cols})")

    _, t_table = timed(lambda: pk.encrypt([0.0], frac_bits=0))  # the first DJN encryption builds the table
    ours, t_djn = timed(lambda: pk.encrypt(v, frac_bits=V_FRAC_BITS))
    _, t_textbook = timed(lambda: textbook.encrypt(v, frac_bits=V_FRAC_BITS))
    reference, t_phe = timed(lambda: [phe_pk.encrypt(float(x), precision=2.0**-V_FRAC_BITS) for x in v])
    print(f"encrypt   phe {t_phe / len(v) * 1e3:7.2f} ms/value | "
          f"ours textbook {t_textbook / len(v) * 1e3:6.2f} "
          f"(x{t_phe / t_textbook:.1f}) | ours djn {t_djn / len(v) * 1e3:6.2f} (x{t_phe / t_djn:.1f}; "
          f"one-off table {t_table:.2f} s)")

    obfuscators(pk, count=max(8, len(v)))

    mine, t_dec = timed(lambda: sk.decrypt(ours))
    theirs, t_phe_dec = timed(lambda: [phe_sk.decrypt(e) for e in reference])
    assert np.array_equal(mine, np.array(theirs)), "decryptions disagree"
    print(f"decrypt   phe {t_phe_dec / len(v) * 1e3:7.2f} ms/value | ours {t_dec / len(v) * 1e3:6.2f} "
          f"(x{t_phe_dec / t_dec:.1f})")

    enc = pk.encrypt(rng.normal(size=args.rows), frac_bits=V_FRAC_BITS)
    X = rng.normal(size=(args.rows, args.cols))
    wrapped = [phe.EncryptedNumber(phe_pk, int(c), -V_FRAC_BITS // 4) for c in enc.ciphertexts]
    product, t_mv = timed(lambda: enc.matvec(X, frac_bits=X_FRAC_BITS))
    looped, t_loop = timed(lambda: loop_matvec(enc, X))
    phe_product, t_phe_mv = timed(lambda: phe_matvec(wrapped, X, phe_pk))
    expected = list(sk.decrypt_encoded(product))
    phe_ints = [int(phe_sk.decrypt_encoded(e).encoding) for e in phe_product]
    assert expected == [m - pk.n if m > pk.n // 2 else m for m in phe_ints], "phe matvec disagrees"
    assert list(sk.decrypt_encoded(EncryptedVector(pk, looped, product.frac_bits))) == expected
    bits = max(int(e).bit_length() for col in X.T for e in pk.encode(col, frac_bits=X_FRAC_BITS))
    print(f"matvec    phe {t_phe_mv:7.2f} s | gmpy2 loop {t_loop:6.2f} s (x{t_phe_mv / t_loop:.1f}) | ours "
          f"{t_mv:6.2f} s (x{t_phe_mv / t_mv:.1f} vs phe, x{t_loop / t_mv:.1f} vs loop); "
          f"exponents <= {bits} bits")


if __name__ == "__main__":
    main()
