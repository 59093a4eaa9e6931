"""A Ray cluster owned by the test session: started once, shut down at the end, no process of it left behind."""

from __future__ import annotations

import os
import secrets
import time
from pathlib import Path

import pytest


def descendants(pid: int) -> set[int]:
    """Every live process descending from `pid` (from /proc)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        children.setdefault(int(fields[1]), []).append(int(entry.name))
    out, todo = set(), [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            if child not in out:
                out.add(child)
                todo.append(child)
    return out


def is_ray(pid: int) -> bool:
    """Whether the process is one of Ray's (raylet, GCS, dashboard, log monitor, workers and actors)."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return False
    return "ray" in cmdline


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


@pytest.fixture(scope="session")
def ray_cluster(tmp_path_factory):
    """ray.init of a local cluster for the whole session; afterwards checks that all of its processes ended."""
    import ray

    token = tmp_path_factory.mktemp("ray") / "auth_token"
    token.write_text(secrets.token_hex(32))
    saved = {k: os.environ.get(k) for k in ("RAY_AUTH_TOKEN_PATH", "RAY_USAGE_STATS_ENABLED", "RAY_ADDRESS")}
    os.environ.update(RAY_AUTH_TOKEN_PATH=str(token), RAY_USAGE_STATS_ENABLED="0")
    os.environ.pop("RAY_ADDRESS", None)
    before = descendants(os.getpid())
    ray.init(num_cpus=4, include_dashboard=False, log_to_driver=False)
    started: set[int] = set()
    try:
        yield ray
    finally:
        # Ray's own processes only: the code under test may start others that outlive a test by design
        # (multiprocessing's resource tracker, started by the first spawn-context pool, lives as long as pytest)
        started = {p for p in descendants(os.getpid()) - before if is_ray(p)}
        ray.shutdown()
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and any(alive(p) for p in started):
        time.sleep(0.2)
    left = sorted(p for p in started if alive(p))
    assert not left, f"processes the Ray fixture started are still running: {left}"
