"""ADMM sharing's Theorem 3 and Corollary 1, pinned by hand-computed values."""

import math

import pytest
from scipy.stats import norm

from ppml.privacy.bounds_admm_sharing import corollary1, theorem3_sensitivity, theorem3_sigma
from ppml.privacy.paper_bounds import evaluate, get_bound


def test_theorem3_sensitivity_known_values():
    # 3 / (d_m rho) * (lam c1 + (1 + M rho) b1)
    assert theorem3_sensitivity(rho=1.0, lam=0.0, c1=1.0, b1=1.0, d_m=1.0, n_parties=2) == pytest.approx(9.0)
    # 3 / (4 * 0.5) * (2 * 3 + (1 + 3 * 0.5) * 1) = 1.5 * 8.5
    value = theorem3_sensitivity(rho=0.5, lam=2.0, c1=3.0, b1=1.0, d_m=4.0, n_parties=3)
    assert value == pytest.approx(12.75)


def test_theorem3_sigma_known_value_and_exact_privacy():
    sigma = theorem3_sigma(epsilon=0.5, delta=1e-5, sensitivity=2.0)
    assert sigma == pytest.approx(math.sqrt(2 * math.log(125000.0)) * 4.0)
    assert sigma == pytest.approx(19.37922, abs=1e-4)
    # the exact delta of this Gaussian mechanism at epsilon = 0.5 stays below the target (epsilon < 1)
    z = sigma / 2.0
    exact_delta = norm.cdf(0.5 / z - 0.5 * z) - math.exp(0.5) * norm.cdf(-0.5 / z - 0.5 * z)
    assert exact_delta <= 1e-5


def test_corollary1_known_value():
    out = corollary1(epsilon=0.1, delta=1e-6, epochs=100, delta_prime=1e-6)
    # sqrt(2 * 100 * ln 1e6) * 0.1 + 100 * 0.1 * (e^0.1 - 1) = 5.256522 + 1.051709
    assert out["epsilon"] == pytest.approx(6.308231, abs=1e-5)
    assert out["delta"] == pytest.approx(101e-6)
    assert out["per_epoch_epsilon_below_1"] is True
    large = corollary1(epsilon=2.0, delta=1e-6, epochs=1, delta_prime=1e-6)
    assert large["per_epoch_epsilon_below_1"] is False


def test_corollary1_grows_with_epochs():
    values = [corollary1(epsilon=0.5, delta=1e-5, epochs=t, delta_prime=1e-5)["epsilon"]
              for t in (1, 10, 100)]
    assert values == sorted(values) and values[0] < values[-1]


def test_registered_as_the_papers_bound():
    assert get_bound("admm_sharing.corollary1") is corollary1
    inputs = {"epsilon": 1.0, "delta": 1e-5, "epochs": 50, "delta_prime": 1e-5}
    assert evaluate({"name": "admm_sharing.corollary1", "inputs": inputs}) == corollary1(**inputs)


@pytest.mark.parametrize("call, message", [
    (lambda: theorem3_sensitivity(rho=1.0, lam=0.1, c1=1.0, b1=1.0, d_m=0.0, n_parties=2), "d_m must be"),
    (lambda: theorem3_sensitivity(rho=-1.0, lam=0.1, c1=1.0, b1=1.0, d_m=1.0, n_parties=2), "rho must be"),
    (lambda: theorem3_sensitivity(rho=1.0, lam=-0.1, c1=1.0, b1=1.0, d_m=1.0, n_parties=2), "lam must be"),
    (lambda: theorem3_sensitivity(rho=1.0, lam=0.1, c1=1.0, b1=1.0, d_m=1.0, n_parties=0),
     "n_parties must be"),
    (lambda: theorem3_sigma(epsilon=0.0, delta=1e-5, sensitivity=1.0), "epsilon must be"),
    (lambda: theorem3_sigma(epsilon=1.0, delta=1.0, sensitivity=1.0), "delta must lie"),
    (lambda: corollary1(epsilon=1.0, delta=1e-5, epochs=0, delta_prime=1e-5), "epochs must be"),
    (lambda: corollary1(epsilon=1.0, delta=1e-5, epochs=3, delta_prime=0.0), "delta_prime must lie"),
])
def test_invalid_inputs_name_the_parameter(call, message):
    with pytest.raises(ValueError, match=message):
        call()
