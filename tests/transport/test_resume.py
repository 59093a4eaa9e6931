"""Crash and resume: the host is killed mid-epoch, all three parties restart with ``--resume``, and the final model
and every number but the clocks equal the uninterrupted run's, bit for bit; a checkpoint of another run is
refused, naming it.

Waits follow progress (a checkpoint file appearing, a process exiting), with deadlines, never fixed sleeps.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import yaml

from ppml.algorithms._hetero_lr import ARBITER
from ppml.io import read_json
from tests.transport.test_grpc import (WAIT, Launcher, assert_same_as_inprocess, make_certs, run_inprocess,
                                       write_params)
from tests.algorithms.vertical_data import write_prepared
from tests.transport.test_ray import vertical_parties

BLOCK = {"algorithm": "paillier_sqn", "dataset": "toy_vertical", "batch_size": 40, "encrypted": True,
         "key_bits": 1024, "eta": 0.15, "lam": 0.01, "max_epochs": 24, "tol": 1e-12, "L": 2, "M": 3, "S_H": 30}
NAMES = ("party1", "party2", ARBITER)


def wait_for(path: Path, proc: subprocess.Popen, launcher: Launcher, label: str, timeout: float = WAIT) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        assert proc.poll() is None, f"{label} ended before {path.name} appeared:\n{launcher.stderr(label)}"
        assert time.monotonic() < deadline, f"no {path} after {timeout:g} s:\n{launcher.stderr(label)}"
        time.sleep(0.01)


def test_a_host_killed_mid_epoch_then_every_party_resumed_equals_the_uninterrupted_run(tmp_path):
    parties = vertical_parties(np.random.default_rng(8), n=120, n_test=60, widths=(5, 4))
    data = write_prepared(tmp_path / "data", parties)
    params = write_params(tmp_path / "params.yaml", BLOCK, "tls")
    peers = make_certs(tmp_path / "certs", NAMES)
    launcher = Launcher(tmp_path)
    out = {n: tmp_path / "out" / n for n in NAMES}
    try:
        for n in NAMES:
            launcher.start(n, peers=peers, params=params, data=data, out=out[n])
        # the host has finished epoch 3 (its checkpoint is written): kill it within a later epoch
        wait_for(out["party2"] / "checkpoint" / "seed0" / "epoch3.json", launcher.procs["party2"], launcher,
                 "party2")
        assert launcher.procs["party2"].poll() is None, "the host finished before it could be killed"
        launcher.procs["party2"].send_signal(signal.SIGKILL)
        codes = launcher.wait(list(NAMES))
        assert codes["party2"] == -signal.SIGKILL and codes["party1"] == codes[ARBITER] == 1, launcher.stderrs()
        assert "party2" in launcher.fail_line("party1"), launcher.stderr("party1")
        assert not (out["party1"] / "metrics.json").exists()
        for n in NAMES:
            launcher.start(n, peers=peers, params=params, data=data, label=f"{n}-resumed", out=out[n],
                           extra=("--resume",))
        codes = launcher.wait([f"{n}-resumed" for n in NAMES])
        assert codes == {f"{n}-resumed": 0 for n in NAMES}, launcher.stderrs()
    finally:
        launcher.stop()
    resumed_at = [int(line.rsplit("after epoch ", 1)[1].split()[0]) for line in
                  launcher.stderr("party1-resumed").splitlines() if "resuming after epoch" in line]
    # the latest epoch all three hold: the host's third, or the one before when the guest or the arbiter had
    # not finished the third when the host died
    assert len(resumed_at) == 1 and 2 <= resumed_at[0] <= 3, launcher.stderr("party1-resumed")
    local = run_inprocess("local", params, data, tmp_path / "inprocess")
    assert_same_as_inprocess(out["party1"], local, skip=("bytes",))
    weights = read_json(local / "history.json")["runs"][0]["extra"]["weights"]
    guest = read_json(out["party1"] / "model" / "seed0.json")
    host = read_json(out["party2"] / "model" / "seed0.json")
    assert guest["weights"] + [guest["intercept"]] == weights["party1"]
    assert host["weights"] == weights["party2"]
    assert read_json(out[ARBITER] / "arbiter.json")["runs"][0]["epochs"] == BLOCK["max_epochs"]


def test_a_checkpoint_of_another_run_is_refused_naming_it(tmp_path):
    """The host's checkpoints from a run with eta 0.15, offered to a run with eta 0.2: refused before linking."""
    from ppml.launch.checkpoint import Checkpoints

    parties = vertical_parties(np.random.default_rng(8), n=120, n_test=60, widths=(5, 4))
    data = write_prepared(tmp_path / "data", parties)
    params = write_params(tmp_path / "params.yaml", {**BLOCK, "eta": 0.2}, "tls")
    peers = make_certs(tmp_path / "certs", NAMES)
    out = tmp_path / "out" / "party2"
    Checkpoints(out, session="exp:0123456789abcdef:seed0", party="party2", seed_index=0, arbiter=ARBITER,
                peers=["party1", ARBITER], resume=True).save(2, {"anything": 1})
    done = subprocess.run([sys.executable, "-m", "ppml.party", "--experiment", "exp", "--party", "party2",
                           "--peers", str(peers), "--params", str(params), "--data", str(data), "--out", str(out),
                           "--resume", "--connect-timeout", "2"], capture_output=True, text=True, timeout=WAIT)
    assert done.returncode == 2, done.stderr
    line = done.stderr.strip().splitlines()[-1]
    assert "epoch2.json: a checkpoint of run 'exp:0123456789abcdef:seed0', not of this run 'exp:" in line, line
    assert yaml.safe_load(params.read_text())["experiments"]["exp"]["eta"] == 0.2
