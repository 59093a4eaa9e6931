"""Tight accountants (RDP and PLD over dp-accounting) against closed forms and known values.

The references are exact: the analytic Gaussian mechanism's (epsilon, delta) curve (Balle and Wang 2018,
Theorem 8) and the optimal composition of pure-DP mechanisms (Kairouz, Oh and Viswanath 2015: k releases
of an epsilon-DP mechanism are at worst k releases of randomized response, whose privacy loss is
(2 i - k) epsilon with i binomial). PLD's discretization is pessimistic on a grid of step GRID = 1e-4: it
never reports below the exact epsilon, and a loss rounded up by at most one step per discretized
distribution bounds how far above it can be (one step for one event, whatever its count; k steps for k
pure-DP events of an epsilon off the grid, each rounded up before they are convolved).
"""

import math

import numpy as np
import pytest
from scipy.optimize import brentq
from scipy.stats import binom, norm

from ppml.privacy.accountants import (PldAccountant, RdpAccountant, UnsupportedEventError,
                                      randomized_response_pld, tight_epsilon)
from ppml.privacy.bounds_admm_sharing import theorem3_sigma
from ppml.privacy.events import (GaussianEvent, LaplaceEvent, LossShiftEvent, PureDPEvent, SVTEvent,
                                 ZCDPEvent, event_from_dict)

GRID = 1e-4  # PldAccountant's default value_discretization_interval


def exact_gaussian_delta(epsilon: float, noise_multiplier: float) -> float:
    """delta(epsilon) of one Gaussian mechanism (Balle and Wang 2018, Theorem 8): the exact privacy curve."""
    z = noise_multiplier
    return norm.cdf(0.5 / z - epsilon * z) - math.exp(epsilon) * norm.cdf(-0.5 / z - epsilon * z)


def exact_gaussian_epsilon(noise_multiplier: float, delta: float) -> float:
    """Bisection (Brent) on the exact curve, which decreases in epsilon."""
    return brentq(lambda e: exact_gaussian_delta(e, noise_multiplier) - delta, 1e-9, 100.0, xtol=1e-13)


def exact_pure_dp_delta(epsilon: float, step: float, k: int) -> float:
    """delta(epsilon) of k releases of a pure step-DP mechanism, optimally composed (randomized response)."""
    i = np.arange(k + 1)
    loss = (2 * i - k) * step
    weights = binom.pmf(i, k, 1.0 / (1.0 + math.exp(-step)))
    return float(np.sum(weights * np.clip(-np.expm1(epsilon - loss), 0.0, None)))


def exact_pure_dp_epsilon(step: float, k: int, delta: float) -> float:
    if exact_pure_dp_delta(0.0, step, k) <= delta:
        return 0.0
    return brentq(lambda e: exact_pure_dp_delta(e, step, k) - delta, 0.0, k * step, xtol=1e-13)


def cks_rdp_epsilon(noise_multiplier: float, delta: float) -> float:
    """min over a dense grid of orders of the Gaussian RDP curve converted by Canonne-Kamath-Steinke."""
    a = np.linspace(1.001, 500.0, 1_000_000)
    eps = a / (2 * noise_multiplier**2) + np.log((a - 1) / a) - (np.log(delta) + np.log(a)) / (a - 1)
    return float(eps.min())


def test_gaussian_one_release_matches_the_exact_curve():
    # sigma / sensitivity = 1 at delta = 1e-5: exact epsilon 4.3772 (PLD is exact up to its grid)
    exact = exact_gaussian_epsilon(1.0, 1e-5)
    assert exact == pytest.approx(4.37718, abs=1e-4)
    pld = PldAccountant().compose(GaussianEvent(sigma=1.0, sensitivity=1.0)).epsilon(1e-5)
    assert exact - 1e-9 <= pld <= exact + 1e-3
    rdp = RdpAccountant().compose(GaussianEvent(sigma=1.0, sensitivity=1.0)).epsilon(1e-5)
    continuous = cks_rdp_epsilon(1.0, 1e-5)
    assert continuous - 1e-9 <= rdp <= continuous * 1.001
    assert rdp > pld  # RDP is valid but looser


def test_only_the_noise_multiplier_matters():
    a = PldAccountant().compose(GaussianEvent(sigma=3.0, sensitivity=2.0)).epsilon(1e-6)
    b = PldAccountant().compose(GaussianEvent(sigma=1.5, sensitivity=1.0)).epsilon(1e-6)
    assert a == pytest.approx(b, rel=1e-12)


def test_composition_of_gaussians_is_one_gaussian_of_smaller_noise():
    # T releases with noise multiplier z compose exactly into one with z / sqrt(T)
    T, z, delta = 100, 5.0, 1e-5
    exact = exact_gaussian_epsilon(z / math.sqrt(T), delta)
    for accountant in (PldAccountant().compose(GaussianEvent(sigma=z), count=T),
                       PldAccountant().compose(GaussianEvent(sigma=z, count=T))):
        assert accountant.epsilon(delta) == pytest.approx(exact, abs=1e-3)
    one_by_one = RdpAccountant()
    for _ in range(T):
        one_by_one.compose(GaussianEvent(sigma=z))
    at_once = RdpAccountant().compose(GaussianEvent(sigma=z, count=4), count=25)
    assert one_by_one.epsilon(delta) == pytest.approx(at_once.epsilon(delta), rel=1e-12)


def test_zcdp_is_the_gaussian_rdp_curve():
    # a Gaussian of noise multiplier z is 1/(2 z^2)-zCDP with exactly that RDP curve
    z = 2.0
    zcdp = RdpAccountant().compose(ZCDPEvent(rho=1 / (2 * z**2)), count=10).epsilon(1e-5)
    gauss = RdpAccountant().compose(GaussianEvent(sigma=z), count=10).epsilon(1e-5)
    assert zcdp == pytest.approx(gauss, rel=1e-12)
    with pytest.raises(UnsupportedEventError, match="PLD"):
        PldAccountant().compose(ZCDPEvent(rho=0.1))


def test_laplace_approaches_pure_dp():
    # Lap(b) on a sensitivity-1 query is (1/b, 0)-DP; at tiny delta the tight epsilon is just below 1/b
    eps = PldAccountant().compose(LaplaceEvent(scale=2.0, sensitivity=1.0)).epsilon(1e-12)
    assert 0.5 - 1e-3 <= eps <= 0.5 + 1e-6
    assert RdpAccountant().compose(LaplaceEvent(scale=2.0, sensitivity=1.0)).epsilon(1e-12) >= eps


def test_unsupported_events_raise():
    for accountant in (RdpAccountant(), PldAccountant()):
        with pytest.raises(UnsupportedEventError, match="svt"):
            accountant.compose(SVTEvent(c=1, eps1=0.1, eps2=0.1))
    with pytest.raises(UnsupportedEventError, match="svt"):
        tight_epsilon([SVTEvent(c=1, eps1=0.1, eps2=0.1, party="a")], 1e-5)
    with pytest.raises(ValueError, match="count"):
        RdpAccountant().compose(GaussianEvent(sigma=1.0), count=0)
    with pytest.raises(ValueError, match="delta"):
        RdpAccountant().compose(GaussianEvent(sigma=1.0)).epsilon(0.0)


def test_tight_epsilon_composes_parties_apart_and_reports_the_worst():
    events = [GaussianEvent(sigma=4.0, count=50, party="party1"),
              GaussianEvent(sigma=8.0, count=50, party="party2"),
              ZCDPEvent(rho=0.001, count=10, party="party2")]
    out = tight_epsilon(events, 1e-5)
    p1 = exact_gaussian_epsilon(4.0 / math.sqrt(50), 1e-5)
    assert out["parties"]["party1"]["epsilon"] == pytest.approx(p1, abs=1e-3)
    assert out["parties"]["party1"]["method"] == "pld"
    assert out["parties"]["party2"]["method"] == "rdp"  # its zCDP event only composes in RDP
    assert out["epsilon"] == max(v["epsilon"] for v in out["parties"].values())
    assert out["delta"] == 1e-5
    assert tight_epsilon([], 1e-5)["epsilon"] == 0.0
    assert tight_epsilon([GaussianEvent(sigma=0.0, party="a")], 1e-5)["epsilon"] == math.inf


@pytest.mark.parametrize("epsilon", [0.1, 0.5, 0.9])
def test_classical_calibration_is_private_by_the_tight_accountants(epsilon):
    # inverse check: sigma from the classical formula, then the accountants' epsilon at the same delta
    delta = 1e-5
    sigma = theorem3_sigma(epsilon=epsilon, delta=delta, sensitivity=1.0)
    tight = tight_epsilon([GaussianEvent(sigma=sigma, sensitivity=1.0, party="a")], delta)["epsilon"]
    assert tight <= epsilon
    assert tight == pytest.approx(exact_gaussian_epsilon(sigma, delta), abs=1e-3)


@pytest.mark.parametrize("noise_multiplier", [0.5, 1.0, 2.0, 5.0, 10.0])
def test_pld_of_one_gaussian_is_the_analytic_gaussian_mechanism_from_above(noise_multiplier):
    # pessimistic: never below the exact epsilon; at most one grid step above (the discretized curve is exact
    # at the grid's losses), 1e-4 absolute, i.e. within 1e-3 relative for every epsilon >= 0.1 here
    delta = 1e-5
    exact = exact_gaussian_epsilon(noise_multiplier, delta)
    pld = PldAccountant().compose(GaussianEvent(sigma=2.0 * noise_multiplier, sensitivity=2.0)).epsilon(delta)
    assert exact - 1e-9 <= pld <= exact + GRID
    assert pld == pytest.approx(exact, rel=1e-3)


@pytest.mark.parametrize("noise_multiplier, k", [(3.0, 3), (10.0, 10)])
def test_pld_composes_separate_gaussians_into_one_of_noise_divided_by_sqrt_k(noise_multiplier, k):
    # k events composed one by one (k FFT convolutions of discretized distributions), not one event of count k
    delta = 1e-5
    exact = exact_gaussian_epsilon(noise_multiplier / math.sqrt(k), delta)
    accountant = PldAccountant()
    for _ in range(k):
        accountant.compose(GaussianEvent(sigma=noise_multiplier))
    assert exact - 1e-9 <= accountant.epsilon(delta) <= exact + GRID


@pytest.mark.parametrize("epsilon", [0.5, 1.0, 0.041443])  # 0.041443 is off the grid: PLD rounds it up
@pytest.mark.parametrize("delta", [1e-3, 1e-5, 1e-12])
def test_one_pure_dp_release_costs_its_epsilon_at_any_delta(epsilon, delta):
    # the exact curve of one epsilon-DP release (randomized response) reaches delta at
    # log(e^eps - delta (1 + e^eps)) = epsilon - O(delta): epsilon itself, up to delta and the grid step
    exact = math.log(math.exp(epsilon) - delta * (1.0 + math.exp(epsilon)))
    assert exact == pytest.approx(exact_pure_dp_epsilon(epsilon, 1, delta), abs=1e-12)
    pld = PldAccountant().compose(PureDPEvent(epsilon=epsilon)).epsilon(delta)
    assert exact - 1e-12 <= pld <= epsilon + GRID
    assert pld == pytest.approx(epsilon, abs=GRID + 2 * delta)


def test_one_randomized_response_is_dp_accountings_pure_dp_distribution():
    from dp_accounting.pld import common, privacy_loss_distribution

    for epsilon in (0.041443, 0.5, 2.0):
        ours = randomized_response_pld(epsilon, 1, GRID)
        theirs = privacy_loss_distribution.from_privacy_parameters(
            common.DifferentialPrivacyParameters(epsilon, 0.0), value_discretization_interval=GRID)
        for delta in (1e-2, 1e-5):
            assert ours.get_epsilon_for_delta(delta) == pytest.approx(theirs.get_epsilon_for_delta(delta),
                                                                      abs=1e-12)
    with pytest.raises(ValueError, match="releases"):
        randomized_response_pld(0.5, 0, GRID)


@pytest.mark.parametrize("epsilon, k, delta", [(0.1, 30, 1e-5), (0.041443, 30, 1e-4), (0.5, 10, 1e-6),
                                               (1.0, 5, 1e-5)])
def test_pure_dp_releases_compose_optimally_by_pld(epsilon, k, delta):
    exact = exact_pure_dp_epsilon(epsilon, k, delta)
    events = [PureDPEvent(epsilon=epsilon, count=k, party="a")]
    pld = PldAccountant().compose(events[0]).epsilon(delta)
    one_by_one = PldAccountant()
    for _ in range(k):
        one_by_one.compose(PureDPEvent(epsilon=epsilon))
    rdp = RdpAccountant().compose(events[0]).epsilon(delta)
    assert exact - 1e-9 <= pld <= exact + GRID  # one event of count k: its k-fold loss is discretized once
    assert exact - 1e-9 <= one_by_one.epsilon(delta) <= exact + k * GRID  # k events: each rounded up
    assert pld < k * epsilon  # below basic composition
    assert pld < rdp  # and below RDP (randomized response's Renyi curve, converted)
    assert tight_epsilon(events, delta)["epsilon"] == pld


@pytest.mark.parametrize("epsilon", [0.05, 0.5, 3.0])
def test_rdp_of_pure_dp_is_the_randomized_response_curve(epsilon):
    # D_alpha of randomized response with log-odds eps,
    # log((e^(alpha eps) + e^((1 - alpha) eps)) / (1 + e^eps)) / (alpha - 1), the largest of any eps-DP
    # mechanism; converted to (epsilon, delta) as dp-accounting does (Canonne-Kamath-Steinke, Prop. 12)
    orders = np.array([1.5, 2.0, 4.0, 8.0, 16.0, 64.0, 256.0])
    k, delta = 7, 1e-6
    log_moment = np.logaddexp(orders * epsilon, (1 - orders) * epsilon) - np.logaddexp(0.0, epsilon)
    curve = log_moment / (orders - 1)
    by_hand = min(k * r + math.log1p(-1 / a) - math.log(delta * a) / (a - 1) for a, r in zip(orders, curve))
    rdp = RdpAccountant(orders).compose(PureDPEvent(epsilon=epsilon), count=k).epsilon(delta)
    assert rdp == pytest.approx(max(by_hand, 0.0), rel=1e-9)
    assert np.all(curve <= np.minimum(epsilon, orders * epsilon**2 / 2) + 1e-15)  # tighter than zCDP and DP


def test_pld_mixes_gaussian_and_pure_dp_events_of_a_party():
    # Gaussian releases and pure-DP releases (AboveThreshold instances, say) of the same party
    events = [GaussianEvent(sigma=20.0, count=30, party="a"), PureDPEvent(epsilon=0.01, count=30, party="a"),
              GaussianEvent(sigma=40.0, count=30, party="a")]
    out = tight_epsilon(events, 1e-4)
    assert out["method"] == "pld" and out["fallback_reason"] is None
    assert out["parties"]["a"] == {"epsilon": out["epsilon"], "method": "pld", "fallback_reason": None}
    rdp = RdpAccountant()
    for event in events:
        rdp.compose(event)
    gaussians_only = tight_epsilon([events[0], events[2]], 1e-4)["epsilon"]
    assert gaussians_only < out["epsilon"] < min(rdp.epsilon(1e-4), gaussians_only + 30 * 0.01)


def test_a_party_with_a_zcdp_event_is_composed_by_rdp_and_says_why():
    events = [GaussianEvent(sigma=4.0, count=30, party="a"), ZCDPEvent(rho=0.01, count=30, party="a"),
              GaussianEvent(sigma=4.0, count=30, party="b")]
    out = tight_epsilon(events, 1e-5)
    a, b = out["parties"]["a"], out["parties"]["b"]
    rdp = RdpAccountant().compose(events[0]).compose(events[1]).epsilon(1e-5)
    assert a["method"] == "rdp" and a["epsilon"] == rdp
    assert "zcdp" in a["fallback_reason"] and "30" in a["fallback_reason"] and "RDP" in a["fallback_reason"]
    assert set(a) == {"epsilon", "method", "fallback_reason"}  # no PLD value is reported for this party
    assert b["method"] == "pld" and b["fallback_reason"] is None
    assert b["epsilon"] == pytest.approx(exact_gaussian_epsilon(4.0 / math.sqrt(30), 1e-5), abs=GRID)
    # party a spends more (its zCDP events on top of the same Gaussians): the run's method is its method
    assert out["epsilon"] == a["epsilon"] and out["method"] == "rdp"
    assert out["fallback_reason"] == a["fallback_reason"]


def test_pure_dp_events_round_trip_and_old_zcdp_ledgers_still_read():
    event = PureDPEvent(epsilon=0.25, count=30, party="agent1")
    assert event.to_dict() == {"kind": "pure_dp", "count": 30, "party": "agent1", "epsilon": 0.25}
    assert event_from_dict(event.to_dict()) == event
    # a ledger written before pure_dp existed records a pure mechanism as zCDP of eps^2/2: read as zCDP,
    # accounted (validly, more loosely) by RDP
    old = event_from_dict({"kind": "zcdp", "count": 30, "party": "agent1", "rho": 0.25**2 / 2})
    assert old == ZCDPEvent(rho=0.03125, count=30, party="agent1")
    assert tight_epsilon([old], 1e-4)["method"] == "rdp"
    assert tight_epsilon([old], 1e-4)["epsilon"] > tight_epsilon([event], 1e-4)["epsilon"]


def test_pure_dp_events_of_bad_or_infinite_epsilon():
    assert tight_epsilon([PureDPEvent(epsilon=math.inf, party="a")], 1e-5)["epsilon"] == math.inf
    for accountant in (PldAccountant(), RdpAccountant()):
        with pytest.raises(ValueError, match="epsilon must be >= 0"):
            accountant.compose(PureDPEvent(epsilon=-0.1, party="a"))
        with pytest.raises(ValueError, match="epsilon must be >= 0"):
            accountant.compose(PureDPEvent(epsilon=math.nan, party="a"))
    assert PldAccountant().compose(PureDPEvent(epsilon=0.0, count=5)).epsilon(1e-5) == 0.0


@pytest.mark.parametrize("noise_multiplier, shift, k",
                         [(1.0, 0.3, 1), (5.0, 0.0013, 30), (2.0, 0.041443, 10)])
def test_a_loss_shift_moves_the_gaussian_curve_by_exactly_its_epsilon(noise_multiplier, shift, k):
    # one Gaussian plus k loss shifts of `shift`: delta(eps) is the Gaussian's delta(eps - k shift), and
    # epsilon(delta) the Gaussian's plus k shift (the Gaussian's own discretization: at most one grid step)
    total = k * shift
    gauss = PldAccountant().compose(GaussianEvent(sigma=noise_multiplier))
    shifted = PldAccountant().compose(GaussianEvent(sigma=noise_multiplier))
    shifted.compose(LossShiftEvent(epsilon=shift, count=k))
    assert shifted.loss_shift == pytest.approx(total, rel=1e-12)
    for delta in (1e-3, 1e-5, 1e-8):
        exact = exact_gaussian_epsilon(noise_multiplier, delta) + total
        assert exact - 1e-9 <= shifted.epsilon(delta) <= exact + GRID
        assert shifted.epsilon(delta) == pytest.approx(gauss.epsilon(delta) + total, abs=1e-12)
    for eps in (0.1, 0.5, 1.0, 2.0):
        assert shifted.delta(eps + total) == pytest.approx(gauss.delta(eps), rel=1e-9)
        # an upper bound on the exact Gaussian's shifted curve
        assert shifted.delta(eps + total) >= exact_gaussian_delta(eps, noise_multiplier) - 1e-12
    assert tight_epsilon([GaussianEvent(sigma=noise_multiplier, party="a"),
                          LossShiftEvent(epsilon=shift, count=k, party="a")], 1e-5)["method"] == "pld"


@pytest.mark.parametrize("shift, k, noise_multiplier, delta", [(0.3, 1, 1.0, 1e-5), (0.01, 30, 20.0, 1e-4),
                                                               (0.0013, 30, 5.0, 1e-4), (0.5, 10, 3.0, 1e-6)])
def test_a_loss_shift_is_never_cheaper_than_an_independent_pure_dp_release(shift, k, noise_multiplier, delta):
    # randomized response's loss is +-shift, at most the constant +shift, so reading the shift as an
    # independent pure-DP release can only understate it (by up to the whole shift when alone)
    gaussian = GaussianEvent(sigma=noise_multiplier, count=k, party="a")
    as_shift = tight_epsilon([gaussian, LossShiftEvent(epsilon=shift, count=k, party="a")], delta)["epsilon"]
    as_rr = tight_epsilon([gaussian, PureDPEvent(epsilon=shift, count=k, party="a")], delta)["epsilon"]
    assert as_shift >= as_rr - GRID  # RR's discretization may round it up by one step
    alone = PldAccountant().compose(LossShiftEvent(epsilon=shift, count=k))
    assert alone.epsilon(delta) == pytest.approx(k * shift, rel=1e-12)  # whatever delta
    assert exact_pure_dp_epsilon(shift, k, delta) <= alone.epsilon(delta) + 1e-12
    rr = PldAccountant().compose(gaussian).compose(PureDPEvent(epsilon=shift, count=k))
    shifted = PldAccountant().compose(gaussian).compose(LossShiftEvent(epsilon=shift, count=k))
    for eps in (0.05, 0.3, 1.0, 3.0):
        assert shifted.delta(eps) >= rr.delta(eps + GRID) - 1e-12


@pytest.mark.parametrize("shift, k", [(0.3, 1), (0.0013, 30)])
def test_rdp_of_a_loss_shift_adds_its_epsilon_at_every_order(shift, k):
    # the curve alpha -> D_alpha + k shift converts (Canonne-Kamath-Steinke, at each order) to the
    # unshifted epsilon plus k shift: an upper bound on PLD's
    orders = [1.5, 2.0, 4.0, 8.0, 16.0, 64.0, 256.0]
    gaussian = GaussianEvent(sigma=4.0, count=k)
    plain = RdpAccountant(orders).compose(gaussian)
    shifted = RdpAccountant(orders).compose(gaussian).compose(LossShiftEvent(epsilon=shift, count=k))
    assert shifted.epsilon(1e-5) == pytest.approx(plain.epsilon(1e-5) + k * shift, abs=1e-9)
    pld = PldAccountant().compose(gaussian).compose(LossShiftEvent(epsilon=shift, count=k)).epsilon(1e-5)
    assert pld <= shifted.epsilon(1e-5)
    default_orders = RdpAccountant().compose(gaussian).compose(LossShiftEvent(epsilon=shift, count=k))
    assert default_orders.epsilon(1e-5) >= pld


def test_loss_shift_events_round_trip_and_refuse_bad_epsilon():
    event = LossShiftEvent(epsilon=0.0013, count=30, party="agent1")
    assert event.to_dict() == {"kind": "loss_shift", "count": 30, "party": "agent1", "epsilon": 0.0013}
    assert event_from_dict(event.to_dict()) == event
    for bad in (-0.1, math.nan, math.inf):
        with pytest.raises(ValueError, match="loss_shift event of party 'agent1': epsilon must be finite"):
            LossShiftEvent(epsilon=bad, party="agent1")
    with pytest.raises(ValueError, match="epsilon must be finite"):
        event_from_dict({"kind": "loss_shift", "count": 1, "party": "a", "epsilon": -1.0})
    assert PldAccountant().compose(LossShiftEvent(epsilon=0.0, count=5)).epsilon(1e-5) == 0.0
