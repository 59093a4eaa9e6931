import math

import numpy as np
import pytest

from ppml.algorithms import ipp_admm, pp_admm
from ppml.models.losses import objective_and_gradient, solve_l2_logistic
from ppml.network import traffic_kind
from ppml.privacy import zcdp
from ppml.privacy.events import PureDPEvent
from ppml.privacy.paper_bounds import evaluate
from ppml.runtime import EVALUATOR

from horizontal_data import fit_module, horizontal

LAM = 0.05


@pytest.fixture(scope="module")
def data():
    return horizontal(np.random.default_rng(9))


def run(parties, evaluator, **kw):
    return fit_module(ipp_admm, parties, evaluator, lam=LAM, **kw)


def protocol(network, kind="training"):
    """The messages of one kind (training: the protocol's own; control; evaluation)."""
    return [m for m in network.messages if traffic_kind(m.tag) == kind]


def test_huge_alpha_broadcasts_nothing(data):
    parties, evaluator = data
    history, network, _ = run(parties, evaluator, T=5, alpha=1e12, capture=True)
    assert protocol(network) == []
    # every round every agent tells each neighbour it is silent (control traffic, counted apart)
    graph = {e for e in network.edges if EVALUATOR not in e}
    silent = protocol(network, "control")
    assert {m.tag for m in silent} == {"ctl/silent"} and len(silent) == 5 * 2 * len(graph)
    assert network.summary()["messages"] == 0 and network.summary()["control"]["messages"] == len(silent)
    assert history.extra["broadcasts"] == {p.name: 0 for p in parties}
    assert history.final["train_logloss"] == pytest.approx(math.log(2))  # every model is still zero


def test_minus_infinity_alpha_broadcasts_every_round_until_c(data):
    parties, evaluator = data
    history, network, _ = run(parties, evaluator, T=6, c=3, alpha=-math.inf, capture=True)
    degree = {p.name: sum(1 for e in network.edges if p.name in e and EVALUATOR not in e) for p in parties}
    theta = protocol(network)
    silent = protocol(network, "control")
    for name in degree:
        rounds = sorted({m.round for m in theta if m.src == name})
        assert rounds == [0, 1, 2]  # rounds 1..3 of the algorithm, then it has used its c broadcasts
        assert sum(1 for m in theta if m.src == name) == 3 * degree[name]
        assert sorted({m.round for m in silent if m.src == name}) == [3, 4, 5]  # then silent, explicitly
    assert history.extra["broadcasts"] == {p.name: 3 for p in parties}
    assert [r["broadcasts_total"] for r in history.records] == [5, 10, 15, 15, 15, 15]


def test_noise_off_reaches_the_centralized_optimum(data):
    parties, evaluator = data
    # paper variant, noise off, lam_hat = N lam: the mean-loss ADMM with eta = 0.5 needs many rounds
    history, _, _ = run(parties, evaluator, noise=False, beta=1e-10, T=400, c=400, alpha=-math.inf,
                        lam_hat_rule="lam")
    X = np.vstack([p.X for p in parties])
    y = np.concatenate([p.y for p in parties])
    f_star = objective_and_gradient(solve_l2_logistic(X, y, LAM), X, y, LAM)[0]
    assert history.final["train_objective"] == pytest.approx(f_star, rel=1e-4)


def test_quality_is_the_clipped_loss_decrease():
    rng = np.random.default_rng(1)
    X = rng.normal(size=(40, 3))
    y = rng.choice([-1.0, 1.0], size=40)
    old, new = rng.normal(size=3) * 4, rng.normal(size=3)
    slow = sum(min(math.log1p(math.exp(-yk * xk @ old)), 2.0) - min(math.log1p(math.exp(-yk * xk @ new)), 2.0)
               for xk, yk in zip(X, y))
    fast = ipp_admm.clipped_loss_decrease(X, y, old, new, clip=2.0, row_weight=0.5)
    assert fast == pytest.approx(0.5 * slow)


def test_sigma1_uses_epsilon_i1_and_the_budget_meets_the_target(data):
    parties, evaluator = data
    history, _, params = run(parties, evaluator, T=8, epsilon=2.0, calibration="exact")
    budget = params.budget(svt_share=params.svt_share, c=params.c)
    # the split by hand: 10 % of rho_total to the SVT, the rest over c = 15 releases (Theorem 4.1)
    rho_total = zcdp.rho_exact(2.0, 1e-4)
    per_release = 0.9 * rho_total / 15
    assert budget.rho_i2 == pytest.approx(per_release * 0.001)
    assert budget.rho_i1 == pytest.approx(per_release * 0.999)
    assert (budget.eps1 + budget.eps2) ** 2 / 2 == pytest.approx(0.1 * rho_total)
    eps_i1 = budget.rho_i1 + 2 * math.sqrt(budget.rho_i1 * math.log(1e4))
    assert budget.epsilon_i1 == pytest.approx(eps_i1)
    sigma1 = history.extra["agents"]["agent1"]["sigma1"]
    # Algorithm 2 line 6 as printed: epsilon_i1 (not epsilon_i3), |D_i| = 120
    assert sigma1 == pytest.approx(2 * math.sqrt(2 * math.log(1.25e4)) / (120 * eps_i1))
    # Theorem 4.1: rho'_i = (eps1 + eps2)^2 / 2 + c (rho_i1 + rho_i2) meets the target exactly
    bound = evaluate(history.ledger.paper_bound)
    assert bound["rho"] == pytest.approx(0.1 * rho_total + 15 * (budget.rho_i1 + budget.rho_i2))
    assert bound["epsilon"] == pytest.approx(2.0, rel=1e-9)
    # the SVT is c = 15 AboveThreshold instances, each pure (eps1 + eps2)/c-DP, recorded as such (not as zCDP)
    svt_epsilon = (budget.eps1 + budget.eps2) / 15
    svt_events = [e for e in history.ledger.events
                  if isinstance(e, PureDPEvent) and e.epsilon == pytest.approx(svt_epsilon, rel=1e-12)]
    assert len(svt_events) == 5 and {e.party for e in svt_events} == set(history.extra["agents"])
    assert not any(e.kind == "zcdp" for e in history.ledger.events)
    assert [e.kind for e in history.ledger.events].count("loss_shift") == 5  # each agent's Jacobian term
    # their zCDP cost is the SVT term of the budget, (eps1 + eps2)^2 / (2c)
    rho_svt = svt_events[0].count * zcdp.rho_pure(svt_epsilon)
    assert rho_svt == pytest.approx((budget.eps1 + budget.eps2) ** 2 / (2 * 15))
    # the tight ledger charges the c releases (and c SVT instances), not the T rounds
    assert all(e.count == 15 for e in history.ledger.events)


@pytest.mark.parametrize("epsilon", [0.5, 1.0, 10.0])
def test_paper_calibration_of_ipp_overshoots_like_pp(data, epsilon):
    parties, evaluator = data
    history, _, params = run(parties, evaluator, T=2, epsilon=epsilon)
    bound = evaluate(history.ledger.paper_bound)
    budget = params.budget(svt_share=params.svt_share, c=params.c)
    assert bound["rho"] == pytest.approx(budget.rho_total) and budget.rho_total == pytest.approx(
        epsilon ** 2 / (4 * math.log(1e4)))
    assert bound["epsilon"] > epsilon


@pytest.mark.parametrize("variant, option, expected", [("paper", "paper", 4.0), ("paper", "per_record", 4.0),
                                                       ("literal", "paper", 4.0),
                                                       ("literal", "per_record", 4.0 / 120)])
def test_svt_sensitivity_options(data, variant, option, expected):
    # Lemma 4.2's 2 C_loss is the per-record sensitivity of the summed quality (paper variant); on the mean
    # scale (literal) the per-record value is 2 C_loss/|D_i|
    parties, evaluator = data
    history, _, _ = run(parties, evaluator, T=2, svt_sensitivity=option, variant=variant)
    assert any(f"quality sensitivity {expected:.6g} ({option})" in n for n in history.ledger.notes)
    recon, _, _ = run(parties, evaluator, T=2, variant="reconstructed", loss_scale="sum", calibration="exact")
    assert any("quality sensitivity 4 (reconstructed)" in n for n in recon.ledger.notes)


@pytest.mark.parametrize("variant, threshold", [("literal", 1.0), ("paper", 120.0)])
def test_per_record_sensitivity_lets_alpha_decide(data, variant, threshold):
    # with the SVT's noise scaled to a per-record sensitivity, the threshold alpha changes the decisions
    parties, evaluator = data
    low, _, _ = run(parties, evaluator, T=6, epsilon=10.0, alpha=-threshold, svt_sensitivity="per_record",
                    variant=variant)
    high, _, _ = run(parties, evaluator, T=6, epsilon=10.0, alpha=threshold, svt_sensitivity="per_record",
                     variant=variant)
    assert sum(low.extra["broadcasts"].values()) > sum(high.extra["broadcasts"].values())


def test_the_summed_reading_is_the_mean_scale_run_with_everything_over_d_i(data):
    # IPP-ADMM's summed reading (quality and Lemma 4.2's 2 C_loss on the summed objective) is the mean-scale
    # code with eta and beta over |D_i| and the per-record sensitivity 2 C_loss/|D_i|; alpha, read on the
    # mean loss (alpha_scale: mean), is the same number in both
    parties, evaluator = data
    summed, _, _ = run(parties, evaluator, T=8, c=4, epsilon=10.0, alpha=6.0 / 120, seed=3)
    mean, _, _ = run(parties, evaluator, T=8, c=4, epsilon=10.0, alpha=6.0 / 120, eta=0.5 / 120,
                     beta=10 ** -3.5 / 120, svt_sensitivity="per_record", variant="literal", seed=3)
    assert [r["broadcasts"] for r in summed.records] == [r["broadcasts"] for r in mean.records]
    assert 0 < summed.records[-1]["broadcasts_total"] < 4 * 5  # some rounds silent, some not
    for key in ("train_loss", "test_error", "consensus"):
        assert [r[key] for r in summed.records] == pytest.approx([r[key] for r in mean.records], rel=1e-7,
                                                                  abs=1e-12), key
    assert evaluate(summed.ledger.paper_bound) == evaluate(mean.ledger.paper_bound)


@pytest.mark.parametrize("variant, rows, row_weight, mean, summed",
                         [("paper", 7000, 1.0, 7.0, 1e-3),          # summed objective: alpha |D_i| vs alpha
                          ("literal", 7000, 1 / 7000, 1e-3, 1e-3 / 7000),  # mean objective
                          ("reconstructed", 120, 0.5, 0.06, 5e-4)])  # a common row weight w: alpha w |D_i|
def test_svt_threshold_reads_alpha_on_the_mean_or_the_summed_loss(variant, rows, row_weight, mean, summed):
    extra = {"loss_scale": "sum", "calibration": "exact"} if variant == "reconstructed" else {}
    on_mean = ipp_admm.Params(alpha=1e-3, variant=variant, **extra)
    on_sum = ipp_admm.Params(alpha=1e-3, alpha_scale="sum", variant=variant, **extra)
    assert on_mean.alpha_scale == "mean"  # the paper's f_i is the mean loss: the default reading
    assert ipp_admm.svt_threshold(on_mean, row_weight=row_weight, rows=rows) == pytest.approx(mean)
    assert ipp_admm.svt_threshold(on_sum, row_weight=row_weight, rows=rows) == pytest.approx(summed)


def test_alpha_scale_is_validated():
    from ppml.config import ParamError, build

    with pytest.raises(ParamError, match=r"experiments\.ipp\.alpha_scale must be one of .*got 'median'"):
        build(ipp_admm.Params, {"alpha_scale": "median"}, "experiments.ipp")


def test_the_two_alpha_readings_send_differently(data):
    # noise off (exact tests): alpha = 0.2 on the mean loss is a threshold of 24 on an agent's summed loss
    # (|D_i| = 120), above even the first round's decrease, so no agent sends; read on the summed loss, 0.2
    # lets that decrease through
    parties, evaluator = data
    kw = dict(T=10, c=10, epsilon=10.0, alpha=0.2, svt_sensitivity="per_record", noise=False, seed=4)
    mean, _, _ = run(parties, evaluator, **kw)
    summed, _, _ = run(parties, evaluator, alpha_scale="sum", **kw)
    assert sum(mean.extra["broadcasts"].values()) == 0 < sum(summed.extra["broadcasts"].values())
    assert any("alpha = 0.2 on the mean loss" in n for n in mean.ledger.notes)


def test_traffic_audit_and_determinism(data):
    parties, evaluator = data
    a, network, _ = run(parties, evaluator, T=6, capture=True, seed=2)
    b, _, _ = run(parties, evaluator, T=6, seed=2)
    assert {m.tag for m in protocol(network)} <= {m["tag"] for m in ipp_admm.MESSAGES}
    assert {m.tag for m in network.messages if traffic_kind(m.tag) != "training"} <= {
        m["tag"] for m in ipp_admm.SIDE_MESSAGES}
    graph = {e for e in network.edges if EVALUATOR not in e}
    assert all(frozenset((m.src, m.dst)) in graph for m in protocol(network) + protocol(network, "control"))
    assert sum(len([m for m in protocol(network) if m.src == p.name]) > 0 for p in parties) >= 1
    # every round, every agent sends each neighbour either its model or word that it is silent
    edges_rounds = {(m.src, m.dst, m.round) for m in protocol(network) + protocol(network, "control")}
    assert len(edges_rounds) == len(protocol(network)) + len(protocol(network, "control")) == 6 * 2 * len(graph)
    assert a.records == b.records and a.final == b.final
