import math

import numpy as np
import pytest

from ppml.algorithms import pp_admm
from ppml.algorithms.decentralized_admm import make_agents
from ppml.models.losses import objective_and_gradient, solve_l2_logistic
from ppml.parties import Party
from ppml.privacy import zcdp
from ppml.privacy.paper_bounds import evaluate

from horizontal_data import fit_module, horizontal

LAM = 0.05


@pytest.fixture(scope="module")
def data():
    return horizontal(np.random.default_rng(5))


def run(parties, evaluator, **kw):
    return fit_module(pp_admm, parties, evaluator, lam=LAM, **kw)


def test_noise_off_reaches_the_centralized_optimum(data):
    parties, evaluator = data
    history, _, _ = run(parties, evaluator, noise=False, beta=1e-10, T=150)
    X = np.vstack([p.X for p in parties])
    y = np.concatenate([p.y for p in parties])
    f_star = objective_and_gradient(solve_l2_logistic(X, y, LAM), X, y, LAM)[0]
    assert history.final["train_objective"] == pytest.approx(f_star, rel=1e-4)
    assert history.ledger.events == [] and not history.ledger.certified


def test_calibration_by_hand(data):
    parties, _ = data
    params = pp_admm.Params(lam=LAM, epsilon=1.0)
    rng = np.random.default_rng(0)
    agents = make_agents(parties, pp_admm.network_for(parties, params, rng=rng), loss_scale="sum", rng=rng)
    budget = params.budget()
    agent = agents[0]
    noise = pp_admm.calibrate_agent(agent, params, budget, sigma1_epsilon=budget.epsilon_i3)
    # sum scale: row weight 1, local l2 weight n_i * lam = 120 * 0.05 = 6
    assert agent.row_weight == pytest.approx(1.0) and agent.regularization(LAM) == pytest.approx(6.0)
    lam_hat = max(6.0, 2 * 0.25 * 1.0 / (budget.epsilon_i1 - budget.epsilon_i3))
    mu = lam_hat + 2 * 0.5 * agent.degree
    assert noise.lam_hat == pytest.approx(lam_hat) and noise.strong_convexity == pytest.approx(mu)
    assert noise.sigma1 == pytest.approx(2.0 * (1 + math.sqrt(2 * math.log(1e4))) / budget.epsilon_i3)
    assert noise.sigma2 == pytest.approx((2 * 10 ** -3.5 / mu) / math.sqrt(2 * budget.rho_i2))
    assert noise.jacobian_epsilon <= budget.epsilon_i1 - budget.epsilon_i3
    credit = pp_admm.calibrate_agent(agent, pp_admm.Params(lam=LAM, penalty_credit=True), budget,
                                     sigma1_epsilon=budget.epsilon_i3)
    assert credit.lam_hat == pytest.approx(max(6.0, lam_hat - 2 * 0.5 * agent.degree))


def test_a_solve_that_misses_beta_is_never_released(data):
    parties, _ = data
    params = pp_admm.Params(lam=LAM)
    rng = np.random.default_rng(0)
    agent = make_agents(parties, pp_admm.network_for(parties, params, rng=rng), loss_scale="sum", rng=rng)[0]
    unreachable = pp_admm.AgentNoise(lam_hat=1.0, strong_convexity=3.0, gtol=1e-300, sigma1=1.0,
                                     sensitivity1=2.0, sigma2=0.1, sensitivity2=1e-3, jacobian_epsilon=0.0)
    with pytest.raises(pp_admm.InexactSolveError, match="not the tolerance"):
        pp_admm.perturbed_update(agent, unreachable, eta=0.5)
    reachable = pp_admm.AgentNoise(lam_hat=1.0, strong_convexity=3.0, gtol=1e-3, sigma1=1.0, sensitivity1=2.0,
                                   sigma2=0.0, sensitivity2=1e-3, jacobian_epsilon=0.0)
    release, solution = pp_admm.perturbed_update(agent, reachable, eta=0.5)
    assert solution.grad_norm <= 1e-3 and np.array_equal(release, solution.theta)


def test_ledger_describes_the_noise_and_the_paper_bound_meets_the_target(data):
    parties, evaluator = data
    history, _, params = run(parties, evaluator, T=10, epsilon=1.5)
    ledger = history.ledger
    assert ledger.certified and ledger.target_epsilon == 1.5 and ledger.delta == 1e-4
    assert len(ledger.events) == 3 * 5 and all(e.count == 10 for e in ledger.events)
    assert evaluate(ledger.paper_bound)["epsilon"] == pytest.approx(1.5, rel=1e-9)
    budget = params.budget()
    acc = zcdp.ZCDPAccountant()
    for event in ledger.events:
        acc.compose(event)
    sigma1 = history.extra["agents"]["agent1"]["sigma1"]
    eps_j = history.extra["agents"]["agent1"]["jacobian_epsilon"]
    per_round = 2.0 ** 2 / (2 * sigma1 ** 2) + eps_j ** 2 / 2 + budget.rho_i2
    assert acc.rho("agent1") == pytest.approx(10 * per_round)
    assert any("epsilon_i3" in note for note in ledger.notes)


def test_rows_outside_the_unit_ball_are_not_certified(data):
    parties, evaluator = data
    wide = [Party(name=p.name, columns=p.columns, ids=p.ids, X=2 * p.X, y=p.y) for p in parties]
    history, _, _ = run(wide, evaluator, T=2)
    assert not history.ledger.certified
    assert any("norm > 1" in note for note in history.ledger.notes)


def test_traffic_audit_only_noised_theta_between_neighbours(data):
    parties, evaluator = data
    _, noisy, _ = run(parties, evaluator, T=3, capture=True, epsilon=1.0)
    _, clean, _ = run(parties, evaluator, T=3, capture=True, noise=False)
    assert {m.tag for m in noisy.messages} == {"theta"}
    assert all(frozenset((m.src, m.dst)) in noisy.edges for m in noisy.messages)
    assert len(noisy.messages) == 3 * 2 * len(noisy.edges)
    first_noisy = {(m.src, m.dst): m.payload for m in noisy.messages if m.round == 0}
    first_clean = {(m.src, m.dst): m.payload for m in clean.messages if m.round == 0}
    assert first_noisy.keys() == first_clean.keys()
    assert all(not np.allclose(first_noisy[k], first_clean[k]) for k in first_noisy)
    for m in noisy.messages:  # every neighbour receives the same release
        same = [o.payload for o in noisy.messages if o.src == m.src and o.round == m.round]
        assert all(np.array_equal(s, m.payload) for s in same)


def test_deterministic_per_seed(data):
    parties, evaluator = data
    a, _, _ = run(parties, evaluator, T=4, seed=3)
    b, _, _ = run(parties, evaluator, T=4, seed=3)
    c, _, _ = run(parties, evaluator, T=4, seed=4)
    assert a.records == b.records and a.final == b.final
    assert a.records != c.records
