"""A TLS listener's admission, on loopback: honest parties link while unauthenticated connections come and go,
and a dialer is the party its certificate's DNS names say, not its common name.

An attacker that keeps silent TCP connections open, reopening each one as soon as the listener closes it, used
to hold every handshake slot (16 of them, 10 s each) and so keep every honest dialer out until its connect
timeout. Here it keeps 16, 64 or 256 such connections (and, with the listener's bounds lowered, many more than
it holds) while two parties link and close; they link within a bound well under the connect timeout, and the
silent connections cost no thread. Every wait follows progress (a condition polled with a deadline).
"""

from __future__ import annotations

import select
import socket
import threading
import time

import pytest

from ppml.network import ProtocolError
from ppml.network import tls_links
from ppml.network.links import make_links
from ppml.network.peer import PeerNetwork
from ppml.network.tls import Credentials, issue, make_ca, throwaway_set

from certificates import certificate_naming
from test_links import close_all, connect_all

NAMES = ("a", "b")  # a dials b: b's listener is the one attacked
CONNECT_TIMEOUT = 60.0
LINKED_WITHIN = 30.0
"""Seconds two parties may take to link under the attack: generous (a busy 2-core machine), yet half the
connect timeout that a listener kept out of reach would reach."""
THREADS = 12
"""Threads the test may add at most, whatever the number of silent connections: the listeners', the dialer's,
the connecting and closing ones, a handshake or two, the attacker's."""


def until(condition, seconds: float, what: str) -> None:
    """Wait until `condition()` holds, at most `seconds`; fail naming `what` otherwise."""
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, f"not within {seconds:g} s: {what}"
        time.sleep(0.01)


class Silent:
    """`n` TCP connections to `address` that never send a byte, in a thread of their own; each one is reopened
    as soon as it is closed (or refused) until the end of the ``with`` block. Counts how many were reopened,
    whether every slot was established at least once, and the most threads this process ran meanwhile."""

    def __init__(self, address: str, n: int) -> None:
        host, _, port = address.rpartition(":")
        self.target = (host, int(port))
        self.n = n
        self.reopened = 0
        self.established: set[int] = set()  # slots connected at least once
        self.peak_threads = threading.active_count()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="silent-attacker", daemon=True)

    def __enter__(self) -> "Silent":
        self._thread.start()
        until(lambda: len(self.established) == self.n, 30.0, f"{self.n} silent connections established")
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(10.0)
        assert not self._thread.is_alive(), "the attacker did not stop"

    def _run(self) -> None:
        poller = select.poll()
        slots: dict[int, tuple[int, socket.socket, bool]] = {}  # per descriptor: slot, socket, connected yet

        def open_slot(slot: int) -> None:
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.setblocking(False)
            sock.connect_ex(self.target)  # under way (EINPROGRESS); its end or failure shows in the poll
            slots[sock.fileno()] = (slot, sock, False)
            poller.register(sock, select.POLLOUT | select.POLLIN)

        for slot in range(self.n):
            open_slot(slot)
        try:
            while not self._stop.is_set():
                self.peak_threads = max(self.peak_threads, threading.active_count())
                for fd, event in poller.poll(50):
                    slot, sock, connected = slots[fd]
                    if event & (select.POLLIN | select.POLLHUP | select.POLLERR):  # closed by the listener
                        poller.unregister(fd)
                        del slots[fd]
                        sock.close()
                        self.reopened += 1
                        open_slot(slot)
                    elif not connected:  # connected: from now on it only waits, silent, to be closed
                        slots[fd] = (slot, sock, True)
                        self.established.add(slot)
                        poller.modify(fd, select.POLLIN)
        finally:
            for _, sock, _ in slots.values():
                sock.close()


def two_parties(credentials: dict[str, Credentials], connect_timeout: float = CONNECT_TIMEOUT) -> dict:
    return {n: make_links("tls", PeerNetwork(n, NAMES, None, 30.0), credentials[n], {m: m for m in NAMES if m != n},
                          listen="127.0.0.1:0", session="admission", connect_timeout=connect_timeout)
            for n in NAMES}


def link_under_attack(n: int) -> tuple[dict, dict, float, int, Silent]:
    """The two parties link and close while `n` silent connections to b are kept open: what each connect and
    close raised (None when it did not), the seconds linking took, how many silent connections the listener
    had closed by then (each reopened at once), and the attacker."""
    _, _, credentials = throwaway_set(NAMES)
    links = two_parties(credentials)
    with Silent(links["b"].address, n) as silent:
        start = time.monotonic()
        errors = connect_all(links, NAMES)
        took = time.monotonic() - start
        reopened = silent.reopened
        closed = close_all(links, errors)
    return errors, closed, took, reopened, silent


@pytest.mark.parametrize("n", [16, 64, 256])
def test_two_parties_link_while_silent_connections_are_reopened_as_soon_as_closed(n):
    before = threading.active_count()
    errors, closed, took, reopened, silent = link_under_attack(n)
    assert errors == {"a": None, "b": None}, errors
    assert closed == {"a": None, "b": None}, closed
    assert took < LINKED_WITHIN, took
    if n > tls_links.MAX_PENDING_PER_SOURCE:  # more than one source may hold: it closed them to make room
        assert reopened > 0, reopened
    # a silent connection costs the listener no thread: the count does not grow with n
    assert silent.peak_threads - before <= THREADS, (silent.peak_threads, before)


def test_two_parties_link_while_more_silent_connections_than_the_listener_holds_are_reopened(monkeypatch):
    """With room for 16 silent connections (8 per source: all of loopback is one), 128 are reopened as fast as
    the listener closes the oldest to make room: the honest dialer, the newest, still gets through."""
    monkeypatch.setattr(tls_links, "MAX_PENDING", 16)
    monkeypatch.setattr(tls_links, "MAX_PENDING_PER_SOURCE", 8)
    before = threading.active_count()
    errors, closed, took, reopened, silent = link_under_attack(128)
    assert errors == {"a": None, "b": None}, errors
    assert closed == {"a": None, "b": None}, closed
    assert took < LINKED_WITHIN, took
    assert reopened >= 128 - 8, reopened  # by the time they linked, the listener had closed many to make room
    assert silent.peak_threads - before <= THREADS, (silent.peak_threads, before)


def test_a_certificate_whose_dns_name_names_another_party_is_refused_whatever_its_common_name():
    """The guest's own CA issues a certificate with common name ``guest`` and DNS name ``arbiter``; dialing the
    host with it, it speaks as ``arbiter`` (its DNS names, not its common name): the host refuses it, naming
    what it speaks as, and tells the dialer so at once."""
    guest_ca, guest_ca_key = make_ca("CA of guest")
    host_ca, host_ca_key = make_ca("CA of host")
    host_cert, host_key = issue(host_ca, host_ca_key, "host")
    bad_cert, bad_key = certificate_naming(guest_ca, guest_ca_key, "guest", ["arbiter"])
    order = ("guest", "host")  # the guest dials the host
    creds = {"host": Credentials("host", host_cert, host_key, guest_ca + host_ca, peer_ca={"guest": guest_ca}),
             "guest": Credentials("guest", bad_cert, bad_key, host_ca)}
    timeouts = {"guest": 30.0, "host": 3.0}
    links = {n: make_links("tls", PeerNetwork(n, order, None, 30.0), creds[n], {m: m for m in order if m != n},
                           listen="127.0.0.1:0", session="identity", connect_timeout=timeouts[n]) for n in order}
    errors = connect_all(links, order)
    described = links["host"].describe()
    close_all(links, errors)
    refused = "'host' refused a link from a certificate speaking as ['arbiter']: not a peer that links to it ('guest')"
    assert isinstance(errors["host"], ProtocolError) and refused in str(errors["host"]), errors
    assert isinstance(errors["guest"], ProtocolError), errors
    assert f"'host' refused the link: {refused}" in str(errors["guest"]), errors
    assert described["presented"] == {}, described
