"""Tests of the Paillier-encrypted stochastic quasi-Newton protocol (Byrd et al.'s Algorithms 1 and 2).

512-bit keys (allowed here by lowering ``MIN_KEY_BITS``) keep the file fast.
"""

from __future__ import annotations

import contextlib
import math
import warnings

import numpy as np
import pytest

from ppml.algorithms import _hetero_lr, paillier_sgd, paillier_sqn
from ppml.config import ParamError, build
from ppml.crypto import paillier
from ppml.crypto.paillier import receive_vector
from ppml.history import ConvergenceWarning
from ppml.network import traffic_kind
from ppml.parties import Party

BITS = 512  # the length of conftest.py's shared keys


@contextlib.contextmanager
def arbiter_keys(keys):
    """The coordinator's program makes its own key pair; have it make `keys` (conftest.py's shared short keys,
    which also let a test decrypt what it captured)."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(paillier, "generate_keypair", lambda bits, *, scheme: keys)
        yield


def vertical(seed: int = 0, *, n: int = 120, scales=(1.0, 1.0, 1.0, 1.0, 1.0)):
    """A guest (labels, 2 features) and a host (3 features); `scales` stretch the columns (host first)."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n + 40, 5)) * np.asarray(scales)
    w = rng.normal(size=5) / np.asarray(scales)
    y = (rng.random(n + 40) < 1.0 / (1.0 + np.exp(-X @ w))).astype(np.int8)
    ids, test_ids = np.arange(n).astype(str), np.arange(n, n + 40).astype(str)
    guest = Party("guest", ("g0", "g1"), ids, X[:n, 3:], y[:n], test_ids, X[n:, 3:], y[n:])
    host = Party("host", ("h0", "h1", "h2"), ids, X[:n, :3], None, test_ids, X[n:, :3], None)
    return [guest, host]


def params(**overrides) -> paillier_sqn.Params:
    base = dict(batch_size=40, key_bits=BITS, eta=0.3, lam=0.05, max_epochs=4, tol=1e-12, L=2, M=3)
    base.update(overrides)
    return paillier_sqn.Params(**base)


def run(parties, p, keys, *, capture=False, seed=0):
    net = paillier_sqn.network_for(parties, p, rng=None, capture=capture)
    with warnings.catch_warnings(), arbiter_keys(keys):
        warnings.simplefilter("ignore", ConvergenceWarning)
        history = paillier_sqn.fit(parties, net, p, rng=np.random.default_rng(seed))
    return history, net


def weights(history):
    return np.concatenate([history.extra["weights"]["host"], history.extra["weights"]["guest"]])


def dense_h(pairs):
    """Algorithm 2 with an explicit matrix: H_0 = (s^T y / y^T y) I (newest pair), then BFGS updates."""
    s_new, y_new = pairs[-1]
    H = (s_new @ y_new) / (y_new @ y_new) * np.eye(len(s_new))
    for s, y in pairs:
        rho = 1.0 / (y @ s)
        V = np.eye(len(s)) - rho * np.outer(y, s)
        H = V.T @ H @ V + rho * np.outer(s, s)
    return H


def random_pairs(rng, d=20, count=5):
    A = rng.normal(size=(d, d))
    A = A @ A.T + 0.5 * np.eye(d)  # positive definite: y = A s has s^T y > 0
    return [(s, A @ s) for s in rng.normal(size=(count, d))]


def test_two_loop_equals_the_dense_matrix_of_algorithm2():
    rng = np.random.default_rng(0)
    pairs = random_pairs(rng)
    g = rng.normal(size=20)
    expected = dense_h(pairs) @ g
    np.testing.assert_allclose(paillier_sqn.two_loop(g, pairs), expected, rtol=1e-12,
                               atol=1e-12 * np.abs(expected).max())


def test_secant_property_of_the_newest_pair():
    pairs = random_pairs(np.random.default_rng(1))
    s, y = pairs[-1]
    np.testing.assert_allclose(paillier_sqn.two_loop(y, pairs), s, rtol=1e-10, atol=1e-10 * np.abs(s).max())


def test_memory_keeps_the_last_m_pairs_and_uses_the_gradient_until_2l():
    rng = np.random.default_rng(2)
    pairs = random_pairs(rng, count=4)
    qn = paillier_sqn.QuasiNewton(L=3, M=3)
    for s, y in pairs:
        assert qn.add_pair(s, y)
    g = rng.normal(size=20)
    assert len(qn) == 3 and qn.formed == 4
    np.testing.assert_allclose(qn.direction(g, k=7), dense_h(pairs[1:]) @ g, rtol=1e-10)
    assert qn.direction(g, k=6) is g  # k <= 2L: plain gradient step


def test_pairs_without_positive_curvature_are_skipped():
    qn = paillier_sqn.QuasiNewton(L=1, M=5)
    s = np.array([1.0, 0.0])
    assert not qn.add_pair(s, np.array([-1.0, 0.5]))
    assert qn.skipped == 1 and len(qn) == 0
    g = np.array([0.3, -0.2])
    assert qn.direction(g, k=10) is g  # no pair stored yet: gradient step


def reference_sqn(parties, p, seed):
    """Plain numpy Algorithm 1 on the Taylor loss with the protocol's batches, dense H from Algorithm 2."""
    guest, host = parties
    X = np.hstack([host.X, guest.X, np.ones((guest.n_samples, 1))])
    y = 2.0 * guest.y - 1.0
    penalized = np.ones(X.shape[1])
    penalized[-1] = 0.0
    w = np.zeros(X.shape[1])
    window, previous, pairs, k = np.zeros_like(w), None, [], 0
    partitions = _hetero_lr.batch_partitions(seed, len(y), p.batch_size, shuffle=p.shuffle)
    for epoch in range(p.max_epochs):
        eta = p.eta / math.sqrt(1.0 + p.decay * epoch)
        for rows in next(partitions):
            k += 1
            u = X[rows] @ w
            g = X[rows].T @ (0.25 * u - 0.5 * y[rows]) / len(rows) + p.lam * penalized * w
            window += w
            w = w - eta * (dense_h(pairs) @ g if k > 2 * p.L else g)
            if k % p.L == 0:
                mean, window = window / p.L, np.zeros_like(w)
                if previous is not None:
                    s = mean - previous
                    y_t = 0.25 * X[rows].T @ (X[rows] @ s) / len(rows) + p.lam * penalized * s
                    pairs = (pairs + [(s, y_t)])[-p.M:]
                previous = mean
    return w, len(pairs)


def batch_seed(net) -> int:
    return next(m.payload for m in net.messages if m.tag == "batch_seed")


def test_matches_numpy_reference_sqn(keys):
    parties = vertical(3, n=130)
    p = params(encrypted=False)
    history, net = run(parties, p, keys["plaintext"], capture=True, seed=4)
    w_ref, n_pairs = reference_sqn(parties, p, batch_seed(net))
    assert history.final["iterations"] == 16 and n_pairs == 3  # pairs at k = 4, 6, ..., 16, the last 3 kept
    np.testing.assert_allclose(weights(history), w_ref, rtol=0, atol=1e-6)
    assert history.final["curvature_pairs"] == 7 and history.final["curvature_skipped"] == 0


def test_encrypted_run_equals_plaintext_run(keys):
    parties = vertical(4)
    encrypted, _ = run(parties, params(), keys["djn"], seed=1)
    plain, _ = run(parties, params(encrypted=False), keys["plaintext"], seed=1)
    np.testing.assert_array_equal(weights(encrypted), weights(plain))
    assert [r["loss"] for r in encrypted.records] == [r["loss"] for r in plain.records]


def test_first_2l_iterations_are_sgd(keys):
    """While k <= 2L the coordinator's step is eta g: the same model as FATE-style SGD (spec oracle 3)."""
    parties = vertical(5)
    p = params(L=3, max_epochs=2)  # 6 iterations = 2L: no quasi-Newton step yet
    sqn, _ = run(parties, p, keys["djn"])
    sgd_params = paillier_sgd.Params(**{f: getattr(p, f) for f in paillier_sgd.Params.__dataclass_fields__
                                        if f != "update_at"}, update_at="coordinator")
    net = paillier_sgd.network_for(parties, sgd_params, rng=None)
    with warnings.catch_warnings(), arbiter_keys(keys["djn"]):
        warnings.simplefilter("ignore", ConvergenceWarning)
        sgd = paillier_sgd.fit(parties, net, sgd_params, rng=np.random.default_rng(0))
    np.testing.assert_array_equal(weights(sqn), weights(sgd))
    assert sqn.final["curvature_pairs"] == 1  # the first pair forms at k = 2L and is not used yet


def coordinator_pairs(net, p, pair):
    """C's curvature pairs (s_t, y_t), rebuilt from the captured traffic as C builds them: s_t from the steps
    it issued (window averages of their running sum), y_t from the decrypted Hessian-vector blocks."""
    pk, sk = pair

    def tagged(tag):
        return [m.payload for m in net.messages if m.tag == tag]

    steps = [np.concatenate([h, g]) for h, g in zip(tagged("host_step"), tagged("guest_step"))]
    vectors = [np.concatenate([sk.decrypt(receive_vector(h, pk)), sk.decrypt(receive_vector(g, pk))])
               for h, g in zip(tagged("host_hessian_vector"), tagged("guest_hessian_vector"))]
    sizes = [len(m.payload) for m in net.messages if m.tag == "hessian_rows"]
    window, model, s_list = _hetero_lr.IterateAverage(len(steps[0])), np.zeros(len(steps[0])), []
    for k, step in enumerate(steps, start=1):
        window.add(model)
        model = model - step
        if k % p.L == 0 and (s := window.close()) is not None:
            s_list.append(s)
    size = p.S_H or p.batch_size
    return [(s, vectors[i] / (sizes[i] if sizes else size)) for i, s in enumerate(s_list)]


@pytest.mark.parametrize("sample", [None, 120])
def test_curvature_pairs_are_the_taylor_hessian_times_s(keys, sample):
    """y_t = X_H^T X_H s_t / (4 |S_H|) + lam s_t (intercept unpenalized), from the encrypted sub-protocol."""
    parties = vertical(6)
    guest, host = parties
    p = params(S_H=sample, max_epochs=3, M=10)
    history, net = run(parties, p, keys["djn"], capture=True)
    pairs = coordinator_pairs(net, p, keys["djn"])
    X = np.hstack([host.X, guest.X, np.ones((120, 1))])
    penalized = np.r_[np.ones(5), 0.0]
    if sample is None:  # S_H = S: the batch of the iteration at which the pair is formed (k = 4, 6, 8)
        partition = next(_hetero_lr.batch_partitions(batch_seed(net), 120, 40, shuffle=False))
        samples = [partition[(k - 1) % 3] for k in (4, 6, 8)]  # the same 3 batches every epoch
        assert not any(m.tag == "hessian_rows" for m in net.messages)
    else:
        samples = [m.payload for m in net.messages if m.tag == "hessian_rows"]
        assert all(len(rows) == 120 for rows in samples)
    assert len(pairs) == len(samples) == history.final["curvature_pairs"] == 3
    for (s, y), rows in zip(pairs, samples):
        expected = 0.25 * X[rows].T @ (X[rows] @ s) / len(rows) + p.lam * penalized * s
        # X_H s crosses the protocol at VALUE_FRAC_BITS fractional bits: exact up to that rounding
        rounding = np.abs(X).max() * 2.0**-_hetero_lr.VALUE_FRAC_BITS
        np.testing.assert_allclose(y, expected, rtol=1e-6, atol=rounding)


def test_traffic_matches_the_messages_table_and_the_posters_count(keys):
    parties = vertical(7)
    p = params(L=3, max_epochs=3)  # 9 iterations of |S| = 40: pairs at k = 6 and 9
    history, net = run(parties, p, keys["djn"], capture=True)
    side = [m for m in net.messages if traffic_kind(m.tag) != "training"]
    assert {(m.tag, m.src, m.dst) for m in side} == {(e["tag"], e["src"], e["dst"])
                                                      for e in paillier_sqn.SIDE_MESSAGES}
    net.messages = [m for m in net.messages if traffic_kind(m.tag) == "training"]
    table = {m["tag"]: m for m in paillier_sqn.MESSAGES}
    for m in net.messages:
        entry = table[m.tag]
        assert m.src == entry["src"] and m.dst in entry["dst"].split(", "), m
        if entry["protection"].startswith("Paillier"):
            vectors = m.payload.values() if "c" not in m.payload else [m.payload]
            assert all(set(v) == {"n", "scheme", "frac_bits", "c"} for v in vectors)
    assert {m.tag for m in net.messages} == set(table) - {"hessian_rows"} - _hetero_lr.MULTI_HOST_TAGS
    f = history.final
    assert f["ab_ciphertexts_per_iteration"] == pytest.approx((9 * (3 * 40 + 1) + 2 * 2 * 40) / 9)
    assert f["poster_ab_per_iteration"] == pytest.approx(3 * 40 + 2 * 40 / 3)
    assert f["arbiter_ciphertexts_per_iteration"] == pytest.approx((9 * (6 + 1) + 2 * 6) / 9)
    assert f["poster_arbiter_per_iteration"] == pytest.approx((2 + 1 / 3) * 6)


def test_quasi_newton_beats_sgd_on_badly_scaled_features(keys):
    """Same learning rate and epochs: SQN ends far closer to the Taylor optimum (spec oracle 6)."""
    parties = vertical(8, n=400, scales=(3.0, 1.0, 0.3, 1.0, 0.2))
    p = params(encrypted=False, batch_size=50, eta=0.3, lam=0.01, max_epochs=8, L=4, M=5)
    sqn, _ = run(parties, p, keys["plaintext"])
    sgd_params = paillier_sgd.Params(**{f: getattr(p, f) for f in paillier_sgd.Params.__dataclass_fields__
                                        if f != "update_at"})
    net = paillier_sgd.network_for(parties, sgd_params, rng=None)
    with warnings.catch_warnings(), arbiter_keys(keys["plaintext"]):
        warnings.simplefilter("ignore", ConvergenceWarning)
        sgd = paillier_sgd.fit(parties, net, sgd_params, rng=np.random.default_rng(0))
    guest, host = parties
    X = np.hstack([host.X, guest.X, np.ones((400, 1))])
    y = 2.0 * guest.y - 1.0
    penalized = np.r_[np.ones(5), 0.0]
    w_opt = np.linalg.solve(0.25 * X.T @ X / 400 + p.lam * np.diag(penalized), 0.5 * X.T @ y / 400)
    optimum = _hetero_lr.taylor_objective(X @ w_opt, guest.y, w_opt[:-1], p.lam)
    gap_sqn = sqn.final["taylor_objective"] - optimum
    gap_sgd = sgd.final["taylor_objective"] - optimum
    assert 0 <= gap_sqn < 0.1 * gap_sgd


def test_params_validation():
    with pytest.raises(ParamError, match=r"experiments\.q\.L must be > 0"):
        build(paillier_sqn.Params, {"L": 0}, "experiments.q")
    with pytest.raises(ParamError, match=r"experiments\.q\.S_H must be > 0"):
        build(paillier_sqn.Params, {"S_H": 0}, "experiments.q")
    with pytest.raises(ParamError, match=r"experiments\.q\.update_at is not a parameter"):
        build(paillier_sqn.Params, {"update_at": "parties"}, "experiments.q")
    p = build(paillier_sqn.Params, {"S_H": None, "batch_size": 3000}, "experiments.q")
    assert (p.L, p.M, p.S_H, p.batch_size) == (4, 5, None, 3000)


def test_batch_or_hessian_sample_larger_than_the_data_is_refused(keys):
    parties = vertical(21)  # 120 training rows
    with pytest.raises(ParamError, match=r"^batch_size must be <= 120, the number of training rows, got 121$"):
        paillier_sqn.network_for(parties, params(batch_size=121), rng=None)
    with pytest.raises(ParamError, match=r"^S_H must be <= 120, the number of training rows, got 1000$"):
        paillier_sqn.network_for(parties, params(S_H=1000), rng=None)
    net = paillier_sqn.network_for(parties, params(), rng=None)
    with pytest.raises(ParamError, match=r"^S_H must be <= 120"):
        paillier_sqn.fit(parties, net, params(S_H=1000), rng=np.random.default_rng(0))


def test_plaintext_mode_is_labelled_plaintext(keys):
    p = params(encrypted=False, max_epochs=1)
    assert p.scheme == "plaintext"
    history, _ = run(vertical(22), p, keys["plaintext"])
    assert any("values cross in plaintext (no cryptographic protection)" in note for note in history.ledger.notes)
    assert not any("Paillier-encrypted" in note for note in history.ledger.notes)
