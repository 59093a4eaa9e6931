"""Links under abuse and mismatch, on loopback: a listener survives a flood at the descriptor limit, the connect
wait names the peer whose link failed at once, and a hello from a party whose data differ names the difference.

Every wait follows progress (a condition polled with a generous deadline); times are asserted only against the
connect timeout a fixed fault would have to wait for.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from ppml.launch.party import data_facts
from ppml.network import ProtocolError
from ppml.network import grpc_links, tls_links  # noqa: F401 - they register the carriers make_links opens
from ppml.network.endpoint import CARRIERS
from ppml.network.links import make_links
from ppml.network.peer import PeerNetwork
from ppml.network.tls import throwaway_set

from test_links import connect_all

ROOT = Path(__file__).resolve().parents[2]

FLOOD = textwrap.dedent("""
    import logging, os, resource, sys, threading, time
    from ppml.network import grpc_links, tls_links  # they register the carriers make_links opens
    from ppml.network.links import make_links
    from ppml.network.peer import PeerNetwork
    from ppml.network.tls import throwaway_set

    carrier = sys.argv[1]
    names = ("a", "b")
    _, _, credentials = throwaway_set(names)
    lines = []

    class Keep(logging.Handler):
        def emit(self, record):
            lines.append(record.getMessage())

    logging.getLogger("ppml").addHandler(Keep())
    logging.getLogger("ppml").setLevel(logging.WARNING)
    nets = {n: PeerNetwork(n, names, None, 30.0) for n in names}
    links = {n: make_links(carrier, nets[n], credentials[n], {m: m for m in names if m != n},
                           listen="127.0.0.1:0", session="flood", connect_timeout=60.0) for n in names}
    open_now = len(os.listdir("/proc/self/fd"))
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    resource.setrlimit(resource.RLIMIT_NOFILE, (open_now + 64, hard))
    fillers = []
    try:
        while True:  # this process at its descriptor limit: the listener's accept fails with EMFILE
            fillers.append(open("/dev/null"))
    except OSError:
        pass
    print(f"full {links['b'].address} {resource.getrlimit(resource.RLIMIT_NOFILE)[0]}", flush=True)
    sys.stdin.readline()  # the flood is in: the listener meets it at the limit
    deadline = time.monotonic() + 60
    while carrier == "tls" and not any("Too many open files" in line for line in lines):
        assert time.monotonic() < deadline, lines
        time.sleep(0.02)
    for f in fillers:
        f.close()
    print("freed", flush=True)
    sys.stdin.readline()  # the flood closed its connections
    # the listener drains what the flood left in its backlog (it accepts, reads end of file, closes); 'a' dials
    # from this same process, so it waits for that progress rather than racing the listener for descriptors
    def held():
        try:
            return len(os.listdir("/proc/self/fd"))
        except OSError:  # listing takes a descriptor too: still at the limit
            return resource.getrlimit(resource.RLIMIT_NOFILE)[0]

    deadline = time.monotonic() + 60
    while held() > open_now + 32:
        assert time.monotonic() < deadline, f"{held()} descriptors still open, {open_now} before the flood"
        time.sleep(0.02)
    errors = []

    def both(step):
        # each party in a thread of its own, as in its own process: a closing party waits for its peer's bye
        def run(n):
            try:
                step(links[n])
            except BaseException as exc:
                errors.append(f"{n}: {exc}")

        threads = [threading.Thread(target=run, args=(n,)) for n in names]
        for t in threads:
            t.start()
        for t in threads:
            t.join(90)

    both(lambda link: link.connect({m: links[m].address for m in names}))
    print("linked" if not errors else f"failed {errors}", flush=True)
    for line in lines:
        print(f"log {line}", flush=True)
    both(lambda link: link.close(timeout=10))
    print("closed" if not errors else f"failed {errors}", flush=True)
""")


def end_flood(child: subprocess.Popen, flood: list[socket.socket]) -> None:
    """Close the flood's connections and stop the flooded process if it still runs."""
    for s in flood:
        s.close()
    if child.poll() is None:
        child.kill()
        child.wait()


@pytest.mark.parametrize("carrier", CARRIERS)
def test_a_flood_at_the_descriptor_limit_delays_but_does_not_disable_a_listener(carrier):
    """A process at its descriptor limit (RLIMIT_NOFILE lowered) takes more unauthenticated connections than
    the limit: its listener's accept fails with EMFILE, it logs that (rate-limited, one bounded line; gRPC's
    core logs its own) and goes on; once the flood closes, a real peer links, and both end the run."""
    # gRPC's core writes its errors to stderr at this verbosity (its default, set against an inherited one)
    child = subprocess.Popen([sys.executable, "-c", FLOOD, carrier], cwd=ROOT, stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             env={**os.environ, "GRPC_VERBOSITY": "ERROR"})
    flood = []
    try:
        first = child.stdout.readline().split()
        assert first and first[0] == "full", first + [child.stderr.read()]
        host, port = first[1].rsplit(":", 1)
        failed = 0
        for _ in range(int(first[2]) + 50):  # more connections than the child may hold descriptors
            try:
                flood.append(socket.create_connection((host, int(port)), timeout=1.0))
            except OSError:  # the listener's backlog is full
                failed += 1
                if failed == 3:
                    break
        assert flood
        child.stdin.write("go\n")
        child.stdin.flush()
        assert child.stdout.readline().strip() == "freed", child.stderr.read()
        for s in flood:
            s.close()
        child.stdin.write("go\n")
        child.stdin.flush()
        out, err = child.communicate(timeout=180)
    finally:
        end_flood(child, flood)
    lines = out.splitlines()
    assert lines and lines[0] == "linked", out + err
    assert lines[-1] == "closed" and child.returncode == 0, out + err
    logged = [line[4:] for line in lines if line.startswith("log ")]
    if carrier == "tls":
        emfile = [line for line in logged if "Too many open files" in line]
        assert emfile, logged
        # rate-limited: a line per LOG_EVERY seconds at most, not one per failed accept; each bounded
        assert len(emfile) <= 12, emfile
    else:  # gRPC's listener is its core's: what it logs goes to stderr, not to Python's logging
        assert "File descriptor limit reached" in err, err[-2000:]
    assert all(len(line) <= 400 for line in logged), logged


def _three(carrier: str, rogue_c: bool = True):
    """Links of a (which dials b and c) and of c, whose certificate is from another CA when `rogue_c`."""
    names = ("a", "b", "c")
    _, _, good = throwaway_set(names)
    _, _, rogue = throwaway_set(names)
    nets = {n: PeerNetwork(n, names, None, 30.0) for n in names}
    a = make_links(carrier, nets["a"], good["a"], {"b": "b", "c": "c"}, listen="127.0.0.1:0", session="s",
                   connect_timeout=30.0)
    c = make_links(carrier, nets["c"], (rogue if rogue_c else good)["c"], {"a": "a", "b": "b"},
                   listen="127.0.0.1:0", session="s", connect_timeout=30.0)
    return a, c


@pytest.mark.parametrize("carrier", CARRIERS)
def test_the_connect_wait_names_the_peer_whose_link_failed_while_another_is_silent(carrier):
    """a dials b, which accepts connections but never answers, and c, whose certificate is from another CA:
    a's wait ends on c's failure, naming c, long before the connect timeout (it used to wait on b, then name
    it)."""
    a, c = _three(carrier)
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(64)
        start = time.monotonic()
        with pytest.raises(ProtocolError) as caught:
            a.connect({"b": "127.0.0.1:%d" % silent.getsockname()[1], "c": c.address})
        took = time.monotonic() - start
        a.close(error="test over", timeout=1.0)
    c.close(error="test over", timeout=1.0)
    message = str(caught.value)
    assert "'a' could not open an authenticated link to 'c'" in message, message
    assert "'b'" not in message.split("'c'", 1)[0], message
    assert "\n" not in message and len(message) < 2000, message
    assert took < 25.0, took  # not the 30 s connect timeout


def _manifest(train: int, test: int) -> dict:
    parties = [{"name": n, "file": f"{n}.npz", "label_holder": n == "a", "columns": 3, "train_rows": train,
                "test_rows": test} for n in ("a", "b")]
    return {"dataset": "toy", "available": True, "partition": "vertical", "evaluator": None, "parties": parties,
            "split": {"method": "stratified", "test_fraction": test / (train + test), "train": train, "test": test},
            "alignment": {"method": "psi", "shared_ids": train + test}}


@pytest.mark.parametrize("carrier", CARRIERS)
def test_a_peer_whose_data_differ_is_named_at_the_hello_with_the_differing_fields(carrier):
    """b's data were prepared with another test fraction: both refuse each other at the hello, naming the
    peer and the facts that differ, before any message is sent."""
    names = ("a", "b")
    _, _, credentials = throwaway_set(names)
    facts = {"a": data_facts(_manifest(1000, 250)), "b": data_facts(_manifest(750, 500))}
    nets = {n: PeerNetwork(n, names, None, 30.0) for n in names}
    links = {n: make_links(carrier, nets[n], credentials[n], {m: m for m in names if m != n},
                           listen="127.0.0.1:0", session="s", connect_timeout=30.0, facts=facts[n])
             for n in names}
    errors = connect_all(links, names)
    for n in names:
        links[n].close(error="test over", timeout=1.0)
    assert set(errors) == set(names), errors
    message = str(errors["a"])
    assert isinstance(errors["a"], ProtocolError), message
    assert "'b' is in another run: its data differ in " in message, message
    assert "split.train: 1000 here, 750 there" in message, message
    assert "split.test: 250 here, 500 there" in message and "(and " in message, message
    assert isinstance(errors["b"], ProtocolError) and "'a' is in another run" in str(errors["b"]), errors["b"]
    assert not nets["a"].messages and not nets["b"].messages


def test_data_facts_are_flat_bounded_and_leave_out_what_the_manifest_lacks():
    facts = data_facts(_manifest(1000, 250))
    assert facts["a.train_rows"] == 1000 and facts["split.test"] == 250 and facts["parties"] == "a,b"
    assert facts["alignment.shared_ids"] == 1250 and "prepare.seed" not in facts
    assert all(v is None or isinstance(v, (bool, int, float, str)) for v in facts.values())
    long = {**_manifest(10, 5), "seed": list(range(500))}
    assert data_facts(long)["prepare.seed"].startswith("sha256:")


@pytest.mark.parametrize("carrier", CARRIERS)
def test_a_peer_with_other_parameters_is_told_the_first_key_that_differs(carrier):
    """Same data, blocks that differ in eta and max_epochs: both refuse at the hello, naming the first parameter
    key that differs (in the block's order) and both values, before any message is sent."""
    from ppml.launch.party import param_facts

    names = ("a", "b")
    _, _, credentials = throwaway_set(names)
    block = {"algorithm": "paillier_sgd", "dataset": "d", "eta": 0.15, "max_epochs": 10, "split": [1, 2]}
    other = {**block, "eta": 0.2, "max_epochs": 12}
    facts = {"a": {**param_facts(block, 7), **data_facts(_manifest(1000, 250))},
             "b": {**param_facts(other, 7), **data_facts(_manifest(1000, 250))}}
    nets = {n: PeerNetwork(n, names, None, 30.0) for n in names}
    links = {n: make_links(carrier, nets[n], credentials[n], {m: m for m in names if m != n},
                           listen="127.0.0.1:0", session=f"s-{n}", connect_timeout=30.0, facts=facts[n])
             for n in names}
    errors = connect_all(links, names)
    for n in names:
        links[n].close(error="test over", timeout=1.0)
    message = str(errors["a"])
    assert isinstance(errors["a"], ProtocolError), message
    assert message.startswith("'b' is in another run: its parameters differ in param.eta: 0.15 here, 0.2 there, "
                              "param.max_epochs: 10 here, 12 there"), message
    assert "param.eta: 0.2 here, 0.15 there" in str(errors["b"]), errors["b"]
    assert not nets["a"].messages and not nets["b"].messages
