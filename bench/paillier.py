"""One epoch of the encrypted SGD protocol on Credit 1: ours against per-element phe, and against the floor.

(b) Encrypted SGD (:mod:`ppml.algorithms.paillier_sgd`, Hardy et al.'s masked flow) on the prepared Credit 1
    data (``data/prepared/default_credit``):

    - ours, one full epoch: background precomputation as configured (``--workers``), wall and CPU seconds;
    - ours and a per-element python-paillier implementation of the same protocol (the same messages, one
      ``phe.EncryptedNumber`` per value, phe's own r^n obfuscation) on the first ``--batches`` mini-batches,
      single process; the phe time is scaled to an epoch (every batch does the same work). phe's result is
      checked against plain numpy Taylor-loss SGD on the same batches.

(c) The floor: the modular exponentiations the protocol needs per epoch (fresh obfuscators; one short
    exponentiation per feature entry of the gradients and per row of the loss; two half-size ones per
    decryption), times the measured cost of one, against ours. The bucket multi-exponentiation can go below
    "one exponentiation per entry", so ours / floor may be below 1 for that part.

Ours runs as the protocol's role programs in this process (:func:`ppml.algorithms.paillier_sgd.fit`); its
coordinator, which makes its own key pair in a real run, is handed the pair phe uses (:func:`coordinator_keys`),
so that both sides work under one key and key generation (a random search for primes) stays out of the timing.

Bench (a), the primitives, is ``bench/paillier_crypto.py``. Usage:
``python bench/paillier.py [--quick] [--data data/prepared/default_credit] [--bits 2048] [--batches 2]
[--rows N]``. ``--quick`` (for the test suite): a 1024-bit key, batches of 200 and the first 1,000 training
rows, on synthetic data of Credit 1's shape when the prepared data are missing.
"""

from __future__ import annotations

import argparse
import contextlib
import math
import resource
import secrets
import sys
import time
import warnings
from pathlib import Path
from typing import Iterator

import gmpy2
import numpy as np
import phe

from ppml.algorithms import paillier_sgd
from ppml.crypto import paillier
from ppml.crypto.paillier import KeyLengthWarning, PublicKey, generate_keypair
from ppml.data.prepared import load_prepared
from ppml.history import ConvergenceWarning
from ppml.parties import Party

ETA, LAM = 0.15, 0.01
QUICK = {"bits": 1024, "batch_size": 200, "batches": 2, "rows": 1000}


def cpu_seconds() -> float:
    """CPU time of this process and of its finished children (the precomputation workers)."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def head(party: Party, rows: int) -> Party:
    """The party restricted to its first `rows` training rows."""
    return Party(party.name, party.columns, party.ids[:rows], party.X[:rows],
                 None if party.y is None else party.y[:rows], party.test_ids, party.X_test, party.y_test)


def synthetic_credit(rows: int, *, seed: int = 0) -> list[Party]:
    """Credit 1's shape without the prepared data: a guest with 13 standardized features and the labels,
    a host with 10, logistic labels (for ``--quick`` on a checkout where the pipeline has not run)."""
    rng = np.random.default_rng(seed)
    n_test = max(rows // 4, 1)
    X = rng.normal(size=(rows + n_test, 23))
    scores = X @ rng.normal(scale=0.3, size=23) - 1.2
    y = (rng.random(rows + n_test) < 1 / (1 + np.exp(-scores))).astype(np.int8)
    ids = np.array([f"r{i}" for i in range(rows + n_test)])
    return [Party("guest", tuple(f"x{j}" for j in range(13)), ids[:rows], X[:rows, :13], y[:rows], ids[rows:],
                  X[rows:, :13], y[rows:]),
            Party("host", tuple(f"x{j}" for j in range(13, 23)), ids[:rows], X[:rows, 13:], None, ids[rows:],
                  X[rows:, 13:], None)]


@contextlib.contextmanager
def coordinator_keys(keys) -> Iterator[None]:
    """Have the coordinator's program make `keys` instead of a fresh pair (as the protocol tests do)."""
    made = paillier.generate_keypair
    paillier.generate_keypair = lambda bits, *, scheme: keys
    try:
        yield
    finally:
        paillier.generate_keypair = made


def ours(parties: list[Party], keys, *, batch_size: int, workers: int,
         squares: str) -> tuple[float, float, int]:
    """(wall s, CPU s, iterations) of one epoch of our protocol, its three role programs in this process."""
    params = paillier_sgd.Params(batch_size=batch_size, key_bits=keys[0].bits, eta=ETA, lam=LAM, max_epochs=1,
                                 precompute_workers=workers, host_squares=squares, scheme=keys[0].scheme)
    network = paillier_sgd.network_for(parties, params, rng=None)
    start, cpu = time.perf_counter(), cpu_seconds()
    with warnings.catch_warnings(), coordinator_keys(keys):
        warnings.simplefilter("ignore", ConvergenceWarning)  # one epoch, on purpose
        warnings.simplefilter("ignore", KeyLengthWarning)  # --quick's short key, on purpose
        history = paillier_sgd.fit(parties, network, params, rng=np.random.default_rng(0))
    return time.perf_counter() - start, cpu_seconds() - cpu, history.final["iterations"]


def phe_epoch(guest: Party, host: Party, pk: phe.PaillierPublicKey, sk: phe.PaillierPrivateKey, *,
              batches: list[np.ndarray], frac_bits: int, squares: str) -> np.ndarray:
    """The masked SGD protocol of :mod:`ppml.algorithms._hetero_lr`, one phe EncryptedNumber per value.

    Fixed-point exponents are chosen as ours (values at 16^-13 = 2^-52, features at about 2^-frac_bits), so
    that no ciphertext needs rescaling. Returns the weights (host block, then guest block with the intercept
    last) after `batches`.
    """
    value_exp, x_exp = -13, -math.ceil(frac_bits / 4)

    def code(v: float, exponent: int) -> phe.EncodedNumber:
        return phe.EncodedNumber.encode(pk, float(v), precision=16.0 ** exponent)

    XA = np.asarray(host.X, dtype=float)
    XB = np.hstack([np.asarray(guest.X, dtype=float), np.ones((guest.n_samples, 1))])
    y = 2.0 * guest.y - 1.0
    theta_A, theta_B = np.zeros(XA.shape[1]), np.zeros(XB.shape[1])
    pen_A, pen_B = np.ones(XA.shape[1]), np.r_[np.ones(XB.shape[1] - 1), 0.0]
    mask_bits = pk.n.bit_length() - 65

    def gradient(fore, X, theta, penalized):
        out = []
        for j in range(X.shape[1]):
            total = None
            for d, x in zip(fore, X[:, j]):
                term = d * code(x, x_exp)
                total = term if total is None else total + term
            out.append(total + code(len(fore) * LAM * penalized[j] * theta[j], total.exponent))
        return out

    def step(encrypted, theta, s):
        masks = [secrets.randbits(mask_bits) for _ in encrypted]
        masked = [g + phe.EncodedNumber(pk, r, g.exponent) for g, r in zip(encrypted, masks)]
        returned = [sk.decrypt_encoded(m) for m in masked]  # C decrypts the masked values
        unmasked = [(e.encoding - r) * 16.0 ** e.exponent / s for e, r in zip(returned, masks)]
        return theta - ETA * np.array(unmasked)

    for rows in batches:
        s = len(rows)
        u_A = XA[rows] @ theta_A
        enc_u = [pk.encrypt(float(v), precision=16.0 ** value_exp) for v in u_A]  # A -> B
        sq = u_A * u_A if squares == "rows" else [u_A @ u_A]
        enc_sq = [pk.encrypt(float(v), precision=16.0 ** value_exp) for v in sq]
        enc_pen = pk.encrypt(0.5 * LAM * float(theta_A @ theta_A), precision=16.0 ** value_exp)
        u_B, y_S = XB[rows] @ theta_B, y[rows]
        own = 0.25 * u_B - 0.5 * y_S
        fore = [e * code(0.25, -1) + code(o, value_exp - 1) for e, o in zip(enc_u, own)]
        for e in fore:
            e.obfuscate()  # B -> A, re-randomized
        cross = None
        for e, o in zip(enc_u, own):
            term = e * code(o, x_exp)
            cross = term if cross is None else cross + term
        plain = (float(np.sum(np.log(2) - 0.5 * y_S * u_B + 0.125 * u_B * u_B))
                 + s * 0.5 * LAM * float((pen_B * theta_B) @ (pen_B * theta_B)))
        sk.decrypt(cross + sum(enc_sq) * 0.125 + enc_pen * s + plain)  # B -> C: the batch loss
        theta_A, theta_B = (step(gradient(fore, XA[rows], theta_A, pen_A), theta_A, s),
                            step(gradient(fore, XB[rows], theta_B, pen_B), theta_B, s))
    return np.concatenate([theta_A, theta_B])


def numpy_epoch(guest: Party, host: Party, batches: list[np.ndarray]) -> np.ndarray:
    X = np.hstack([host.X, guest.X, np.ones((guest.n_samples, 1))])
    y = 2.0 * guest.y - 1.0
    penalized = np.r_[np.ones(X.shape[1] - 1), 0.0]
    w = np.zeros(X.shape[1])
    for rows in batches:
        u = X[rows] @ w
        w = w - ETA * (X[rows].T @ (0.25 * u - 0.5 * y[rows]) / len(rows) + LAM * penalized * w)
    return w


def floor_seconds(pk: PublicKey, sk, parties: list[Party], *, batch_size: int, frac_bits: int,
                  squares: str) -> tuple[dict[str, int], dict[str, float]]:
    """Exponentiations one epoch needs, by kind, and the measured seconds of one of each kind."""
    guest, host = parties
    n, batches = guest.n_samples, math.ceil(guest.n_samples / batch_size)
    d = host.n_features + guest.n_features + 1
    counts = {
        # [u_A] and [d] per row, the squares per row or per batch, the penalty and the masks per batch
        "obfuscation": 2 * n + (n if squares == "rows" else batches) + batches * (1 + d),
        "short exponentiation": n * (d + 1),  # gradient entries and the loss's cross term
        "decryption": batches * (d + 1),
    }
    rng = np.random.default_rng(0)
    X = np.hstack([host.X, guest.X])
    exps = [abs(int(e)) for e in pk.encode(X[rng.integers(0, n, 200), rng.integers(0, X.shape[1], 200)],
                                           frac_bits=frac_bits) if e]
    enc = pk.encrypt(rng.normal(size=200), frac_bits=frac_bits)
    nsq = gmpy2.mpz(pk.nsquare)
    start = time.process_time()
    pk.encrypt(np.zeros(200), frac_bits=0)
    cost = {"obfuscation": (time.process_time() - start) / 200}
    start = time.process_time()
    for c, e in zip(enc.ciphertexts, exps):
        gmpy2.powmod(c, e, nsq)
    cost["short exponentiation"] = (time.process_time() - start) / len(exps)
    start = time.process_time()
    sk.decrypt(enc)
    cost["decryption"] = (time.process_time() - start) / 200
    return counts, cost


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small run for the test suite: " + " ".join(
        f"--{k.replace('_', '-')} {v}" for k, v in QUICK.items()))
    parser.add_argument("--data", default="data/prepared/default_credit")
    parser.add_argument("--bits", type=int, default=2048)
    parser.add_argument("--batch-size", type=int, default=1000)
    parser.add_argument("--batches", type=int, default=2, help="mini-batches of the side-by-side comparison")
    parser.add_argument("--rows", type=int, help="use the first ROWS training rows only (default: all)")
    parser.add_argument("--workers", type=int, default=1, help="precompute_workers of the full-epoch run")
    parser.add_argument("--squares", choices=("rows", "sum"), default="sum", help="host_squares")
    args = parser.parse_args(argv)
    if args.quick:
        parser.set_defaults(**QUICK)
        args = parser.parse_args(argv)  # the quick sizes, unless given explicitly
    frac_bits = paillier_sgd.Params().frac_bits
    if Path(args.data, "manifest.json").exists():
        _, parties, _ = load_prepared(args.data)
        source = f"Credit 1 ({args.data})"
    elif args.quick:
        parties = synthetic_credit(args.rows)
        source = f"synthetic data of Credit 1's shape ({args.data} not prepared)"
    else:
        print(f"{args.data}: no prepared data; run `dvc repro prepare@default_credit` first", file=sys.stderr)
        return 2
    if args.rows is not None:
        parties = [head(p, args.rows) for p in parties]
    guest, host = parties
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", KeyLengthWarning)  # --quick's short key, on purpose
        pk, sk = generate_keypair(args.bits, scheme="djn")
    textbook = (PublicKey(pk.n, scheme="textbook"), sk)
    n_batches = math.ceil(guest.n_samples / args.batch_size)
    print(f"{source}: {guest.n_samples} rows, {host.n_features} + {guest.n_features} features + intercept; "
          f"{args.bits}-bit key; |S| = {args.batch_size} ({n_batches} batches per epoch); host_squares = "
          f"{args.squares}")

    # (b) side by side on the first batches, one process each
    rows = args.batches * args.batch_size
    few = [head(p, rows) for p in parties]
    batches = [np.arange(i, min(i + args.batch_size, rows)) for i in range(0, rows, args.batch_size)]
    djn_wall, djn_cpu, _ = ours(few, (pk, sk), batch_size=args.batch_size, workers=0, squares=args.squares)
    tb_wall, tb_cpu, _ = ours(few, textbook, batch_size=args.batch_size, workers=0, squares=args.squares)
    phe_pk = phe.PaillierPublicKey(pk.n)
    start, cpu = time.perf_counter(), cpu_seconds()
    phe_w = phe_epoch(few[0], few[1], phe_pk, sk.phe_key, batches=batches, frac_bits=frac_bits,
                      squares=args.squares)
    phe_wall, phe_cpu = time.perf_counter() - start, cpu_seconds() - cpu
    gap = float(np.max(np.abs(phe_w - numpy_epoch(few[0], few[1], batches))))
    assert gap < 1e-5, f"the phe protocol drifted from the numpy reference by {gap:.2e}"
    scale = n_batches / args.batches
    print(f"(b) {args.batches} batches, CPU s (one process): phe {phe_cpu:.1f} | ours textbook {tb_cpu:.1f} "
          f"(x{phe_cpu / tb_cpu:.1f}) | ours djn {djn_cpu:.1f} (x{phe_cpu / djn_cpu:.1f}); "
          f"phe = numpy to {gap:.1e}")
    print(f"    per epoch (scaled x{scale:.1f}): phe {phe_cpu * scale / 60:.1f} min, ours djn "
          f"{djn_cpu * scale / 60:.1f} min")

    wall, cpu, iterations = ours(parties, (pk, sk), batch_size=args.batch_size, workers=args.workers,
                                 squares=args.squares)
    print(f"    ours, full epoch ({iterations} iterations, precompute_workers={args.workers}): "
          f"wall {wall:.1f} s, CPU {cpu:.1f} s; phe / ours (wall) x{phe_wall * scale / wall:.1f}")

    # (c) the floor
    counts, cost = floor_seconds(pk, sk, parties, batch_size=args.batch_size, frac_bits=frac_bits,
                                 squares=args.squares)
    floor = sum(counts[k] * cost[k] for k in counts)
    detail = ", ".join(f"{counts[k]} {k}s x {cost[k] * 1e3:.3f} ms" for k in counts)
    print(f"(c) floor per epoch: {detail} = {floor:.1f} s; ours CPU / floor x{cpu / floor:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
