import math

import pytest

from ppml.privacy import bounds_pp_admm as bounds
from ppml.privacy import zcdp
from ppml.privacy.paper_bounds import evaluate

L = math.log(1e4)  # ln(1/delta) = ln(1/delta_i1) at 1e-4
# fixed inputs: (epsilon_i1, delta_i1, rho_i2, T, c, eps1, eps2) and the run's delta
EPS_I1, DELTA_I1, RHO_I2, T, C, EPS1, EPS2, DELTA = 0.2, 1e-4, 2e-6, 30, 15, 0.02, 0.18, 1e-4


def test_theorem_3_3_golden_values():
    # rho_i1 inverts epsilon_i1 = rho_i1 + 2 sqrt(rho_i1 ln(1/delta_i1)): (sqrt(L + 0.2) - sqrt(L))^2
    rho_i1 = (math.sqrt(9.210340371976184 + 0.2) - math.sqrt(9.210340371976184)) ** 2
    assert rho_i1 == pytest.approx(0.00107410556716, rel=1e-10)
    rho = 30 * (rho_i1 + 2e-6)  # = 0.032283167...
    epsilon = rho + 2 * math.sqrt(rho * 9.210340371976184)  # = 1.122859...
    out = bounds.theorem_3_3(epsilon_i1=EPS_I1, delta_i1=DELTA_I1, rho_i2=RHO_I2, T=T, delta=DELTA)
    assert out["rho"] == pytest.approx(0.0322831670148, rel=1e-10)
    assert out["epsilon"] == pytest.approx(1.12285908183, rel=1e-10)
    assert (out["rho"], out["epsilon"]) == pytest.approx((rho, epsilon), rel=1e-12)
    assert out["delta"] == DELTA
    assert out["epsilon_cks"] < out["epsilon"]
    one = bounds.theorem_3_1(epsilon_i1=EPS_I1, delta_i1=DELTA_I1, rho_i2=RHO_I2, delta=DELTA)
    assert one["rho"] * T == pytest.approx(out["rho"], rel=1e-12)


def test_theorem_4_1_golden_values():
    # Theorem 4.1: rho'_i = (eps1 + eps2)^2 / 2 + c (rho_i1 + rho_i2), c = 15 releases, not T rounds
    rho_i1 = 0.00107410556716
    rho_svt = (0.02 + 0.18) ** 2 / 2  # Lemma 4.3: 0.02
    rho_gauss = 15 * (rho_i1 + 2e-6)  # = 0.0161415835074
    rho = rho_svt + rho_gauss  # = 0.0361415835074
    out = bounds.theorem_4_1(epsilon_i1=EPS_I1, delta_i1=DELTA_I1, rho_i2=RHO_I2, c=C, eps1=EPS1, eps2=EPS2,
                             delta=DELTA)
    assert out["rho_svt"] == pytest.approx(0.02, rel=1e-10)
    assert out["rho_gaussian"] == pytest.approx(0.0161415835074, rel=1e-10)
    assert out["rho"] == pytest.approx(0.0361415835074, rel=1e-10)
    assert out["epsilon"] == pytest.approx(1.19005022059, rel=1e-10)
    assert out["epsilon"] == pytest.approx(rho + 2 * math.sqrt(rho * L), rel=1e-9)
    assert out["rho_gaussian"] == pytest.approx(rho_gauss, rel=1e-9)


def test_theorem_4_1_reconstructed_golden_values():
    # the earlier accounting: all T rounds plus (eps1 + eps2)^2 / (2c)
    rho = 0.0322831670148 + (0.02 + 0.18) ** 2 / (2 * 15)  # = 0.033616500...
    out = bounds.theorem_4_1_reconstructed(epsilon_i1=EPS_I1, delta_i1=DELTA_I1, rho_i2=RHO_I2, T=T, c=C,
                                           eps1=EPS1, eps2=EPS2, delta=DELTA)
    assert out["rho_svt"] == pytest.approx(0.00133333333333, rel=1e-10)
    assert out["rho"] == pytest.approx(0.0336165003481, rel=1e-10)
    assert out["epsilon"] == pytest.approx(1.14648560374, rel=1e-10)
    assert out["epsilon"] == pytest.approx(rho + 2 * math.sqrt(rho * L), rel=1e-9)


def test_pure_dp_composition_of_the_baselines():
    out = bounds.pure_dp_composition(step_epsilons={"a": [0.1] * 30, "b": [0.05] * 30}, delta=1e-4)
    assert out["rho"] == pytest.approx(0.15)  # the larger agent: 30 * 0.1^2 / 2
    assert out["epsilon"] == pytest.approx(2.50079, abs=1e-5)
    assert out["epsilon_linear"] == pytest.approx(3.0)
    with pytest.raises(ValueError, match="names no agent"):
        bounds.pure_dp_composition(step_epsilons={}, delta=1e-4)


@pytest.mark.parametrize("epsilon", [0.5, 1.0, 1.5, 2.0, 10.0])
def test_budget_spends_exactly_the_target_by_the_papers_own_bound(epsilon):
    budget = bounds.pp_admm_budget(epsilon=epsilon, delta=1e-4, T=30, splits=0.001, delta_i1=1e-4,
                                   eps3_ratio=0.99, calibration="exact")
    assert budget.rho_i1 == pytest.approx(budget.rho_total * 0.999 / 30)
    assert budget.rho_i2 == pytest.approx(budget.rho_total * 0.001 / 30)
    assert budget.epsilon_i3 == pytest.approx(0.99 * budget.epsilon_i1)
    out = bounds.theorem_3_3(epsilon_i1=budget.epsilon_i1, delta_i1=1e-4, rho_i2=budget.rho_i2, T=30,
                             delta=1e-4)
    assert out["epsilon"] == pytest.approx(epsilon, rel=1e-9)
    with_svt = bounds.pp_admm_budget(epsilon=epsilon, delta=1e-4, T=30, splits=0.001, delta_i1=1e-4,
                                     eps3_ratio=0.99, calibration="exact", svt_share=0.1, c=15)
    assert with_svt.eps2 / with_svt.eps1 == pytest.approx(30 ** (2 / 3))
    out = evaluate({"name": "pp_admm.theorem_4_1_reconstructed", "inputs": {
        "epsilon_i1": with_svt.epsilon_i1, "delta_i1": 1e-4, "rho_i2": with_svt.rho_i2, "T": 30, "c": 15,
        "eps1": with_svt.eps1, "eps2": with_svt.eps2, "delta": 1e-4}})
    assert out["epsilon"] == pytest.approx(epsilon, rel=1e-9)
    assert out["rho_svt"] == pytest.approx(0.1 * with_svt.rho_total, rel=1e-9)


@pytest.mark.parametrize("epsilon", [0.5, 1.0, 1.5, 2.0, 10.0])
@pytest.mark.parametrize("svt_share", [0.05, 0.1, 0.5])
def test_ipp_budget_meets_the_target_by_theorem_4_1(epsilon, svt_share):
    budget = bounds.ipp_admm_budget(epsilon=epsilon, delta=1e-4, c=15, splits=0.001, delta_i1=1e-4,
                                    eps3_ratio=0.99, calibration="exact", svt_share=svt_share)
    assert (budget.eps1 + budget.eps2) ** 2 / 2 == pytest.approx(svt_share * budget.rho_total)
    assert budget.eps2 / budget.eps1 == pytest.approx(30 ** (2 / 3))
    assert 15 * (budget.rho_i1 + budget.rho_i2) == pytest.approx((1 - svt_share) * budget.rho_total)
    assert budget.rho_i2 / budget.rho_i1 == pytest.approx(0.001 / 0.999)
    out = evaluate({"name": "pp_admm.theorem_4_1", "inputs": {
        "epsilon_i1": budget.epsilon_i1, "delta_i1": 1e-4, "rho_i2": budget.rho_i2, "c": 15,
        "eps1": budget.eps1, "eps2": budget.eps2, "delta": 1e-4}})
    assert out["epsilon"] == pytest.approx(epsilon, rel=1e-9)
    assert out["rho_svt"] == pytest.approx(svt_share * budget.rho_total, rel=1e-9)
    with pytest.raises(ValueError, match="svt_share"):
        bounds.ipp_admm_budget(epsilon=epsilon, delta=1e-4, c=15, splits=0.001, delta_i1=1e-4,
                               eps3_ratio=0.99, calibration="exact", svt_share=0.0)


def test_paper_calibration_overshoots_the_target():
    budget = bounds.pp_admm_budget(epsilon=1.0, delta=1e-4, T=30, splits=0.001, delta_i1=1e-4,
                                   eps3_ratio=0.99, calibration="paper")
    out = bounds.theorem_3_3(epsilon_i1=budget.epsilon_i1, delta_i1=1e-4, rho_i2=budget.rho_i2, T=30,
                             delta=1e-4)
    assert out["epsilon"] == pytest.approx(zcdp.epsilon_paper(1 / (4 * L), 1e-4), rel=1e-9)
    assert out["epsilon"] == pytest.approx(1.02714, abs=1e-5)


def test_budget_rejects_bad_splits():
    with pytest.raises(ValueError, match="splits must lie in"):
        bounds.pp_admm_budget(epsilon=1.0, delta=1e-4, T=30, splits=1.0, delta_i1=1e-4, eps3_ratio=0.99,
                              calibration="exact")
