"""Each organization prepares only its own data: ``python -m ppml.party --prepare``, one process per party on
loopback over mutual TLS, writes each party's shard exactly as the single-process prepare stage does on the
same raw files, and each process opens only its own raw file.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from ppml.certs import free_base
from ppml.data import prepare as stage
from ppml.data.partition import Holding, Table
from ppml.data.prepare import dataset_params, prepare_dataset
from ppml.data.prepared import load_shard

SEED = 7
KEY = "default_credit"
BLOCK = {"required": True, "reader": "fate_hetero", "partition": "vertical", "parties": ["guest", "host"],
         "split": [13, 10], "label_holder": "guest", "normalize": "fate_zscore", "alignment": "psi",
         "private_fraction": 0.05, "test_fraction": 0.2}
WAIT = 180.0
"""Longest a party process may run (s): far beyond what it takes (a few seconds), so a busy machine passes."""
LINKED = 60.0
"""--connect-timeout (s): the parties start one after the other and import numpy, pandas and the PSI first."""

# Started as `python -c AUDITED LOG -m ppml.party ...`: records every file the process opens (Python's "open"
# audit event: io.open, os.open, pandas' reader), then runs the module as `python -m` would.
AUDITED = """
import os, runpy, sys
log = open(sys.argv[1], "a", buffering=1)
def hook(event, args):
    if event == "open" and isinstance(args[0], (str, bytes, os.PathLike)):
        log.write(os.path.abspath(os.fsdecode(args[0])) + "\\n")
sys.addaudithook(hook)
module = sys.argv[3]
sys.argv = [module] + sys.argv[4:]
runpy.run_module(module, run_name="__main__", alter_sys=True)
"""


def make_certs(directory: Path, names) -> Path:
    """``python -m ppml.certs``: a throwaway CA, every party's key and certificate, and the peers file."""
    done = subprocess.run([sys.executable, "-m", "ppml.certs", str(directory), "--parties", *names,
                           "--host", "127.0.0.1", "--base-port", str(free_base(len(names)))],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return directory / "peers.yaml"


def fate_files(n: int, *, shared_order: bool, seed: int = 3) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Default-credit-shaped FATE hetero files: guest ``id, y, x0..x12``, host ``id, x0..x9`` (z-score-like
    values rounded as FATE's). With `shared_order` both list the same ids in the same order (as FATE's files
    do); without, each drops a few ids the other has and lists its rows in its own order."""
    g = np.random.default_rng(seed)
    ids = g.permutation(np.arange(1000, 1000 + n))
    guest = pd.DataFrame({"id": ids, "y": (g.random(n) < 0.3).astype(int),
                          **{f"x{j}": np.round(g.normal(size=n), 6) for j in range(13)}})
    host = pd.DataFrame({"id": ids, **{f"x{j}": np.round(g.normal(size=n), 6) for j in range(10)}})
    if not shared_order:
        guest = guest.iloc[3:]  # the first three ids only the host has
        host = host.iloc[g.permutation(n)[:-4]]  # four others only the guest has; the host's own order
    return guest, host


def write_params(path: Path, **change) -> Path:
    path.write_text(yaml.safe_dump({"seed": SEED, "datasets": {KEY: {**BLOCK, **change}}}, sort_keys=False))
    return path


class Parties:
    """The party processes of one test, each with its own logs and its audit of opened files."""

    def __init__(self, root: Path, peers: Path, params: Path) -> None:
        self.root, self.peers, self.params = root, peers, params
        self.procs: dict[str, subprocess.Popen] = {}
        (root / "logs").mkdir(parents=True, exist_ok=True)

    def start(self, party: str, raw: Path | None, *extra: str) -> None:
        args = ["--prepare", "--dataset", KEY, "--party", party, "--peers", str(self.peers),
                "--params", str(self.params), "--out", str(self.out(party)), "--connect-timeout", str(LINKED),
                *(["--raw", str(raw)] if raw is not None else []), *extra]
        with open(self.log(party, "out"), "wb") as out, open(self.log(party, "err"), "wb") as err:
            self.procs[party] = subprocess.Popen(
                [sys.executable, "-c", AUDITED, str(self.log(party, "opened")), "-m", "ppml.party", *args],
                stdout=out, stderr=err, stdin=subprocess.DEVNULL, env={**os.environ, "PYTHONUNBUFFERED": "1"})

    def log(self, party: str, kind: str) -> Path:
        return self.root / "logs" / f"{party}.{kind}"

    def out(self, party: str) -> Path:
        return self.root / "out" / party

    def opened(self, party: str) -> set[str]:
        return set(self.log(party, "opened").read_text().split("\n")) - {""}

    def stderr(self, party: str) -> str:
        return self.log(party, "err").read_text(errors="replace")

    def wait(self) -> dict[str, int]:
        """Every process's exit status; one still running after :data:`WAIT` s fails the test."""
        deadline = time.monotonic() + WAIT
        codes = {}
        for party, proc in self.procs.items():
            try:
                codes[party] = proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                pytest.fail(f"{party} still running after {WAIT:g} s; stderr:\n{self.stderr(party)}")
        return codes

    def stop(self) -> None:
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.kill()
                proc.wait(timeout=30)


@pytest.fixture
def parties(tmp_path):
    made: list[Parties] = []

    def start(peers: Path, params: Path) -> Parties:
        made.append(Parties(tmp_path, peers, params))
        return made[-1]

    yield start
    for p in made:
        p.stop()


def own_files(root: Path, guest: pd.DataFrame, host: pd.DataFrame) -> dict[str, Path]:
    """Each organization's raw file in a directory of its own."""
    files = {}
    for name, frame in (("guest", guest), ("host", host)):
        (root / name).mkdir(parents=True)
        files[name] = root / name / f"{name}.csv"
        frame.to_csv(files[name], index=False)
    return files


def assert_shards_equal(out: Path, reference: Path, party: str) -> None:
    """The party's shard is the reference's, byte for byte (and so array for array)."""
    assert {f.name for f in out.iterdir()} == {f"{party}.npz", "manifest.json"}
    assert (out / f"{party}.npz").read_bytes() == (reference / f"{party}.npz").read_bytes(), party
    mine, theirs = load_shard(out / f"{party}.npz"), load_shard(reference / f"{party}.npz")
    np.testing.assert_array_equal(mine.ids, theirs.ids)
    np.testing.assert_array_equal(mine.X_test, theirs.X_test)


def run_parties(tmp_path, parties, files: dict[str, Path], params: Path, *extra: str) -> Parties:
    peers = make_certs(tmp_path / "certs", ["guest", "host", "arbiter"])
    run = parties(peers, params)
    for name in ("host", "guest"):
        run.start(name, files[name], *extra)
    codes = run.wait()
    assert codes == {"host": 0, "guest": 0}, {n: run.stderr(n)[-3000:] for n in codes}
    for name, other in (("guest", "host"), ("host", "guest")):  # each opened its own raw file, never the other's
        opened = run.opened(name)
        assert str(files[name].resolve()) in opened, name
        assert not any(path.startswith(str(files[other].parent.resolve())) for path in opened), (name, opened)
    return run


def test_each_party_prepares_its_own_shard_of_the_prepare_stage(tmp_path, parties):
    guest, host = fate_files(80, shared_order=True)
    files = own_files(tmp_path / "raw", guest, host)
    params = write_params(tmp_path / "params.yaml")
    # the single-process prepare stage on the same two files (it reads both)
    raw = tmp_path / "stage_raw"
    (raw / "fate").mkdir(parents=True)
    guest.to_csv(raw / "fate" / f"{KEY}_hetero_guest.csv", index=False)
    host.to_csv(raw / "fate" / f"{KEY}_hetero_host.csv", index=False)
    (raw / "status.json").write_text(json.dumps({"dataset": KEY, "available": True}))
    reference = tmp_path / "stage"
    expected = prepare_dataset(KEY, dataset_params(yaml.safe_load(params.read_text()), KEY), raw, reference,
                               rng=np.random.default_rng(SEED))

    run = run_parties(tmp_path, parties, files, params)
    for name in ("guest", "host"):
        assert_shards_equal(run.out(name), reference, name)
    manifests = {n: json.loads((run.out(n) / "manifest.json").read_text()) for n in ("guest", "host")}
    assert manifests["guest"] == manifests["host"]
    prepared = manifests["guest"].pop("prepared")
    assert manifests["guest"] == expected  # every fact of the stage's manifest, the alignment traffic too
    assert prepared["holding"] == "dealt" and len(prepared["shared_ids_sha256"].split(":")[1]) == 64
    assert expected["alignment"]["dropped"] == {"guest": 4, "host": 4}  # ids private to each were dealt


def test_own_tables_with_overlapping_ids_match_the_stages_alignment(tmp_path, parties, monkeypatch):
    guest, host = fate_files(60, shared_order=False, seed=5)
    files = own_files(tmp_path / "raw", guest, host)
    params = write_params(tmp_path / "params.yaml")
    # the prepare stage's dealing, split and normalization over these very tables (each party's holding is its
    # file as it stands), in one process
    union = pd.Index(pd.concat([guest["id"], host["id"]]).astype(str).unique())
    X = np.zeros((len(union), 23))
    X[union.get_indexer(guest["id"].astype(str)), :13] = guest.iloc[:, 2:].to_numpy()
    X[union.get_indexer(host["id"].astype(str)), 13:] = host.iloc[:, 1:].to_numpy()
    y = np.zeros(len(union), dtype=np.int8)
    y[union.get_indexer(guest["id"].astype(str))] = guest["y"].to_numpy()
    table = Table(ids=union.to_numpy(str), X=X, columns=tuple(guest.columns[2:]) + tuple(host.columns[1:]), y=y)
    rows = {n: union.get_indexer(f["id"].astype(str)) for n, f in (("guest", guest), ("host", host))}
    holdings = [Holding(n, table.ids[rows[n]], rows[n].astype(np.int64), block)
                for n, block in (("guest", slice(0, 13)), ("host", slice(13, 23)))]
    monkeypatch.setattr(stage, "vertical_holdings", lambda *a, **k: holdings)
    reference = tmp_path / "stage"
    reference.mkdir()
    _, dealing = np.random.default_rng(SEED).spawn(2)
    expected = stage._prepare_vertical(table, dataset_params(yaml.safe_load(params.read_text()), KEY), reference,
                                       rng=dealing)

    run = run_parties(tmp_path, parties, files, params, "--holding", "own")
    for name in ("guest", "host"):
        assert_shards_equal(run.out(name), reference, name)
    manifest = json.loads((run.out("host") / "manifest.json").read_text())
    assert manifest["parties"] == expected["parties"] and manifest["split"] == expected["split"]
    assert manifest["alignment"]["shared_ids"] == expected["alignment"]["shared_ids"] == 60 - 7
    assert manifest["alignment"]["bytes"] == expected["alignment"]["bytes"]


def test_dealt_holding_refuses_files_in_another_order_and_the_arbiter_has_no_part(tmp_path, parties):
    guest, host = fate_files(40, shared_order=True)
    files = own_files(tmp_path / "raw", guest, host.iloc[::-1])
    params = write_params(tmp_path / "params.yaml")
    peers = make_certs(tmp_path / "certs", ["guest", "host", "arbiter"])
    run = parties(peers, params)
    for name in ("host", "guest"):
        run.start(name, files[name])
    run.start("arbiter", None)
    codes = run.wait()
    assert codes == {"host": 1, "guest": 2, "arbiter": 2}, {n: run.stderr(n)[-2000:] for n in codes}
    last = {n: run.stderr(n).strip().splitlines()[-1] for n in codes}
    assert last["guest"].startswith("party guest: party 'host''s file lists other ids or another order")
    assert last["host"].startswith("party host: ") and "'guest' stopped" in last["host"]
    assert last["arbiter"].startswith("party arbiter: --party 'arbiter' holds no data of dataset")
    assert not (run.out("guest")).exists() and not run.out("host").exists()
