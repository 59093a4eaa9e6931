"""The Paillier protocols with more than one host (a guest, K >= 2 hosts and the arbiter; :mod:`_hetero_lr`).

With encryption off the runs reach the centralized minimizer of the same objective (the Taylor loss plus
lam/2 ||w||^2, the intercept unpenalized) and their decrypted batch losses are the numpy Taylor losses,
host-host cross terms included; a host without signal leaves the one-host run's models unchanged to the last
bit; the encrypted runs give the plaintext runs' integers; every host gets its own re-randomized [d]; the
arbiter refuses a block of the wrong length, naming its sender; and every party logs its progress once per
epoch. K = 1 is pinned bit for bit by ``test_hetero_lr_golden.py``.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

from ppml.algorithms import _hetero_lr, paillier_sgd, paillier_sqn
from ppml.crypto.paillier import receive_vector
from ppml.history import ConvergenceWarning
from ppml.network import ProtocolError, traffic_kind
from ppml.parties import Party

from test_paillier_sgd import arbiter_keys, vertical
from vertical_data import hosts_of, merged, reference_losses

BITS = KEY_BITS = 1024  # conftest.py's `keys` in this module: packed runs need room for their slots


def dealt(seed: int, widths: tuple[int, ...], *, n: int = 120, n_test: int = 40) -> list[Party]:
    """:func:`test_paillier_sgd.vertical`'s data, its host's columns dealt to len(`widths`) hosts."""
    return hosts_of(vertical(seed, n=n, n_test=n_test, d_host=sum(widths)), widths)


def with_zero_host(parties: list[Party]) -> list[Party]:
    """`parties` (guest, host) and a second host ``idle`` whose two features are zero on every row."""
    guest, host = parties
    zeros = np.zeros((host.n_samples, 2))
    idle = Party("idle", ("z0", "z1"), host.ids, zeros, None, host.test_ids, np.zeros((host.X_test.shape[0], 2)))
    return [guest, host, idle]


def sgd(**overrides) -> paillier_sgd.Params:
    base = dict(batch_size=40, key_bits=BITS, eta=0.5, lam=0.05, max_epochs=3, tol=1e-12)
    return paillier_sgd.Params(**{**base, **overrides})


def sqn(**overrides) -> paillier_sqn.Params:
    base = dict(batch_size=40, key_bits=BITS, eta=0.3, lam=0.05, max_epochs=4, tol=1e-12, L=2, M=3)
    return paillier_sqn.Params(**{**base, **overrides})


def run(module, parties, p, keys=None, *, seed=5, capture=False):
    net = module.network_for(parties, p, rng=None, capture=capture)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        if keys is None:
            history = module.fit(parties, net, p, rng=np.random.default_rng(seed))
        else:
            with arbiter_keys(keys):
                history = module.fit(parties, net, p, rng=np.random.default_rng(seed))
    return history, net


def weights(history) -> np.ndarray:
    """The model's blocks in the arbiter's order: the hosts in order, then the guest (and its intercept)."""
    return np.concatenate(list(history.extra["weights"].values()))


def taylor_minimizer(parties: list[Party], lam: float) -> np.ndarray:
    """argmin (1/n) sum_i (log 2 - y_i u_i / 2 + u_i^2 / 8) + lam/2 ||w||^2 (the intercept unpenalized): the
    objective is quadratic, so its minimizer solves (X^T X / (4n) + lam P) w = X^T y / (2n)."""
    X, y = merged(parties)
    n = len(y)
    penalized = np.r_[np.ones(X.shape[1] - 1), 0.0]
    return np.linalg.solve(0.25 * X.T @ X / n + lam * np.diag(penalized), 0.5 * X.T @ y / n)


def batch_seed(net) -> int:
    return next(m.payload for m in net.messages if m.tag == "batch_seed")


# -- the same model as a centralized solver, the same losses as numpy -------------------------------------


@pytest.mark.parametrize("widths", [(2, 3), (2, 2, 1)], ids=["K=2", "K=3"])
def test_more_hosts_reach_the_centralized_minimizer(widths):
    """Full-batch, no decay: the protocol is gradient descent on the quadratic Taylor objective, which it
    follows to its minimizer (plaintext mode: the encrypted runs' integers, see below)."""
    parties = dealt(21, widths, n=120)
    p = sgd(encrypted=False, batch_size=120, eta=4.0, decay=0.0, lam=0.05, max_epochs=150, tol=1e-15)
    history, _ = run(paillier_sgd, parties, p)
    w_opt = taylor_minimizer(parties, p.lam)
    np.testing.assert_allclose(weights(history), w_opt, rtol=0, atol=1e-6)
    assert abs(w_opt).max() > 0.05  # a model that moved: the comparison is not between two zero vectors
    X, _ = merged(parties)
    optimum = _hetero_lr.taylor_objective(X @ w_opt, parties[0].y, w_opt[:-1], p.lam)
    assert history.records[-1]["taylor_objective"] == pytest.approx(optimum, abs=1e-12)
    # the arbiter's decrypted loss is the Taylor objective too: the host-host cross terms are in it
    assert history.final["loss"] == pytest.approx(optimum, abs=penalty_steps(len(widths)))


def test_sqn_with_two_hosts_reaches_the_centralized_minimizer():
    parties = dealt(22, (3, 2), n=120)
    p = sqn(encrypted=False, batch_size=120, eta=1.0, decay=0.0, max_epochs=200, tol=1e-15, L=2, M=5)
    history, _ = run(paillier_sqn, parties, p)
    np.testing.assert_allclose(weights(history), taylor_minimizer(parties, p.lam), rtol=0, atol=1e-6)
    assert history.final["curvature_pairs"] > 10 and history.final["curvature_skipped"] == 0


def penalty_steps(hosts: int) -> float:
    """What the decrypted loss may be off by: every host's lam/2 ||theta_k||^2 crosses as one value rounded to
    VALUE_FRAC_BITS (half a step each, not averaged out by |S| as the per-row roundings are), and 1e-8 for
    the rest of the fixed-point encoding."""
    return 1e-8 + hosts * 2.0 ** -(_hetero_lr.VALUE_FRAC_BITS + 1)


@pytest.mark.parametrize("widths", [(2, 3), (2, 2, 1)], ids=["K=2", "K=3"])
@pytest.mark.parametrize("squares, lam", [("rows", 0.05), ("sum", 0.05), ("rows", 0.0)])
def test_batch_losses_are_the_taylor_losses_of_the_joint_scores(widths, squares, lam):
    """Mini-batches, a short last one: the decrypted batch losses hold every host's squares and the cross
    terms 2 sum_{j<k} u_j u_k / 8, which are far larger than the tolerance (without the penalties' rounding,
    lam = 0, it is 3e-8)."""
    parties = dealt(23, widths, n=130)
    p = sgd(encrypted=False, update_at="coordinator", host_squares=squares, lam=lam)
    history, net = run(paillier_sgd, parties, p, capture=True)
    w_ref, losses_ref = reference_losses(parties, p, batch_seed(net))
    np.testing.assert_allclose(weights(history), w_ref, rtol=0, atol=1e-6)
    tolerance = penalty_steps(len(widths)) if lam else 3e-8
    np.testing.assert_allclose([r["loss"] for r in history.records], losses_ref, rtol=0, atol=tolerance)
    X = merged(parties)[0]
    start, u = 0, []
    for width in widths:
        u.append(X[:, start:start + width] @ w_ref[start:start + width])
        start += width
    cross = np.mean(sum(u[j] * u[k] for k in range(len(u)) for j in range(k))) / 4
    assert abs(cross) > 100 * tolerance  # the host-host terms matter at this tolerance


def test_two_hosts_against_one_host_holding_both_blocks():
    """The same features as one host or dealt to two: not the same integers, hence close but not equal.

    Each host computes its own u_k = X_k theta_k in float64 and rounds it to VALUE_FRAC_BITS before
    encrypting, so [u_1] + [u_2] holds round(u_1) + round(u_2), not the one host's round(u_1 + u_2) (nor is
    X_1 theta_1 + X_2 theta_2 the float64 X_A theta_A); and the loss's cross terms take u_k as factors at
    ``frac_bits`` where the one host squares u_A in float64. The difference is a few encoding steps
    (2^-22 ~ 2.4e-7 per value), far below what the test allows; a host without signal, below, gives equality.
    """
    one = vertical(24, n=130, d_host=5)
    two = hosts_of(one, (2, 3))
    for module, p in ((paillier_sgd, sgd(encrypted=False)), (paillier_sqn, sqn(encrypted=False, S_H=60))):
        a, _ = run(module, one, p)
        b, _ = run(module, two, p)
        assert not np.array_equal(weights(a), weights(b))
        np.testing.assert_allclose(weights(b), weights(a), rtol=0, atol=1e-7)
        np.testing.assert_allclose([r["loss"] for r in b.records], [r["loss"] for r in a.records], rtol=0,
                                   atol=1e-6)


@pytest.mark.parametrize("p", [sgd(encrypted=False), sgd(update_at="coordinator", packing="auto", frac_bits=16),
                               sgd(packing="auto", frac_bits=16)],
                         ids=["plain-masked", "djn-coordinator-packed", "djn-masked-packed"])
def test_a_host_without_signal_leaves_the_model_of_the_others_unchanged_to_the_last_bit(keys, p):
    """A second host whose features are all zero: u_2 = 0, its gradient 0, its cross term 0, so every integer
    the others see is the one-host run's, through another network, another arbiter split and other slot
    widths. The models are equal bit for bit; the losses carry 2 more fractional bits (the cross terms'), so
    their last bits may differ."""
    one = vertical(25, n=130)
    pair = keys["djn" if p.encrypted else "plaintext"]
    a, _ = run(paillier_sgd, one, p, pair)
    b, _ = run(paillier_sgd, with_zero_host(one), p, pair)
    assert list(b.extra["weights"]) == ["host", "idle", "guest"]
    assert b.extra["weights"]["idle"] == [0.0, 0.0]
    assert b.extra["weights"]["host"] == a.extra["weights"]["host"]
    assert b.extra["weights"]["guest"] == a.extra["weights"]["guest"]
    np.testing.assert_allclose([r["loss"] for r in b.records], [r["loss"] for r in a.records], rtol=1e-13)
    assert [r["train_objective"] for r in b.records] == [r["train_objective"] for r in a.records]
    assert b.final["test_auc"] == a.final["test_auc"]


@pytest.mark.parametrize("module, p", [
    (paillier_sgd, sgd(update_at="parties", packing="auto", frac_bits=16)),
    (paillier_sqn, sqn(S_H=60, packing="auto", frac_bits=16)),
    (paillier_sqn, sqn()),
], ids=["sgd-masked-packed", "sqn-sampled-packed", "sqn-unpacked"])
def test_three_hosts_encrypted_equal_plaintext_to_the_last_bit(keys, module, p):
    parties = dealt(26, (2, 2, 1), n=130)
    encrypted, _ = run(module, parties, p, keys["djn"], seed=2)
    plain, _ = run(module, parties, type(p)(**{**vars(p), "encrypted": False}), keys["plaintext"], seed=2)
    assert weights(encrypted).tolist() == weights(plain).tolist()
    assert [r["loss"] for r in encrypted.records] == [r["loss"] for r in plain.records]
    if p.packing == "auto":
        assert encrypted.final["packing_slots"] >= 2
    assert abs(weights(encrypted)).max() > 0.05


def test_packing_slots_grow_with_the_hosts():
    """K + 1 values are added in [d] and K products in the batch loss: ceil(log2(K + 1)) - 1 more input bits
    and ceil(log2 K) more product bits than one host's layout, which stays as it was."""
    p = sgd(key_bits=2048, frac_bits=16, packing="auto", batch_size=1000)
    layouts = {K: _hetero_lr.packing_layout(p, 1000, hosts=K) for K in (1, 2, 3, 4, 8)}
    one = layouts[1]
    assert (one.slots, one.input_bits, one.value_bits) == (7, 33, 68)  # Table 1's seven rows at |S| = 1000
    for K, layout in layouts.items():
        assert layout.input_bits == one.input_bits + math.ceil(math.log2(K + 1)) - 1
        assert layout.value_bits == one.value_bits + layout.input_bits - one.input_bits + math.ceil(math.log2(K))
        assert layout.slots <= one.slots


# -- messages ----------------------------------------------------------------------------------------------


def _roles_of(parties: list[Party]) -> dict[str, str]:
    guest, *hosts = parties
    return {guest.name: "guest", **{h.name: "host" for h in hosts}, _hetero_lr.ARBITER: "arbiter"}


@pytest.mark.parametrize("module, p", [(paillier_sgd, sgd(update_at="coordinator")),
                                       (paillier_sgd, sgd(update_at="parties")),
                                       (paillier_sqn, sqn(S_H=60, max_epochs=2))],
                         ids=["sgd-coordinator", "sgd-masked", "sqn-sampled"])
def test_traffic_of_three_hosts_matches_the_messages_table(keys, module, p):
    parties = dealt(27, (2, 2, 1))
    _, net = run(module, parties, p, keys["djn"], capture=True)
    role = _roles_of(parties)
    table = {m["tag"]: m for m in module.MESSAGES}
    side = {(e["tag"], e["src"], e["dst"]) for e in module.SIDE_MESSAGES}
    used: dict[str, set] = {}
    for m in net.messages:
        route = (role[m.src], role[m.dst])
        if traffic_kind(m.tag) != "training":
            assert (m.tag, *route) in side, m
            continue
        entry = table[m.tag]
        assert route[0] == entry["src"] and route[1] in entry["dst"].split(", "), m
        used.setdefault(m.tag, set()).add((m.src, m.dst))
    # the prefix sums go to the second and third host, their cross terms come back; nothing to the first
    assert used[_hetero_lr.TAG_PREFIX] == {("guest", "host2"), ("guest", "host3")}
    assert used[_hetero_lr.TAG_CROSS] == {("host2", "guest"), ("host3", "guest")}
    for tag in ("batch_seed", "fore_gradient", "converged"):
        assert {dst for _, dst in used[tag]} >= {"host1", "host2", "host3"}, tag
    masked = module is paillier_sgd and p.update_at == "parties"
    step = "host_gradient_decrypted" if masked else "host_step"
    assert used[step] == {("arbiter", h) for h in ("host1", "host2", "host3")}
    if module is paillier_sqn:
        assert used["hessian_rows"] == {("guest", h) for h in ("host1", "host2", "host3")}
        assert used["host_hessian_vector"] == {(h, "arbiter") for h in ("host1", "host2", "host3")}


def test_every_host_gets_its_own_randomness_and_no_plaintext(keys):
    """[d] and [h] decrypt to the same values for every host but are different ciphertexts (a host that made
    [u_k] cannot divide it out), [P_k] is the re-randomized sum of the hosts before k, and host k's [c_k] is
    sum_i u_k,i P_k,i. Checked on the last batch (at theta = 0 every u_k is 0)."""
    pk, sk = keys["djn"]
    parties = dealt(28, (2, 2, 1))
    _, net = run(paillier_sqn, parties, sqn(max_epochs=2), keys["djn"], capture=True)

    def last(tag, src=None, dst=None):
        return receive_vector([m.payload for m in net.messages if m.tag == tag and (src is None or m.src == src)
                               and (dst is None or m.dst == dst)][-1], pk)

    hosts = ("host1", "host2", "host3")
    for tag in ("fore_gradient", "hessian_fore"):
        sent = [last(tag, dst=h) for h in hosts]
        assert len({tuple(v.ciphertexts.tolist()) for v in sent}) == 3, tag
        assert sk.decrypt(sent[0]).tolist() == sk.decrypt(sent[1]).tolist() == sk.decrypt(sent[2]).tolist()
    u1, u2, u3 = (last("host_forward", src=h) for h in hosts)
    assert np.abs(sk.decrypt(u1)).max() > 0.05 and np.abs(sk.decrypt(u3)).max() > 0.05
    prefix2, prefix3 = last(_hetero_lr.TAG_PREFIX, dst="host2"), last(_hetero_lr.TAG_PREFIX, dst="host3")
    assert prefix2.ciphertexts.tolist() != u1.ciphertexts.tolist()  # re-randomized: host1 made [u_1]
    assert sk.decrypt_encoded(prefix2).tolist() == sk.decrypt_encoded(u1).tolist()
    assert sk.decrypt_encoded(prefix3).tolist() == (sk.decrypt_encoded(u1) + sk.decrypt_encoded(u2)).tolist()
    cross = last(_hetero_lr.TAG_CROSS, src="host3")
    assert len(cross) == 1
    # u_3 as host 3's factors (frac_bits) against its encryption (VALUE_FRAC_BITS): equal to rounding
    assert sk.decrypt(cross)[0] == pytest.approx(float(sk.decrypt(u3) @ sk.decrypt(prefix3)), abs=1e-5)
    for m in net.messages:  # what the hosts receive from the guest is ciphertexts, but the seed and S_H's rows
        if m.dst in hosts and m.src == "guest" and m.tag not in ("batch_seed", "hessian_rows"):
            assert set(m.payload) == {"n", "scheme", "frac_bits", "c"}, m.tag


def test_arbiter_refuses_a_block_of_the_wrong_length_naming_its_sender(keys):
    """C knows every party's block size from the public column counts: one coefficient too few or too many is
    a ProtocolError naming the host and the tag (before, a host's extra ciphertext shifted every other block)."""
    from ppml.crypto.paillier import EncryptedVector

    parties = dealt(29, (2, 3), n=60, n_test=20)

    def attempt(p, src, tag, change):
        module = paillier_sqn if isinstance(p, paillier_sqn.Params) else paillier_sgd
        net = module.network_for(parties, p, rng=None)
        send, done = net.send, []

        def tampered(s, dst, t, payload):
            if s == src and t == tag and not done:
                payload = change(payload)
                done.append(t)
            return send(s, dst, t, payload)

        net.send = tampered
        with pytest.raises(ProtocolError) as exc, warnings.catch_warnings(), arbiter_keys(keys["djn"]):
            warnings.simplefilter("ignore", ConvergenceWarning)
            module.fit(parties, net, p, rng=np.random.default_rng(0))
        assert done
        return str(exc.value)

    def shorter(v):
        return EncryptedVector(v.public_key, list(v.ciphertexts)[:-1], v.frac_bits)

    def longer(v):
        return EncryptedVector(v.public_key, list(v.ciphertexts) * 2, v.frac_bits)

    p = sgd(batch_size=30, max_epochs=1)
    assert attempt(p, "host2", "host_gradient", shorter) == \
        "'host2' sent 'host_gradient' of 2 ciphertexts, expected 3 (one per coefficient of its block)"
    assert attempt(sgd(batch_size=30, max_epochs=1, update_at="coordinator"), "host1", "host_gradient",
                   longer).startswith("'host1' sent 'host_gradient' of 4 ciphertexts, expected 2")
    text = attempt(sqn(batch_size=30, max_epochs=2, L=1), "host2", "host_hessian_vector", shorter)
    assert text.startswith("'host2' sent 'host_hessian_vector' of 2 ciphertexts, expected 3"), text
    text = attempt(p, "guest", _hetero_lr.TAG_PREFIX, shorter)
    assert text.startswith("'guest' sent 'loss_prefix' of 29 ciphertexts, expected 30"), text
    text = attempt(p, "host2", _hetero_lr.TAG_CROSS, longer)
    assert text.startswith("'host2' sent 'host_loss_cross' of 2 ciphertexts, expected 1"), text


def test_every_party_logs_its_progress_once_per_epoch(caplog):
    caplog.set_level("INFO", logger=_hetero_lr.__name__)
    parties = dealt(30, (2, 3), n=60, n_test=20)
    history, _ = run(paillier_sgd, parties, sgd(encrypted=False, batch_size=30, max_epochs=3))
    lines: dict[str, list[str]] = {}
    for record in caplog.records:
        if record.name == _hetero_lr.__name__ and record.levelname == "INFO":
            who, text = record.getMessage().split(": ", 1)
            lines.setdefault(who, []).append(text)
    assert sorted(lines) == ["arbiter", "guest", "host1", "host2"]
    for who, texts in lines.items():
        assert [t.split(":")[0] for t in texts] == ["epoch 1/3", "epoch 2/3", "epoch 3/3"], who
    objective = history.records[0]["train_objective"]
    assert lines["guest"][0].startswith(f"epoch 1/3: train objective {objective:.6f}, ")
    assert all(" bytes sent" in t for who in ("guest", "host1", "host2") for t in lines[who])
