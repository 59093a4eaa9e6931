"""Every benchmark still runs: each ``bench/*.py --quick`` as a subprocess, exit code 0 and some output.

DESIGN.md section 7: benchmark numbers are never asserted (nothing here times anything), but each bench accepts
``--quick`` and runs in ``make test`` so that none can rot; a new file in bench/ is covered by being there.
A bench that offers ``--json`` also writes its numbers, which must be JSON objects of numbers. Every process a
bench starts (Ray's cluster and actors, precomputation workers) must be gone once it exits: each run carries a
token in its environment, which every process it starts inherits, however detached from it.
"""

from __future__ import annotations

import json
import os
import secrets
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
BENCHES = sorted((REPO / "bench").glob("*.py"))
TIMEOUT = 300  # seconds; a quick bench takes well under a minute
MARK = "PPML_BENCH_RUN"


def marked(token: str) -> list[int]:
    """Live processes (not zombies) whose environment carries ``PPML_BENCH_RUN=token``."""
    needle = f"{MARK}={token}".encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            environ = (entry / "environ").read_bytes().split(b"\0")
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:  # ended meanwhile, or not ours to read
            continue
        if needle in environ and state != "Z":
            found.append(int(entry.name))
    return found


def check_numbers(value, where: str) -> None:
    if isinstance(value, dict):
        assert value, f"{where}: empty object"
        for key, item in value.items():
            check_numbers(item, f"{where}.{key}")
    else:
        assert isinstance(value, (int, float)) and not isinstance(value, bool), f"{where}: {value!r}"


def test_there_are_benches():
    assert BENCHES, f"no bench/*.py under {REPO}"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="finds left-over processes through /proc")
@pytest.mark.parametrize("bench", BENCHES, ids=lambda path: path.name)
def test_quick_run(bench, tmp_path):
    token = secrets.token_hex(8)
    # A cluster of its own: no address or token of one this session (tests/transport) may hold.
    env = {k: v for k, v in os.environ.items()
           if k not in ("RAY_ADDRESS", "RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH")}
    env.update({MARK: token, "RAY_USAGE_STATS_ENABLED": "0"})
    command = [sys.executable, str(bench), "--quick"]
    written = tmp_path / "bench.json"
    if '"--json"' in bench.read_text():
        command += ["--json", str(written)]
    try:
        done = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True, timeout=TIMEOUT)
    finally:
        deadline = time.monotonic() + 30  # Ray's processes end shortly after its driver
        while (left := marked(token)) and time.monotonic() < deadline:
            time.sleep(0.2)
        for pid in left:  # fail, but leave nothing running
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
    assert done.returncode == 0, (f"{bench.name} --quick exited with {done.returncode}:\n"
                                  f"{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    assert done.stdout.strip(), f"{bench.name} --quick printed nothing"
    assert not left, f"{bench.name} --quick left processes running: {left}"
    if "--json" in command:
        check_numbers(json.loads(written.read_text()), bench.name)
