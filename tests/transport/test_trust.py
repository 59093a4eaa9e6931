"""Per-peer trust: a certificate is a peer's only if that peer's own CA signed it (and, pinned, it is that one).

With one CA per organization (``python -m ppml.certs --ca-per-party``) every party trusts every organization's
CA; these pin that no organization's CA can still certify another's party: the arbiter's organization issues a
certificate for ``guest``, and the real host refuses that fake guest whether it dials the host or is dialed by
it, on both carriers, naming the peer, the issuer presented and the one expected. Also: a pinned fingerprint
that does not match is refused; a peers file with a key given twice, or another party's key, is refused; what
each peer presented is in the links' description (comm.json). Parties run as threads of this process, on
loopback.
"""

from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path

import pytest
import yaml

from ppml.config import ParamError
from ppml.network import ProtocolError
from ppml.network import grpc_links, tls_links  # noqa: F401 - they register the carriers make_links opens
from ppml.network.endpoint import CARRIERS
from ppml.network.links import make_links
from ppml.network.peer import PeerNetwork
from ppml.network.peers import load_peers
from ppml.network.tls import Credentials, fingerprint, issue

from test_links import connect_all

PARTIES = ("guest", "host", "arbiter")
SHORT = 3.0
"""Connect timeout (s) of a party whose peer is refused: it gives up waiting for the real one after this."""


@pytest.fixture(scope="module")
def orgs(tmp_path_factory) -> Path:
    """``python -m ppml.certs DIR --parties guest host arbiter --ca-per-party``: one directory per party."""
    root = tmp_path_factory.mktemp("orgs")
    done = subprocess.run([sys.executable, "-m", "ppml.certs", str(root), "--parties", *PARTIES, "--ca-per-party"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return root


def credentials(orgs: Path, party: str, file: str = "peers.yaml") -> Credentials:
    return load_peers(orgs / party / file, party, PARTIES).credentials


def fake_guest(orgs: Path) -> Credentials:
    """A certificate for ``guest`` issued by the arbiter's organization from its own CA; trusting the host's CA,
    so that the refusal is the host's."""
    arbiter = orgs / "arbiter"
    certificate, key = issue((arbiter / "ca-arbiter.pem").read_bytes(), (arbiter / "ca-arbiter.key").read_bytes(),
                             "guest")
    return Credentials("guest", certificate, key, (arbiter / "ca-host.pem").read_bytes())


def link_pair(carrier: str, order: tuple[str, str], creds: dict[str, Credentials], timeouts: dict[str, float]):
    """The two parties' links (the first of `order` dials the second), connected in threads: each party's links
    and what its connect raised (None when it linked). Every link is closed before returning."""
    links = {n: make_links(carrier, PeerNetwork(n, order, None, 30.0), creds[n], {m: m for m in order if m != n},
                           listen="127.0.0.1:0", session="trust", connect_timeout=timeouts[n]) for n in order}
    errors = connect_all(links, order)
    assert set(errors) == set(order), errors
    described = {n: link.describe() for n, link in links.items()}
    closers = [threading.Thread(target=_close, args=(links[n], errors[n]), daemon=True) for n in order]
    for t in closers:
        t.start()
    for t in closers:
        t.join(60)
    return described, errors


def _close(links, error) -> None:
    try:
        links.close(error=None if error is None else str(error)[:300], timeout=10.0)
    except ProtocolError:
        pass


ISSUER = "'CN=ppml throwaway CA of arbiter'"
EXPECTED = "'CN=ppml throwaway CA of guest'"


@pytest.mark.parametrize("carrier", CARRIERS)
def test_the_host_refuses_a_guest_certified_by_the_arbiters_ca_when_it_dials_the_host(orgs, carrier):
    creds = {"host": credentials(orgs, "host"), "guest": fake_guest(orgs)}
    _, errors = link_pair(carrier, ("guest", "host"), creds, {"guest": 30.0, "host": SHORT})
    host = str(errors["host"])
    assert isinstance(errors["host"], ProtocolError), errors
    assert f"'host' refused 'guest': its certificate is issued by {ISSUER}, not by a CA allowed to certify " \
           f"'guest' ({EXPECTED})" in host, host
    # the fake guest is told (a refused frame; gRPC's PERMISSION_DENIED) at once, not at its 30 s timeout
    assert isinstance(errors["guest"], ProtocolError) and "'host' refused 'guest'" in str(errors["guest"]), errors


@pytest.mark.parametrize("carrier", CARRIERS)
def test_the_host_refuses_a_guest_certified_by_the_arbiters_ca_when_it_dials_the_guest(orgs, carrier):
    creds = {"host": credentials(orgs, "host"), "guest": fake_guest(orgs)}
    _, errors = link_pair(carrier, ("host", "guest"), creds, {"guest": SHORT, "host": 30.0})
    host = str(errors["host"])
    assert isinstance(errors["host"], ProtocolError), errors
    assert "'host' could not open an authenticated link to 'guest' at 127.0.0.1:" in host, host
    assert f"it presented a certificate issued by {ISSUER}, expected one issued by {EXPECTED}" in host, host
    assert errors["guest"] is not None, errors


@pytest.mark.parametrize("carrier", CARRIERS)
@pytest.mark.parametrize("order", [("guest", "host"), ("host", "guest")], ids=["host-listens", "host-dials"])
def test_a_pinned_fingerprint_that_does_not_match_is_refused(orgs, carrier, order):
    doc = yaml.safe_load((orgs / "host" / "peers.yaml").read_text())
    doc["parties"]["guest"]["fingerprint"] = "sha256:" + "ab" * 32
    (orgs / "host" / "pinned.yaml").write_text(yaml.safe_dump(doc))
    creds = {"host": credentials(orgs, "host", "pinned.yaml"), "guest": credentials(orgs, "guest")}
    timeouts = {order[0]: 30.0, order[1]: SHORT} if order[0] == "host" else {"guest": 30.0, "host": SHORT}
    if order[0] == "host" and carrier == "grpc":
        timeouts["guest"] = SHORT  # a gRPC dialer cannot tell the listener why
    _, errors = link_pair(carrier, order, creds, timeouts)
    host = str(errors["host"])
    real = fingerprint((orgs / "guest" / "guest.pem").read_bytes())
    assert f"'host' refused 'guest': its certificate has fingerprint {real}, not the pinned sha256:{'ab' * 32} " \
           f"(issuer {EXPECTED}, expected {EXPECTED})" in host, host
    assert errors["guest"] is not None, errors
    if carrier == "tls" or order[0] == "guest":  # the refused side is told where the carrier allows
        assert "'host' refused 'guest': its certificate has fingerprint" in str(errors["guest"]), errors


@pytest.mark.parametrize("carrier", CARRIERS)
def test_the_links_describe_what_each_peer_presented(orgs, carrier):
    creds = {n: credentials(orgs, n) for n in ("guest", "host")}
    described, errors = link_pair(carrier, ("guest", "host"), creds, {"guest": 30.0, "host": 30.0})
    assert errors == {"guest": None, "host": None}, errors
    for me, peer in (("guest", "host"), ("host", "guest")):
        assert described[me]["presented"] == {peer: {
            "identity": peer, "issuer": f"CN=ppml throwaway CA of {peer}",
            "fingerprint": fingerprint((orgs / peer / f"{peer}.pem").read_bytes())}}, described[me]


# --- the peers files -----------------------------------------------------------------------------------------


def test_ca_per_party_writes_one_file_per_party_with_only_its_own_key(orgs):
    for me in PARTIES:
        doc = yaml.safe_load((orgs / me / "peers.yaml").read_text())
        assert "ca" not in doc and "rehearsal" not in doc
        for name, entry in doc["parties"].items():
            assert entry["ca"] == f"ca-{name}.pem"
            assert ("key" in entry) == ("certificate" in entry) == (name == me), (me, name)
        assert sorted(f.name for f in (orgs / me).glob("*.key")) == sorted([f"{me}.key", f"ca-{me}.key"])
        assert all((orgs / me / k).stat().st_mode & 0o077 == 0 for k in (f"{me}.key", f"ca-{me}.key"))
        peers = load_peers(orgs / me / "peers.yaml", me, PARTIES)
        assert set(peers.credentials.peer_ca) == set(PARTIES) - {me}


def test_a_key_given_twice_is_refused_naming_it_and_its_line(orgs):
    text = (orgs / "host" / "peers.yaml").read_text()
    twice = orgs / "host" / "twice.yaml"
    twice.write_text(text + "  guest:\n    address: 127.0.0.1:1\n    ca: ca-arbiter.pem\n")
    line = len(text.splitlines()) + 1
    with pytest.raises(ParamError) as err:
        load_peers(twice, "host", PARTIES)
    assert str(err.value).startswith(f"{twice}: line {line}: duplicate key 'guest' (first at line "), err.value
    inner = orgs / "host" / "inner.yaml"
    inner.write_text(text.replace("    ca: ca-guest.pem\n", "    ca: ca-guest.pem\n    ca: ca-arbiter.pem\n"))
    with pytest.raises(ParamError, match=r"inner.yaml: line \d+: duplicate key 'ca' \(first at line \d+\)"):
        load_peers(inner, "host", PARTIES)


def test_another_partys_entry_holding_a_key_is_refused(orgs):
    doc = yaml.safe_load((orgs / "host" / "peers.yaml").read_text())
    doc["parties"]["guest"]["key"] = "host.key"
    bad = orgs / "host" / "keyed.yaml"
    bad.write_text(yaml.safe_dump(doc, sort_keys=False))
    with pytest.raises(ParamError) as err:
        load_peers(bad, "host", PARTIES)
    assert str(err.value).startswith(f"{bad}: parties.guest.key: only this party's own entry (host) may hold"), \
        err.value


def test_an_entry_without_a_ca_in_a_file_without_a_default_is_refused(orgs):
    doc = yaml.safe_load((orgs / "host" / "peers.yaml").read_text())
    del doc["parties"]["arbiter"]["ca"]
    bad = orgs / "host" / "noca.yaml"
    bad.write_text(yaml.safe_dump(doc, sort_keys=False))
    with pytest.raises(ParamError, match=r"noca.yaml: parties.arbiter.ca is required \(the CA allowed to certify "
                                         r"arbiter\), as the file has no top-level ca"):
        load_peers(bad, "host", PARTIES)
    doc["ca"] = "ca-arbiter.pem"  # a top-level default serves the entries without their own
    bad.write_text(yaml.safe_dump(doc, sort_keys=False))
    peers = load_peers(bad, "host", PARTIES)
    assert peers.credentials.ca_of("arbiter") == (orgs / "host" / "ca-arbiter.pem").read_bytes()


def test_a_bad_fingerprint_is_refused_naming_key_and_value(orgs):
    doc = yaml.safe_load((orgs / "host" / "peers.yaml").read_text())
    doc["parties"]["guest"]["fingerprint"] = "md5:abc"
    bad = orgs / "host" / "badpin.yaml"
    bad.write_text(yaml.safe_dump(doc, sort_keys=False))
    with pytest.raises(ParamError, match=r"badpin.yaml: parties.guest.fingerprint must be sha256:<64 hex digits> "
                                         r"\(of the DER certificate\), got 'md5:abc'"):
        load_peers(bad, "host", PARTIES)
