import math

import dp_accounting
import pytest

from ppml.privacy import zcdp
from ppml.privacy.events import (GaussianEvent, LaplaceEvent, LossShiftEvent, PrivacyEvent, PureDPEvent,
                                 SVTEvent, UnsupportedEventError, ZCDPEvent)

LOG_1E4 = math.log(1e4)  # ln(1/delta) at delta = 1e-4


def test_paper_conversion_golden_values():
    # DVP spec oracle: alpha = 0.1 per step for T = 30 -> rho = 30 * 0.1^2 / 2 = 0.15
    assert zcdp.epsilon_paper(0.15, 1e-4) == pytest.approx(0.15 + 2 * math.sqrt(0.15 * LOG_1E4), rel=1e-12)
    assert zcdp.epsilon_paper(0.15, 1e-4) == pytest.approx(2.50079, abs=1e-5)
    assert zcdp.epsilon_paper(0.0, 1e-4) == 0.0


def test_paper_budget_overshoots_and_exact_inverse_does_not():
    assert zcdp.rho_paper(1.0, 1e-4) == pytest.approx(1 / (4 * LOG_1E4), rel=1e-12)
    assert zcdp.rho_paper(1.0, 1e-4) == pytest.approx(0.0271434, abs=1e-7)
    assert zcdp.epsilon_paper(zcdp.rho_paper(1.0, 1e-4), 1e-4) == pytest.approx(1.02714, abs=1e-5)
    assert zcdp.epsilon_paper(zcdp.rho_paper(10.0, 1e-4), 1e-4) == pytest.approx(12.714, abs=1e-3)
    for eps in (1e-6, 0.5, 1.0, 1.5, 2.0, 10.0):
        rho = zcdp.rho_exact(eps, 1e-4)
        assert rho == pytest.approx((math.sqrt(LOG_1E4 + eps) - math.sqrt(LOG_1E4)) ** 2, rel=1e-9)
        assert zcdp.epsilon_paper(rho, 1e-4) == pytest.approx(eps, rel=1e-12)
    assert zcdp.rho_from_epsilon(1.0, 1e-4, calibration="paper") == zcdp.rho_paper(1.0, 1e-4)
    with pytest.raises(ValueError, match="calibration must be one of"):
        zcdp.rho_from_epsilon(1.0, 1e-4, calibration="loose")


def test_gaussian_and_pure_dp_rho():
    assert zcdp.rho_gaussian(2.0, 1.0) == 0.125
    assert zcdp.rho_gaussian(zcdp.sigma_for_rho(0.01, 3.0), 3.0) == pytest.approx(0.01, rel=1e-12)
    assert zcdp.rho_pure(0.3) == pytest.approx(0.045)
    assert zcdp.rho_svt(c=15, eps1=0.1, eps2=0.2) == pytest.approx(15 * (0.3 / 15) ** 2 / 2)
    with pytest.raises(ValueError, match="sigma must be > 0"):
        zcdp.rho_gaussian(0.0, 1.0)
    with pytest.raises(ValueError, match="delta must lie in"):
        zcdp.epsilon_paper(0.1, 1.5)


@pytest.mark.parametrize("rho", [1e-4, 0.0271434, 0.15, 2.0])
def test_cks_is_tighter_than_the_paper_and_agrees_with_dp_accounting(rho):
    ours = zcdp.epsilon_cks(rho, 1e-4)
    assert ours < zcdp.epsilon_paper(rho, 1e-4)
    accountant = dp_accounting.rdp.RdpAccountant()
    accountant.compose(dp_accounting.ZCDpEvent(rho=rho))
    theirs = accountant.get_epsilon(1e-4)  # the same conversion, minimized over a grid of orders
    assert ours <= theirs + 1e-9
    assert ours == pytest.approx(theirs, rel=0.05)  # their order grid is coarser at small rho
    assert zcdp.epsilon_cks(0.0, 1e-4) == 0.0


def test_accountant_composes_per_party_and_takes_the_largest():
    acc = zcdp.ZCDPAccountant()
    acc.compose(GaussianEvent(sigma=2.0, sensitivity=1.0, count=8, party="a"))  # 8 * 1/8 = 1
    acc.compose(LaplaceEvent(scale=10.0, sensitivity=1.0, party="b"), count=2)  # 2 * 0.1^2/2 = 0.01
    acc.compose(SVTEvent(c=4, eps1=0.2, eps2=0.2, party="b"))  # 4 * 0.1^2/2 = 0.02
    acc.compose(ZCDPEvent(rho=0.5, party="b"))
    acc.compose(PureDPEvent(epsilon=0.1, count=3, party="b"))  # 3 * 0.1^2/2 = 0.015
    assert acc.rho("a") == pytest.approx(1.0)
    assert acc.rho("b") == pytest.approx(0.545)
    assert acc.rho() == pytest.approx(1.0)
    assert acc.epsilon(1e-4, conversion="paper") == pytest.approx(zcdp.epsilon_paper(1.0, 1e-4))
    assert acc.epsilon(1e-4) == pytest.approx(zcdp.epsilon_cks(1.0, 1e-4))
    with pytest.raises(UnsupportedEventError):
        acc.compose(PrivacyEvent(party="a"))


def test_a_loss_shift_adds_to_xi_and_the_epsilon_not_to_rho():
    acc = zcdp.ZCDPAccountant()
    acc.compose(GaussianEvent(sigma=2.0, sensitivity=1.0, count=8, party="a"))  # rho 1
    acc.compose(LossShiftEvent(epsilon=0.05, count=30, party="a"))  # xi 1.5
    acc.compose(GaussianEvent(sigma=2.0, sensitivity=1.0, count=9, party="b"))  # rho 1.125, no xi
    assert acc.rho("a") == pytest.approx(1.0) and acc.xi("a") == pytest.approx(1.5) and acc.xi("b") == 0.0
    # the largest party epsilon, not the epsilon of the largest rho: a's rho 1 and xi 1.5 beat b's rho 1.125
    assert acc.rho() == pytest.approx(1.125)
    assert acc.epsilon(1e-4) == pytest.approx(zcdp.epsilon_cks(1.0, 1e-4) + 1.5, rel=1e-12)
    assert acc.epsilon(1e-4, conversion="paper") == pytest.approx(zcdp.epsilon_paper(1.0, 1e-4) + 1.5)
    assert zcdp.ZCDPAccountant().compose(LossShiftEvent(epsilon=0.2, party="c")).epsilon(1e-4) == 0.2
    assert zcdp.ZCDPAccountant().epsilon(1e-4) == 0.0


def renyi(alpha: float, p: list[float], q: list[float]) -> float:
    return math.log(sum(pi ** alpha * qi ** (1 - alpha) for pi, qi in zip(p, q))) / (alpha - 1)


def test_a_loss_shift_is_not_eps_squared_over_two_zcdp():
    # a pair of distributions whose privacy loss is randomized response's (log-odds 3) shifted by at most
    # s = 0.1 at each output: +s on the likely output, the small rest on the other. Its Renyi divergence
    # grows by nearly s, more than the alpha s^2/2 a pure s-DP charge would allow (for alpha < 2/s), never
    # more than s
    e0, s = 3.0, 0.1
    p = math.exp(e0) / (1 + math.exp(e0))
    P, Q = [p, 1 - p], [1 - p, p]
    shifted = [(1 - p) * math.exp(-s), 1 - (1 - p) * math.exp(-s)]
    assert sum(shifted) == pytest.approx(1.0)
    shifts = [math.log(P[i] / shifted[i]) - math.log(P[i] / Q[i]) for i in range(2)]
    assert max(abs(x) for x in shifts) == pytest.approx(s)
    for alpha in (1.5, 2.0, 5.0, 10.0):
        grown = renyi(alpha, P, shifted) - renyi(alpha, P, Q)
        assert alpha * s ** 2 / 2 < grown <= s + 1e-12
