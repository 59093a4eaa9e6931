"""A party's own files and a peer's words: data aligned over other ids are named at the hello, a manifest never
leads a party outside its data directory, an own file that is not a regular file is refused at once, a peer's
text reaches a log or terminal escaped, and a certificate speaks as its DNS names (its common name only when it
has none). Links are the carriers' real listeners and dialers on loopback.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from ppml.config import ParamError
from ppml.launch.party import data_facts, fail_line, own_shard, shard_facts
from ppml.network import ProtocolError
from ppml.network import grpc_links, tls_links  # noqa: F401 - they register the carriers make_links opens
from ppml.network.endpoint import CARRIERS
from ppml.network.links import make_links, printable, shorten
from ppml.network.ownfiles import NotRegularFileError, read_own_bytes
from ppml.network.peer import PeerNetwork
from ppml.network.peers import load_peers
from ppml.network.tls import identities, issue, make_ca, throwaway_set
from ppml.parties import Party

from certificates import certificate_naming
from test_links import connect_all
from test_robust import _manifest

ESCAPES = "\x1b[2K\r\x1b[8mparty guest: finished (rc 0)\x1b[0m\u202e\x07"


def _shard(name: str, ids: list[str], test_ids: list[str]) -> Party:
    g = np.random.default_rng(0)
    return Party(name, ("c0", "c1"), np.array(ids), g.normal(size=(len(ids), 2)), None, np.array(test_ids),
                 g.normal(size=(len(test_ids), 2)), None)


def _links(carrier: str, facts: dict[str, dict], names=("a", "b")):
    _, _, credentials = throwaway_set(names)
    nets = {n: PeerNetwork(n, names, None, 30.0) for n in names}
    links = {n: make_links(carrier, nets[n], credentials[n], {m: m for m in names if m != n},
                           listen="127.0.0.1:0", session="s", connect_timeout=30.0, facts=facts.get(n))
             for n in names}
    return nets, links


# ---------------------------------------------------------------------------------------------------------
# data aligned over other ids (defect 4)


@pytest.mark.parametrize("carrier", CARRIERS)
def test_a_shard_aligned_over_other_ids_is_named_at_the_hello(carrier):
    """Same counts, same manifest facts, other ids: the digest each party takes of its own shard differs, and
    both refuse each other at the hello, before any message."""
    manifest = _manifest(4, 2)
    a = _shard("a", ["1", "2", "3", "4"], ["5", "6"])
    b = _shard("b", ["1", "2", "3", "9"], ["5", "6"])
    facts = {"a": {**data_facts(manifest), **shard_facts(a, "vertical")},
             "b": {**data_facts(manifest), **shard_facts(b, "vertical")}}
    nets, links = _links(carrier, facts)
    errors = connect_all(links, ("a", "b"))
    for link in links.values():
        link.close(error="test over", timeout=1.0)
    message = str(errors["a"])
    assert isinstance(errors["a"], ProtocolError), message
    assert "'b' is in another run: its data differ in shard.ids_sha256: 'sha256:" in message, message
    assert not nets["a"].messages and not nets["b"].messages


@pytest.mark.parametrize("carrier", CARRIERS)
def test_a_party_without_a_shard_is_not_asked_for_its_digest(carrier):
    """The Paillier arbiter holds no data: its hello lacks the shard digest, which is then not compared."""
    manifest = _manifest(4, 2)
    a = _shard("a", ["1", "2", "3", "4"], ["5", "6"])
    facts = {"a": {**data_facts(manifest), **shard_facts(a, "vertical")}, "b": data_facts(manifest)}
    _, links = _links(carrier, facts)
    errors = connect_all(links, ("a", "b"))
    closers = [threading.Thread(target=link.close, kwargs={"timeout": 10.0}) for link in links.values()]
    for t in closers:
        t.start()
    for t in closers:
        t.join(30)
    assert errors == {"a": None, "b": None}, errors


def test_shard_facts_follow_ids_and_order_and_only_for_vertical_data():
    a = shard_facts(_shard("a", ["1", "2"], ["3"]), "vertical")
    assert a == shard_facts(_shard("b", ["1", "2"], ["3"]), "vertical")  # the parties' columns do not enter
    assert a != shard_facts(_shard("a", ["2", "1"], ["3"]), "vertical")
    assert a != shard_facts(_shard("a", ["1"], ["2", "3"]), "vertical")  # the split is part of it
    assert shard_facts(_shard("a", ["1", "2"], ["3"]), "horizontal") == {}
    assert shard_facts(None, "vertical") == {}
    # the manifest's own digest of the shared ids (written by --prepare) is a fact of the hello too
    facts = data_facts({**_manifest(4, 2), "prepared": {"holding": "own", "shared_ids_sha256": "6:abc"}})
    assert facts["prepared.shared_ids_sha256"] == "6:abc" and facts["prepared.holding"] == "own"


# ---------------------------------------------------------------------------------------------------------
# a manifest that leads outside the data directory (defect 5)


@pytest.mark.parametrize("name", ["../../../escape/host.npz", "/etc/host.npz", "sub/host.npz", "..", "host.txt",
                                  7, None])
def test_a_shard_file_name_outside_the_data_directory_is_refused(tmp_path, name):
    data = tmp_path / "data"
    data.mkdir()
    (tmp_path / "escape").mkdir()
    (tmp_path / "escape" / "host.npz").write_bytes(b"x")
    manifest = {"parties": [{"name": "host", "file": name}]}
    with pytest.raises(ParamError) as caught:
        own_shard(data, manifest, "host")
    message = str(caught.value)
    assert message.startswith(f"{data / 'manifest.json'}: the file of shard 'host'"), message


def test_a_shard_that_is_a_symlink_out_of_the_data_directory_is_refused(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    (tmp_path / "elsewhere.npz").write_bytes(b"x")
    (data / "host.npz").symlink_to(tmp_path / "elsewhere.npz")
    with pytest.raises(ParamError, match="leads outside"):
        own_shard(data, {"parties": [{"name": "host", "file": "host.npz"}]}, "host")


def test_the_own_shard_is_found_inside_the_data_directory(tmp_path):
    (tmp_path / "host.npz").write_bytes(b"x")
    assert own_shard(tmp_path, {"parties": [{"name": "host", "file": "host.npz"}]}, "host") == tmp_path / "host.npz"
    with pytest.raises(ParamError, match="lists no shard of this party"):
        own_shard(tmp_path, {"parties": [{"name": "guest", "file": "guest.npz"}]}, "host")


# ---------------------------------------------------------------------------------------------------------
# own files that are not regular files (defect 10)


def _within(seconds: float, call):
    """`call()` in a thread: what it returned or raised, failing the test if it still runs after `seconds`."""
    out: dict = {}

    def run():
        try:
            out["value"] = call()
        except BaseException as exc:  # noqa: BLE001 - the test reads it
            out["error"] = exc

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(seconds)
    assert not thread.is_alive(), f"still blocked after {seconds} s"
    return out


def test_an_own_key_that_is_a_named_pipe_is_refused_at_once(tmp_path):
    done = subprocess.run([sys.executable, "-m", "ppml.certs", str(tmp_path), "--parties", "guest", "host"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    (tmp_path / "guest.key").unlink()
    os.mkfifo(tmp_path / "guest.key")
    start = time.monotonic()
    out = _within(20.0, lambda: load_peers(tmp_path / "peers.yaml", "guest", ("guest", "host")))
    assert time.monotonic() - start < 10.0
    error = out.get("error")
    assert isinstance(error, ParamError), out
    assert "key" in str(error) and "is not a regular file (it is a named pipe)" in str(error), error


@pytest.mark.parametrize("make, kind", [(os.mkfifo, "a named pipe"), (os.mkdir, "a directory")])
def test_own_files_are_read_only_from_regular_files(tmp_path, make, kind):
    path = tmp_path / "file"
    make(path)
    out = _within(10.0, lambda: read_own_bytes(path, what="the test's file"))
    assert isinstance(out.get("error"), NotRegularFileError) and kind in str(out["error"]), out


def test_own_files_are_bounded(tmp_path):
    path = tmp_path / "big"
    path.write_bytes(b"x" * 100)
    assert read_own_bytes(path, what="a file", limit=100) == b"x" * 100
    with pytest.raises(NotRegularFileError, match="more than the 99 read"):
        read_own_bytes(path, what="a file", limit=99)
    with pytest.raises(FileNotFoundError, match="a file is missing"):
        read_own_bytes(tmp_path / "none", what="a file")


# ---------------------------------------------------------------------------------------------------------
# a peer's words reach a terminal escaped (defect 9)


@pytest.mark.parametrize("carrier", CARRIERS)
def test_a_peers_abort_text_arrives_escaped(carrier):
    nets, links = _links(carrier, {})
    errors = connect_all(links, ("a", "b"))
    assert errors == {"a": None, "b": None}, errors
    closer = threading.Thread(target=links["a"].close, kwargs={"error": ESCAPES, "timeout": 5.0})
    closer.start()
    deadline = time.monotonic() + 30
    while nets["b"].aborted is None:
        assert time.monotonic() < deadline
        links["b"]._wait(threading.Event(), 0.05)
    closer.join(30)
    try:
        links["b"].close(error="test over", timeout=1.0)
    except ProtocolError:
        pass
    seen = nets["b"].aborted
    assert "'a' stopped (" in seen, seen
    assert not any(ch in seen for ch in "\x1b\r\x07\u202e"), repr(seen)
    assert "\\x1b[2K" in seen and "\\u202e" in seen, seen


def test_printable_and_the_failure_line_escape_control_characters():
    assert printable("plain text: ok") == "plain text: ok"
    assert printable("a\x1b[8mb") == "a\\x1b[8mb"
    assert shorten("x\ny\x1bz") == "x y\\x1bz"
    line = fail_line("host", ProtocolError(f"'guest' stopped ({ESCAPES})"))
    assert line.isprintable(), repr(line)


# ---------------------------------------------------------------------------------------------------------
# a certificate speaks as its DNS names (defect 8)


def test_a_certificate_speaks_as_its_dns_names_and_as_its_common_name_only_without_them():
    ca, ca_key = make_ca("test CA")
    assert identities(certificate_naming(ca, ca_key, "guest", ["arbiter"])[0]) == ["arbiter"]
    assert identities(certificate_naming(ca, ca_key, "guest", [])[0]) == ["guest"]
    certificate, _ = issue(ca, ca_key, "host")
    assert identities(certificate) == ["host", "localhost"]
