"""Tests of the Paillier-encrypted vertical SGD protocol (and the shared hetero-LR roles).

512-bit keys (below the production minimum, allowed here by lowering ``MIN_KEY_BITS``) keep the file fast;
one slow-marked test runs a 2048-bit epoch.
"""

from __future__ import annotations

import contextlib
import gc
import math
import types
import warnings

import numpy as np
import pytest

from ppml.algorithms import _hetero_lr, paillier_sgd
from ppml.config import ParamError, build
from ppml.crypto import paillier
from ppml.crypto.paillier import (KeyLengthWarning, PrivateKey, generate_keypair,
                                  receive_vector)
from ppml.history import ConvergenceWarning
from ppml.network import ProtocolError, traffic_kind
from ppml.parties import Party
from vertical_data import reference_losses

BITS = 512  # the length of conftest.py's shared keys


@contextlib.contextmanager
def arbiter_keys(keys):
    """The coordinator's program makes its own key pair; have it make `keys` (conftest.py's shared short keys,
    which also let a test decrypt what it captured). None: a fresh pair, as in a real run."""
    if keys is None:
        yield
        return
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(paillier, "generate_keypair", lambda bits, *, scheme: keys)
        yield


def vertical(seed: int = 0, *, n: int = 120, d_host: int = 3, d_guest: int = 2, n_test: int = 40):
    """A guest (labels, d_guest features) and a host (d_host features) on n aligned rows."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n + n_test, d_host + d_guest))
    w = rng.normal(size=d_host + d_guest)
    y = (rng.random(n + n_test) < 1.0 / (1.0 + np.exp(-X @ w - 0.3))).astype(np.int8)
    ids = np.array([f"id{i}" for i in range(n)])
    test_ids = np.array([f"id{i}" for i in range(n, n + n_test)])
    guest = Party("guest", tuple(f"g{j}" for j in range(d_guest)), ids, X[:n, d_host:], y[:n], test_ids,
                  X[n:, d_host:], y[n:])
    host = Party("host", tuple(f"h{j}" for j in range(d_host)), ids, X[:n, :d_host], None, test_ids,
                 X[n:, :d_host], None)
    return [guest, host]


def params(**overrides) -> paillier_sgd.Params:
    base = dict(batch_size=40, key_bits=BITS, eta=0.5, lam=0.05, max_epochs=3, tol=1e-12)
    base.update(overrides)
    return paillier_sgd.Params(**base)


def run(parties, p, keys, *, capture=False, seed=0):
    net = paillier_sgd.network_for(parties, p, rng=None, capture=capture)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        warnings.simplefilter("ignore", KeyLengthWarning)  # runs that generate their own short key
        with arbiter_keys(keys):
            history = paillier_sgd.fit(parties, net, p, rng=np.random.default_rng(seed))
    return history, net


def weights(history):
    return np.concatenate([history.extra["weights"]["host"], history.extra["weights"]["guest"]])


def reference_sgd(parties, p, seed: int):
    """Plain numpy Taylor-loss mini-batch SGD with the protocol's batches: (weights, epoch losses)."""
    return reference_losses(list(parties), p, seed)


def batch_seed(net) -> int:
    return next(m.payload for m in net.messages if m.tag == "batch_seed")


@pytest.mark.parametrize("update_at", ["parties", "coordinator"])
@pytest.mark.parametrize("shuffle", [False, True])
def test_matches_numpy_reference_sgd(keys, update_at, shuffle):
    parties = vertical(1, n=130)  # 130 rows: the last batch of each epoch is short
    p = params(update_at=update_at, shuffle=shuffle, encrypted=False)
    history, net = run(parties, p, keys["plaintext"], capture=True, seed=3)
    w_ref, losses_ref = reference_sgd(parties, p, batch_seed(net))
    np.testing.assert_allclose(weights(history), w_ref, rtol=0, atol=1e-6)
    np.testing.assert_allclose([r["loss"] for r in history.records], losses_ref, rtol=0, atol=1e-7)
    assert abs(w_ref).max() > 0.05  # the model moved: the comparison is not between two zero vectors


@pytest.mark.parametrize("update_at", ["parties", "coordinator"])
def test_encrypted_run_equals_plaintext_run(keys, update_at):
    parties = vertical(2)
    encrypted, _ = run(parties, params(update_at=update_at), keys["djn"], seed=5)
    plain, _ = run(parties, params(update_at=update_at, encrypted=False), keys["plaintext"], seed=5)
    # Same fixed-point integers on both paths: equal to the last bit, far inside the 2^-23 encoding step.
    np.testing.assert_array_equal(weights(encrypted), weights(plain))
    assert [r["loss"] for r in encrypted.records] == [r["loss"] for r in plain.records]


def test_masked_and_coordinator_updates_give_the_same_model(keys):
    parties = vertical(3)
    masked, _ = run(parties, params(update_at="parties"), keys["djn"])
    fate, _ = run(parties, params(update_at="coordinator"), keys["djn"])
    np.testing.assert_allclose(weights(masked), weights(fate), rtol=1e-12, atol=1e-14)


def test_first_batch_loss_is_log2_and_residual_is_minus_half_y(keys):
    """At theta = 0 the Taylor loss is log 2 on every row and d = -y/2 (spec oracle 1)."""
    parties = vertical(4)
    pk, sk = keys["djn"]
    history, net = run(parties, params(max_epochs=1), keys["djn"], capture=True)
    loss = next(m.payload for m in net.messages if m.tag == "batch_loss")
    assert sk.decrypt(receive_vector(loss, pk))[0] / 40 == pytest.approx(math.log(2), abs=1e-12)
    fore = next(m.payload for m in net.messages if m.tag == "fore_gradient")
    rows = next(_hetero_lr.batch_partitions(batch_seed(net), 120, 40, shuffle=False))[0]
    y = 2.0 * parties[0].y[rows] - 1.0
    np.testing.assert_array_equal(sk.decrypt(receive_vector(fore, pk)), -0.5 * y)


def test_coordinator_sees_only_masked_gradients(keys):
    """C's view (spec oracle 3): uniformly large integers, different in every run; parties recover G."""
    parties = vertical(5)
    pk, sk = keys["djn"]
    _, net1 = run(parties, params(max_epochs=1), keys["djn"], capture=True)
    _, net2 = run(parties, params(max_epochs=1), keys["djn"], capture=True)
    seen = []
    for net in (net1, net2):
        grads = [m.payload for m in net.messages if m.tag == "host_gradient"]
        seen.append([int(v) for g in grads for v in sk.decrypt_encoded(receive_vector(g, pk))])
        returned = [int(v) for m in net.messages if m.tag == "host_gradient_decrypted" for v in m.payload]
        assert returned == seen[-1]
    mask_bits = BITS - paillier.GUARD_BITS - 1
    # A true encoded gradient is below 2^90; a masked one is below 2^(mask_bits + 1) and almost never small.
    assert all(2 ** (mask_bits - 40) < abs(v) < 2 ** (mask_bits + 1) for v in seen[0] + seen[1])
    assert not set(seen[0]) & set(seen[1])  # fresh masks: the same gradients look different


def test_traffic_matches_the_messages_table(keys):
    """Every message is in MESSAGES; Paillier-protected tags carry only ciphertexts; what A and B receive in
    plaintext is small (no labels, no u_A, no residuals)."""
    parties = vertical(6)
    for update_at in ("parties", "coordinator"):
        _, net = run(parties, params(update_at=update_at, max_epochs=2), keys["djn"], capture=True)
        side = [m for m in net.messages if traffic_kind(m.tag) != "training"]
        assert {(m.tag, m.src, m.dst) for m in side} == {(e["tag"], e["src"], e["dst"])
                                                          for e in paillier_sgd.SIDE_MESSAGES}
        assert len(side) == 2  # the host's scores after each epoch, for the guest's evaluation
        table = {m["tag"]: m for m in paillier_sgd.MESSAGES}
        used = set()
        for m in (m for m in net.messages if traffic_kind(m.tag) == "training"):
            entry = table[m.tag]
            assert m.src == entry["src"] and m.dst in entry["dst"].split(", "), m
            used.add(m.tag)
            if entry["protection"].startswith("Paillier"):
                vectors = m.payload.values() if "c" not in m.payload else [m.payload]
                assert all(set(v) == {"n", "scheme", "frac_bits", "c"} for v in vectors)
                assert m.ciphertexts == sum(len(v["c"]) for v in vectors)
            elif m.dst in ("host", "guest"):
                plain = np.atleast_1d(np.asarray(m.payload, dtype=object) if not isinstance(m.payload, dict)
                                      else [])
                assert plain.size <= 4, m  # seed, flags, or the receiver's own step / masked gradient
        other_mode = {"parties": {"host_step", "guest_step"},
                      "coordinator": {"host_gradient_decrypted", "guest_gradient_decrypted"}}[update_at]
        assert used == set(table) - other_mode - _hetero_lr.MULTI_HOST_TAGS  # one host: no cross terms


def _objects_reachable_from(root):
    """Every object reachable from `root` by references, not descending into modules, classes or code."""
    seen, stack, out = set(), [root], []
    while stack:
        obj = stack.pop()
        if id(obj) in seen or isinstance(obj, (types.ModuleType, type, types.FunctionType, types.CodeType)):
            continue
        seen.add(id(obj))
        out.append(obj)
        stack.extend(gc.get_referents(obj))
    return out


def _roles(parties, p, keys):
    """The three roles' state objects on one network, set up, stepped by hand (no scheduler)."""
    guest, host = parties
    net = paillier_sgd.network_for(parties, p, rng=None, capture=True)
    with arbiter_keys(keys):
        arbiter = _hetero_lr.ArbiterRole(net.endpoint("arbiter"), params=p, hosts=["host"], guest="guest",
                                         blocks={"host": host.n_features, "guest": guest.n_features + 1})
    host_role = _hetero_lr.HostRole(host, net.endpoint("host"), params=p, guest="guest")
    guest_role = _hetero_lr.GuestRole(guest, net.endpoint("guest"), params=p, hosts=["host"],
                                      rng=np.random.default_rng(0))
    arbiter.publish_key()
    guest_role.setup()
    host_role.setup()
    return types.SimpleNamespace(host=host_role, guest=guest_role, arbiter=arbiter), net


def test_roles_are_built_from_public_facts_and_the_key_pair_inside_the_coordinator():
    """No role's inputs hold a key: the coordinator's program makes the pair; only the public key crosses."""
    from ppml.runtime import Public

    parties = vertical(7)
    built = paillier_sgd.roles(Public.from_parties(parties), params(), rng=np.random.default_rng(0))
    assert [r.name for r in built] == ["guest", "host", "arbiter"]
    assert [r.shard for r in built] == ["guest", "host", None]
    for role in built:
        reachable = _objects_reachable_from(role.kwargs)
        assert not any(isinstance(o, (PrivateKey, paillier.PublicKey)) for o in reachable), role.name


def test_private_key_never_reaches_host_or_guest(keys):
    parties = vertical(7)
    roles, net = _roles(parties, params(), keys["djn"])
    rows = np.arange(40)
    # one masked iteration, each role's steps in the order its program takes them
    roles.host.forward(rows)
    roles.guest.forward(rows)
    roles.arbiter.batch_loss(len(rows))
    roles.host.gradient(rows, masked=True)
    roles.guest.gradient(rows, masked=True)
    roles.arbiter.return_masked()
    roles.host.apply_unmasked(tag="host_gradient_decrypted", eta=0.1, batch_size=len(rows))
    roles.guest.apply_unmasked(tag="guest_gradient_decrypted", eta=0.1, batch_size=len(rows))
    for role in (roles.host, roles.guest):
        assert not any(isinstance(o, PrivateKey) for o in _objects_reachable_from(role)), role.name
    # the search does find the key where it is, so the two negatives above mean something
    assert any(isinstance(o, PrivateKey) for o in _objects_reachable_from(roles.arbiter))


def test_foreign_and_tampered_ciphertexts_are_rejected(keys):
    parties = vertical(8)
    roles, net = _roles(parties, params(), keys["djn"])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", KeyLengthWarning)
        foreign_pk, _ = generate_keypair(BITS, scheme="djn")
    host_ep = net.endpoint("host")
    rows = np.arange(40)
    honest = keys["djn"][0].encrypt(np.zeros(40), frac_bits=52)
    loss = {"squares": honest.to_wire(), "penalty": honest[:1].to_wire()}
    foreign = foreign_pk.encrypt(np.zeros(40), frac_bits=52).to_wire()
    host_ep.send("guest", "host_forward", foreign)
    host_ep.send("guest", "host_loss", loss)
    with pytest.raises(ProtocolError, match="'host' sent 'host_forward' that guest cannot use: .*key"):
        roles.guest.forward(rows)
    tampered = honest.to_wire()
    tampered["c"] = tampered["c"].copy()
    tampered["c"][3] = keys["djn"][0].nsquare + 5  # outside Z*_{n^2}
    host_ep.send("guest", "host_forward", tampered)
    host_ep.send("guest", "host_loss", loss)
    with pytest.raises(ProtocolError, match=r"'host' sent 'host_forward'.*must lie in \[1, n\^2\)"):
        roles.guest.forward(rows)


@pytest.mark.parametrize("squares, per_iteration",
                         [("rows", lambda s: 3 * s + 1), ("sum", lambda s: 2 * s + 2)])
def test_traffic_per_iteration_against_the_posters_count(keys, squares, per_iteration):
    parties = vertical(9)  # 120 rows, batches of 40: every iteration has |S| = 40
    history, _ = run(parties, params(host_squares=squares), keys["djn"])
    f = history.final
    assert f["ab_ciphertexts_per_iteration"] == per_iteration(40)
    assert f["poster_ab_per_iteration"] == 3 * 40
    # C receives the two gradient blocks (n = 3 + 2 + intercept ciphertexts) and the loss; it returns n values
    assert f["arbiter_ciphertexts_per_iteration"] == 6 + 1
    assert f["poster_arbiter_per_iteration"] == 2 * 6
    assert f["n_parameters"] == 6 and f["iterations"] == 9


def test_stopping_rule_and_cap(keys):
    parties = vertical(10)
    net = paillier_sgd.network_for(parties, params(), rng=None)
    # the plaintext mode with its own key (guest and host refuse a plaintext key when encrypted: true)
    with arbiter_keys(keys["plaintext"]):
        history = paillier_sgd.fit(parties, net, params(tol=10.0, max_epochs=50, encrypted=False),
                                   rng=np.random.default_rng(0))
    assert history.converged is True and history.epochs == 2  # FATE's diff rule needs two epoch losses
    net = paillier_sgd.network_for(parties, params(), rng=None)
    with pytest.warns(ConvergenceWarning, match="max_epochs=2"), arbiter_keys(keys["plaintext"]):
        history = paillier_sgd.fit(parties, net, params(max_epochs=2, encrypted=False),
                                   rng=np.random.default_rng(0))
    assert history.converged is False and history.final["epochs"] == 2
    assert {"train_objective", "test_auc", "loss", "train_auc"} <= set(history.final)


def test_params_validation(monkeypatch):
    monkeypatch.setattr(paillier, "MIN_KEY_BITS", 1024)
    with pytest.raises(ParamError, match=r"experiments\.x: key_bits must be >= 1024, got 512"):
        build(paillier_sgd.Params, {"key_bits": 512}, "experiments.x")
    with pytest.raises(ParamError, match=r"experiments\.x\.update_at must be one of"):
        build(paillier_sgd.Params, {"update_at": "arbiter"}, "experiments.x")
    with pytest.raises(ParamError, match=r"experiments\.x\.batch_size must be > 0"):
        build(paillier_sgd.Params, {"batch_size": 0}, "experiments.x")
    p = build(paillier_sgd.Params, {"eta": 0.2, "decay": 3.0}, "experiments.x")
    assert p.key_bits == 2048 and p.learning_rate(2) == pytest.approx(0.2 / math.sqrt(7.0))
    assert build(paillier_sgd.Params, {"decay_sqrt": False, "eta": 0.2}, "e").learning_rate(1) == 0.1


def test_takes_every_unlabelled_party_as_a_host_and_refuses_horizontal_data(keys):
    guest, host = vertical(11)
    extra = Party("host2", host.columns, host.ids, host.X)
    net = paillier_sgd.network_for([guest, host, extra], params(), rng=None)
    assert net.names == ("guest", "host", "host2", "arbiter")
    assert _hetero_lr.split_parties([extra, guest, host]) == (guest, [extra, host])  # hosts in their order
    with pytest.raises(ValueError, match="vertically partitioned"):
        paillier_sgd.fit([guest, host], None, params(), rng=np.random.default_rng(0), evaluation=guest)


def test_background_precomputation_gives_the_same_model():
    """precompute_workers > 0 (zeros encrypted ahead of time in another process) changes nothing."""
    parties = vertical(12)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", KeyLengthWarning)
        pair = generate_keypair(1024, scheme="djn")  # worker processes accept production-length keys only
    pooled, _ = run(parties, params(key_bits=1024, precompute_workers=1), pair)
    inline, _ = run(parties, params(key_bits=1024, encrypted=False), None)
    np.testing.assert_array_equal(weights(pooled), weights(inline))
    assert pooled.final["key_warning"] == "1024-bit Paillier key, below the default 2048"
    assert "key_warning" not in inline.final  # the identity "cipher" is not a weak key


@pytest.mark.slow
def test_one_epoch_with_a_2048_bit_key(keys):
    parties = vertical(13, n=60, n_test=20)
    p = params(key_bits=2048, max_epochs=1, batch_size=30)
    encrypted, _ = run(parties, p, None)
    assert encrypted.extra["public_key"] == {"bits": 2048, "scheme": "djn"}
    plain, _ = run(parties, params(key_bits=2048, max_epochs=1, batch_size=30, encrypted=False),
                   keys["plaintext"])
    np.testing.assert_array_equal(weights(encrypted), weights(plain))


# --- issue 12: plaintext mode labelled as such; params that do not fit the data refused ---------------------


def test_plaintext_mode_is_labelled_plaintext(keys):
    from ppml.config import flat_fields

    parties = vertical(14)
    p = params(encrypted=False, max_epochs=1)
    assert p.scheme == "plaintext" and flat_fields(p)["scheme"] == "plaintext"
    net = paillier_sgd.network_for(parties, p, rng=None)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        warnings.simplefilter("error", KeyLengthWarning)  # the run makes its own 512-bit plaintext key
        history = paillier_sgd.fit(parties, net, p, rng=np.random.default_rng(0))
    notes = " ".join(history.ledger.notes)
    assert "values cross in plaintext (no cryptographic protection)" in notes
    assert "encrypted" not in notes.replace("encrypted: false", "")
    assert history.extra["public_key"]["scheme"] == "plaintext"
    assert "key_warning" not in history.final


def test_encrypted_labels_are_unchanged(keys):
    parties = vertical(14)
    p = params(max_epochs=1)
    assert p.scheme == "djn"
    history, _ = run(parties, p, keys["djn"])
    assert history.ledger.notes == [
        "no differential privacy: values cross Paillier-encrypted (djn, 512-bit modulus) between "
        "honest-but-curious, non-colluding parties; the coordinator sees masked gradients and the batch losses"]
    assert history.final["key_warning"] == "512-bit Paillier key, below the default 2048"


def test_plaintext_scheme_needs_the_plaintext_mode():
    with pytest.raises(ParamError, match=r"experiments\.x: scheme must be djn or textbook when encrypted is "
                                         r"true .* got 'plaintext'"):
        build(paillier_sgd.Params, {"scheme": "plaintext"}, "experiments.x")
    assert build(paillier_sgd.Params, {"scheme": "textbook", "encrypted": False}, "e").scheme == "plaintext"


def test_batch_larger_than_the_data_is_refused(keys):
    parties = vertical(15)  # 120 training rows
    p = params(batch_size=500)
    with pytest.raises(ParamError, match=r"^batch_size must be <= 120, the number of training rows, got 500$"):
        paillier_sgd.network_for(parties, p, rng=None)
    net = paillier_sgd.network_for(parties, params(), rng=None)
    with pytest.raises(ParamError, match=r"batch_size must be <= 120.*got 500"):
        paillier_sgd.fit(parties, net, p, rng=np.random.default_rng(0))
    assert paillier_sgd.network_for(parties, params(batch_size=120), rng=None)  # all rows in one batch is fine


def test_parties_that_do_not_fit_the_protocol_are_param_errors():
    guest, host = vertical(16)
    unlabelled = Party("guest", guest.columns, guest.ids, guest.X)
    with pytest.raises(ParamError, match=r"^dataset must give labels to exactly one party \(the guest\), got "
                                         r"label holders \[\] among parties \['guest', 'host'\]"):
        paillier_sgd.network_for([unlabelled, host], params(), rng=None)
    labelled_host = Party("host", host.columns, host.ids, host.X, guest.y)
    with pytest.raises(ParamError, match=r"label holders \['guest', 'host'\]"):
        paillier_sgd.network_for([guest, labelled_host], params(), rng=None)
    with pytest.raises(ParamError, match=r"^dataset must have at least two parties .* one or more hosts, got 1 "
                                         r"parties \['guest'\]"):
        paillier_sgd.network_for([guest], params(), rng=None)
    short = Party("host", host.columns, host.ids[:50], host.X[:50])
    with pytest.raises(ParamError, match=r"aligned parties, got guest with 120 rows and host with 50"):
        paillier_sgd.network_for([guest, short], params(), rng=None)
    arbiter = Party("arbiter", host.columns, host.ids, host.X)
    with pytest.raises(ParamError, match=r"must not name a party 'arbiter'"):
        paillier_sgd.network_for([guest, arbiter], params(), rng=None)
