"""Every party of a ``transport: grpc`` run as its own process on this machine (the train stage's launcher).

Each party is ``python -m ppml.party`` with certificates made for this run alone (a throwaway CA), linked
over loopback; nothing else differs from three organizations running their parties (README). The launcher
plays the part of every organization only to gather what each party's process returned, as the Ray driver
does, so that the run is assembled and written like every other transport's. A party that fails ends the
run with a :class:`~ppml.network.ProtocolError` naming it and its own last words (a bad parameter is a
:class:`~ppml.config.ParamError`); the others stop within the run's timeout, or are stopped.
"""

from __future__ import annotations

import logging
import os
import pickle
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

from ppml import party as party_cli  # the program each party process runs (so code deps hold it)
from ppml.config import ParamError
from ppml.network.errors import ProtocolError
from ppml.network.peer import adopt
from ppml.network.peers import write_peers
from ppml.network.tls import throwaway_set

log = logging.getLogger(__name__)

__all__ = ["run_local", "adopt"]  # adopt: each seed's outputs into its network, as the train stage assembles them

GRACE = 15.0
"""Seconds the other parties get to stop by themselves after one failed, before they are killed."""


def _hold_ports(n: int) -> list[socket.socket]:
    """`n` free loopback ports, each held by a bound socket that does not listen (SO_REUSEADDR: a party's
    listener binds the port beside it) until the run ends, so that no other process is given one meanwhile."""
    socks = []
    try:
        for _ in range(n):
            socks.append(socket.socket())
            socks[-1].setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            socks[-1].bind(("127.0.0.1", 0))
    except OSError:
        for s in socks:
            s.close()
        raise
    return socks


def run_local(name: str, block: dict[str, Any], section: str, seed: int, data_dir: str | Path,
              names: tuple[str, ...]) -> list[dict[str, dict[str, Any]]]:
    """Run experiment `name` with one ``python -m ppml.party`` process per address in `names`; per seed, what
    each party's process returned (``result``, ``rounds``, ``seconds``, ``messages``, ``where``)."""
    work = Path(tempfile.mkdtemp(prefix="ppml-grpc-"))
    procs: dict[str, subprocess.Popen] = {}
    held = _hold_ports(len(names))
    try:
        _, _, credentials = throwaway_set(names)
        peers = write_peers(work / "certs", credentials,
                            {n: f"127.0.0.1:{s.getsockname()[1]}" for n, s in zip(names, held)})
        params = work / "params.yaml"
        params.write_text(yaml.safe_dump({"seed": seed, section: {name: block}}, sort_keys=False))
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        for party in names:
            (work / party).mkdir()
            with open(work / party / "log.txt", "wb") as log_file:
                procs[party] = subprocess.Popen(
                    [sys.executable, "-m", party_cli.__name__, "--experiment", name, "--party", party, "--peers",
                     str(peers), "--params", str(params), "--data", str(Path(data_dir).resolve()), "--out",
                     str(work / party), "--result", str(work / party / "result.pickle")],
                    stdout=log_file, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env)
        log.info("grpc: %d parties started on loopback (%s)", len(procs),
                 ", ".join(f"{n}:{p.pid}" for n, p in procs.items()))
        _wait(procs, work)
        per_party = {party: pickle.loads((work / party / "result.pickle").read_bytes()) for party in names}
    finally:
        for proc in procs.values():
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        for s in held:
            s.close()
        shutil.rmtree(work, ignore_errors=True)  # the run's keys go with it
    seeds = len(next(iter(per_party.values())))
    return [{party: outputs[s] for party, outputs in per_party.items()} for s in range(seeds)]


def _last_words(work: Path, party: str) -> str:
    lines = (work / party / "log.txt").read_text(errors="replace").strip().splitlines()
    return lines[-1] if lines else "no output"


def _wait(procs: dict[str, subprocess.Popen], work: Path) -> None:
    """Wait for every party; the first that fails names the run's failure, the rest get :data:`GRACE` s."""
    while True:
        codes = {n: p.poll() for n, p in procs.items()}
        failed = [n for n, c in codes.items() if c not in (None, 0)]
        if failed:
            break
        if all(c == 0 for c in codes.values()):
            return
        time.sleep(0.05)
    first = failed[0]
    deadline = time.monotonic() + GRACE
    while time.monotonic() < deadline and any(p.poll() is None for p in procs.values()):
        time.sleep(0.05)
    codes = {n: p.poll() for n, p in procs.items()}
    # the party whose failure is its own (bad input, exit 2; or a program error) rather than a broken link
    words = {n: _last_words(work, n) for n, c in codes.items() if c not in (None, 0)}
    own = [n for n in words if codes[n] == 2] or [n for n in words if "link to" not in words[n]
                                                  and " stopped " not in words[n]] or [first]
    culprit = own[0]
    if codes[culprit] < 0:
        raise ProtocolError(f"party {culprit!r} failed (its process died: signal {-codes[culprit]})")
    if codes[culprit] == 2:
        raise ParamError(words[culprit].split(": ", 1)[-1])
    raise ProtocolError(f"party {culprit!r} failed ({words[culprit]})")
