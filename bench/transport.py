"""What a process per party costs: in-process against Ray and gRPC-transport parties, per iteration, and FDML at
Tencent's shape and scale.

Part 1, overhead. The same role programs run on every transport (same numbers; see tests/transport): ADMM
sharing (a9a's shape and row count), FDML (logistic regression) and encrypted SGD (batch 1000, 1024- and
2048-bit keys), on four transports: ``inprocess``; ``ray`` (an actor per party, linked directly by TLS-socket
links, :mod:`ppml.network.links`); ``grpc`` (a ``python -m ppml.party`` process per party on loopback, the same
links); ``grpc_streams`` (the same with ``links: grpc``, gRPC bidirectional streams). Each is timed by the
parties' own in-run clocks over the epochs after the first, so start-up stays out: process start, linking,
shard loading, key generation (a random search for primes, a random time) and the first epoch's one-off costs.
The clocks are what each protocol's history records per epoch (:data:`CLOCKS`): ADMM sharing, the central
node's cumulative protocol seconds (evaluation excluded), one iteration per epoch; FDML, the slowest worker's
cumulative seconds at the end of each epoch (its evaluation forward pass included), ``n_batches`` iterations
per epoch; encrypted SGD, the guest's seconds of each epoch's training (evaluation excluded) and the
cumulative iteration count. Every party runs with the same BLAS thread count (:data:`BLAS_THREADS`): the party
processes set it themselves (:func:`ppml.network.links.run_program`), the in-process run sets it with
threadpoolctl; the count every party's program actually ran under is printed, and so is the machine's load.
Each measurement is repeated (``--repeat``) and the median printed with the range.

Part 2, scale. FDML logistic regression on a synthetic data set shaped like the paper's Tencent app data
(8,700 sparse features split 7,000 / 1,000 / 700 over three workers, about 1 % non-zero, labels at the
7,000-feature party), at n = 10^4, 10^5, 10^6 rows: seconds per epoch in-process, on Ray over links and on
``transport: grpc`` (a process per party, the same links), by the in-run clock over the epochs after the first
as in part 1, as many as make at least 1,000 iterations (median of ``--repeat`` runs below 10^6 rows, one at
10^6), the peak memory of the largest process, and the
growth exponent of the per-epoch cost in n (a least-squares slope of log seconds against log n; linear is 1). The data stay sparse end to end
(CSR shards, sparse products; no dense n x 8,700 matrix anywhere). The paper's own system needed about 7.8 ms
per FDML LR iteration on three machines; ours is printed beside it.

Usage: ``python bench/transport.py [--quick] [--rows 10000,100000,1000000] [--repeat 3] [--skip-overhead]
[--skip-scale] [--no-2048] [--json FILE]``. ``--quick`` (for the test suite) runs every case of part 1 at a
small size (1024-bit keys only, one repeat) and part 2 on one small row count, in-process only; ``--json``
writes the medians of part 1 as ``{protocol: {transport: ms per iteration}}``. Ratios are measured in one run
on one machine; absolute seconds depend on the machine's load.

References
----------
B. Hu, Z. Wu, J. Yang, S. Zhou, D. Niu, "FDML: A Collaborative Machine Learning Framework for Distributed
Features", KDD 2019, Section 5 (Tencent MyApp data, three machines, 7.8 ms per iteration for LR).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import tempfile
import warnings
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Callable

import numpy as np
import scipy.sparse as sp
from threadpoolctl import threadpool_info, threadpool_limits

from ppml import runtime
from ppml.algorithms import get_algorithm, make_network
from ppml.config import build
from ppml.history import History
from ppml.io import save_party, write_json
from ppml.launch.local import run_local
from ppml.launch.ray_runner import ray_cluster, run_ray
from ppml.network import Network
from ppml.parties import Party
from ppml.network.peer import adopt

PAPER_FDML_LR_MS = 7.8
TENCENT_SPLIT = (7000, 1000, 700)  # the label holder first
DENSITY = 0.01
TENCENT_BATCH = 100  # rows per FDML iteration in the scale run
BLAS_THREADS = 1  # what every party process runs with (ppml.network.links.run_program); in-process is set to match
TRANSPORTS = ("inprocess", "ray", "grpc", "grpc_streams")
"""Columns: in-process; Ray over links (TLS sockets); ``transport: grpc`` (a ``python -m ppml.party`` process per
party, TLS-socket links, the default); the same with ``links: grpc`` (gRPC bidirectional streams)."""


# ---------------------------------------------------------------------------------------------------------
# data


def vertical_dense(rng: np.random.Generator, n: int, widths: tuple[int, ...], *, n_test: int = 0) -> list[Party]:
    """Dense Gaussian blocks with unit-norm rows per block; labels (logistic) at the first party."""
    X = rng.normal(size=(n + n_test, sum(widths)))
    w = rng.normal(size=X.shape[1])
    y = (rng.random(n + n_test) < 1 / (1 + np.exp(-X @ w / math.sqrt(X.shape[1])))).astype(np.int8)
    blocks, start = [], 0
    for width in widths:
        block = X[:, start:start + width]
        blocks.append(block / np.linalg.norm(block, axis=1, keepdims=True))
        start += width
    return _parties(blocks, y, n)


def tencent_shaped(rng: np.random.Generator, n: int, *, n_test: int = 2000,
                   split: tuple[int, ...] = TENCENT_SPLIT, density: float = DENSITY) -> list[Party]:
    """Sparse 0/1 features, `density` of each block non-zero, labels from a sparse logistic model."""
    rows = n + n_test
    blocks = []
    for width in split:
        per_row = rng.binomial(width, density, size=rows)
        indptr = np.concatenate([[0], np.cumsum(per_row)])
        indices = rng.integers(0, width, size=int(indptr[-1]), dtype=np.int32)
        data = np.full(indices.shape, 1.0 / math.sqrt(max(width * density, 1.0)))
        block = sp.csr_array((data, indices, indptr), shape=(rows, width))
        block.sum_duplicates()
        blocks.append(block)
    scores = sum(b @ rng.normal(scale=2.0, size=b.shape[1]) for b in blocks)
    y = (rng.random(rows) < 1 / (1 + np.exp(-(scores - np.median(scores))))).astype(np.int8)
    return _parties(blocks, y, n)


def _parties(blocks: list[Any], y: np.ndarray, n: int) -> list[Party]:
    ids = np.char.add("e", np.arange(len(y)).astype(str))
    out, start = [], 0
    for k, block in enumerate(blocks):
        width = block.shape[1]
        cols = tuple(f"f{start + j}" for j in range(width))
        start += width
        holder = k == 0
        out.append(Party(f"party{k + 1}", cols, ids[:n], block[:n], y[:n] if holder else None, ids[n:], block[n:],
                         y[n:] if holder else None))
    return out


def save_shards(parties: list[Party], directory: Path) -> Path:
    """Every party's shard and the manifest of their public facts, as the prepare stage writes them."""
    directory.mkdir(parents=True, exist_ok=True)
    for p in parties:
        save_party(directory / f"{p.name}.npz", p)
    write_json(directory / "manifest.json", {
        "dataset": "bench", "available": True, "partition": "vertical", "evaluator": None,
        "parties": [{"name": p.name, "file": f"{p.name}.npz", "label_holder": p.is_label_holder,
                     "columns": p.n_features, "train_rows": p.n_samples, "test_rows": p.X_test.shape[0]}
                    for p in parties]})
    return directory


# ---------------------------------------------------------------------------------------------------------
# the parties' own clocks


def _admm_clock(history: History) -> tuple[float, int]:
    """ADMM sharing: the central node's cumulative protocol seconds; one iteration (round) per epoch."""
    first, last = history.records[0], history.records[-1]
    return last["seconds"] - first["seconds"], len(history.records) - 1


def _fdml_clock(history: History) -> tuple[float, int]:
    """FDML: the slowest worker's cumulative seconds at each epoch's end; ``n_batches`` iterations per epoch."""
    first, last = history.records[0], history.records[-1]
    return last["seconds"] - first["seconds"], (len(history.records) - 1) * history.extra["n_batches"]


def _hetero_lr_clock(history: History) -> tuple[float, int]:
    """The Paillier protocols: the guest's seconds of each epoch's training, cumulative ``iterations``."""
    first, later = history.records[0], history.records[1:]
    return sum(r["seconds"] for r in later), later[-1]["iterations"] - first["iterations"]


CLOCKS: dict[str, Callable[[History], tuple[float, int]]] = {
    "admm_sharing": _admm_clock,
    "fdml": _fdml_clock,
    "paillier_sgd": _hetero_lr_clock,
}
"""Per algorithm: (seconds, iterations) after the first epoch, by the clock its history records."""


def after_first_epoch(algorithm: str, history: History) -> tuple[float, int]:
    if len(history.records) < 2:
        raise RuntimeError(f"{algorithm}: ran {len(history.records)} epoch(s); timing by the in-run clock "
                           "needs at least 2")
    return CLOCKS[algorithm](history)


# ---------------------------------------------------------------------------------------------------------
# one run on either transport


def _observed(endpoint: Any, party: Party | None, *, _program: Callable[..., Any], **kwargs: Any) -> dict:
    """A role's program, run as it is, with the BLAS thread count it ran under.

    It reaches the Ray actors by value: cloudpickle ships the functions of a script (``__main__``) that way,
    and :func:`run` registers this module for it when it is imported instead.
    """
    threads = max((p["num_threads"] for p in threadpool_info() if p["user_api"] == "blas"), default=0)
    return {"blas_threads": threads, "result": _program(endpoint, party, **kwargs)}


@dataclass
class Outcome:
    history: History
    network: Network
    blas_threads: set[int]


def run(algorithm: str, parties: list[Party], block: dict[str, Any], transport: str, shard_dir: Path | None,
        *, seed: int = 0) -> Outcome:
    """One run, data already in memory (in-process, at :data:`BLAS_THREADS`) or on disk (Ray)."""
    module = get_algorithm(algorithm)
    params = build(module.Params, block, f"bench.{algorithm}")
    rng = np.random.default_rng(seed)
    public = runtime.Public.from_parties(parties)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # fixed epoch budgets and short keys, on purpose
        network = make_network(module, parties if transport == "inprocess" else list(public.parties), params,
                               rng=rng)
        roles = [replace(r, program=_observed, kwargs={**r.kwargs, "_program": r.program})
                 for r in module.roles(public, params, rng=rng, network=network)]
        if transport == "inprocess":
            with threadpool_limits(limits=BLAS_THREADS):
                results = runtime.run_inprocess(roles, network, runtime.shards_of(parties))
        elif transport.startswith("grpc"):  # `python -m ppml.party` per party, each building the roles itself
            links = {"links": "grpc"} if transport == "grpc_streams" else {}
            outputs = run_local(algorithm, {"algorithm": algorithm, "dataset": "bench", "transport": "grpc", **links,
                                            **block}, "experiments", seed, shard_dir, tuple(r.name for r in roles))[0]
            results = {name: {"blas_threads": out["blas_threads"], "result": out["result"]}
                       for name, out in outputs.items()}
            adopt(network, outputs)
        else:
            if __name__ != "__main__":
                import ray.cloudpickle

                ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])
            results = run_ray(roles, network, {p.name: str(shard_dir / f"{p.name}.npz") for p in parties})
        history = module.assemble(public, params, {name: out["result"] for name, out in results.items()})
    return Outcome(history, network, {out["blas_threads"] for out in results.values()})


def repeated(measure: Callable[[], float], repeat: int) -> tuple[float, float, float]:
    """(median, min, max) of `repeat` measurements."""
    values = [measure() for _ in range(repeat)]
    return float(np.median(values)), min(values), max(values)


# ---------------------------------------------------------------------------------------------------------
# the two parts


@dataclass(frozen=True)
class Case:
    key: str  # the protocol's name in --json
    label: str
    algorithm: str
    parties: list[Party]
    block: dict[str, Any]


@dataclass(frozen=True)
class Sizes:
    admm_rows: int
    admm_epochs: int
    fdml_rows: int
    fdml_epochs: int
    encrypted_rows: int
    encrypted_batch: int
    encrypted_epochs: int
    rows: tuple[int, ...]  # of the scale run
    scale_test_rows: int
    scale_timed: int  # fewest iterations the scale run times at each n (in the epochs after the first)
    scale_linked: bool
    repeat: int
    with_2048: bool


FULL = Sizes(admm_rows=32561, admm_epochs=101, fdml_rows=8000, fdml_epochs=5, encrypted_rows=3000,
             encrypted_batch=1000, encrypted_epochs=3, rows=(10_000, 100_000, 1_000_000), scale_test_rows=2000,
             scale_timed=1000, scale_linked=True, repeat=3, with_2048=True)
QUICK = Sizes(admm_rows=2000, admm_epochs=21, fdml_rows=1000, fdml_epochs=3, encrypted_rows=300,
              encrypted_batch=100, encrypted_epochs=2, rows=(2000,), scale_test_rows=500, scale_timed=20,
              scale_linked=False, repeat=1, with_2048=False)
"""Quick: every case of part 1 on both transports (the Ray path kept from rotting), part 2 in-process only
(one more Ray run would cost several seconds of actor start for the same code path)."""


def overhead(rng: np.random.Generator, workdir: Path, sizes: Sizes) -> dict[str, dict[str, float]]:
    """Print the per-iteration table; return the medians in ms as {protocol: {transport: ms}}."""
    b = sizes.encrypted_batch
    encrypted = {"batch_size": b, "encrypted": True, "max_epochs": sizes.encrypted_epochs, "tol": 1e-12}
    paillier = vertical_dense(rng, sizes.encrypted_rows, (13, 10))  # default_credit's split
    cases = [
        Case("admm_sharing", f"ADMM sharing (a9a's shape, n = {sizes.admm_rows})", "admm_sharing",
             vertical_dense(rng, sizes.admm_rows, (66, 57)),
             {"max_epochs": sizes.admm_epochs, "tol_primal": 0.0, "tol_dual": 0.0}),
        Case("fdml_lr", f"FDML LR (3 workers, n = {sizes.fdml_rows}, batch 100)", "fdml",
             vertical_dense(rng, sizes.fdml_rows, (40, 30, 30)),
             {"local_model": "lr", "epochs": sizes.fdml_epochs}),
        Case("encrypted_sgd", f"encrypted SGD (n = {sizes.encrypted_rows}, b{b}), 1024-bit key", "paillier_sgd",
             paillier, {**encrypted, "key_bits": 1024}),
    ]
    if sizes.with_2048:
        cases.append(Case("encrypted_sgd_2048",
                          f"encrypted SGD (n = {sizes.encrypted_rows}, b{b}), 2048-bit key", "paillier_sgd",
                          paillier, {**encrypted, "key_bits": 2048}))
    print(f"\n## Per-iteration cost: in-process, Ray (a process per party, linked directly) and gRPC (a "
          f"`python -m ppml.party` process per party), by the parties' in-run clocks over the epochs after the "
          f"first (median of {sizes.repeat}, range)\n")
    print("| protocol | iterations timed | in-process ms/iter | ray ms/iter | grpc ms/iter | grpc, gRPC streams "
          "ms/iter | ray / in-process | grpc / in-process | grpc (gRPC streams) / in-process | BLAS threads | "
          "load (1 min) |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    medians: dict[str, dict[str, float]] = {}
    for case in cases:
        shards = save_shards(case.parties, workdir / case.key)
        measured, threads, counted = {}, {}, 0
        for transport in TRANSPORTS:
            seen: set[int] = set()

            def measure() -> float:
                nonlocal counted
                done = run(case.algorithm, case.parties, case.block, transport, shards)
                seen.update(done.blas_threads)
                seconds, counted = after_first_epoch(case.algorithm, done.history)
                return seconds / counted

            measured[transport] = repeated(measure, sizes.repeat)
            threads[transport] = "/".join(map(str, sorted(seen)))
        local = measured["inprocess"][0]
        medians[case.key] = {t: 1e3 * m[0] for t, m in measured.items()}
        cells = [f"{1e3 * m:.2f} ({1e3 * lo:.2f}–{1e3 * hi:.2f})" for m, lo, hi in measured.values()]
        ratios = " | ".join(f"{measured[t][0] / local:.2f}" for t in TRANSPORTS[1:])
        print(f"| {case.label} | {counted} | {' | '.join(cells)} | {ratios} | "
              f"{' / '.join(threads[t] for t in TRANSPORTS)} | {os.getloadavg()[0]:.2f} |", flush=True)
    return medians


def scale(rng: np.random.Generator, workdir: Path, sizes: Sizes) -> None:
    linked = ("ray", "grpc") if sizes.scale_linked else ()
    transports = ("inprocess", *linked)
    print("\n## FDML LR at Tencent's shape: 8,700 sparse features (7,000 / 1,000 / 700), 1 % non-zero; "
          f"the epochs after the first (at least {sizes.scale_timed:,} iterations) by the in-run clock, per "
          f"epoch (median of the runs; below 10^6 rows {sizes.repeat} run(s), at 10^6 one)\n")
    print("| rows | non-zeros | runs | epochs timed | in-process s/epoch | " + "".join(f"{t} s/epoch | " for t in linked)
          + "".join(f"{t} / in-process | " for t in linked) + "ms/iter in-process | "
          + "".join(f"ms/iter {t} | " for t in linked) + "paper ms/iter | peak MiB (driver) | "
          + "".join(f"peak MiB (largest party, {t}) | " for t in linked) + "load (1 min) |")
    print("|---:" * (9 + 4 * len(linked)) + "|")
    per_epoch: dict[str, list[float]] = {t: [] for t in transports}
    for n in sizes.rows:
        # the epochs after the first (which pays the one-off costs) cover at least scale_timed iterations: at
        # 10^4 rows one epoch is 100 iterations, 0.15 s, and one stall of a background thread moved its ratio
        # by 0.3 between two runs
        batches = math.ceil(n / TENCENT_BATCH)
        block = {"local_model": "lr", "batch_size": TENCENT_BATCH,
                 "epochs": 1 + math.ceil(sizes.scale_timed / batches)}
        parties = tencent_shaped(rng, n, n_test=sizes.scale_test_rows)
        nnz = sum(p.X.nnz for p in parties)
        shards = save_shards(parties, workdir / f"tencent_{n}")
        runs = sizes.repeat if n < 1_000_000 else 1
        epoch, per_iter, peak = {}, {}, {}  # seconds per epoch, per iteration, peak MiB
        for transport in transports:
            seen: list[tuple[float, int]] = []
            largest = 0.0
            for _ in range(runs):
                done = run("fdml", parties, block, transport, shards)
                seen.append(after_first_epoch("fdml", done.history))
                largest = max([largest, *(w.get("peak_rss_mib", 0.0) for w in done.network.where.values())])
            epoch[transport] = float(np.median([s for s, _ in seen])) / (block["epochs"] - 1)
            per_iter[transport] = float(np.median([s / i for s, i in seen]))
            peak[transport] = largest
            per_epoch[transport].append(epoch[transport])
        driver = runtime.here()["peak_rss_mib"]
        el = epoch["inprocess"]
        cells = ([f"{epoch[t]:.2f}" for t in linked] + [f"{epoch[t] / el:.2f}" for t in linked]
                 + [f"{1e3 * per_iter['inprocess']:.2f}"] + [f"{1e3 * per_iter[t]:.2f}" for t in linked]
                 + [f"{PAPER_FDML_LR_MS}", f"{driver:,.0f}"] + [f"{peak[t]:,.0f}" for t in linked])
        print(f"| {n:,} | {nnz:,} | {runs} | {block['epochs'] - 1} | {el:.2f} | {' | '.join(cells)} | {os.getloadavg()[0]:.2f} |",
              flush=True)
        del parties
    if len(sizes.rows) > 1:
        logn = np.log(sizes.rows)
        for transport, seconds in per_epoch.items():
            slope = float(np.polyfit(logn, np.log(seconds), 1)[0])
            print(f"\ngrowth exponent of seconds per epoch in n ({transport}): {slope:.2f} (linear = 1)")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes, 1024-bit keys, one repeat")
    parser.add_argument("--rows", help="row counts of the scale run (default 10000,100000,1000000; quick 2000)")
    parser.add_argument("--repeat", type=int, help="repetitions of each per-iteration measurement (default 3; "
                                                   "quick 1)")
    parser.add_argument("--skip-overhead", action="store_true")
    parser.add_argument("--skip-scale", action="store_true")
    parser.add_argument("--no-2048", action="store_true", help="leave out the 2048-bit encrypted SGD case")
    parser.add_argument("--json", type=Path,
                        help="write part 1's medians here: {protocol: {transport: ms/iter}}")
    args = parser.parse_args(argv)
    sizes = QUICK if args.quick else FULL
    if args.rows is not None:
        sizes = replace(sizes, rows=tuple(int(r) for r in args.rows.split(",") if r))
    if args.repeat is not None:
        if args.repeat < 1:
            parser.error(f"--repeat must be at least 1, got {args.repeat}")
        sizes = replace(sizes, repeat=args.repeat)
    if args.no_2048:
        sizes = replace(sizes, with_2048=False)
    default_threads = sorted({p["num_threads"] for p in threadpool_info() if p["user_api"] == "blas"})
    print(f"{'quick' if args.quick else 'full'} run; BLAS threads per party: {BLAS_THREADS} on every transport "
          f"(this machine's default: {'/'.join(map(str, default_threads)) or 'no BLAS found'}); {os.cpu_count()} "
          f"CPUs, load average {' / '.join(f'{x:.2f}' for x in os.getloadavg())} (1 / 5 / 15 min) at the start")
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    rng = np.random.default_rng(2019)
    medians: dict[str, dict[str, float]] = {}
    with tempfile.TemporaryDirectory(prefix="ppml-bench-transport-") as tmp, ray_cluster(num_cpus=4):
        if not args.skip_overhead:
            medians = overhead(rng, Path(tmp), sizes)
        if not args.skip_scale:
            scale(rng, Path(tmp), sizes)
    if args.json is not None:
        args.json.write_text(json.dumps(medians, indent=2) + "\n")
        print(f"\nmedians written to {args.json}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
