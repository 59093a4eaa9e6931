"""ADMM sharing (Hu et al., AAAI 2020): optimum, noise, calibration, traffic."""

import warnings

import numpy as np
import pytest
import scipy.optimize
import scipy.sparse as sp

from ppml.algorithms import admm_sharing
from ppml.config import ParamError, build
from ppml.history import ConvergenceWarning
from ppml.metrics import logistic_loss
from ppml.models.losses import logistic_objective, solve_l2_logistic, with_bias
from ppml.network import traffic_kind, Network, encode
from ppml.parties import Party
from ppml.privacy.accountants import tight_epsilon
from ppml.privacy.bounds_admm_sharing import theorem3_sensitivity, theorem3_sigma
from ppml.privacy.paper_bounds import evaluate


def _normalize_rows(X):
    if sp.issparse(X):
        norms = np.sqrt(np.asarray(X.multiply(X).sum(axis=1)).ravel())
    else:
        norms = np.linalg.norm(X, axis=1)
    scale = 1.0 / np.where(norms > 0, norms, 1.0)
    return sp.csr_array(X.multiply(scale[:, None])) if sp.issparse(X) else X * scale[:, None]


def _parties(X, y, n, widths):
    """Vertical parties over the first n rows (train) and the rest (test), each block row-normalized."""
    ids = np.array([f"id{i}" for i in range(n)])
    tids = np.array([f"id{i}" for i in range(n, X.shape[0])])
    bounds = np.cumsum((0,) + tuple(widths))
    parties = []
    for k, (lo, hi) in enumerate(zip(bounds[:-1], bounds[1:])):
        block = X[:, lo:hi]
        parties.append(Party(name=f"party{k + 1}", columns=tuple(f"f{j}" for j in range(lo, hi)), ids=ids,
                             X=_normalize_rows(block[:n]), y=y[:n] if k == 0 else None, test_ids=tids,
                             X_test=_normalize_rows(block[n:]), y_test=y[n:] if k == 0 else None))
    return parties


def a9a_like(rng, *, n=400, n_test=200, groups=((4, 3, 5), (6, 4))):
    """Sparse one-hot categorical blocks like a9a's (one active category per group and row)."""
    rows = n + n_test
    blocks = []
    for party_groups in groups:
        cols = []
        for size in party_groups:
            cols.append(sp.csr_array((np.ones(rows), (np.arange(rows), rng.integers(0, size, rows))),
                                     shape=(rows, size)))
        blocks.append(sp.hstack(cols, format="csr"))
    X = sp.csr_array(sp.hstack(blocks, format="csr"))
    w = rng.normal(scale=1.5, size=X.shape[1])
    y = (rng.random(rows) < 1 / (1 + np.exp(-(X @ w) + 1.0))).astype(np.int8)
    return _parties(X, y, n, [sum(g) for g in groups])


def gaussian_blocks(rng, *, n=300, n_test=300, widths=(5, 4, 3), scale=6.0):
    """Dense Gaussian blocks: every D_m^T D_m is well conditioned."""
    X = rng.normal(size=(n + n_test, sum(widths)))
    w = rng.normal(size=sum(widths))
    Xn = np.hstack([_normalize_rows(b) for b in np.split(X, np.cumsum(widths)[:-1], axis=1)])
    y = (rng.random(n + n_test) < 1 / (1 + np.exp(-scale * (Xn @ w) / np.sqrt(len(widths))))).astype(np.int8)
    return _parties(X, y, n, widths)


def _joined(parties, attr):
    blocks = [getattr(p, attr) for p in parties]
    blocks[0] = with_bias(blocks[0])
    if any(sp.issparse(b) for b in blocks):
        return sp.csr_array(sp.hstack(blocks, format="csr"))
    return np.hstack(blocks)


def _fit(parties, *, capture=False, seed=0, **params):
    network = Network([p.name for p in parties], capture=capture)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        history = admm_sharing.fit(parties, network, build(admm_sharing.Params, params, "test"),
                                   rng=np.random.default_rng(seed))
    return history, network


# --- the maths against slow references ---------------------------------------------------------------------


@pytest.mark.parametrize("rho", [0.01, 1.0, 100.0])
def test_z_update_matches_scalar_minimization(rho):
    rng = np.random.default_rng(1)
    c = rng.normal(scale=4.0, size=40)
    b = rng.choice([-1.0, 1.0], size=40)
    z = admm_sharing.z_update(c, b, rho=rho)
    for i in range(40):
        ref = scipy.optimize.minimize_scalar(
            lambda t, bi=b[i], ci=c[i]: np.logaddexp(0.0, -bi * t) + 0.5 * rho * (t - ci) ** 2,
            bracket=(c[i] - 2 / rho, c[i] + 2 / rho), tol=1e-12)
        assert z[i] == pytest.approx(ref.x, abs=1e-7)
    bounded = admm_sharing.z_update(c, b, rho=rho, bound=1.5)
    np.testing.assert_allclose(bounded, np.clip(z, -1.5, 1.5))


@pytest.mark.parametrize("shape", [(40, 8), (8, 40)])
@pytest.mark.parametrize("sparse", [False, True])
def test_x_update_solves_the_normal_equations(shape, sparse):
    rng = np.random.default_rng(2)
    D = rng.normal(size=shape)
    v = rng.normal(size=shape[0])
    rho, lam = 0.7, 0.3
    expected = np.linalg.solve(lam * np.eye(shape[1]) + rho * D.T @ D, -D.T @ v)
    solver = admm_sharing.x_update_solver(sp.csr_array(D) if sparse else D, rho=rho, lam=lam)
    np.testing.assert_allclose(solver.solve(v), expected, rtol=1e-9, atol=1e-12)
    wide_ball = admm_sharing.x_update_solver(D, rho=rho, lam=lam, radius=1e6)
    np.testing.assert_allclose(wide_ball.solve(v), expected, rtol=1e-9, atol=1e-12)


def test_ball_constrained_x_update_meets_kkt():
    rng = np.random.default_rng(3)
    D = rng.normal(size=(30, 6))
    v = 5.0 * rng.normal(size=30)
    rho, lam, radius = 1.0, 0.1, 0.2
    x = admm_sharing.x_update_solver(D, rho=rho, lam=lam, radius=radius).solve(v)
    grad = (lam * np.eye(6) + rho * D.T @ D) @ x + D.T @ v
    mu = -grad @ x / (x @ x)
    assert np.linalg.norm(x) == pytest.approx(radius, rel=1e-10)
    assert mu > 0  # the constraint is active and pushes inwards
    np.testing.assert_allclose(grad, -mu * x, atol=1e-8 * np.linalg.norm(grad))


# --- acceptance: the centralized optimum without noise ------------------------------------------------------


def test_reaches_the_centralized_optimum_without_noise():
    parties = a9a_like(np.random.default_rng(4))
    lam = 1e-3
    X, y = _joined(parties, "X"), parties[0].y
    w_ref = solve_l2_logistic(X, y, lam)
    f_ref = logistic_objective(X @ w_ref, y, w_ref, lam)
    history, _ = _fit(parties, lam=lam, rho=1.0, max_epochs=100)
    assert history.epochs <= 100
    assert abs(history.final["train_objective"] - f_ref) <= 1e-4 * f_ref
    test_ref = logistic_loss(parties[0].y_test, _joined(parties, "X_test") @ w_ref)
    assert history.final["test_logloss"] == pytest.approx(test_ref, abs=5e-3)
    assert history.final["noise_sigma"] == 0.0
    assert [r["epoch"] for r in history.records] == list(range(1, history.epochs + 1))
    assert history.ledger.certified is False and history.ledger.events == []


def test_sum_objective_is_the_mean_objective_with_lam_over_n():
    # the paper states lambda on the summed loss: sum_i l_i + lam/2 ||x||^2 = n f(x) with lam / n
    parties = a9a_like(np.random.default_rng(4))
    n, lam_sum = parties[0].n_samples, 0.2
    X, y = _joined(parties, "X"), parties[0].y
    w_ref = solve_l2_logistic(X, y, lam_sum / n)
    f_ref = logistic_objective(X @ w_ref, y, w_ref, lam_sum / n)
    summed, _ = _fit(parties, objective="sum", lam=lam_sum, max_epochs=100)
    mean, _ = _fit(parties, lam=lam_sum / n, max_epochs=100)
    assert summed.final["lam_mean"] == pytest.approx(lam_sum / n, rel=1e-15)
    assert summed.extra["lam_sum"] == pytest.approx(lam_sum, rel=1e-15)
    assert abs(summed.final["train_objective"] - f_ref) <= 1e-4 * f_ref
    for a, b in zip(summed.records, mean.records, strict=True):
        assert a["train_objective"] == pytest.approx(b["train_objective"], rel=1e-12)
        assert a["test_logloss"] == pytest.approx(b["test_logloss"], rel=1e-12)


def test_wide_blocks_use_the_sample_space_form_and_converge():
    rng = np.random.default_rng(5)
    parties = gaussian_blocks(rng, n=40, n_test=40, widths=(30, 60, 20))  # party2 has more columns than rows
    lam = 1e-2
    X, y = _joined(parties, "X"), parties[0].y
    w_ref = solve_l2_logistic(X, y, lam)
    f_ref = logistic_objective(X @ w_ref, y, w_ref, lam)
    history, _ = _fit(parties, lam=lam, max_epochs=300, tol_primal=1e-9, tol_dual=1e-9)
    assert abs(history.final["train_objective"] - f_ref) <= 1e-4 * f_ref


def test_stops_at_the_residual_tolerances():
    parties = gaussian_blocks(np.random.default_rng(6))
    history, _ = _fit(parties, max_epochs=500, tol_primal=1e-4, tol_dual=1e-4)
    last = history.records[-1]
    assert history.converged is True and history.epochs < 500
    assert last["primal_residual"] <= 1e-4 and last["dual_residual"] <= 1e-4
    assert history.records[-2]["primal_residual"] > 1e-4 or history.records[-2]["dual_residual"] > 1e-4


def test_cap_without_convergence_warns():
    parties = gaussian_blocks(np.random.default_rng(6))
    with pytest.warns(ConvergenceWarning, match="max_epochs"):
        admm_sharing.fit(parties, Network([p.name for p in parties]),
                         admm_sharing.Params(max_epochs=3), rng=np.random.default_rng(0))


# --- noise --------------------------------------------------------------------------------------------------


def test_noisy_runs_are_deterministic_for_a_seed():
    parties = gaussian_blocks(np.random.default_rng(7))
    first, _ = _fit(parties, sigma=0.5, max_epochs=15, seed=11)
    again, _ = _fit(parties, sigma=0.5, max_epochs=15, seed=11)
    other, _ = _fit(parties, sigma=0.5, max_epochs=15, seed=12)
    strip = [{k: v for k, v in r.items() if k != "seconds"} for r in first.records]
    assert strip == [{k: v for k, v in r.items() if k != "seconds"} for r in again.records]
    assert first.final["test_logloss"] == again.final["test_logloss"] != other.final["test_logloss"]


def test_test_logloss_grows_with_sigma():
    # a moderate signal, as in a9a; on nearly separable data small noise can regularize and help
    parties = gaussian_blocks(np.random.default_rng(8), n=600, n_test=600, scale=2.0)
    finals = [_fit(parties, sigma=s, max_epochs=40)[0].final for s in (0.0, 1.0, 3.0, 10.0)]
    assert np.all(np.diff([f["test_logloss"] for f in finals]) > 0), finals
    assert np.all(np.diff([f["train_objective"] for f in finals]) > 0), finals


def test_fixed_sigma_is_not_certified():
    history, _ = _fit(gaussian_blocks(np.random.default_rng(9)), sigma=0.3, max_epochs=5)
    ledger = history.ledger
    assert ledger.certified is False and ledger.events == [] and ledger.paper_bound is None
    assert any("not certified" in note for note in ledger.notes)
    assert history.final["noise_sigma"] == 0.3


# --- eq. (16): column-space noise --------------------------------------------------------------------------


def _projector(D):
    """Orthogonal projector onto the column space of D, from an SVD (the slow reference)."""
    U, s, _ = np.linalg.svd(D.toarray() if sp.issparse(D) else D, full_matrices=False)
    U = U[:, s > 1e-8 * s[0]]
    return U @ U.T


@pytest.mark.parametrize("make, rank", [
    # a9a-like one-hot groups plus a bias column: D^T D singular (each group sums to the bias), rank 1 + 3*2
    (lambda rng: with_bias(a9a_like(rng, n=40, n_test=0, groups=((3, 3, 3),))[0].X), 7),
    (lambda rng: rng.normal(size=(30, 4)), 4),  # full column rank
    (lambda rng: rng.normal(size=(6, 9)), 6),  # more columns than rows: the sample-space form
])
def test_eq16_noise_has_the_column_space_covariance(make, rank):
    rng = np.random.default_rng(20)
    D = make(rng)
    sigma, draws = 0.7, 5000
    noise = admm_sharing.ColumnSpaceNoise(D, sigma=sigma)
    assert noise.rank == rank
    samples = np.stack([noise.draw(rng) for _ in range(draws)])
    P = _projector(D)
    assert np.allclose(samples @ (np.eye(D.shape[0]) - P), 0.0, atol=1e-9)  # nothing outside col(D)
    cov = samples.T @ samples / draws
    # entries of a sample covariance of unit-variance components: standard error <= sqrt(2 / draws) sigma^2
    assert np.max(np.abs(cov - sigma**2 * P)) < 5 * np.sqrt(2 / draws) * sigma**2
    assert np.trace(cov) == pytest.approx(sigma**2 * rank, rel=0.05)


def test_eq16_perturbs_x_by_the_pseudo_inverse_gram():
    # xi = basis @ u must have covariance sigma^2 (D^T D)^+, the pseudo-inverse reading of eq. (16)
    rng = np.random.default_rng(21)
    D = with_bias(a9a_like(rng, n=60, n_test=0, groups=((3, 4),))[0].X)
    noise = admm_sharing.ColumnSpaceNoise(D, sigma=1.0)
    basis = noise._basis
    assert np.allclose(basis @ basis.T, np.linalg.pinv((D.T @ D).toarray()), atol=1e-8)


def test_eq16_run_noises_only_the_column_space_and_defaults_are_unchanged():
    parties = a9a_like(np.random.default_rng(22), n=200, n_test=50)
    default, _ = _fit(parties, sigma=0.5, max_epochs=4, seed=3)
    shares, _ = _fit(parties, sigma=0.5, max_epochs=4, seed=3, noise_form="shares")
    assert default.records == shares.records or all(  # bit-identical apart from wall-clock seconds
        {k: v for k, v in a.items() if k != "seconds"} == {k: v for k, v in b.items() if k != "seconds"}
        for a, b in zip(default.records, shares.records))
    _, exact = _fit(parties, capture=True, max_epochs=1)
    eq16, noisy = _fit(parties, capture=True, sigma=0.5, max_epochs=1, noise_form="eq16")
    share = [m.payload for m in noisy.messages if m.tag == admm_sharing.TAG_SHARE][0]
    clean = [m.payload for m in exact.messages if m.tag == admm_sharing.TAG_SHARE][0]
    D = parties[1].X
    diff = share - clean
    assert np.linalg.norm(diff) > 0.1
    assert np.allclose(diff, _projector(D) @ diff, atol=1e-9)  # in col(D_2): the eq. (16) form
    ranks = {name: info["noise_rank"] for name, info in eq16.extra["parties"].items()}
    # every one-hot group sums to the same column (the bias on party1): columns minus the repeats
    assert ranks == {"party1": (4 + 3 + 5 + 1) - 3, "party2": (6 + 4) - 1}
    assert any("eq. (16)" in note and "not certified" in note for note in eq16.ledger.notes)


# --- calibrated DP: Assumption 2 enforced, Theorem 3 noise, both accountings --------------------------------


def test_calibrated_run_enforces_assumption_2_and_is_certified():
    parties = gaussian_blocks(np.random.default_rng(10), n=400, n_test=100)
    b1, epsilon, delta, epochs = 2.0, 0.5, 1e-5, 12
    history, _ = _fit(parties, epsilon=epsilon, delta=delta, b1=b1, max_epochs=epochs, tol_primal=0.0,
                      tol_dual=0.0)
    ledger, extra = history.ledger, history.extra
    assert ledger.certified is True and history.epochs == epochs
    assert extra["z_abs_max"] <= b1 + 1e-12 and extra["y_abs_max"] <= b1 + 1e-12
    n = parties[0].n_samples
    for p in parties:
        info = extra["parties"][p.name]
        assert info["x_norm"] <= b1 * (1 + 1e-9)
        # the bias column pushes every row of the central node above norm 1; the others are normalized already
        assert info["rows_clipped"] == (n if p.name == "party1" else 0)
        D = with_bias(p.X) / np.sqrt(2.0) if p.name == "party1" else p.X
        d_m = np.linalg.eigvalsh(D.T @ D)[0]
        assert info["smallest_eigenvalue"] == pytest.approx(d_m, rel=1e-8)
        sensitivity = theorem3_sensitivity(rho=1.0, lam=n * 1e-3, c1=b1, b1=b1, d_m=d_m, n_parties=3)
        expected = theorem3_sigma(epsilon=epsilon, delta=delta, sensitivity=sensitivity)
        assert info["sigma"] == pytest.approx(expected)
    assert sorted(e.party for e in ledger.events) == ["party1", "party2", "party3"]
    assert all(e.count == epochs and e.kind == "gaussian" for e in ledger.events)
    paper = evaluate(ledger.paper_bound)
    assert paper["delta"] == pytest.approx(ledger.delta) == pytest.approx((epochs + 1) * delta)
    assert ledger.target_epsilon == pytest.approx(paper["epsilon"])
    tight = tight_epsilon(ledger.events, ledger.delta)
    assert 0 < tight["epsilon"] <= paper["epsilon"]


@pytest.mark.parametrize("objective", ["mean", "sum"])
def test_calibrated_noise_uses_the_summed_loss_lambda(objective):
    # Theorem 3 is stated on the summed loss: its lambda is lam_s = n lam_mean whichever scale states lam
    parties = gaussian_blocks(np.random.default_rng(10), n=400, n_test=100)
    n, lam_s, b1 = parties[0].n_samples, 0.4, 2.0
    lam = lam_s if objective == "sum" else lam_s / n
    history, _ = _fit(parties, objective=objective, lam=lam, epsilon=1.0, delta=1e-5, b1=b1, max_epochs=2)
    info = history.extra["parties"]["party2"]
    sensitivity = theorem3_sensitivity(rho=1.0, lam=lam_s, c1=b1, b1=b1, d_m=info["smallest_eigenvalue"],
                                       n_parties=3)
    assert info["sensitivity"] == pytest.approx(sensitivity, rel=1e-12)
    assert info["sigma"] == pytest.approx(theorem3_sigma(epsilon=1.0, delta=1e-5, sensitivity=sensitivity))
    assert any(f"lam_s = {lam_s:g}" in note for note in history.ledger.notes)


@pytest.mark.parametrize("make, detail", [
    (lambda rng: a9a_like(rng), "smallest eigenvalue"),  # one-hot groups: D_m^T D_m is singular
    (lambda rng: gaussian_blocks(rng, n=30, n_test=10, widths=(5, 40)), "40 columns but only 30 rows"),
])
def test_calibrated_noise_refuses_a_singular_block(make, detail):
    with pytest.raises(ValueError, match=f"positive definite.*{detail}"):
        _fit(make(np.random.default_rng(11)), epsilon=1.0, delta=1e-5, max_epochs=2)


# --- the privacy boundary -----------------------------------------------------------------------------------


def test_traffic_is_only_the_messages_table():
    parties = gaussian_blocks(np.random.default_rng(12), n=50, n_test=20, widths=(6, 5, 4))
    epochs = 4
    history, network = _fit(parties, capture=True, max_epochs=epochs, tol_primal=0.0, tol_dual=0.0)
    n = parties[0].n_samples
    central, others = "party1", ["party2", "party3"]
    routes = {admm_sharing.TAG_BROADCAST: {(central, o) for o in others},
              admm_sharing.TAG_SHARE: {(o, central) for o in others}}
    assert {m["tag"] for m in admm_sharing.MESSAGES} == set(routes)
    expected = {(tag, src, dst) for tag, pairs in routes.items() for src, dst in pairs}
    side = [m for m in network.messages if traffic_kind(m.tag) != "training"]
    assert {m.tag for m in side} == {m["tag"] for m in admm_sharing.SIDE_MESSAGES}
    assert all(central in (m.src, m.dst) for m in side)
    # evaluation and control messages are counted apart: the protocol's totals are the table's messages only
    network.messages = [m for m in network.messages if traffic_kind(m.tag) == "training"]
    assert {(m.tag, m.src, m.dst) for m in network.messages} == expected

    def arrays(payload):
        return list(payload.values()) if isinstance(payload, dict) else [payload]

    columns = np.hstack([p.X for p in parties])
    columns = columns / np.linalg.norm(columns, axis=0)
    for m in network.messages:
        for arr in arrays(m.payload):
            # one value per sample: never a feature matrix or an x_m (whose lengths are 6, 5 and 4) ...
            assert isinstance(arr, np.ndarray) and arr.shape == (n,) and arr.dtype == np.float64
            # ... nor a single feature column, even without noise
            if np.linalg.norm(arr) > 0:
                assert np.max(np.abs(columns.T @ arr)) / np.linalg.norm(arr) < 0.999
    share = len(encode(np.zeros(n))[0])
    broadcast = len(encode({"residual": np.zeros(n), "dual": np.zeros(n)})[0])
    for rnd in range(epochs):
        sent = [m for m in network.messages if m.round == rnd]
        assert sum(m.nbytes for m in sent) == len(others) * (share + broadcast)
    assert network.round == epochs == history.epochs


def test_shares_are_noised_and_labels_never_leave():
    parties = gaussian_blocks(np.random.default_rng(13), n=50, n_test=20, widths=(6, 5, 4))
    _, exact = _fit(parties, capture=True, max_epochs=3)
    _, noisy = _fit(parties, capture=True, sigma=0.5, max_epochs=3)
    first_exact = [m.payload for m in exact.messages if m.tag == admm_sharing.TAG_SHARE][:2]
    first_noisy = [m.payload for m in noisy.messages if m.tag == admm_sharing.TAG_SHARE][:2]
    for a, b in zip(first_exact, first_noisy):  # same state before the first share: only the noise differs
        assert np.std(b - a) == pytest.approx(0.5, rel=0.3)
    labels = 2.0 * parties[0].y - 1.0
    for m in noisy.messages:  # evaluation and control messages included
        values = m.payload.values() if isinstance(m.payload, dict) else [m.payload]
        for arr in (v for v in values if isinstance(v, np.ndarray) and v.shape == labels.shape):
            assert not np.allclose(np.abs(arr), 1.0)
            assert not np.allclose(arr, labels)


# --- parameters ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("mapping, message", [
    ({"sigma": 0.5, "epsilon": 1.0, "delta": 1e-5}, "sigma must be 0"),
    ({"epsilon": 1.0}, "must be set together"),
    ({"delta": 1e-5}, "must be set together"),
    ({"b1": 2.0, "c1": 1.0}, "c1 must be >= b1"),
    ({"rho": 0.0}, "rho must be > 0"),
    ({"delta": 1.5, "epsilon": 1.0}, "delta must be < 1"),
    ({"gamma": 1.0}, "gamma is not a parameter"),
    ({"objective": "avg"}, r"objective must be one of \['mean', 'sum'\], got 'avg'"),
    ({"noise_form": "x"}, r"noise_form must be one of \['shares', 'eq16'\], got 'x'"),
    ({"noise_form": "eq16", "epsilon": 1.0, "delta": 1e-5}, "noise_form must be 'shares' when epsilon"),
])
def test_params_are_validated_with_their_key_path(mapping, message):
    with pytest.raises(ParamError, match=message):
        build(admm_sharing.Params, mapping, "experiments.admm_sharing-a9a")


def test_horizontal_data_is_refused():
    parties = gaussian_blocks(np.random.default_rng(14))
    with pytest.raises(ValueError, match="vertically partitioned"):
        admm_sharing.fit(parties, Network([p.name for p in parties]), admm_sharing.Params(),
                         rng=np.random.default_rng(0), evaluation=parties[0])
