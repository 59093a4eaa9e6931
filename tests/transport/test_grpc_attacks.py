"""gRPC links under attack: the pin binds the stream that carries the run, the listener reads a dialer's identity
by the certificate rule, and a flood of connections held at the descriptor limit does not disable a listener.

A gRPC dialer cannot see the listener's certificate, so the listener proves over the stream itself that it holds
the key of the certificate the dialer accepts, signing the dialer's nonce and the dialer's certificate as it
received it (:mod:`ppml.network.grpc_links`). Pinned here: an honest pinned pair links; a rogue holding another
certificate for ``host`` from the host's own CA is refused before the guest said anything of its run, and so is
one relaying the real host's proof over a connection of its own; forged, malformed, missing and late proofs are
refused, naming the peer. Parties run as threads of this process on loopback, but for the flood, whose listener
is a process of its own at a low descriptor limit.
"""

from __future__ import annotations

import dataclasses
import datetime
import os
import queue
import secrets
import socket
import subprocess
import sys
import textwrap
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Callable

import grpc
import pytest

from ppml.network import ProtocolError
from ppml.network import grpc_links  # noqa: F401 - it registers the carrier make_links opens
from ppml.network.codec import decode, encode
from ppml.network.grpc_links import proof_message, sign_proof, verify_proof
from ppml.network.links import make_links
from ppml.network.peer import PeerNetwork
from ppml.network.tls import Credentials, der_of, fingerprint, issue, throwaway_set

from certificates import certificate_naming
from test_links import close_all, connect_all
from test_robust import end_flood
from test_trust import credentials, link_pair, orgs  # noqa: F401 - orgs: the fixture of one CA per party

ROOT = Path(__file__).resolve().parents[2]
PAIR = ("guest", "host")
SHORT = 3.0
"""Connect timeout (s) of a party whose peer is refused, or of a dialer waiting for a proof that never comes."""


def pinned(orgs: Path, me: str, peer: str, pin: str) -> Credentials:
    """`me`'s credentials from its peers file, pinning `peer`'s fingerprint to `pin`."""
    own = credentials(orgs, me)
    return dataclasses.replace(own, pins={**own.pins, peer: pin})


def real_fingerprint(orgs: Path, party: str) -> str:
    return fingerprint((orgs / party / f"{party}.pem").read_bytes())


def rogue_host(orgs: Path) -> Credentials:
    """The host's credentials, but another certificate for ``host`` issued by the host's own CA (and its key)."""
    host = orgs / "host"
    certificate, key = issue((host / "ca-host.pem").read_bytes(), (host / "ca-host.key").read_bytes(), "host")
    return dataclasses.replace(credentials(orgs, "host"), certificate=certificate, key=key)


# --- the pin binds the stream --------------------------------------------------------------------------------


@pytest.mark.parametrize("order", [("guest", "host"), ("host", "guest")], ids=["guest-dials", "host-dials"])
def test_an_honest_pinned_pair_links(orgs, order):
    creds = {"guest": pinned(orgs, "guest", "host", real_fingerprint(orgs, "host")),
             "host": pinned(orgs, "host", "guest", real_fingerprint(orgs, "guest"))}
    described, errors = link_pair("grpc", order, creds, {"guest": 30.0, "host": 30.0})
    assert errors == {"guest": None, "host": None}, errors
    for me, peer in (("guest", "host"), ("host", "guest")):
        assert described[me]["presented"][peer]["fingerprint"] == real_fingerprint(orgs, peer), described[me]


def test_a_rogue_with_another_certificate_of_the_hosts_ca_is_refused_before_the_guest_says_anything(orgs):
    """The rogue listens as ``host`` with a valid certificate from the host's CA (so the channel's TLS accepts
    it), but not the one the guest pinned: the guest refuses it at the proof, naming 'host' and both fingerprints,
    and the rogue never received the guest's hello (session and data facts) nor anything after it."""
    real = real_fingerprint(orgs, "host")
    rogue = rogue_host(orgs)
    creds = {"guest": pinned(orgs, "guest", "host", real), "host": rogue}
    links = {n: make_links("grpc", PeerNetwork(n, PAIR, None, 30.0), creds[n], {m: m for m in PAIR if m != n},
                           listen="127.0.0.1:0", session="secret session", connect_timeout=t,
                           facts={"guest.train_rows": 1000})
             for n, t in (("guest", 30.0), ("host", SHORT))}
    received = []
    on_frame = links["host"]._on_frame

    def watch(link, raw):
        received.append(decode(raw))
        on_frame(link, raw)

    links["host"]._on_frame = watch
    start = time.monotonic()
    errors = connect_all(links, PAIR)
    took = time.monotonic() - start
    close_all(links, errors)
    message = str(errors["guest"])
    assert isinstance(errors["guest"], ProtocolError), errors
    assert f"'guest' refused 'host': its certificate has fingerprint {fingerprint(rogue.certificate)}, not the " \
           f"pinned {real}" in message, message
    assert received == [], received
    assert not links["host"]._links["guest"].hello.is_set()
    assert isinstance(errors["host"], ProtocolError), errors
    assert took < SHORT + 10, took  # the guest refuses at once: the host's short wait is what takes time


class FakeListener:
    """A gRPC listener of the links' service speaking as ``host`` with `tls` (certificate and key), whose stream
    records every frame the dialer sends and answers its first with ``answer(frame)``'s frames (then waits for
    the dialer to end the stream); with `answer` None it ends the stream at once."""

    def __init__(self, tls: Credentials, trusted: bytes, answer: Callable[[bytes], list[bytes]] | None) -> None:
        self.answer = answer
        self.received: list = []
        self.server = grpc.server(ThreadPoolExecutor(max_workers=4))
        self.server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(
            "ppml.Link", {"Stream": grpc.stream_stream_rpc_method_handler(self._stream)}),))
        port = self.server.add_secure_port("127.0.0.1:0", grpc.ssl_server_credentials(
            [(tls.key, tls.certificate)], root_certificates=trusted, require_client_auth=True))
        self.server.start()
        self.address = f"127.0.0.1:{port}"

    def _stream(self, frames, context):
        for raw in frames:
            self.received.append(decode(raw))
            if self.answer is None:
                return
            yield from self.answer(raw)
            break
        for raw in frames:
            self.received.append(decode(raw))

    def stop(self) -> None:
        self.server.stop(0).wait(5)


def dial(orgs: Path, listener: FakeListener, timeout: float = 30.0) -> tuple[ProtocolError | None, float]:
    """The real guest, pinning the real host's certificate, dials `listener` as ``host``: what its connect raised,
    and how long it took."""
    guest = make_links("grpc", PeerNetwork("guest", PAIR, None, 30.0),
                       pinned(orgs, "guest", "host", real_fingerprint(orgs, "host")), {"host": "host"},
                       listen="127.0.0.1:0", session="secret session", connect_timeout=timeout)
    start = time.monotonic()
    try:
        guest.connect({"host": listener.address})
        error = None
    except ProtocolError as exc:
        error = exc
    took = time.monotonic() - start
    guest.close(error="test over", timeout=1.0)
    listener.stop()
    return error, took


def test_a_proof_relayed_from_the_real_host_over_another_connection_is_refused(orgs):
    """The rogue terminates the guest's TLS with another host certificate, and relays the guest's nonce to the
    real host over a stream of its own, as a guest certified by the guest's CA (it lacks the real guest's key):
    the real host's proof, with the pinned certificate, signs the rogue's certificate, not the guest's, so the
    guest refuses it and says nothing more."""
    guest_dir = orgs / "guest"
    ca = ((guest_dir / "ca-guest.pem").read_bytes(), (guest_dir / "ca-guest.key").read_bytes())
    cert, key = issue(*ca, "guest")
    host = make_links("grpc", PeerNetwork("host", PAIR, None, 30.0), credentials(orgs, "host"),
                      {"guest": "guest"}, listen="127.0.0.1:0", session="secret session", connect_timeout=SHORT)
    relays = []

    def relay(first: bytes) -> list[bytes]:
        channel = grpc.secure_channel(host.address, grpc.ssl_channel_credentials(
            (orgs / "guest" / "ca-host.pem").read_bytes(), key, cert),
            options=[("grpc.ssl_target_name_override", "host")])
        out: queue.SimpleQueue = queue.SimpleQueue()
        out.put(first)
        call = channel.stream_stream("/ppml.Link/Stream")(iter(out.get, None))
        proof = next(call)
        relays.append((channel, call, out))
        return [proof]

    listener = FakeListener(rogue_host(orgs), credentials(orgs, "host").ca, relay)
    try:
        error, _ = dial(orgs, listener)
    finally:
        for channel, call, out in relays:
            out.put(None)
            call.cancel()
            channel.close()
        host.close(error="test over", timeout=1.0)
    assert relays, "the rogue got no proof from the real host"
    message = str(error)
    assert isinstance(error, ProtocolError), error
    assert "'guest' refused 'host' at 127.0.0.1:" in message and "its proof does not verify" in message, message
    assert [frame[0] for frame in listener.received] == ["prove"], listener.received


def _answer(orgs: Path, kind: str) -> Callable[[bytes], list[bytes]] | None:
    """A listener's answer to the guest's ("prove", nonce) of `kind`, with the real host's certificate and key."""
    host = credentials(orgs, "host")
    der = der_of(host.certificate)
    guest = fingerprint(credentials(orgs, "guest").certificate)

    def proof(nonce: bytes, identity: str = "host", dialer: str = guest) -> bytes:
        return encode(("proof", der, sign_proof(host.key, proof_message(nonce, identity, dialer))))[0]

    def nonce_of(raw: bytes) -> bytes:
        return decode(raw)[1]

    answers: dict[str, Callable[[bytes], list[bytes]] | None] = {
        "other-nonce": lambda raw: [proof(secrets.token_bytes(32))],
        "other-identity": lambda raw: [proof(nonce_of(raw), identity="arbiter")],
        "other-dialer": lambda raw: [proof(nonce_of(raw), dialer="sha256:" + "00" * 32)],
        "bad-signature": lambda raw: [encode(("proof", der, secrets.token_bytes(72)))[0]],
        "no-certificate": lambda raw: [encode(("proof", b"not a certificate", b"x"))[0]],
        "hello-first": lambda raw: [encode(("hello", "secret session", {}))[0]],
        "garbage": lambda raw: [b"\xff\x00\x1b[31m not a frame"],
        "late": lambda raw: [],
        "none": None,
    }
    return answers[kind]


REFUSED = {
    "other-nonce": "its proof does not verify", "other-identity": "its proof does not verify",
    "other-dialer": "its proof does not verify", "bad-signature": "its proof does not verify",
    "no-certificate": "the certificate in its proof cannot be read",
    "hello-first": "its first frame is not a proof of holding its certificate's key (a 'hello' frame)",
    "garbage": "its first frame is not a proof (",
    "late": f"it did not prove that it holds its certificate's key within {SHORT:g} s",
    "none": "it ended the stream without proving that it holds its certificate's key",
}


@pytest.mark.parametrize("kind", list(REFUSED))
def test_a_forged_malformed_missing_or_late_proof_is_refused_naming_the_peer(orgs, kind):
    """A listener with the real host's certificate (the channel's TLS and the pin accept it) whose proof is
    wrong: the guest refuses it, naming 'host' and its address, on one bounded line, and sends nothing after its
    nonce; a proof that never comes is refused at the connect deadline."""
    listener = FakeListener(credentials(orgs, "host"), credentials(orgs, "host").ca, _answer(orgs, kind))
    error, took = dial(orgs, listener, timeout=SHORT if kind == "late" else 30.0)
    message = str(error)
    assert isinstance(error, ProtocolError), error
    assert message.startswith(f"'guest' refused 'host' at {listener.address}: {REFUSED[kind]}"), message
    assert message.isprintable() and len(message) < 1000, message
    assert [frame[0] for frame in listener.received] == ["prove"], listener.received
    assert took < (SHORT + 5 if kind == "late" else 10), took
    if kind == "late":
        assert took >= SHORT - 0.5, took


def test_a_proof_signs_with_ec_rsa_and_ed25519_keys():
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa, x25519
    from cryptography.x509.oid import NameOID

    now = datetime.datetime.now(datetime.timezone.utc)
    message = proof_message(secrets.token_bytes(32), "host", "sha256:" + "ab" * 32)
    certs = []
    for key in (ec.generate_private_key(ec.SECP256R1()), rsa.generate_private_key(65537, 2048),
                ed25519.Ed25519PrivateKey.generate()):
        name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "host")])
        cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
                .serial_number(1).not_valid_before(now).not_valid_after(now + datetime.timedelta(days=1))
                .sign(key, None if isinstance(key, ed25519.Ed25519PrivateKey) else hashes.SHA256()))
        pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                serialization.NoEncryption())
        certificate = cert.public_bytes(serialization.Encoding.DER)
        signature = sign_proof(pem, message)
        verify_proof(certificate, message, signature)
        with pytest.raises(ValueError):
            verify_proof(certificate, message + b"!", signature)
        certs.append((certificate, signature))
    with pytest.raises(ValueError):  # one key's signature is not another's
        verify_proof(certs[0][0], message, certs[2][1])
    other = x25519.X25519PrivateKey.generate().private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    with pytest.raises(ValueError, match="cannot sign a link proof"):
        sign_proof(other, message)


# --- who a dialer is: DNS names when there are any, else the common name ------------------------------------


def test_a_dialer_whose_common_name_is_guest_but_whose_dns_name_is_arbiter_is_refused(orgs):
    guest_dir = orgs / "guest"
    cert, key = certificate_naming((guest_dir / "ca-guest.pem").read_bytes(),
                                   (guest_dir / "ca-guest.key").read_bytes(), "guest", ["arbiter"])
    dialer = Credentials("guest", cert, key, (guest_dir / "ca-host.pem").read_bytes())
    _, errors = link_pair("grpc", PAIR, {"guest": dialer, "host": credentials(orgs, "host")},
                          {"guest": 30.0, "host": SHORT})
    refusal = ("'host' refused a link from a certificate speaking as ['arbiter']: not a peer that links to it "
               "('guest')")
    assert isinstance(errors["host"], ProtocolError) and refusal in str(errors["host"]), errors
    assert isinstance(errors["guest"], ProtocolError) and refusal in str(errors["guest"]), errors


# --- a flood of connections held at the descriptor limit -----------------------------------------------------

LIMIT = 128
"""The flooded listener's descriptor limit (RLIMIT_NOFILE)."""

HELD = LIMIT + 200
"""Connections the flood opens to it and holds (never closes) while its peers link."""

CONNECT = 30.0
"""Connect timeout of every party of the flood test: the honest links must open within it."""

HELD_LISTENER = textwrap.dedent("""
    import logging, os, resource, sys, time
    from pathlib import Path
    from ppml.network import grpc_links  # it registers the carrier make_links opens
    from ppml.network.links import make_links
    from ppml.network.peer import PeerNetwork
    from ppml.network.tls import Credentials

    limit, directory, timeout = int(sys.argv[1]), Path(sys.argv[2]), float(sys.argv[3])
    resource.setrlimit(resource.RLIMIT_NOFILE, (limit, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))
    logging.basicConfig(level=logging.INFO, format="%(levelname)s b %(name)s: %(message)s")  # as a party logs
    creds = Credentials("b", *((directory / f).read_bytes() for f in ("b.pem", "b.key", "ca.pem")))
    links = make_links("grpc", PeerNetwork("b", ("a", "b", "c"), None, 30.0), creds, {"a": "a", "c": "c"},
                       listen="127.0.0.1:0", session="held", connect_timeout=timeout)
    print(f"listening {links.address}", flush=True)
    c = sys.stdin.readline().strip()  # the flood is in, and held
    start = time.monotonic()
    try:
        links.connect({"c": c})  # a dials in, b dials c: both while the flood is held
    except Exception as exc:
        print(f"failed {exc}", flush=True)
        sys.exit(1)
    print(f"linked {time.monotonic() - start:.1f} s, {len(os.listdir('/proc/self/fd'))} descriptors", flush=True)
    sys.stdin.readline()
    links.close(timeout=10)
    print("closed", flush=True)
""")


def test_a_flood_held_at_the_descriptor_limit_does_not_disable_a_grpc_listener(tmp_path):
    """b, a process at a descriptor limit of LIMIT, meets HELD connections that are never closed (more than it
    may hold descriptors): gRPC's core holds a quarter of the limit, closes the rest at once and each held one
    after its handshake timeout, so a (dialing into b) and b (dialing c) both link within the connect timeout
    while the flood is still held; b's stderr stays a few bounded lines, and b never runs out of descriptors."""
    ca, _, creds = throwaway_set(("a", "b", "c"))
    for name, data in (("b.pem", creds["b"].certificate), ("b.key", creds["b"].key), ("ca.pem", ca)):
        (tmp_path / name).write_bytes(data)
    # gRPC's core writes its errors to stderr at this verbosity (its default, set against an inherited one)
    child = subprocess.Popen([sys.executable, "-c", HELD_LISTENER, str(LIMIT), str(tmp_path), str(CONNECT)],
                             cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True, env={**os.environ, "GRPC_VERBOSITY": "ERROR"})
    flood: list[socket.socket] = []
    names = ("a", "b", "c")
    ours = {n: make_links("grpc", PeerNetwork(n, names, None, 30.0), creds[n], {m: m for m in names if m != n},
                          listen="127.0.0.1:0", session="held", connect_timeout=CONNECT) for n in ("a", "c")}
    errors: dict = {}
    try:
        first = child.stdout.readline().split()
        assert first and first[0] == "listening", first + [child.stderr.read()]
        host, port = first[1].rsplit(":", 1)
        for _ in range(HELD):
            try:
                flood.append(socket.create_connection((host, int(port)), timeout=2.0))
            except OSError:
                break
        assert len(flood) > LIMIT, len(flood)
        start = time.monotonic()

        def connect(n, addresses):
            try:
                ours[n].connect(addresses)
                errors[n] = None
            except BaseException as exc:  # noqa: BLE001 - the test reads it
                errors[n] = exc

        threads = [threading.Thread(target=connect, args=("a", {"b": first[1], "c": ours["c"].address}),
                                    daemon=True),
                   threading.Thread(target=connect, args=("c", {}), daemon=True)]
        for t in threads:
            t.start()
        child.stdin.write(ours["c"].address + "\n")
        child.stdin.flush()
        linked = child.stdout.readline().strip()
        for t in threads:
            t.join(CONNECT + 10)
        took = time.monotonic() - start
        assert linked.startswith("linked "), linked + child.stderr.read()
        assert errors == {"a": None, "c": None}, errors
        assert took < CONNECT, took
        child.stdin.write("go\n")
        child.stdin.flush()
        close_all(ours, {})
        out, err = child.communicate(timeout=60)
    finally:
        end_flood(child, flood)
    assert out.strip() == "closed" and child.returncode == 0, out + err
    lines = err.splitlines()
    assert len(lines) <= 10, err[-3000:]
    assert all(len(line) <= 400 and line.isprintable() for line in lines), err[-3000:]
    assert "File descriptor limit reached" not in err, err[-3000:]
