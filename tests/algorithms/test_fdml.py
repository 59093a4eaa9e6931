"""FDML: synchronous equivalence, convergence, staleness, determinism, threads mode and the traffic audit."""

import dataclasses
import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from scipy.special import expit

from ppml.algorithms import fdml, make_network
from ppml.config import ParamError, build
from ppml.history import ConvergenceWarning
from ppml.models.local import make_local_model
from ppml.models.losses import logistic_objective, solve_l2_logistic, with_bias
from ppml.network import Network
from ppml.parties import Party

DIMS = (4, 3, 5)


def _parties(*, seed=0, n=240, n_test=80, dims=DIMS, sparse=False):
    """Three vertical parties of a seeded logistic model; party1 holds the labels."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n + n_test, sum(dims)))
    if sparse:
        X[rng.random(X.shape) < 0.5] = 0.0
    y = (rng.random(n + n_test) < expit(X @ rng.normal(size=sum(dims)) + 0.3)).astype(np.int8)
    parties, start = [], 0
    for j, d in enumerate(dims):
        block = X[:, start:start + d]
        train, test = (sp.csr_array(block[:n]), sp.csr_array(block[n:])) if sparse else (block[:n], block[n:])
        parties.append(Party(name=f"party{j + 1}", columns=tuple(f"c{start + i}" for i in range(d)),
                             ids=np.arange(n).astype(str), X=train, y=y[:n] if j == 0 else None,
                             test_ids=np.arange(n, n + n_test).astype(str), X_test=test,
                             y_test=y[n:] if j == 0 else None))
        start += d
    return parties


def _params(**values):
    return build(fdml.Params, values, "experiments.test")


def _fit(parties, params, *, seed=1, capture=False):
    network = make_network(fdml, parties, params, rng=None, capture=capture)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        history = fdml.fit(parties, network, params, rng=np.random.default_rng(seed))
    return history, network


def _reference_sgd(Xs, y, models, thetas, schedule, *, eta, lam, iterations):
    """Plain synchronous mini-batch SGD on the composite model, parameters after every epoch."""
    thetas = [t.copy() for t in thetas]
    out = []
    for t in range(iterations):
        rows = schedule.rows(t)
        passes = [m.forward(th, X[rows]) for m, th, X in zip(models, thetas, Xs)]
        r = expit(sum(alpha for alpha, _ in passes)) - y[rows]
        step = eta / np.sqrt(t + 1)
        thetas = [th - step * (m.backward(th, X[rows], cache, r / len(rows)) + lam * th)
                  for m, th, X, (_, cache) in zip(models, thetas, Xs, passes)]
        if (t + 1) % schedule.n_batches == 0:
            out.append(np.concatenate(thetas))
    return out


def _joined_lr_sgd(X, y, w, schedule, *, eta, lam, iterations):
    """The centralized oracle for linear local models: logistic-regression SGD on the joined features."""
    out = []
    for t in range(iterations):
        rows = schedule.rows(t)
        Xs = X[rows]
        w = w - eta / np.sqrt(t + 1) * (Xs.T @ ((expit(Xs @ w) - y[rows]) / len(rows)) + lam * w)
        if (t + 1) % schedule.n_batches == 0:
            out.append(w)
    return out


def _simulate(parties, params, *, local_model, seed=3):
    """Run the protocol through `simulate` with known initial parameters and schedule."""
    rng = np.random.default_rng(seed)
    names = [p.name for p in parties]
    Xs = [p.X for p in parties]
    models = [make_local_model(local_model, n_features=X.shape[1], hidden=4, bias=j == 0)
              for j, X in enumerate(Xs)]
    thetas = [m.init(rng) for m in models]
    schedule = fdml.Schedule(Xs[0].shape[0], params.batch_size, seed=11)
    network = Network([*names, fdml.SERVER])
    trace = fdml.simulate(names, Xs, parties[0].y, models=models, thetas=thetas, schedule=schedule,
                          params=params, network=network, rng=rng)
    return trace, models, thetas, schedule


@pytest.mark.parametrize("mode", ["simulated", "threads"])
@pytest.mark.parametrize("speeds", [(1.0, 1.0, 1.0), (1.0, 1.0, 4.0)], ids=["even", "uneven"])
def test_tau0_linear_equals_centralized_sgd_on_joined_features(speeds, mode):
    parties = _parties(sparse=True)
    params = _params(tau=0, eta=0.7, lam=1e-3, batch_size=25, epochs=3, speeds=list(speeds), mode=mode)
    trace, models, thetas, schedule = _simulate(parties, params, local_model="lr")
    # Joined layout: party1's columns, its intercept, then party2's and party3's columns.
    X = sp.hstack([parties[0].X, np.ones((240, 1)), parties[1].X, parties[2].X], format="csr")
    expected = _joined_lr_sgd(X, parties[0].y, np.concatenate(thetas), schedule, eta=params.eta,
                              lam=params.lam, iterations=params.epochs * schedule.n_batches)
    for e, w in enumerate(expected):
        got = np.concatenate([trace.snapshots[j][e] for j in range(3)])
        assert np.max(np.abs(got - w)) <= 1e-12
    assert trace.delays[:, 2].max() == 0 and trace.refreshes == 0


def test_tau0_nn_equals_synchronous_sgd_on_the_composite_model():
    parties = _parties()
    params = _params(tau=0, eta=0.3, lam=1e-3, batch_size=40, epochs=2, speeds=[1, 3, 2])
    trace, models, thetas, schedule = _simulate(parties, params, local_model="nn")
    expected = _reference_sgd([p.X for p in parties], parties[0].y, models, thetas, schedule, eta=params.eta,
                              lam=params.lam, iterations=params.epochs * schedule.n_batches)
    for e, w in enumerate(expected):
        got = np.concatenate([trace.snapshots[j][e] for j in range(3)])
        assert np.max(np.abs(got - w)) <= 1e-12


def test_single_worker_is_plain_minibatch_sgd():
    parties = _parties(dims=(6,))
    params = _params(tau=3, eta=0.5, lam=1e-2, batch_size=32, epochs=2, speeds=[1])
    trace, models, thetas, schedule = _simulate(parties, params, local_model="lr")
    X = with_bias(parties[0].X)
    expected = _joined_lr_sgd(X, parties[0].y, thetas[0], schedule, eta=0.5, lam=1e-2,
                              iterations=2 * schedule.n_batches)
    np.testing.assert_allclose(trace.snapshots[0][-1], expected[-1], rtol=0, atol=1e-13)


@pytest.mark.parametrize("features,columns",
                         [("split", slice(None)), ("all", slice(None)), ("local", slice(0, 4))])
@pytest.mark.parametrize("tau,speeds", [(0, []), (4, [1, 1, 4])], ids=["sync", "stale"])
def test_lr_reaches_the_centralized_optimum(features, columns, tau, speeds):
    parties = _parties()
    if features != "split":
        speeds = speeds[:1]
    params = _params(features=features, tau=tau, speeds=speeds, eta=8.0, lam=1e-3, batch_size=20, epochs=40)
    history, _ = _fit(parties, params)
    X = with_bias(np.hstack([p.X for p in parties])[:, columns])
    w = solve_l2_logistic(X, parties[0].y, 1e-3)
    optimum = logistic_objective(X @ w, parties[0].y, w, 1e-3)
    assert 0 <= history.final["train_objective"] - optimum < 1e-3
    assert history.final["max_delay"] <= tau


def test_sum_objective_steps_and_reports_with_lam_over_n():
    parties = _parties()
    n, lam_sum = parties[0].n_samples, 0.3
    summed = _params(objective="sum", lam=lam_sum, tau=0, eta=0.7, batch_size=25, epochs=3)
    trace, _, thetas, schedule = _simulate(parties, dataclasses.replace(summed, speeds=(1.0,) * 3),
                                           local_model="lr")
    X = np.hstack([parties[0].X, np.ones((n, 1)), parties[1].X, parties[2].X])
    expected = _joined_lr_sgd(X, parties[0].y, np.concatenate(thetas), schedule, eta=0.7, lam=lam_sum / n,
                              iterations=3 * schedule.n_batches)
    got = np.concatenate([trace.snapshots[j][-1] for j in range(3)])
    assert np.max(np.abs(got - expected[-1])) <= 1e-12

    history, _ = _fit(parties, summed)
    reference, _ = _fit(parties, _params(lam=lam_sum / n, tau=0, eta=0.7, batch_size=25, epochs=3))
    assert history.final["lam_mean"] == reference.final["lam_mean"] == pytest.approx(lam_sum / n, rel=1e-15)
    strip = [{k: v for k, v in r.items() if k != "seconds"} for r in history.records]
    assert strip == [{k: v for k, v in r.items() if k != "seconds"} for r in reference.records]


def test_stale_runs_are_deterministic_and_bounded():
    parties = _parties()
    params = _params(tau=2, speeds=[1, 1, 4], eta=1.0, batch_size=20, epochs=3)
    first, _ = _fit(parties, params, seed=5)
    second, _ = _fit(parties, params, seed=5)
    other, _ = _fit(parties, params, seed=6)

    def strip(records):
        return [{k: v for k, v in r.items() if k != "seconds"} for r in records]

    assert strip(first.records) == strip(second.records)
    assert strip(first.records) != strip(other.records)
    assert first.final["max_delay"] == 2  # the bound is reached, never exceeded
    assert first.final["refreshes"] > 0
    assert sum(first.extra["delay_histogram"]) == 3 * 3 * 12
    for record in first.records:
        assert set(record) >= {"epoch", "train_objective", "test_logloss", "test_auc", "sim_time", "seconds",
                               "max_delay", "mean_delay"}


def test_staleness_lowers_simulated_time_per_epoch_with_uneven_parties():
    parties = _parties()
    times = [_fit(parties, _params(tau=tau, speeds=[1, 1, 4], batch_size=20, epochs=2))[0].final["sim_time"]
             for tau in (0, 1, 4, 16)]
    # Staleness absorbs the slow parties' fluctuations; once no party ever waits, the slowest party's own
    # total compute time is all that is left, so the gain saturates.
    assert times[0] > times[1] > times[2] >= times[3]
    even = [_fit(parties, _params(tau=tau, jitter=0.0, batch_size=20, epochs=2))[0].final["sim_time"]
            for tau in (0, 4)]
    assert even[0] == even[1] == 2 * 12  # identical deterministic parties: nothing to gain from staleness


def test_threads_mode_respects_the_bound_and_learns():
    parties = _parties()
    params = _params(tau=3, speeds=[1, 1, 4], mode="threads", tick=1e-4, eta=8.0, lam=1e-3, batch_size=20,
                     epochs=10)
    history, network = _fit(parties, params)
    assert history.final["max_delay"] <= 3
    assert history.final["sim_time"] is None
    sync, _ = _fit(parties, _params(tau=0, eta=8.0, lam=1e-3, batch_size=20, epochs=10))
    assert abs(history.final["train_objective"] - sync.final["train_objective"]) < 5e-3
    assert network.summary()["tags"]["residual"]["messages"] == 3 * 10 * 12


def test_traffic_audit_only_local_predictions_and_residuals_cross():
    parties = _parties()
    params = _params(tau=2, speeds=[1, 1, 4], batch_size=24, epochs=2, local_model="nn", hidden=6)
    _, network = _fit(parties, params, capture=True)
    names = {p.name for p in parties}
    table = {(m["tag"], m["src"], m["dst"]) for m in fdml.MESSAGES}
    keys = {"alpha": {"clock", "alpha"}, "refresh": {"clock"}, "alpha_refresh": {"clock", "version", "alpha"},
            "residual": {"clock", "residual"}}
    role = {**{n: "party" for n in names}, fdml.SERVER: fdml.SERVER}
    private_sizes = {240, 80} | {d for d in DIMS} | {d * 6 + 12 + (j == 0) for j, d in enumerate(DIMS)}
    seen = set()
    for msg in network.messages:
        assert (msg.tag, role[msg.src], role[msg.dst]) in table
        assert fdml.SERVER in (msg.src, msg.dst)  # parties never talk to each other
        assert set(msg.payload) == keys[msg.tag]
        for key, value in msg.payload.items():
            if key in ("alpha", "residual"):
                # One float per batch row: never a feature matrix, a parameter vector or a label vector.
                assert value.dtype == np.float64 and value.shape == (24,)
                assert value.size not in private_sizes
                assert not np.all(np.isin(value, (0.0, 1.0)))
            else:
                assert isinstance(value, int)
        seen.add(msg.tag)
    assert seen == set(keys)  # every message of the table occurs in a stale run
    per_tag = network.summary()["tags"]
    assert per_tag["alpha"]["messages"] == per_tag["residual"]["messages"] == 3 * 2 * 10
    assert per_tag["refresh"]["messages"] == per_tag["alpha_refresh"]["messages"]


def test_schedule_is_a_shared_seeded_permutation_per_epoch():
    schedule = fdml.Schedule(10, 4, seed=7)
    assert schedule.n_batches == 3
    epoch0 = np.concatenate([schedule.rows(t) for t in range(3)])
    epoch1 = np.concatenate([schedule.rows(t) for t in range(3, 6)])
    assert sorted(epoch0) == sorted(epoch1) == list(range(10))
    assert not np.array_equal(epoch0, epoch1)
    assert len(schedule.rows(2)) == 2
    again = fdml.Schedule(10, 4, seed=7)
    np.testing.assert_array_equal(again.rows(4), schedule.rows(4))
    with pytest.raises(ValueError, match="batch_size must be in"):
        fdml.Schedule(10, 11, seed=7)


def test_parameter_errors_name_the_key():
    with pytest.raises(ParamError, match=r"experiments.test.local_model must be one of"):
        _params(local_model="svm")
    with pytest.raises(ParamError, match=r"experiments.test.tau must be >= 0"):
        _params(tau=-1)
    with pytest.raises(ParamError, match=r"experiments.test.speeds\[1\] must be > 0"):
        _params(speeds=[1, 0])
    with pytest.raises(ParamError, match=r"experiments.test.objective must be one of \['mean', 'sum'\], "
                                         r"got 'Sum'"):
        _params(objective="Sum")
    parties = _parties()
    with pytest.raises(ParamError, match="speeds has 2 entries but the run has 3 workers"):
        _fit(parties, _params(speeds=[1, 2], epochs=1))
    with pytest.raises(ValueError, match="horizontal evaluation party"):
        fdml.fit(parties, make_network(fdml, parties, _params(), rng=None), _params(),
                 rng=np.random.default_rng(0), evaluation=parties[0])
