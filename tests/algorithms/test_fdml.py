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
from ppml.network import Network, traffic_kind
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
    """Today's model-(8) variant unless the test names another (tests of Algorithm 1 are further below)."""
    return build(fdml.Params, {"variant": "staleness_bounded", **values}, "experiments.test")


def _paper(**values):
    """Algorithm 1 as written (own: stored) unless the test names another own term."""
    return build(fdml.Params, {"own": "stored", **values}, "experiments.test")


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


def test_the_worker_clock_stops_for_its_evaluation(monkeypatch):
    # evaluation (predictions on every training and test row after each epoch) is not training time: make it
    # slow and the per-epoch `seconds` must not grow with it (as ADMM sharing's clock excludes evaluation)
    import time

    from ppml.models.local import LinearModel

    forward = LinearModel.forward

    def slow_on_all_rows(self, theta, X):
        if X.shape[0] > 32:  # every row, not a mini-batch: an evaluation
            time.sleep(0.1)
        return forward(self, theta, X)

    monkeypatch.setattr(LinearModel, "forward", slow_on_all_rows)
    history, _ = _fit(_parties(dims=(6,)), _params(eta=0.5, batch_size=32, epochs=3, speeds=[1]))
    seconds = [r["seconds"] for r in history.records]
    # three epochs' evaluations before the last record would add >= 0.4 s (two calls of 0.1 s per epoch)
    assert seconds == sorted(seconds) and seconds[-1] < 0.15


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
    observed = history.extra["observed_staleness"]  # what the pushes really had (here: the scheduler's order)
    assert sum(observed["histogram"]) == 3 * 10 * 12 and observed["max"] == len(observed["histogram"]) - 1
    # real timing: no simulated clock to keep, only each completion announced (the server takes them as they come)
    assert set(network.summary()["control"]["tags"]) == {fdml.TAG_DONE}
    assert network.summary()["control"]["messages"] == 3 * 10 * 12


def _check_side_traffic(network, parties, *, epochs):
    """Evaluation and control messages follow SIDE_MESSAGES and are then set aside: the training traffic is
    the protocol's own. Each party scores every training and test row once per epoch, with its own model."""
    names = {p.name for p in parties}
    role = {**{n: "party" for n in names}, fdml.SERVER: fdml.SERVER}
    table = {(m["tag"], m["src"], m["dst"]) for m in fdml.SIDE_MESSAGES}
    side = [m for m in network.messages if traffic_kind(m.tag) != "training"]
    assert {(m.tag, role[m.src], role[m.dst]) for m in side} == table
    scores = [m for m in side if m.tag == fdml.TAG_EVAL]
    assert len(scores) == epochs * len(parties)
    for m in scores:
        assert set(m.payload) == {"train", "test", "sqnorm", "sim_time", "seconds"}
        assert m.payload["train"].shape == (240,) and m.payload["test"].shape == (80,)
    # on the simulated clock every answer and refresh comes with its event, every completion with its time
    answers = sum(m.tag in ("sum", "residual", "refresh") for m in network.messages)
    assert sum(m.tag == fdml.TAG_AT for m in side) == answers
    network.messages = [m for m in network.messages if traffic_kind(m.tag) == "training"]


def test_traffic_audit_staleness_bounded_only_local_predictions_and_residuals_cross():
    parties = _parties()
    params = _params(tau=2, speeds=[1, 1, 4], batch_size=24, epochs=2, local_model="nn", hidden=6)
    _, network = _fit(parties, params, capture=True)
    _check_side_traffic(network, parties, epochs=2)
    names = {p.name for p in parties}
    table = {(m["tag"], m["src"], m["dst"]) for m in fdml.MESSAGES_BY_VARIANT["staleness_bounded"]}
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


# ---------------------------------------------------------------------------------------------------------
# Algorithm 1 as written (variant: paper / label_private)


def _reference_paper_tau0(Xs, y, models, thetas, schedule, *, eta, lam, iterations, warmup, own="stored"):
    """Lock-step Algorithm 1 (tau = 0) in plain numpy: the server's A holds each party's post-update
    prediction for every row; iteration t uses sigmoid(sum_k A[I(t), k]) (own: stored), i.e. the composite
    model at the joint iterate right after the rows' previous visit, or (own: fresh) party j's own current
    prediction plus the other parties' entries of A. The first `warmup` iterations use fresh predictions."""
    thetas = [t.copy() for t in thetas]
    A = np.column_stack([m.forward(th, X)[0] for m, th, X in zip(models, thetas, Xs)])
    out = []
    for t in range(iterations):
        rows = schedule.rows(t)
        passes = [m.forward(th, X[rows]) for m, th, X in zip(models, thetas, Xs)]
        if t < warmup:
            totals = [sum(a for a, _ in passes)] * len(Xs)
        elif own == "stored":
            totals = [A[rows].sum(axis=1)] * len(Xs)
        else:
            totals = [A[rows][:, [k for k in range(len(Xs)) if k != j]].sum(axis=1) + passes[j][0]
                      for j in range(len(Xs))]
        residuals = [expit(total) - y[rows] for total in totals]
        step = eta / np.sqrt(t + 1)
        thetas = [th - step * (m.backward(th, X[rows], cache, r / len(rows)) + lam * th)
                  for m, th, X, (_, cache), r in zip(models, thetas, Xs, passes, residuals)]
        for k, (m, th, X) in enumerate(zip(models, thetas, Xs)):
            A[rows, k] = m.forward(th, X[rows])[0]
        if (t + 1) % schedule.n_batches == 0:
            out.append(np.concatenate(thetas))
    return out


def _snapshots(trace, e):
    return np.concatenate([snaps[e] for snaps in trace.snapshots])


@pytest.mark.parametrize("own", ["stored", "fresh"])
@pytest.mark.parametrize("warmup", ["sync", "x0"])
@pytest.mark.parametrize("local_model", ["lr", "nn"])
def test_paper_tau0_full_batch_equals_synchronous_gradient_descent(local_model, warmup, own):
    # One batch per epoch: the rows' previous visit is the previous iteration, so A holds every party's
    # current predictions and Algorithm 1 at tau = 0 is synchronous (full-batch) SGD exactly, whichever own
    # term the worker uses.
    parties = _parties()
    params = _paper(tau=0, eta=0.5, lam=1e-3, batch_size=240, epochs=6, speeds=[1, 3, 2], warmup=warmup,
                    own=own)
    trace, models, thetas, schedule = _simulate(parties, params, local_model=local_model)
    expected = _reference_sgd([p.X for p in parties], parties[0].y, models, thetas, schedule, eta=0.5,
                              lam=1e-3, iterations=6)
    for e, w in enumerate(expected):
        assert np.max(np.abs(_snapshots(trace, e) - w)) <= 1e-12


@pytest.mark.parametrize("local_model", ["lr", "nn"])
def test_paper_tau0_first_epoch_is_synchronous_sgd_then_uses_epoch_old_predictions(local_model):
    parties = _parties(sparse=local_model == "lr")
    params = _paper(tau=0, eta=0.5, lam=1e-3, batch_size=40, epochs=3, speeds=[1, 1, 4])
    trace, models, thetas, schedule = _simulate(parties, params, local_model=local_model)
    Xs, y, iters = [p.X for p in parties], parties[0].y, 3 * schedule.n_batches
    sync = _reference_sgd(Xs, y, models, thetas, schedule, eta=0.5, lam=1e-3, iterations=iters)
    stale = _reference_paper_tau0(Xs, y, models, thetas, schedule, eta=0.5, lam=1e-3, iterations=iters,
                                  warmup=schedule.n_batches)
    assert np.max(np.abs(_snapshots(trace, 0) - sync[0])) <= 1e-12  # the synchronous first epoch
    for e, w in enumerate(stale):
        assert np.max(np.abs(_snapshots(trace, e) - w)) <= 1e-12
    assert np.max(np.abs(_snapshots(trace, 2) - sync[2])) > 1e-6  # and it is not synchronous SGD after it
    assert trace.rejections > 0 and trace.gaps.max() == 0  # uneven speeds: retries, never a gap


def test_paper_x0_warmup_reads_the_initial_predictions():
    parties = _parties()
    params = _paper(tau=0, eta=0.5, lam=1e-3, batch_size=40, epochs=2, warmup="x0", speeds=[2, 1, 1])
    trace, models, thetas, schedule = _simulate(parties, params, local_model="nn")
    expected = _reference_paper_tau0([p.X for p in parties], parties[0].y, models, thetas, schedule, eta=0.5,
                                     lam=1e-3, iterations=2 * schedule.n_batches, warmup=0)
    for e, w in enumerate(expected):
        assert np.max(np.abs(_snapshots(trace, e) - w)) <= 1e-12


@pytest.mark.parametrize("own", ["stored", "fresh"])
def test_label_private_gives_the_same_iterates_as_paper(own):
    parties = _parties()
    for tau in (0, 3):
        runs = [_simulate(parties, _paper(variant=v, tau=tau, eta=0.5, batch_size=40, epochs=3,
                                          speeds=[1, 1, 4], jitter=0.5, own=own), local_model="lr")[0]
                for v in ("paper", "label_private")]
        for e in range(3):
            assert np.max(np.abs(_snapshots(runs[0], e) - _snapshots(runs[1], e))) <= 1e-12


def test_paper_clock_gap_is_bounded_and_pulls_are_rejected():
    parties = _parties()
    params = _paper(tau=2, speeds=[1, 1, 4], eta=1.0, batch_size=20, epochs=3)
    first, _ = _fit(parties, params, seed=5)
    second, _ = _fit(parties, params, seed=5)
    def strip(records):
        return [{k: v for k, v in r.items() if k != "seconds"} for r in records]

    assert strip(first.records) == strip(second.records)  # same seed, same run
    assert first.final["protocol"] == "paper" and first.final["max_gap"] == 2
    assert first.final["rejections"] > 0
    # Ages of the used predictions are not bounded by tau: after the first epoch they are about an epoch.
    assert first.final["max_delay"] > 12 and first.records[-1]["mean_delay"] > 2
    assert first.records[0]["max_delay"] == 0  # synchronous first epoch


def test_paper_threads_mode_respects_the_clock_gap():
    parties = _parties()
    params = _paper(tau=2, speeds=[1, 1, 4], mode="threads", tick=1e-4, eta=4.0, lam=1e-3, batch_size=20,
                    epochs=6)
    history, network = _fit(parties, params)
    assert history.final["max_gap"] <= 2
    assert network.summary()["tags"]["sum"]["messages"] == 3 * 6 * 12


def test_paper_lr_approaches_the_centralized_optimum():
    parties = _parties()
    history, _ = _fit(parties, _paper(tau=4, speeds=[1, 1, 4], eta=2.0, lam=1e-3, batch_size=20, epochs=60))
    X = with_bias(np.hstack([p.X for p in parties]))
    w = solve_l2_logistic(X, parties[0].y, 1e-3)
    optimum = logistic_objective(X @ w, parties[0].y, w, 1e-3)
    assert 0 <= history.final["train_objective"] - optimum < 5e-3


@pytest.mark.parametrize("own", ["stored", "fresh"])
@pytest.mark.parametrize("variant", ["paper", "label_private"])
def test_traffic_audit_paper(variant, own):
    parties = _parties()
    params = _paper(variant=variant, tau=2, speeds=[1, 1, 4], batch_size=24, epochs=3, local_model="nn",
                    hidden=6, own=own)
    history, network = _fit(parties, params, capture=True)
    _check_side_traffic(network, parties, epochs=3)
    names = {p.name for p in parties}
    role = {**{n: "party" for n in names}, fdml.SERVER: fdml.SERVER}
    table = {(m["tag"], m["src"], m["dst"]) for m in fdml.MESSAGES_BY_VARIANT[variant]}
    keys = {"labels": {"labels"}, "pull_sync": {"clock", "alpha"}, "pull": {"clock"}, "reject": {"clock"},
            "sum": {"clock", "sum"}, "residual": {"clock", "residual"}, "push": {"clock", "alpha"},
            "pull_fresh": {"clock", "alpha"}}
    param_sizes = {d * 6 + 12 + (j == 0) for j, d in enumerate(DIMS)} | set(DIMS)
    seen = set()
    for msg in network.messages:
        assert (msg.tag, role[msg.src], role[msg.dst]) in table
        assert fdml.SERVER in (msg.src, msg.dst)
        assert set(msg.payload) == keys[msg.tag]
        for key, value in msg.payload.items():
            if key == "labels":  # the paper sends the labels to every worker, and nothing else carries them
                np.testing.assert_array_equal(value, parties[0].y)
            elif key == "clock":
                assert isinstance(value, int)
            else:
                assert value.dtype == np.float64 and value.shape == (24,)
                assert value.size not in param_sizes and not np.all(np.isin(value, (0.0, 1.0)))
        seen.add(msg.tag)
    # a label-private pull carries the worker's own current term when the server computes it (own: fresh)
    carries_own = variant == "label_private" and own == "fresh"
    assert seen == {m["tag"] for m in fdml.MESSAGES_BY_VARIANT[variant]} - {"init"} - (
        set() if carries_own else {"pull_fresh"})
    tags = network.summary()["tags"]
    assert tags["push"]["messages"] == 3 * 3 * 10
    answers = tags["sum" if variant == "paper" else "residual"]["messages"]
    assert answers == 3 * 3 * 10 and tags["reject"]["messages"] == history.final["rejections"]
    first_pulls = tags["pull_fresh"]["messages"] if carries_own else 0
    assert first_pulls == (3 * 2 * 10 if carries_own else 0)  # every pull after the synchronous epoch
    assert tags["pull"]["messages"] == 3 * 2 * 10 - first_pulls + history.final["rejections"]
    assert history.extra["own"] == own
    assert ("labels" in tags) == (variant == "paper")


# ---------------------------------------------------------------------------------------------------------
# The worker's own term: own: fresh (model (8), lag 0 from a party to itself) vs own: stored (the literal sum)


@pytest.mark.parametrize("warmup", ["sync", "x0"])
@pytest.mark.parametrize("variant", ["paper", "label_private"])
def test_own_fresh_with_a_single_worker_is_minibatch_sgd(variant, warmup):
    # No other entry in A: with its own term fresh, Algorithm 1 is plain mini-batch SGD whatever tau and the
    # timing; with the stored one it feeds back its own prediction from the rows' previous visit.
    parties = _parties(dims=(6,))
    runs = {own: _simulate(parties, _paper(variant=variant, own=own, warmup=warmup, tau=3, eta=0.5, lam=1e-2,
                                           batch_size=32, epochs=3, speeds=[1]), local_model="lr")
            for own in ("fresh", "stored")}
    trace, _, thetas, schedule = runs["fresh"]
    expected = _joined_lr_sgd(with_bias(parties[0].X), parties[0].y, thetas[0], schedule, eta=0.5, lam=1e-2,
                              iterations=3 * schedule.n_batches)
    for e, w in enumerate(expected):
        np.testing.assert_allclose(trace.snapshots[0][e], w, rtol=0, atol=1e-12)
    assert trace.delays[:, 2].max() == 0 and not trace.mean_ages.any()  # nothing was read from A
    assert np.max(np.abs(runs["stored"][0].snapshots[0][-1] - expected[-1])) > 1e-6


@pytest.mark.parametrize("local_model", ["lr", "nn"])
def test_own_fresh_with_every_other_entry_fresh_equals_staleness_bounded(local_model):
    # Parties 2 and 3 see only zeros (linear, no intercept): their predictions are 0 whatever their
    # parameters, so every entry of theirs in A is as fresh as model (8)'s. Then Algorithm 1 with the own term
    # fresh takes exactly the steps of staleness_bounded, under uneven random timing and tau > 0; with the own
    # term stored it does not.
    rng = np.random.default_rng(4)
    n = 240
    X1 = rng.normal(size=(n, 5))
    y = (rng.random(n) < expit(X1 @ rng.normal(size=5))).astype(np.int8)
    Xs = [X1, np.zeros((n, 3)), np.zeros((n, 4))]
    models = [make_local_model(local_model, n_features=5, hidden=4, bias=True),
              make_local_model("lr", n_features=3, hidden=4, bias=False),
              make_local_model("lr", n_features=4, hidden=4, bias=False)]
    thetas = [m.init(rng) for m in models]
    names = ["party1", "party2", "party3"]

    def run(**values):
        params = dataclasses.replace(
            build(fdml.Params, {"tau": 2, "eta": 0.5, "lam": 1e-2, "batch_size": 40, "epochs": 3, **values},
                  "experiments.test"), speeds=(1.0, 1.0, 4.0))
        trace = fdml.simulate(names, Xs, y, models=models, thetas=thetas,
                              schedule=fdml.Schedule(n, 40, seed=11), params=params,
                              network=Network([*names, fdml.SERVER]), rng=np.random.default_rng(9))
        return [_snapshots(trace, e) for e in range(3)]

    bounded = run(variant="staleness_bounded")
    fresh = run(variant="paper", own="fresh")
    stored = run(variant="paper", own="stored")
    for e in range(3):
        assert np.max(np.abs(fresh[e] - bounded[e])) <= 1e-12
    assert np.max(np.abs(stored[-1] - bounded[-1])) > 1e-6


@pytest.mark.parametrize("warmup", ["sync", "x0"])
@pytest.mark.parametrize("local_model", ["lr", "nn"])
def test_own_fresh_tau0_uses_its_own_current_prediction_and_the_others_entries(local_model, warmup):
    parties = _parties(sparse=local_model == "lr")
    params = _paper(own="fresh", warmup=warmup, tau=0, eta=0.5, lam=1e-3, batch_size=40, epochs=3,
                    speeds=[1, 1, 4])
    trace, models, thetas, schedule = _simulate(parties, params, local_model=local_model)
    Xs, y, iters = [p.X for p in parties], parties[0].y, 3 * schedule.n_batches
    first = schedule.n_batches if warmup == "sync" else 0
    expected = _reference_paper_tau0(Xs, y, models, thetas, schedule, eta=0.5, lam=1e-3, iterations=iters,
                                     warmup=first, own="fresh")
    for e, w in enumerate(expected):
        assert np.max(np.abs(_snapshots(trace, e) - w)) <= 1e-12
    stored = _reference_paper_tau0(Xs, y, models, thetas, schedule, eta=0.5, lam=1e-3, iterations=iters,
                                   warmup=first, own="stored")
    assert np.max(np.abs(_snapshots(trace, 2) - stored[2])) > 1e-6
    # the other parties' entries are still about an epoch old; only the own term is fresh
    assert trace.delays[:, 2].max() >= schedule.n_batches - 1


def test_own_stored_is_algorithm_1_only():
    with pytest.raises(ParamError, match=r"experiments.test: own must be 'fresh' with variant "
                                         r"'staleness_bounded'.*got 'stored'"):
        _params(own="stored")
    assert _paper(own="fresh").own == "fresh" and build(fdml.Params, {}, "x").own == "fresh"


def test_cost_model_prices_compute_and_messages_but_not_rejections():
    parties = _parties()
    base = dict(batch_size=20, epochs=2, eta=1.0, speeds=[1, 1, 4])
    runs = {tau: _fit(parties, _paper(tau=tau, **base))[0] for tau in (0, 2)}
    assert runs[0].final["rejections"] != runs[2].final["rejections"]
    assert runs[0].final["cost_seconds"] == pytest.approx(runs[2].final["cost_seconds"], rel=1e-12)
    # Per worker and iteration: labels once, pull, answer, push; 24 floats per answer and push.
    free = _fit(parties, _paper(tau=0, latency=0.0, bandwidth=1e30, flop_rate=1.0, **base))[0]
    assert free.final["cost_seconds"] == pytest.approx(2 * 12 * 20 * 4 * (max(DIMS) + 0), rel=1e-12)
    alone = _fit(parties, _paper(features="all", flop_rate=1.0, **{**base, "speeds": [1]}))[0]
    assert alone.final["protocol"] == "sgd"
    assert alone.final["cost_seconds"] == pytest.approx(2 * 12 * 20 * 4 * sum(DIMS), rel=1e-12)
