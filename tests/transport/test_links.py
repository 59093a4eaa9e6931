"""Links between two parties, each in a thread of this process: what the carriers guarantee under load and faults.

The TLS carrier is read by the waiting program itself (no reader thread), so these pin what that design must
still do: two parties that send more than a connection buffers to each other at once both get through (a
blocked send reads meanwhile); an abort from another thread ends a wait at once; a peer that takes nothing
ends a send within the run's timeout, named.
"""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

from ppml.network import ProtocolError
from ppml.network import grpc_links, tls_links  # noqa: F401 - they register the carriers make_links opens
from ppml.network.endpoint import CARRIERS
from ppml.network.links import ABORT_LINGER, make_links, run_program
from ppml.network.peer import PeerNetwork
from ppml.network.tls import throwaway_set

NAMES = ("a", "b")


def linked(carrier: str, timeout: float):
    """Two parties' networks and links, connected to each other."""
    _, _, credentials = throwaway_set(NAMES)
    nets = {n: PeerNetwork(n, NAMES, None, timeout) for n in NAMES}
    links = {n: make_links(carrier, nets[n], credentials[n], {m: m for m in NAMES if m != n},
                           listen="127.0.0.1:0", session="test") for n in NAMES}
    addresses = {n: link.address for n, link in links.items()}
    errors = []

    def connect(n):
        try:
            links[n].connect(addresses)
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=connect, args=(n,)) for n in NAMES]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert not errors, errors
    return nets, links


def in_threads(links: dict, order, step) -> dict:
    """`step(links[n])` for every party of `order` at once, each in a thread of its own (bounded joins): per
    party, None when it returned, else the exception it raised."""
    errors: dict = {}

    def run(n):
        try:
            step(n)
            errors[n] = None
        except BaseException as exc:  # noqa: BLE001 - the test reads it
            errors[n] = exc

    threads = [threading.Thread(target=run, args=(n,), daemon=True) for n in order]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    return errors


def connect_all(links: dict, order) -> dict:
    """Every party of `order` links to all the others at once, each in a thread of its own (bounded joins):
    per party, None when it linked, else the exception its ``connect`` raised."""
    addresses = {n: link.address for n, link in links.items()}
    return in_threads(links, order, lambda n: links[n].connect(addresses))


def close_all(links: dict, errors: dict) -> dict:
    """Close every party's links at once, each in a thread of its own (bye, or abort after an error): per party,
    None when it closed cleanly, else what its ``close`` raised."""
    return in_threads(links, list(links), lambda n: links[n].close(
        error=None if errors.get(n) is None else str(errors[n])[:300], timeout=10.0))


def run_both(links, programs, timeout):
    """Each party's program over its links, in its own thread: what each returned or raised, and when it ended."""
    out, ended = {}, {}
    start = time.monotonic()

    def run(n):
        try:
            out[n] = run_program(links[n], programs[n], None, {}, timeout=timeout)["result"]
        except BaseException as exc:  # noqa: BLE001 - the test reads it
            out[n] = exc
        ended[n] = time.monotonic() - start

    threads = [threading.Thread(target=run, args=(n,), daemon=True) for n in NAMES]
    for t in threads:
        t.start()
    for t in threads:
        t.join(4 * timeout + 30)
    assert not any(t.is_alive() for t in threads), "a party did not end"
    return out, ended


@pytest.mark.parametrize("carrier", CARRIERS)
def test_two_parties_sending_more_than_a_connection_holds_to_each_other_at_once_both_get_through(carrier):
    rng = np.random.default_rng(5)
    big = {n: [rng.standard_normal(2_000_000) for _ in range(3)] for n in NAMES}  # 3 x 16 MB each way

    def program(me, other):
        def run(endpoint, party):
            for k, vector in enumerate(big[me]):
                endpoint.send(other, f"v{k}", vector)
            return [endpoint.recv(other, f"v{k}") for k in range(3)]
        return run

    _, links = linked(carrier, timeout=60.0)
    out, _ = run_both(links, {"a": program("a", "b"), "b": program("b", "a")}, timeout=60.0)
    for me, other in (("a", "b"), ("b", "a")):
        assert not isinstance(out[me], BaseException), out[me]
        for got, sent in zip(out[me], big[other]):
            np.testing.assert_array_equal(got, sent)


@pytest.mark.parametrize("carrier", CARRIERS)
def test_an_abort_from_another_thread_ends_a_wait_at_once(carrier):
    nets, links = linked(carrier, timeout=60.0)

    def waits(endpoint, party):
        return endpoint.recv("b" if endpoint.name == "a" else "a", "never")

    threading.Timer(0.5, nets["a"].abort, args=("stopped by its driver",)).start()
    out, ended = run_both(links, {"a": waits, "b": waits}, timeout=60.0)
    assert isinstance(out["a"], ProtocolError) and "stopped by its driver" in str(out["a"]), out["a"]
    assert isinstance(out["b"], ProtocolError) and "'a' stopped (ProtocolError" in str(out["b"]), out["b"]
    assert max(ended.values()) < 15, ended  # not the 60 s timeout


def test_a_send_to_a_peer_that_takes_nothing_ends_within_the_timeout():
    """TLS: a sender whose peer reads nothing (its program busy) for the run's timeout stops, naming it."""
    timeout = 1.5
    _, links = linked("tls", timeout=timeout)

    def sends(endpoint, party):
        endpoint.send("b", "big", np.zeros(5_000_000))  # 40 MB: more than the connection holds
        return endpoint.recv("b", "reply")

    def busy(endpoint, party):
        time.sleep(10.0)  # neither receives nor reads its link
        return endpoint.recv("a", "big")

    out, ended = run_both(links, {"a": sends, "b": busy}, timeout=timeout)
    assert isinstance(out["a"], ProtocolError), out["a"]
    assert f"'b' took nothing from 'a' for {timeout:g} s" in str(out["a"]), out["a"]
    # the timeout, then ABORT_LINGER for the peer to read the abort (it does not): long before b wakes
    assert ended["a"] < timeout + ABORT_LINGER + 3.0 < 10.0, ended
    assert isinstance(out["b"], ProtocolError) and "the link to 'a' broke" in str(out["b"]), out["b"]
