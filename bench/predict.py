"""Joint scoring end to end: guest and host score new rows together over TLS on loopback, PSI included.

Each party is its own ``python -m ppml.party --predict`` process with its own raw CSV of new rows (Credit 2's
shape: guest 5 features, host 5; 100,000 rows each, 1 % of each file's ids not in the other's, each file in its own
order) and its own model block (random weights of the Credit 2 layout, written as training writes them,
:mod:`ppml.launch.model`). Per party: the process's wall time from start to exit (Python's start, reading and
parsing its CSV, linking, the PSI, the scores, writing) and its own clock from linking to the end of scoring
(``predict.json``); rows per second over the slower party's wall time. Prints the load average before and after.

Usage: ``python bench/predict.py [--quick] [--rows N] [--json FILE]`` (``--quick``: 2,000 rows, for the test
suite; FILE: the seconds measured).
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from ppml.certs import free_base  # noqa: E402
from ppml.launch.model import block_sha256, model_block, normalization_of, write_model  # noqa: E402
from ppml.launch.party import params_sha256  # noqa: E402

SEED = 2020
PARTIES = {"guest": 5, "host": 5}  # Credit 2 (give_credit): guest 5 features and the label, host 5
BLOCK = {"algorithm": "paillier_sqn", "dataset": "give_credit", "batch_size": 1000, "key_bits": 2048}
TIMEOUT = 1800


def _setup(root: Path, rows: int, rng: np.random.Generator) -> tuple[Path, Path, dict[str, Path]]:
    """Certificates, params.yaml, each party's model block and raw file; (peers, params, raw files)."""
    certs = root / "certs"
    subprocess.run([sys.executable, "-m", "ppml.certs", str(certs), "--parties", *PARTIES, "--host", "127.0.0.1",
                    "--base-port", str(free_base(len(PARTIES)))], check=True, capture_output=True, timeout=120)
    params = root / "params.yaml"
    params.write_text(yaml.safe_dump({"seed": SEED, "experiments": {"score": BLOCK}}, sort_keys=False))
    blocks = {}
    for name, width in PARTIES.items():
        guest = name == "guest"
        blocks[name] = model_block(
            experiment="score", algorithm=BLOCK["algorithm"], dataset=BLOCK["dataset"], party=name,
            label_holder=guest, params_sha256=params_sha256(BLOCK, SEED), session="score:bench:seed0",
            seed_index=0, columns=tuple(f"{name}_x{j}" for j in range(width)),
            theta=rng.normal(size=width + guest), normalization=normalization_of("fate_zscore"), ids_sha256=None)
    digests = {name: block_sha256(b) for name, b in blocks.items()}
    raw = {}
    ids = np.array([f"id{i:07d}" for i in range(int(rows * 1.02))])
    for name, width in PARTIES.items():
        write_model(root / name, blocks[name], digests)
        own = rng.permutation(len(ids))[:rows]
        X = rng.normal(size=(rows, width))
        raw[name] = root / f"{name}.csv"
        with open(raw[name], "w", newline="") as f:
            writer = csv.writer(f)
            writer.writerow(["id", *blocks[name]["features"]])
            writer.writerows([i, *row] for i, row in zip(ids[own], np.round(X, 6).tolist()))
    return certs / "peers.yaml", params, raw


def run(rows: int) -> dict[str, float]:
    rng = np.random.default_rng(1)
    with tempfile.TemporaryDirectory(prefix="bench-predict-") as tmp:
        root = Path(tmp)
        peers, params, raw = _setup(root, rows, rng)
        procs, started = {}, {}
        for name in PARTIES:
            started[name] = time.perf_counter()
            procs[name] = subprocess.Popen(
                [sys.executable, "-m", "ppml.party", "--predict", "--experiment", "score", "--party", name,
                 "--peers", str(peers), "--params", str(params), "--raw", str(raw[name]),
                 "--model", str(root / name), "--out", str(root / name / "scored")],
                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        wall = {}
        for name, proc in procs.items():
            _, err = proc.communicate(timeout=TIMEOUT)
            wall[name] = time.perf_counter() - started[name]
            if proc.returncode != 0:
                raise SystemExit(f"{name} failed ({proc.returncode}):\n{err[-2000:]}")
        own = {name: json.loads((root / name / "scored" / "predict.json").read_text()) for name in PARTIES}
        with open(root / "guest" / "scored" / "predictions.csv") as f:
            scored = sum(1 for _ in f) - 1
    out = {"rows": float(rows), "aligned": float(own["guest"]["aligned"]), "scored": float(scored)}
    for name in PARTIES:
        out[f"{name}_wall_seconds"] = wall[name]
        out[f"{name}_own_seconds"] = own[name]["seconds"]
        out[f"{name}_psi_seconds"] = own[name]["align_seconds"]
    out["rows_per_second"] = rows / max(wall.values())
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="2,000 rows (the test suite's run)")
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--json", help="write the figures to this file")
    args = parser.parse_args(argv)
    rows = 2_000 if args.quick else args.rows
    print(f"load average before: {' '.join(f'{v:.2f}' for v in os.getloadavg())}; {os.cpu_count()} cores")
    figures = run(rows)
    print(f"joint scoring of {rows:,} new rows per party ({int(figures['aligned']):,} shared), guest 5 + host 5 "
          "features, TLS on loopback, ECDH PSI:")
    for name in PARTIES:
        print(f"  {name:5s}: {figures[f'{name}_wall_seconds']:7.1f} s process wall time "
              f"(its own clock from linking to the end of scoring: {figures[f'{name}_own_seconds']:.1f} s, "
              f"of it the PSI {figures[f'{name}_psi_seconds']:.1f} s)")
    print(f"  {figures['rows_per_second']:,.0f} rows per second over the slower party's wall time; "
          f"{int(figures['scored']):,} rows in predictions.csv")
    print(f"load average after: {' '.join(f'{v:.2f}' for v in os.getloadavg())}")
    if args.json:
        Path(args.json).write_text(json.dumps(figures, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
