"""Every wait of a Ray run is bounded: joining ``RAY_ADDRESS`` and the message timeout itself (no cluster).

Joining runs in a child process: a ray.init given up on may go on in its thread for a while, and it must not
meet the Ray cluster of the test session.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]

JOIN = textwrap.dedent("""
    import sys, time
    from ppml.network import ProtocolError
    from ppml.launch.ray_runner import ray_cluster

    start = time.monotonic()
    try:
        with ray_cluster(connect_timeout=float(sys.argv[1])):
            print("joined")
    except ProtocolError as exc:
        print(f"ProtocolError: {exc}")
    print(f"{time.monotonic() - start:.2f}")
""")


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _env(address: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}
    return {**env, "RAY_ADDRESS": address, "RAY_USAGE_STATS_ENABLED": "0"}


def _join(address: str, connect_timeout: float) -> tuple[str, float]:
    done = subprocess.run([sys.executable, "-c", JOIN, str(connect_timeout)], env=_env(address), cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    lines = done.stdout.strip().splitlines()
    assert len(lines) == 2, done.stdout + done.stderr
    return lines[0], float(lines[1])


def test_a_closed_ray_address_fails_at_once_naming_it():
    port = _closed_port()
    message, seconds = _join(f"127.0.0.1:{port}", 5)
    assert message == f"ProtocolError: ray: cannot reach the cluster at RAY_ADDRESS=127.0.0.1:{port} " \
                      "(Connection refused)"
    assert seconds < 5


def test_an_address_that_never_answers_fails_within_the_connect_timeout():
    """A port that accepts connections and says nothing: Ray alone would retry for about ten minutes."""
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(64)
        address = "127.0.0.1:%d" % silent.getsockname()[1]
        message, seconds = _join(address, 2)
    assert message == f"ProtocolError: ray: could not join the cluster at RAY_ADDRESS={address} within 2 s"
    assert 1.9 <= seconds < 6


def test_the_train_stage_exits_1_with_one_line_naming_the_address(tmp_path):
    import yaml

    from tests.algorithms.vertical_data import write_prepared
    from tests.transport.test_ray import vertical_parties

    data = tmp_path / "toy_vertical"
    data.mkdir()
    write_prepared(data, vertical_parties(np.random.default_rng(1), n=60, n_test=20))
    params = tmp_path / "params.yaml"
    params.write_text(yaml.safe_dump({"seed": 7, "experiments": {"remote": {
        "algorithm": "admm_sharing", "dataset": "toy_vertical", "max_epochs": 2, "transport": "ray"}}}))
    port = _closed_port()
    stage = [sys.executable, "stages/train.py", "--experiment", "remote", "--params", str(params),
             "--data", str(data), "--out", str(tmp_path / "out")]
    done = subprocess.run(stage, env=_env(f"127.0.0.1:{port}"), cwd=ROOT, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 1
    assert done.stderr.strip().splitlines() == [
        f"experiment remote: ray: cannot reach the cluster at RAY_ADDRESS=127.0.0.1:{port} (Connection refused)"]
    assert not (tmp_path / "out").exists()


def test_a_timeout_past_what_the_clocks_represent_is_refused_at_load():
    from ppml.config import ParamError
    from ppml.experiment import experiment_params
    from ppml.network import MAX_TIMEOUT

    base = {"algorithm": "admm_sharing", "dataset": "toy"}
    with pytest.raises(ParamError, match=r"experiments.x.timeout must be <= 604800.0, got 10000000000.0"):
        experiment_params("x", {**base, "timeout": 1.0e10})
    assert MAX_TIMEOUT == 7 * 24 * 3600
    experiment_params("x", {**base, "timeout": MAX_TIMEOUT})


def test_run_ray_refuses_such_a_timeout_before_starting_anything():
    from ppml import runtime
    from ppml.network import Network
    from ppml.launch.ray_runner import run_ray

    network = Network(["a", "b"], timeout=1.0e10)
    with pytest.raises(ValueError, match=r"timeout must be in \(0, 604800\] seconds, got 10000000000.0"):
        run_ray([runtime.Role("a", print), runtime.Role("b", print)], network, {})
