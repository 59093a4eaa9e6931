"""Tight accountants (RDP and PLD over dp-accounting) against closed forms and known values."""

import math

import numpy as np
import pytest
from scipy.optimize import brentq
from scipy.stats import norm

from ppml.privacy.accountants import PldAccountant, RdpAccountant, UnsupportedEventError, tight_epsilon
from ppml.privacy.bounds_admm_sharing import theorem3_sigma
from ppml.privacy.events import GaussianEvent, LaplaceEvent, SVTEvent, ZCDPEvent


def exact_gaussian_delta(epsilon: float, noise_multiplier: float) -> float:
    """delta(epsilon) of one Gaussian mechanism (Balle and Wang 2018, Theorem 8): the exact privacy curve."""
    z = noise_multiplier
    return norm.cdf(0.5 / z - epsilon * z) - math.exp(epsilon) * norm.cdf(-0.5 / z - epsilon * z)


def exact_gaussian_epsilon(noise_multiplier: float, delta: float) -> float:
    return brentq(lambda e: exact_gaussian_delta(e, noise_multiplier) - delta, 1e-9, 100.0)


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
