"""One epoch of encrypted SGD on Credit 1: ours unpacked and packed, phe, and a floor, in one run.

Encrypted SGD (:mod:`ppml.algorithms.paillier_sgd`, Hardy et al.'s masked flow, ``update_at: parties``) on
the prepared Credit 1 data (``data/prepared/default_credit``; synthetic data of its shape with ``--quick``
when they are absent). One key pair (DJN) serves every run; the coordinator, which makes its own pair in a
real run, is handed it (:func:`coordinator_keys`), so key generation stays out of the timing. Printed side by
side, and written with ``--json FILE``:

1. **Ours, one core.** For each ``--frac-bits`` (16, Table 1's setting, and 23, FATE's default) unpacked
   (``packing: 1``) and packed (``packing: "auto"``, the largest t rows per ciphertext the key allows), one
   full epoch (or, with ``--ours-batches N``, the first N mini-batches scaled to an epoch), the three role
   programs in this process with ``precompute_workers: 0``: the CPU seconds of this process are the
   protocol's whole per-core cost (every party's work, evaluation after the epoch included). The packed and
   unpacked models are checked to be equal bit for bit.
2. **Ours, wall with workers** (labelled apart): the same epochs at the first ``--frac-bits`` with
   ``precompute_workers: --workers`` (per data party, background processes that make zeros and one that
   computes half of each product: :mod:`ppml.crypto.background`): wall seconds, and the CPU seconds of this
   process and its finished workers. On a 2-core machine this is what a run waits for,
   not what it costs.
3. **phe, one core.** A per-element python-paillier implementation of the same masked protocol (the same
   messages, one ``phe.EncryptedNumber`` per value, phe's own r^n obfuscation, unpacked) on the first
   ``--batches`` mini-batches, scaled to an epoch (every batch does the same work), at the first
   ``--frac-bits``; its model is checked against plain numpy Taylor-loss SGD on the same batches. Ratios
   phe / ours are of one-core CPU seconds per epoch.
4. **A floor the code cannot beat**, per configuration (t = 1 and the packed t): the protocol's unavoidable
   operations per epoch, each priced at the best per-operation cost measured in this run:

   - fresh obfuscators, one per ciphertext of every fresh encryption or re-randomization the protocol
     requires, per batch of s rows: ceil(s/t) for [u_A], ceil(s/t) for the re-randomized [d], and the
     unpacked ones, A's squares (s per-row ciphertexts or 1 sum) and A's penalty (1); priced at an
     obfuscator from the widest DJN table (``PublicKey.build_table(MAX_DJN_WINDOW)``, 16-bit digits; the
     protocol's workers use 12 and in-line encryption 8, so ours cannot be cheaper per obfuscator);
   - decryptions, one per gradient entry (d_A + d_B + 1 with the intercept) and one per loss ciphertext per
     batch; priced at a CRT decryption by ``PrivateKey.decrypt_encoded`` on a vector;
   - one modular multiplication mod n^2 per non-zero entry of X_S (both parties' features and the
     intercept column) and per entry of the loss's column u_B/4 - y/2 (non-zero almost surely), i.e. at
     least one product to bring each term into the encrypted X^T [d] and the loss; priced at a gmpy2
     ``a * b % n^2`` timed in a tight Python loop.

   It leaves out everything else ours pays: the rest of each exponentiation (frac_bits-long exponents cost
   more than one product per term, even by bucket multi-exponentiation), packing's Horner shifts (t - 1
   powerings by 2^B per product column) and slot masks, the unpacked masked mode's encryptions of its
   gradient masks (a plaintext mask needs no obfuscator), the product that joins an obfuscator to its
   plaintext or ciphertext, the homomorphic sums and scalings that form [d] and the loss, encoding,
   decoding and range checks, messages, the per-epoch evaluation, table building and all Python overhead.
   ours / floor (one-core CPU) must be >= 1: the bench says so and exits with status 1 if it is not, since
   then the floor is wrong.

Also printed: FATE's own published per-epoch time for its hetero (coordinated) LR, as a labelled reference
line with its source (:data:`FATE_REFERENCE`; a different shape, key length unstated, 2 x 16 cores), and the
load average before and after. Bench (a), the primitives, is ``bench/paillier_crypto.py``.

Usage: ``python bench/paillier.py [--quick] [--data data/prepared/default_credit] [--bits 2048]
[--batches 2] [--batch-size 1000] [--rows N] [--frac-bits 16,23] [--workers 1] [--squares sum]
[--ours-batches N] [--json FILE]``. ``--quick`` (for the test suite): a 1024-bit key, batches of 200, the
first 1,000 training rows, ``--frac-bits 16`` (packed t = 3 at 1024 bits). The floor's 16-bit table takes
about 2.7 GB at 2048 bits (0.7 GB at 1024; in crypto_mb's Montgomery form where it runs, 2.3 and 0.6 GB as
gmpy2 integers) while it is measured; the full run takes about 7 minutes.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import resource
import secrets
import sys
import time
import warnings
from pathlib import Path
from typing import Any, Iterator

import gmpy2
import numpy as np
import phe

from ppml.algorithms import _hetero_lr, paillier_sgd
from ppml.crypto import multibuffer, paillier
from ppml.crypto.paillier import MAX_DJN_WINDOW, KeyLengthWarning, PublicKey, generate_keypair
from ppml.data.prepared import load_prepared
from ppml.history import ConvergenceWarning
from ppml.parties import Party

ETA, LAM = 0.15, 0.01
QUICK = {"bits": 1024, "batch_size": 200, "batches": 2, "rows": 1000, "frac_bits": "16"}

#: FATE's published figure (FATE-v2.0.0 performance document), quoted as given; not the same shape or machine.
#: --shape: Credit 1 (this bench) or FATE's published benchmark shape (bench/fate_shape.py)
SHAPES = ("credit1", "fate")
FATE_REFERENCE = {
    "url": "https://github.com/FederatedAI/FATE/blob/master/doc/2.0/fate/performance.md",
    "text": ("FATE's docs: Hetero-Coordinated-LR 2m16s/epoch on FATE-v2.0.0 (2m41s/epoch on v1.11.4); guest "
             "100,000 rows x 30 features, host 100,000 x 300; 2 hosts, 16 cores used on each, 1 Gb LAN; key "
             "length and batch size not stated"),
    "numbers": {"seconds_per_epoch_v2_0_0": 136.0, "seconds_per_epoch_v1_11_4": 161.0, "rows": 100000,
                "guest_features": 30, "host_features": 300, "cores_used": 32},
}


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


def progress(message: str) -> None:
    """A line on stderr as each measurement ends (the report itself is printed at the end)."""
    print(message, file=sys.stderr, flush=True)


def params_for(keys, *, batch_size: int, workers: int, squares: str, packing: int | str,
               frac_bits: int) -> paillier_sgd.Params:
    """The protocol parameters of one bench run (one epoch, the bench's eta and lam)."""
    return paillier_sgd.Params(batch_size=batch_size, key_bits=keys[0].bits, eta=ETA, lam=LAM, max_epochs=1,
                               precompute_workers=workers, host_squares=squares, scheme=keys[0].scheme,
                               packing=packing, frac_bits=frac_bits)


def slots_of(params: paillier_sgd.Params) -> int:
    """t, the rows per ciphertext that ``params.packing`` resolves to (1 when unpacked)."""
    layout = _hetero_lr.packing_layout(params, params.batch_size)
    return 1 if layout is None else layout.slots


def ours(parties: list[Party], keys, *, batch_size: int, workers: int, squares: str, packing: int | str,
         frac_bits: int) -> dict[str, Any]:
    """One epoch of our protocol, its three role programs in this process.

    Parameters
    ----------
    parties : list of Party
        The guest, then its hosts (the epoch covers all their training rows).
    keys : tuple of PublicKey, PrivateKey
        The pair the coordinator uses; each run gets a fresh copy of the public key (no table or pooled
        obfuscators carried over from another run).
    batch_size, workers, squares, packing, frac_bits
        ``batch_size``, ``precompute_workers``, ``host_squares``, ``packing`` and ``frac_bits``.

    Returns
    -------
    dict
        ``wall`` and ``cpu`` seconds (CPU of this process and of its finished workers), ``iterations``,
        ``slots`` (t) and the final ``weights`` (the hosts' blocks in order, then the guest's).
    """
    pk, sk = keys
    keys = (PublicKey(pk.n, scheme=pk.scheme, h_s=pk.h_s), sk)
    params = params_for(keys, batch_size=batch_size, workers=workers, squares=squares, packing=packing,
                        frac_bits=frac_bits)
    network = paillier_sgd.network_for(parties, params, rng=None)
    start, cpu = time.perf_counter(), cpu_seconds()
    with warnings.catch_warnings(), coordinator_keys(keys):
        warnings.simplefilter("ignore", ConvergenceWarning)  # one epoch, on purpose
        warnings.simplefilter("ignore", KeyLengthWarning)  # --quick's short key, on purpose
        history = paillier_sgd.fit(parties, network, params, rng=np.random.default_rng(0))
    wall, cpu = time.perf_counter() - start, cpu_seconds() - cpu
    weights = history.extra["weights"]
    return {"wall": wall, "cpu": cpu, "iterations": history.final["iterations"], "slots": slots_of(params),
            "weights": np.concatenate([weights[p.name] for p in [*parties[1:], parties[0]]])}


def phe_epoch(guest: Party, host: Party, pk: phe.PaillierPublicKey, sk: phe.PaillierPrivateKey, *,
              batches: list[np.ndarray], frac_bits: int, squares: str) -> np.ndarray:
    """The masked SGD protocol of :mod:`ppml.algorithms._hetero_lr`, one phe EncryptedNumber per value.

    Fixed-point exponents are ours rounded up to phe's base 16 (values at 16^-ceil(VALUE_FRAC_BITS / 4),
    features at 16^-ceil(frac_bits / 4)), so that no ciphertext needs rescaling. Returns the weights (host
    block, then guest block with the intercept last) after `batches`.
    """
    value_exp, x_exp = -math.ceil(_hetero_lr.VALUE_FRAC_BITS / 4), -math.ceil(frac_bits / 4)

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
    """Plain Taylor-loss SGD on the same batches (the reference phe's model is checked against)."""
    X = np.hstack([host.X, guest.X, np.ones((guest.n_samples, 1))])
    y = 2.0 * guest.y - 1.0
    penalized = np.r_[np.ones(X.shape[1] - 1), 0.0]
    w = np.zeros(X.shape[1])
    for rows in batches:
        u = X[rows] @ w
        w = w - ETA * (X[rows].T @ (0.25 * u - 0.5 * y[rows]) / len(rows) + LAM * penalized * w)
    return w


def floor_counts(guest: Party, hosts: list[Party], *, batch_size: int, slots: int,
                 squares: str) -> dict[str, int]:
    """The protocol's unavoidable operations in one epoch over all rows, with t = `slots` rows per ciphertext
    and K = len(`hosts`) hosts (the counts for K = 1 are those of one host, unchanged).

    Returns
    -------
    dict
        ``obfuscators`` (per batch of s rows: ceil(s/t) for each [u_k] and for the [d] re-randomized for each
        host, ceil(s/t) for each re-randomized prefix sum [P_k] and one for each [c_k], k >= 2; each host's
        squares, s or 1, and penalty, 1), ``decryptions`` (per batch: every block's gradient entries, the
        intercept and the loss) and ``mulmods`` (non-zero entries of every X_k, X_B and the intercept column,
        one loss coefficient per row, and per row one product for each host cross term c_k, k >= 2).
    """
    n, k = guest.n_samples, len(hosts)
    sizes = _hetero_lr.batch_sizes(n, batch_size)
    obfuscators = sum((3 * k - 1) * -(-s // slots) + k * ((s if squares == "rows" else 1) + 1) + (k - 1)
                      for s in sizes)
    decryptions = len(sizes) * (sum(h.n_features for h in hosts) + guest.n_features + 1 + 1)
    mulmods = (sum(int(np.count_nonzero(h.X)) for h in hosts) + int(np.count_nonzero(guest.X)) + n + n
               + (k - 1) * n)
    return {"obfuscators": obfuscators, "decryptions": decryptions, "mulmods": mulmods}


def best_costs(pk: PublicKey, sk, *, samples: int, repeats: int = 3) -> tuple[dict[str, float], float]:
    """The best (smallest over `repeats`) CPU seconds of one operation of each kind the floor counts.

    An obfuscator from a fresh copy of `pk` with the widest table (``build_table(MAX_DJN_WINDOW)``, whose
    building is timed apart and returned second); a multiplication mod n^2 by gmpy2 in a tight loop; a CRT
    decryption by ``PrivateKey.decrypt_encoded`` on a vector of `samples` ciphertexts.
    """
    wide = PublicKey(pk.n, scheme=pk.scheme, h_s=pk.h_s)
    start = time.process_time()
    wide.build_table(MAX_DJN_WINDOW)
    build = time.process_time() - start
    cost = {"obfuscators": math.inf, "mulmods": math.inf, "decryptions": math.inf}
    for _ in range(repeats):
        start = time.process_time()
        wide.precompute(samples)
        cost["obfuscators"] = min(cost["obfuscators"], (time.process_time() - start) / samples)
    del wide  # the table: 2^16 elements of Z_{n^2} per 16-bit digit of alpha (2.3 to 2.7 GB at 2048 bits)
    nsq = gmpy2.mpz(pk.nsquare)
    a, b = gmpy2.mpz(secrets.randbelow(pk.nsquare)), gmpy2.mpz(secrets.randbelow(pk.nsquare))
    loops = 50 * samples
    for _ in range(repeats):
        x = a
        start = time.process_time()
        for _ in range(loops):
            x = x * b % nsq
        cost["mulmods"] = min(cost["mulmods"], (time.process_time() - start) / loops)
    vector = pk.encrypt(np.random.default_rng(0).normal(size=samples), frac_bits=16)
    for _ in range(repeats):
        start = time.process_time()
        sk.decrypt_encoded(vector)
        cost["decryptions"] = min(cost["decryptions"], (time.process_time() - start) / samples)
    return cost, build


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small run for the test suite: " + " ".join(
        f"--{k.replace('_', '-')} {v}" for k, v in QUICK.items()))
    parser.add_argument("--data", default="data/prepared/default_credit")
    parser.add_argument("--bits", type=int, default=2048)
    parser.add_argument("--batch-size", type=int, default=1000)
    parser.add_argument("--batches", type=int, default=2,
                        help="mini-batches of the phe run (scaled to an epoch)")
    parser.add_argument("--ours-batches", type=int, default=0,
                        help="time ours on the first N mini-batches scaled to an epoch (0: one full epoch)")
    parser.add_argument("--rows", type=int, help="use the first ROWS training rows only (default: all)")
    parser.add_argument("--frac-bits", default="16,23", help="comma-separated frac_bits; the first one is "
                                                             "also the phe run's and the workers run's")
    parser.add_argument("--workers", type=int, default=1, help="precompute_workers of the wall-clock runs")
    parser.add_argument("--squares", choices=("rows", "sum"), default="sum", help="host_squares")
    parser.add_argument("--json", type=Path, help="write every number to this file")
    parser.add_argument("--shape", choices=SHAPES, default="credit1",
                        help="fate: FATE's published benchmark shape instead (bench/fate_shape.py, its own options)")
    only_shape = argparse.ArgumentParser(add_help=False)  # the rest of the arguments are fate_shape's then
    only_shape.add_argument("--shape", choices=SHAPES, default="credit1")
    shape, rest = only_shape.parse_known_args(argv)
    if shape.shape == "fate":
        import fate_shape  # bench/fate_shape.py, beside this file

        return fate_shape.main(rest)
    args = parser.parse_args(argv)
    if args.quick:
        parser.set_defaults(**QUICK)
        args = parser.parse_args(argv)  # the quick sizes, unless given explicitly
    fracs = [int(f) for f in str(args.frac_bits).split(",")]
    load_before = os.getloadavg()
    if Path(args.data, "manifest.json").exists():
        _, parties, _ = load_prepared(args.data)
        source, synthetic = f"Credit 1 ({args.data})", 0
    elif args.quick:
        parties = synthetic_credit(args.rows)
        source, synthetic = f"synthetic data of Credit 1's shape ({args.data} not prepared)", 1
    else:
        print(f"{args.data}: no prepared data; run `dvc repro prepare@default_credit` first", file=sys.stderr)
        return 2
    if args.rows is not None:
        parties = [head(p, args.rows) for p in parties]
    guest, host = parties
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", KeyLengthWarning)  # --quick's short key, on purpose
        pk, sk = generate_keypair(args.bits, scheme="djn")
    keys = (pk, sk)
    n_batches = math.ceil(guest.n_samples / args.batch_size)
    mask_bits = paillier_sgd.Params().mask_bits
    print(f"{source}: {guest.n_samples} rows, {host.n_features} + {guest.n_features} features + intercept; "
          f"{args.bits}-bit DJN key; |S| = {args.batch_size} ({n_batches} batches per epoch); host_squares = "
          f"{args.squares}; update_at = parties (masked); mask_bits = {mask_bits}")
    engine = ("crypto_mb, eight per call on AVX-512 IFMA, where estimated faster than gmpy2; obfuscators "
              "through its Montgomery product where it exports one" if multibuffer.enabled()
              else "gmpy2 only (crypto_mb absent, off or no IFMA)")
    print(f"exponentiations: {engine}")
    print(f"load average before: {' '.join(f'{v:.2f}' for v in load_before)}")
    out: dict[str, Any] = {}

    # 1. ours on one core: every configuration, one epoch (or the first --ours-batches scaled)
    timed_parties, scale = parties, 1.0
    if args.ours_batches:
        timed_parties = [head(p, args.ours_batches * args.batch_size) for p in parties]
        scale = n_batches / math.ceil(timed_parties[0].n_samples / args.batch_size)
    configs = [(packing, f) for f in fracs for packing in (1, "auto")]
    one_core: dict[tuple, dict] = {}
    for packing, f in configs:
        run = ours(timed_parties, keys, batch_size=args.batch_size, workers=0, squares=args.squares,
                   packing=packing, frac_bits=f)
        run["cpu_epoch"], run["wall_epoch"] = run["cpu"] * scale, run["wall"] * scale
        one_core[packing, f] = run
        progress(f"ours one core, packing {packing} (t={run['slots']}), frac_bits {f}: "
                 f"CPU {run['cpu']:.1f} s")
    for f in fracs:
        same = np.array_equal(one_core[1, f]["weights"], one_core["auto", f]["weights"])
        assert same, f"frac_bits {f}: the packed model differs from the unpacked one"

    # 2. ours, wall with the background processes
    with_workers = {packing: ours(parties, keys, batch_size=args.batch_size, workers=args.workers,
                                  squares=args.squares, packing=packing, frac_bits=fracs[0])
                    for packing in (1, "auto")}
    progress("ours with workers: " + ", ".join(f"t={r['slots']} wall {r['wall']:.1f} s"
                                              for r in with_workers.values()))

    # 3. phe on the first --batches batches, one process, scaled to an epoch
    rows = min(args.batches * args.batch_size, guest.n_samples)
    few = [head(p, rows) for p in parties]
    batches = [np.arange(i, min(i + args.batch_size, rows)) for i in range(0, rows, args.batch_size)]
    start, cpu = time.perf_counter(), cpu_seconds()
    phe_w = phe_epoch(few[0], few[1], phe.PaillierPublicKey(pk.n), sk.phe_key, batches=batches,
                      frac_bits=fracs[0], squares=args.squares)
    phe_wall, phe_cpu = time.perf_counter() - start, cpu_seconds() - cpu
    gap = float(np.max(np.abs(phe_w - numpy_epoch(few[0], few[1], batches))))
    assert gap < 1e-5, f"the phe protocol drifted from the numpy reference by {gap:.2e}"
    phe_scale = n_batches / len(batches)
    phe_epoch_cpu = phe_cpu * phe_scale
    progress(f"phe, {len(batches)} batches: CPU {phe_cpu:.1f} s")

    # 4. the floor
    cost, build = best_costs(pk, sk, samples=500 if args.bits <= 1024 else 1000)
    floors: dict[int, dict] = {}
    for run in one_core.values():
        t = run["slots"]
        if t not in floors:
            counts = floor_counts(guest, [host], batch_size=args.batch_size, slots=t, squares=args.squares)
            floors[t] = {**counts, "seconds": sum(counts[k] * cost[k] for k in counts)}
    load_after = os.getloadavg()

    # the report
    scaled = "one full epoch" if scale == 1 else f"first {args.ours_batches} batches x {scale:.1f}"
    print(f"\n1. ours, ONE CORE (precompute_workers=0, all three roles in this process; CPU s per epoch, "
          f"{scaled}); 3. phe / ours; 4. ours / floor")
    print(f"   {'configuration':<25}{'t':>3}{'frac':>6}{'CPU s':>10}{'wall s':>9}{'floor s':>9}"
          f"{'ours/floor':>12}{'phe/ours':>10}")
    violated = []
    for (packing, f), run in one_core.items():
        floor = floors[run["slots"]]["seconds"]
        run["over_floor"] = run["cpu_epoch"] / floor
        run["phe_over"] = phe_epoch_cpu / run["cpu_epoch"] if f == fracs[0] else None
        if run["over_floor"] < 1:
            violated.append((packing, f))
        name = "unpacked (packing 1)" if packing == 1 else 'packed (packing "auto")'
        phe_ratio = "" if run["phe_over"] is None else f"{run['phe_over']:.1f}"
        print(f"   {name:<25}{run['slots']:>3}{f:>6}{run['cpu_epoch']:>10.1f}{run['wall_epoch']:>9.1f}"
              f"{floor:>9.1f}{run['over_floor']:>12.2f}{phe_ratio:>10}")
    print("   (packed and unpacked models equal bit for bit at every frac_bits)")
    print(f"2. ours, WALL with background processes (precompute_workers={args.workers} per data "
          f"party; frac_bits {fracs[0]}; one full epoch; CPU includes the workers'):")
    for packing, run in with_workers.items():
        name = "unpacked" if packing == 1 else f"packed t={run['slots']}"
        print(f"   {name:<14} wall {run['wall']:.1f} s, CPU {run['cpu']:.1f} s; phe one core / ours wall "
              f"x{phe_epoch_cpu / run['wall']:.1f}")
    print(f"3. phe, one core, per element (frac_bits {fracs[0]}, unpacked): {len(batches)} batches CPU "
          f"{phe_cpu:.1f} s (wall {phe_wall:.1f} s), per epoch x{phe_scale:.1f} = {phe_epoch_cpu:.1f} s "
          f"({phe_epoch_cpu / 60:.1f} min); phe = numpy to {gap:.1e}")
    print(f"4. floor per epoch = counts x best measured costs: obfuscator {cost['obfuscators'] * 1e3:.3f} ms "
          f"(DJN table window {MAX_DJN_WINDOW}, built in {build:.1f} s, not counted), mulmod mod n^2 "
          f"{cost['mulmods'] * 1e6:.2f} us (gmpy2 tight loop), CRT decryption "
          f"{cost['decryptions'] * 1e3:.3f} ms "
          f"(decrypt_encoded on a vector)")
    for t, floor in floors.items():
        parts = " + ".join(f"{floor[k]} {k} ({floor[k] * cost[k]:.1f} s)"
                           for k in ("obfuscators", "mulmods", "decryptions"))
        print(f"   t={t}: {parts} = {floor['seconds']:.1f} s")
    print("   counts: obfuscators of [u_A] and re-randomized [d] (ceil(s/t) each per batch), A's squares and "
          "penalty; one mulmod per non-zero of X_S and per loss coefficient; one decryption per gradient "
          "entry and per loss. Left out: the rest of every exponentiation, Horner shifts and slot masks, "
          "mask encryptions, obfuscator joins, sums/scalings, encoding, messages, evaluation, Python "
          "overhead.")
    if violated:
        print(f"   FLOOR VIOLATED: ours / floor < 1 for {violated}: the floor counts something ours does not "
              f"need, so the floor is wrong")
    print(f"reference: {FATE_REFERENCE['text']} ({FATE_REFERENCE['url']}); not comparable in shape or "
          f"machine")
    print(f"load average after: {' '.join(f'{v:.2f}' for v in load_after)}")

    if args.json is not None:
        out = {
            "setup": {"key_bits": args.bits, "rows": guest.n_samples, "batch_size": args.batch_size,
                      "batches_per_epoch": n_batches, "host_features": host.n_features,
                      "guest_features": guest.n_features, "mask_bits": mask_bits, "synthetic_data": synthetic,
                      "host_squares_per_row": int(args.squares == "rows"), "ours_scale": scale,
                      "workers": args.workers, "crypto_mb_lanes": multibuffer.LANES if multibuffer.enabled() else 0},
            "load_average": {"before_1min": load_before[0], "before_5min": load_before[1],
                             "before_15min": load_before[2], "after_1min": load_after[0],
                             "after_5min": load_after[1], "after_15min": load_after[2]},
            "ours_one_core": {f"{'unpacked' if p == 1 else 'packed'}_frac{f}": {
                "packing_t": r["slots"], "frac_bits": f, "cpu_seconds_epoch": r["cpu_epoch"],
                "wall_seconds_epoch": r["wall_epoch"], "iterations": r["iterations"],
                "floor_seconds": floors[r["slots"]]["seconds"], "ours_over_floor": r["over_floor"],
                **({} if r["phe_over"] is None else {"phe_over_ours": r["phe_over"]})}
                for (p, f), r in one_core.items()},
            "ours_with_workers": {"unpacked" if p == 1 else "packed": {
                "packing_t": r["slots"], "frac_bits": fracs[0], "wall_seconds_epoch": r["wall"],
                "cpu_seconds_with_workers": r["cpu"], "iterations": r["iterations"],
                "phe_one_core_over_wall": phe_epoch_cpu / r["wall"]} for p, r in with_workers.items()},
            "phe": {"frac_bits": fracs[0], "batches": len(batches), "cpu_seconds_batches": phe_cpu,
                    "wall_seconds_batches": phe_wall, "cpu_seconds_epoch": phe_epoch_cpu, "scale": phe_scale,
                    "max_gap_to_numpy": gap},
            "floor": {"cost_seconds": cost, "table_window": MAX_DJN_WINDOW, "table_build_seconds": build,
                      **{f"t{t}": {**floor, "packing_t": t} for t, floor in floors.items()}},
            "fate_reference": FATE_REFERENCE["numbers"],
        }
        args.json.write_text(json.dumps(out, indent=1) + "\n")
    return 1 if violated else 0


if __name__ == "__main__":
    sys.exit(main())
