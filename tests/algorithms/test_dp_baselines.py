import math

import numpy as np
import pytest
import scipy.optimize

from ppml.algorithms import _private_admm as private
from ppml.algorithms import decentralized_admm, dvp, m_admm, r_admm
from ppml.algorithms.decentralized_admm import local_gradient, make_agents
from ppml.models.losses import objective_and_gradient, solve_l2_logistic
from ppml.privacy.accountants import tight_epsilon
from ppml.privacy.paper_bounds import evaluate

from horizontal_data import fit_module, horizontal

LAM = 0.05


@pytest.fixture(scope="module")
def data():
    return horizontal(np.random.default_rng(4), n=100, d=4, n_test=150)


def run(module, parties, evaluator, **kw):
    return fit_module(module, parties, evaluator, lam=LAM, **kw)[0]


# --- the specs' formula oracles ----------------------------------------------------------------------------


def test_dvp_constants():
    # c1 = 1/4, C = 1, rho/P = 0.01, eta = 0.05, V = 2, B = 100 -> Lambda = 0.21
    assert dvp.dvp_constants(alpha=0.5, row_weight=0.01, strong_convexity=0.21) == pytest.approx(
        (0.476331, 0.238166, 0.0), abs=1e-6)
    assert dvp.dvp_constants(alpha=0.02, row_weight=0.01, strong_convexity=0.21) == pytest.approx(
        (0.01, 0.005, 0.288751), abs=1e-6)
    eps_prime, _, _ = dvp.dvp_constants(alpha=0.0425389, row_weight=1 / 7000,
                                        strong_convexity=2e-4 + 2 * 0.5 * 2)
    assert eps_prime == pytest.approx(0.0425033, abs=2e-7)  # the spec rounds alpha = 0.04253894


def test_m_admm_step_epsilons():
    etas = 0.05 * 1.05 ** np.arange(1, 31)
    betas = m_admm.step_epsilons(1.0, etas=etas, degree=2, row_weight=0.01, reg=0.01, jacobian_terms=2)
    assert betas[0] == pytest.approx(0.213075, abs=1e-6)
    assert betas[-1] == pytest.approx(0.051986, abs=1e-6)
    assert betas.sum() == pytest.approx(3.446294, abs=1e-6)
    assert np.sum(betas ** 2) / 2 == pytest.approx(0.231831, abs=1e-6)
    assert np.all(np.diff(betas) < 0)


def test_r_admm_step_epsilon():
    beta = private.objective_perturbation_epsilon(rate=1.0, kappa=0.05 * 2, row_weight=0.01,
                                                  strong_convexity=0.01 + 2 * 0.05 * 2)
    assert beta == pytest.approx(0.223669, abs=1e-6)
    assert 15 * beta == pytest.approx(3.355034, abs=1e-5)


def test_rate_calibration_round_trip_and_infeasibility():
    etas = 0.5 * 1.05 ** np.arange(1, 31)

    def betas(rate):
        return m_admm.step_epsilons(rate, etas=etas, degree=2, row_weight=1 / 7000, reg=2e-4,
                                    jacobian_terms=2)

    rate = private.calibrate_rate(betas, 0.0257, what="test")
    assert np.sum(betas(rate) ** 2) / 2 == pytest.approx(0.0257, rel=1e-9)
    with pytest.raises(ValueError, match="budget infeasible"):
        private.calibrate_rate(lambda r: betas(r) + 1.0, 0.0257, what="test")


def test_jacobian_regularization_brings_the_jacobian_cost_to_a_quarter():
    def cost(phi):
        return 30 * (2 * math.log1p(0.25 / (7.0 + phi + 2.0))) ** 2 / 2

    phi = private.jacobian_regularization(cost, 0.0066)
    assert phi > 0 and cost(phi) == pytest.approx(0.0066 / 4, rel=1e-9)
    assert private.jacobian_regularization(cost, 10.0) == 0.0


def test_gamma_noise_has_the_right_radius_law():
    rng = np.random.default_rng(0)
    d, rate = 5, 2.0
    draws = np.array([private.gamma_noise(rng, d, rate=rate) for _ in range(100_000)])
    norms = np.linalg.norm(draws, axis=1)
    assert norms.mean() == pytest.approx(d / rate, abs=3 * math.sqrt(d) / rate / math.sqrt(100_000))
    assert norms.var() == pytest.approx(d / rate ** 2, rel=0.03)
    assert np.abs(draws.mean(axis=0)).max() < 3 * norms.std() / math.sqrt(100_000) * 2


# --- noise off: the base iteration and the optimum ---------------------------------------------------------


@pytest.mark.parametrize("module, kw", [(dvp, {}), (m_admm, {"q": 1.0})])
def test_noise_off_reproduces_the_base_iterates(data, module, kw):
    parties, evaluator = data
    base = run(decentralized_admm, parties, evaluator, T=8)
    variant = run(module, parties, evaluator, T=8, noise=False, **kw)
    for a, b in zip(base.records, variant.records):
        assert a["train_objective"] == pytest.approx(b["train_objective"], rel=1e-10, abs=1e-12)
        assert a["consensus"] == pytest.approx(b["consensus"], rel=1e-8, abs=1e-10)


@pytest.mark.parametrize("module, kw", [(dvp, {}), (m_admm, {"q": 1.01}), (r_admm, {})])
def test_noise_off_reaches_the_centralized_optimum(data, module, kw):
    parties, evaluator = data
    history = run(module, parties, evaluator, T=150, noise=False, **kw)
    X = np.vstack([p.X for p in parties])
    y = np.concatenate([p.y for p in parties])
    f_star = objective_and_gradient(solve_l2_logistic(X, y, LAM), X, y, LAM)[0]
    assert history.final["train_objective"] == pytest.approx(f_star, rel=1e-4)


# --- R-ADMM's recycling ------------------------------------------------------------------------------------


def test_recycled_gradient_is_the_noisy_local_gradient(data):
    parties, _ = data
    params = r_admm.Params(lam=LAM)
    rng = np.random.default_rng(1)
    agent = make_agents(parties, r_admm.network_for(parties, params, rng=rng), loss_scale="sum", rng=rng)[0]
    agent.dual = rng.normal(size=4)
    agent.neighbour_theta = {j: rng.normal(size=4) for j in agent.neighbours}
    kappa_noise = rng.normal(size=4) * 3
    for linear in (None, kappa_noise):
        problem = agent.problem(reg=agent.regularization(LAM), penalty=0.5, linear=linear)
        theta = agent.solve(problem).theta
        g = r_admm.recycled_gradient(dual=agent.dual, centre_sum=agent.centre_sum(), theta=theta,
                                     degree=agent.degree, eta=0.5)
        # ∇O: the data term and the l2 term only (no penalty; the dual is taken back out below)
        loss_only = agent.problem(reg=agent.regularization(LAM), penalty=0.0)
        direct = local_gradient(loss_only, theta) - 2 * agent.dual + (0 if linear is None else linear)
        np.testing.assert_allclose(g, direct, atol=1e-8)


def test_even_step_closed_form_minimizes_its_quadratic():
    rng = np.random.default_rng(2)
    g, dual, centres = rng.normal(size=3), rng.normal(size=3), rng.normal(size=(2, 3))
    closed = r_admm.recycled_update(gradient=g, dual=dual, centre_sum=centres.sum(axis=0), degree=2, eta=0.7)

    def objective(f):
        return g @ f + 2 * dual @ f + 0.7 * np.sum((centres - f) ** 2)

    numeric = scipy.optimize.minimize(objective, np.zeros(3), method="BFGS", options={"gtol": 1e-12}).x
    np.testing.assert_allclose(closed, numeric, atol=1e-7)


# --- ledgers -----------------------------------------------------------------------------------------------


def test_ledgers_meet_the_target_and_r_admm_pays_only_odd_rounds(data):
    parties, evaluator = data
    for module in (dvp, m_admm, r_admm):
        history = run(module, parties, evaluator, T=7, epsilon=2.0)
        assert history.ledger.certified
        assert evaluate(history.ledger.paper_bound)["epsilon"] == pytest.approx(2.0, rel=1e-9)
        # every release is pure DP and recorded as such, so the tight accountant composes it by PLD (the
        # optimal composition), below the paper's zCDP bound
        assert {e.kind for e in history.ledger.events} == {"pure_dp"}
        tight = tight_epsilon(history.ledger.events, history.ledger.delta)
        assert tight["method"] == "pld" and tight["fallback_reason"] is None and tight["epsilon"] < 2.0
    history = run(r_admm, parties, evaluator, T=7, epsilon=2.0)
    assert {e.count for e in history.ledger.events} == {4}
    assert {e.party for e in history.ledger.events} == {p.name for p in parties}


@pytest.mark.parametrize("module", [decentralized_admm, dvp, m_admm, r_admm])
def test_every_decentralized_run_records_the_majority_class_error(data, module):
    parties, evaluator = data
    history = run(module, parties, evaluator, T=2)
    y_train = np.concatenate([p.y for p in parties])
    majority = int(y_train.mean() > 0.5)
    assert history.final["majority_error"] == pytest.approx(np.mean(evaluator.y != majority))
