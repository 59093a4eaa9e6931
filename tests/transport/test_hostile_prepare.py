"""A hostile label holder during ``--prepare``: every PSI and prepare message is checked where it arrives.

The honest host runs :func:`ppml.launch.prepare.prepare_party` over real TLS links on loopback; the guest is a
hostile program over its own links (the same session, so the hello passes) that plays the protocol with one
message made bad: a PSI request that does not parse or asks for more ids than the host answers, aligned ids
given twice, a test mask marking every row, a manifest that is not a dict or that renames the host's shard.
Each time the host ends with a one-line ProtocolError naming ``'guest'`` and the message, within the run's
timeout, and its output directory is never written (nothing half-written, no manifest of 10 bytes).
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import numpy as np
import pytest
import yaml

from ppml.data.align import align_as_holder
from ppml.launch.prepare import prepare_party, session_of_prepare
from ppml.network import ProtocolError
from ppml.network.links import make_links, run_program
from ppml.network.peer import PeerNetwork
from ppml.network.peers import load_peers

from test_prepare_parties import BLOCK, KEY, SEED, fate_files, make_certs

NAMES = ("guest", "host")
TIMEOUT = 30.0
"""Seconds a party waits for one message; the refusals below come at once, far inside it."""


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    root = tmp_path_factory.mktemp("hostile")
    peers = make_certs(root / "certs", NAMES)
    block = {**BLOCK, "private_fraction": 0.0}
    params = root / "params.yaml"
    params.write_text(yaml.safe_dump({"seed": SEED, "datasets": {KEY: block}}, sort_keys=False))
    _, host = fate_files(120, shared_order=True)
    raw = root / "host.csv"
    host.to_csv(raw, index=False)
    return {"root": root, "peers": peers, "params": params, "block": block, "raw": raw}


def _hostile_guest(setup, program):
    """The guest's links (same session as the host's) running `program(endpoint)`; returns a thread."""
    peers = load_peers(setup["peers"], "guest", NAMES)
    edges = {frozenset(NAMES)}
    net = PeerNetwork("guest", NAMES, edges, TIMEOUT)
    links = make_links("tls", net, peers.credentials, peers.identities, listen=peers.listen,
                       session=session_of_prepare(KEY, setup["block"], SEED, "own"), pairs=edges,
                       connect_timeout=TIMEOUT)

    def run():
        try:
            links.connect(peers.addresses)
            run_program(links, lambda endpoint, _: program(endpoint), None, {}, timeout=TIMEOUT)
        except BaseException:  # noqa: BLE001 - the host's refusal ends the hostile guest's run too
            pass

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def _host_refuses(setup, tmp_path: Path, program, **kwargs) -> str:
    out = tmp_path / "host-out"
    guest = _hostile_guest(setup, program)
    start = time.monotonic()
    with pytest.raises(ProtocolError) as caught:
        prepare_party(dataset=KEY, party="host", raw_file=setup["raw"], peers_file=setup["peers"],
                      params_file=setup["params"], out_dir=out, holding="own", connect_timeout=TIMEOUT,
                      timeout=TIMEOUT, **kwargs)
    took = time.monotonic() - start
    guest.join(TIMEOUT)
    message = str(caught.value)
    assert "\n" not in message and len(message) < 600, message
    assert took < TIMEOUT, took  # at once, not at the message timeout
    assert not out.exists(), sorted(out.iterdir())  # nothing written
    assert not [p for p in out.parent.iterdir() if p.name.startswith(".host-out.")]  # no staging left
    return message


def _honest_psi(endpoint, ids):
    return align_as_holder(endpoint, np.asarray(ids, dtype=str), ["host"], method="psi")


def _guest_ids():
    guest, _ = fate_files(120, shared_order=True)
    return guest["id"].astype(str).to_numpy()


def test_a_psi_request_that_does_not_parse(setup, tmp_path):
    def program(endpoint):
        endpoint.send("host", "psi_request", b"\x08\x96\x01 not a protobuf \xff\xff")
        endpoint.recv("host", "psi_setup")

    message = _host_refuses(setup, tmp_path, program)
    assert message.startswith("'guest' sent 'psi_request' that does not parse"), message


def test_a_psi_request_that_is_not_bytes(setup, tmp_path):
    def program(endpoint):
        endpoint.send("host", "psi_request", {"not": "bytes"})
        endpoint.recv("host", "psi_setup")

    message = _host_refuses(setup, tmp_path, program)
    assert message.startswith("'guest' sent 'psi_request' of type dict, expected bytes"), message


def test_a_psi_request_of_points_off_the_curve(setup, tmp_path):
    import private_set_intersection.python as psi

    def program(endpoint):
        request = psi.Request()
        request.ParseFromString(psi.client.CreateWithNewKey(True).CreateRequest(["a", "b"]).SerializeToString())
        request.encrypted_elements[0] = b"\x05" * 33  # not the encoding of a point
        endpoint.send("host", "psi_request", request.SerializeToString())
        endpoint.recv("host", "psi_setup")

    message = _host_refuses(setup, tmp_path, program)
    assert message.startswith("'guest' sent 'psi_request' that the PSI library refuses"), message


def test_a_psi_request_beyond_the_hosts_bound(setup, tmp_path):
    """A dishonest guest asking for ids it does not hold (every id 1..N) is refused past the host's bound."""
    def program(endpoint):
        _honest_psi(endpoint, [str(i) for i in range(1000, 1300)])

    message = _host_refuses(setup, tmp_path, program, max_request=200)
    assert message.startswith("'guest' sent 'psi_request' of 300 ids, more than the 200"), message


@pytest.mark.parametrize("forge, problem", [
    (lambda shared: [shared[0]] + shared[:-1].tolist(), "holding an id more than once"),
    (lambda shared: shared[::-1].tolist(), "that are not in the canonical (sorted) order"),
])
def test_aligned_ids_the_intersection_cannot_be(setup, tmp_path, forge, problem):
    """The PSI played honestly, then the announced ids forged: given twice, or out of the canonical order."""
    from ppml.data import align

    def program(endpoint):
        client_ids = _guest_ids()
        client = align._psi_request(endpoint, "host", client_ids)
        shared = np.sort(align._psi_result(endpoint, "host", client, client_ids))
        endpoint.next_round()
        endpoint.send("host", "aligned_ids", forge(shared))
        endpoint.recv("host", "prepared_entry")

    message = _host_refuses(setup, tmp_path, program)
    assert message.startswith(f"'guest' sent 'aligned_ids' {problem}"), message


@pytest.mark.parametrize("mask, problem", [
    (lambda n: np.ones(n, dtype=np.int8), "marking 120 of 120 rows for testing"),
    (lambda n: np.full(n, 2, dtype=np.int8), "outside [0, 1]"),
    (lambda n: np.zeros(n - 1, dtype=np.int8), "of shape (119,), expected (120,)"),
    (lambda n: [0] * n, "of type list"),
])
def test_a_test_mask_the_split_cannot_draw(setup, tmp_path, mask, problem):
    def program(endpoint):
        aligned, _ = _honest_psi(endpoint, _guest_ids())
        endpoint.send("host", "test_rows", mask(len(aligned)))
        endpoint.recv("host", "prepared_entry")

    message = _host_refuses(setup, tmp_path, program)
    assert message.startswith("'guest' sent 'test_rows'"), message
    assert problem in message, message


def _manifest_attack(make):
    def program(endpoint):
        aligned, _ = _honest_psi(endpoint, _guest_ids())
        n = len(aligned)
        test = np.zeros(n, dtype=np.int8)
        test[:round(BLOCK["test_fraction"] * n)] = 1
        endpoint.send("host", "test_rows", test)
        facts = endpoint.recv("host", "prepared_entry")
        endpoint.send("host", "manifest", make(facts, n, int(test.sum())))
    return program


def _forged(facts, n, n_test, **change):
    entry = {**facts["entry"], **change}
    return {"dataset": KEY, "available": True, "partition": "vertical", "source": {}, "parties": [entry],
            "evaluator": None, "alignment": {"shared_ids": n}, "split": {"train": n - n_test, "test": n_test},
            "normalization": {}, "seed": SEED, "params": {}, "prepared": {"shared_ids_sha256": facts["aligned"]}}


@pytest.mark.parametrize("make, problem", [
    (lambda f, n, t: [1, 2, 3], "'guest' sent 'manifest' of type list, expected a dict"),
    (lambda f, n, t: _forged(f, n, t, file="../../../escape/host.npz"), "its entry for 'host' is not the one"),
    (lambda f, n, t: {**_forged(f, n, t), "split": {"train": n, "test": 0}}, "split's row counts"),
    (lambda f, n, t: {**_forged(f, n, t), "prepared": {"shared_ids_sha256": "12:abc"}}, "digest of the shared"),
])
def test_a_manifest_this_party_cannot_write(setup, tmp_path, make, problem):
    """The host checks the manifest before anything is written: its own entry (its shard's file name
    included) must be the one it wrote; a non-dict manifest used to crash it after --out was replaced."""
    message = _host_refuses(setup, tmp_path, _manifest_attack(make))
    assert message.startswith("'guest' sent "), message
    assert problem in message, message


def test_the_honest_forged_manifest_is_written(setup, tmp_path):
    """The control: the same hostile program with a well-formed manifest completes (the checks refuse what
    is wrong, not what is merely hand-made)."""
    out = tmp_path / "host-out"
    guest = _hostile_guest(setup, _manifest_attack(lambda f, n, t: _forged(f, n, t)))
    manifest = prepare_party(dataset=KEY, party="host", raw_file=setup["raw"], peers_file=setup["peers"],
                             params_file=setup["params"], out_dir=out, holding="own", connect_timeout=TIMEOUT,
                             timeout=TIMEOUT)
    guest.join(TIMEOUT)
    assert manifest["parties"][0]["file"] == "host.npz"
    assert sorted(p.name for p in out.iterdir()) == ["host.npz", "manifest.json"]
