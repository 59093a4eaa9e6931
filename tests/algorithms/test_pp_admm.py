import math

import numpy as np
import pytest

from ppml.algorithms import pp_admm
from ppml.algorithms.decentralized_admm import make_agents
from ppml.models.losses import objective_and_gradient, solve_l2_logistic
from ppml.network import traffic_kind
from ppml.parties import Party
from ppml.privacy import zcdp
from ppml.privacy.accountants import tight_epsilon
from ppml.privacy.paper_bounds import evaluate
from ppml.runtime import EVALUATOR

from horizontal_data import fit_module, horizontal

LAM = 0.05


@pytest.fixture(scope="module")
def data():
    return horizontal(np.random.default_rng(5))


def run(parties, evaluator, **kw):
    return fit_module(pp_admm, parties, evaluator, lam=LAM, **kw)


@pytest.mark.parametrize("variant, T", [("paper", 100), ("literal", 400)])
def test_noise_off_reaches_the_centralized_optimum(data, variant, T):
    parties, evaluator = data
    # noise off, lam_hat = N lam: the run's objective is the centralized one (mean loss + lam/2 ||theta||^2);
    # with eta = 0.5 on the mean loss (literal) the ADMM needs many more rounds to get there
    history, _, _ = run(parties, evaluator, noise=False, beta=1e-10, T=T, lam_hat_rule="lam", variant=variant)
    X = np.vstack([p.X for p in parties])
    y = np.concatenate([p.y for p in parties])
    f_star = objective_and_gradient(solve_l2_logistic(X, y, LAM), X, y, LAM)[0]
    assert history.final["train_objective"] == pytest.approx(f_star, rel=1e-4)
    assert history.ledger.events == [] and not history.ledger.certified


def test_calibration_by_hand(data):
    # paper variant, Algorithm 1 lines 2-9 and §5's budget, computed by hand (docs/specs/pp_admm_paper.md)
    parties, _ = data
    params = pp_admm.Params(lam=LAM, epsilon=1.0)
    rng = np.random.default_rng(0)
    agents = pp_admm.build_agents(parties, pp_admm.network_for(parties, params, rng=rng), params, rng=rng)
    budget = params.budget()
    rho_total = 1.0 / (4 * math.log(1e4))                    # §5: epsilon^2 / (4 ln 1/delta)
    rho_i1, rho_i2 = rho_total * 0.999 / 30, rho_total * 0.001 / 30
    eps_i1 = rho_i1 + 2 * math.sqrt(rho_i1 * math.log(1e4))
    assert budget.rho_total == pytest.approx(rho_total) and budget.rho_i2 == pytest.approx(rho_i2)
    assert budget.epsilon_i1 == pytest.approx(eps_i1) and budget.epsilon_i3 == pytest.approx(0.99 * eps_i1)
    noises, info = pp_admm.calibrate_all(agents, params, budget, sigma1_from="epsilon_i3")
    line3 = 2.8 * 5 * 0.25 / (0.01 * eps_i1 * 120)           # line 3, |D_i| = 120, N = 5
    assert line3 > 5 * LAM                                   # line 3 binds here
    assert info["lam_hat_line3"] == pytest.approx(line3) and info["lam_hat"] == pytest.approx(line3)
    agent = agents[0]
    noise = noises[agent.name]
    # the summed reading: the problem solved is |D_i| = 120 times the mean-loss one, eta and beta on it
    mu = 120 * line3 / 5 + 2 * 0.5 * agent.degree
    assert noise.lam_hat == pytest.approx(line3 / 5) and noise.strong_convexity == pytest.approx(mu)
    assert noise.scale == 120 and noise.reg == pytest.approx(120 * line3 / 5)
    assert noise.sigma1 == pytest.approx(2 * math.sqrt(2 * math.log(1.25e4)) / (120 * 0.99 * eps_i1))
    assert noise.sigma2 == pytest.approx(10 ** -3.5 / (math.sqrt(2 * rho_i2) * mu))
    assert noise.sensitivity2 == pytest.approx(2 * 10 ** -3.5 / mu)
    assert noise.jacobian_epsilon == pytest.approx(2 * math.log1p(0.25 / (120 * line3 / 5)))
    assert agent.row_weight == pytest.approx(1.0)


def test_literal_calibration_by_hand(data):
    # variant literal: eta and beta on the mean loss as printed; the same lam_hat and sigma_i1
    parties, _ = data
    params = pp_admm.Params(lam=LAM, epsilon=1.0, variant="literal")
    rng = np.random.default_rng(0)
    agents = pp_admm.build_agents(parties, pp_admm.network_for(parties, params, rng=rng), params, rng=rng)
    budget = params.budget()
    noises, info = pp_admm.calibrate_all(agents, params, budget, sigma1_from="epsilon_i3")
    agent = agents[0]
    noise = noises[agent.name]
    mu = info["lam_hat"] / 5 + 2 * 0.5 * agent.degree
    assert noise.scale == 1 and noise.strong_convexity == pytest.approx(mu)
    assert noise.sigma2 == pytest.approx(10 ** -3.5 / (math.sqrt(2 * budget.rho_i2) * mu))
    assert noise.jacobian_epsilon == pytest.approx(2 * math.log1p(0.25 / (120 * info["lam_hat"] / 5)))
    assert agent.row_weight == pytest.approx(1 / 120)


def test_the_summed_reading_is_the_mean_scale_run_with_eta_and_beta_over_d_i(data):
    # the whole per-agent objective times |D_i| (loss, lam_hat term, b_i1, penalty eta and tolerance beta)
    # gives the iterates of the mean-scale code run with eta/|D_i| and beta/|D_i| (|D_i| = 120 for every agent)
    parties, evaluator = data
    eta, beta = 0.5, 1e-4
    summed, _, _ = run(parties, evaluator, T=6, epsilon=10.0, eta=eta, beta=beta, seed=7)
    mean, _, _ = run(parties, evaluator, T=6, epsilon=10.0, eta=eta / 120, beta=beta / 120, seed=7,
                     variant="literal")
    assert summed.extra["variant"] == "paper" and mean.extra["variant"] == "literal"
    for key in ("train_loss", "train_objective", "test_error", "consensus"):
        assert [r[key] for r in summed.records] == pytest.approx([r[key] for r in mean.records], rel=1e-7,
                                                                  abs=1e-12), key
    for key in ("train_objective", "train_logloss", "test_auc", "test_logloss", "test_error_average_model"):
        assert summed.final[key] == pytest.approx(mean.final[key], rel=1e-7), key
    for name, noise in summed.extra["agents"].items():
        other = mean.extra["agents"][name]
        for key in ("sigma1", "sigma2", "lam_hat", "jacobian_epsilon"):
            assert noise[key] == pytest.approx(other[key], rel=1e-12), key
        assert noise["strong_convexity"] == pytest.approx(120 * other["strong_convexity"], rel=1e-12)
    # and the literal variant at the printed eta barely moves: a different algorithm, not a rescaling
    frozen, _, _ = run(parties, evaluator, T=6, epsilon=10.0, eta=eta, beta=beta, seed=7, variant="literal")
    assert frozen.records[-1]["train_loss"] > summed.records[-1]["train_loss"] + 0.01


def test_paper_and_literal_ledgers_hold_the_same_budget_and_certified_epsilon(data):
    # at the same epsilon the two readings spend the same budget: only eta, beta and sigma_i2 (with the output
    # release's sensitivity 2 beta/mu, in the same ratio) differ
    parties, evaluator = data
    paper, _, _ = run(parties, evaluator, T=4, epsilon=2.0)
    literal, _, _ = run(parties, evaluator, T=4, epsilon=2.0, variant="literal")
    assert paper.ledger.certified and literal.ledger.certified
    assert paper.ledger.paper_bound == literal.ledger.paper_bound
    assert evaluate(paper.ledger.paper_bound) == evaluate(literal.ledger.paper_bound)
    assert paper.extra["budget"] == literal.extra["budget"]
    assert paper.extra["lam_hat"] == literal.extra["lam_hat"]
    acc = {}
    for name, history in (("paper", paper), ("literal", literal)):
        acc[name] = zcdp.ZCDPAccountant()
        for event in history.ledger.events:
            acc[name].compose(event)
    for agent in paper.extra["agents"]:
        assert acc["paper"].rho(agent) == pytest.approx(acc["literal"].rho(agent), rel=1e-12)
        p, q = paper.extra["agents"][agent], literal.extra["agents"][agent]
        assert p["sigma1"] == q["sigma1"] and p["jacobian_epsilon"] == q["jacobian_epsilon"]
        assert p["sigma2"] < q["sigma2"] / 10  # sigma_i2 = beta/(sqrt(2 rho_i2) mu): mu is |D_i| times larger
        assert p["sigma2"] / p["sensitivity2"] == pytest.approx(q["sigma2"] / q["sensitivity2"], rel=1e-12)
    tight = [tight_epsilon(h.ledger.events, 1e-4)["epsilon"] for h in (paper, literal)]
    assert tight[0] == pytest.approx(tight[1], rel=1e-9)
    assert paper.final["reading"] == pp_admm.READINGS["paper"]
    assert literal.final["reading"] == "η and β read on the mean-loss scale as printed"
    assert any("mean-loss scale as printed" in note for note in literal.ledger.notes)


def test_loss_scale_belongs_to_the_reconstructed_variant():
    with pytest.raises(Exception, match="loss_scale applies to variant 'reconstructed' only"):
        pp_admm.Params(loss_scale="sum")
    with pytest.raises(Exception, match="loss_scale"):
        pp_admm.Params(variant="literal", loss_scale="mean")
    assert pp_admm.Params().agent_loss_scale == "sum"
    assert pp_admm.Params(variant="literal").agent_loss_scale == "mean"
    assert pp_admm.Params(variant="reconstructed").agent_loss_scale == "mean"


def test_reconstructed_variant_keeps_the_earlier_calibration(data):
    parties, _ = data
    params = pp_admm.Params(lam=LAM, epsilon=1.0, variant="reconstructed", loss_scale="sum",
                            calibration="exact")
    rng = np.random.default_rng(0)
    agents = make_agents(parties, pp_admm.network_for(parties, params, rng=rng), loss_scale="sum", rng=rng)
    budget = params.budget()
    assert budget.rho_total == pytest.approx(zcdp.rho_exact(1.0, 1e-4))
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
    credit_params = pp_admm.Params(lam=LAM, variant="reconstructed", loss_scale="sum", penalty_credit=True)
    credit = pp_admm.calibrate_agent(agent, credit_params, budget, sigma1_epsilon=budget.epsilon_i3)
    assert credit.lam_hat == pytest.approx(max(6.0, lam_hat - 2 * 0.5 * agent.degree))
    with pytest.raises(Exception, match="penalty_credit"):
        pp_admm.Params(lam=LAM, penalty_credit=True)


@pytest.mark.parametrize("lam, certified", [(1e-4, False), (1.0, True)])
def test_a_fixed_lam_hat_is_certified_only_if_it_reaches_line_3(data, lam, certified):
    parties, evaluator = data
    history, _, params = fit_module(pp_admm, parties, evaluator, lam=lam, T=2, epsilon=1.0,
                                    lam_hat_rule="lam")
    info = history.extra["lam_hat"]
    assert info["lam_hat"] == pytest.approx(5 * lam)
    assert (info["lam_hat"] >= info["lam_hat_line3"]) is certified
    assert history.ledger.certified is certified
    line3_run, _, _ = fit_module(pp_admm, parties, evaluator, lam=lam, T=2, epsilon=1.0)
    assert line3_run.extra["lam_hat"]["lam_hat"] == pytest.approx(max(5 * lam, info["lam_hat_line3"]))
    assert line3_run.ledger.certified


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
    # calibration "exact": Theorem 3.3's bound is exactly the target; "paper" overshoots (documented)
    history, _, params = run(parties, evaluator, T=10, epsilon=1.5, calibration="exact")
    ledger = history.ledger
    assert ledger.certified and ledger.target_epsilon == 1.5 and ledger.delta == 1e-4
    assert len(ledger.events) == 3 * 5 and all(e.count == 10 for e in ledger.events)
    # two Gaussian releases and the Jacobian factor as a shift of the first one's loss: all composed by PLD
    assert [e.kind for e in ledger.events[:3]] == ["gaussian", "loss_shift", "gaussian"]
    assert tight_epsilon(ledger.events, ledger.delta)["method"] == "pld"
    assert evaluate(ledger.paper_bound)["epsilon"] == pytest.approx(1.5, rel=1e-9)
    paper_cal, _, _ = run(parties, evaluator, T=10, epsilon=1.5)
    assert evaluate(paper_cal.ledger.paper_bound)["epsilon"] > 1.5
    budget = params.budget()
    acc = zcdp.ZCDPAccountant()
    for event in ledger.events:
        acc.compose(event)
    sigma1 = history.extra["agents"]["agent1"]["sigma1"]
    sens1 = history.extra["agents"]["agent1"]["sensitivity1"]
    mu = history.extra["agents"]["agent1"]["strong_convexity"]
    eps_j = history.extra["agents"]["agent1"]["jacobian_epsilon"]
    assert sens1 == pytest.approx(2 / 120)
    sigma2 = history.extra["agents"]["agent1"]["sigma2"]
    per_round = sens1 ** 2 / (2 * sigma1 ** 2) + (2 * 10 ** -3.5 / mu) ** 2 / (2 * sigma2 ** 2)
    # the tight ledger's output release has sensitivity 2 beta/mu, four times rho_i2
    assert (2 * 10 ** -3.5 / mu) ** 2 / (2 * sigma2 ** 2) == pytest.approx(4 * budget.rho_i2)
    assert acc.rho("agent1") == pytest.approx(10 * per_round)
    assert acc.xi("agent1") == pytest.approx(10 * eps_j)  # the Jacobian shifts add to xi, not to rho
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
    side = [m for m in noisy.messages if traffic_kind(m.tag) != "training"]
    assert {m.tag for m in side} == {m["tag"] for m in pp_admm.SIDE_MESSAGES}
    assert all(EVALUATOR in (m.src, m.dst) for m in side)
    for net in (noisy, clean):  # the protocol's own messages: the table's
        net.messages = [m for m in net.messages if traffic_kind(m.tag) == "training"]
    graph = {e for e in noisy.edges if EVALUATOR not in e}
    assert {m.tag for m in noisy.messages} == {"theta"}
    assert all(frozenset((m.src, m.dst)) in graph for m in noisy.messages)
    assert len(noisy.messages) == 3 * 2 * len(graph)
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
