"""ADMM sharing's own privacy bounds: Theorem 3 (per-epoch Gaussian calibration) and Corollary 1.

Pure formulas, no bookkeeping. A calibrated run of :mod:`ppml.algorithms.admm_sharing` names
``admm_sharing.corollary1`` as its paper bound; the account stage evaluates it through
:mod:`ppml.privacy.paper_bounds` beside the tight bound of :mod:`ppml.privacy.accountants` for the same
noise and sensitivity.

Theorem 3 bounds the L2 sensitivity of party m's shared value ``D_m x_m`` to one changed row of ``D_m`` under
Assumption 2 (``||x_m||``, the samples' ``z_i`` and ``y_i`` bounded by ``b1``; ``||grad R_m|| <= c1``; rows of
``D_m`` of norm at most 1; ``D_m^T D_m`` with smallest eigenvalue ``d_m > 0``) by

    C_m = 3 / (d_m rho) * (lam c1 + (1 + M rho) b1),

and calibrates the Gaussian mechanism classically, ``sigma_m = sqrt(2 ln(1.25/delta)) C_m / epsilon``, which
makes one epoch (epsilon, delta)-DP for party m's rows. That classical calibration (Dwork and Roth, Theorem
A.1) is proven only for ``epsilon < 1``; :func:`corollary1` reports whether the condition holds. Corollary 1
composes T epochs by the advanced composition theorem of Dwork, Rothblum and Vadhan:

    epsilon_T = sqrt(2 T ln(1/delta')) epsilon + T epsilon (e^epsilon - 1),   delta_T = T delta + delta'.

References
----------
.. [1] Y. Hu, D. Niu, J. Yang, S. Zhou, "Learning Privately over Distributed Features: An ADMM Sharing
   Approach", AAAI 2020 (arXiv:1907.07735), Assumption 2, Theorem 3, Corollary 1.
.. [2] C. Dwork, G. N. Rothblum, S. Vadhan, "Boosting and Differential Privacy", FOCS 2010, Theorem III.3.
.. [3] C. Dwork, A. Roth, "The Algorithmic Foundations of Differential Privacy", 2014, Theorem A.1.
"""

from __future__ import annotations

import math
from typing import Any

__all__ = ["theorem3_sensitivity", "theorem3_sigma", "corollary1"]


def _positive(name: str, value: float) -> None:
    if not (isinstance(value, (int, float)) and value > 0 and math.isfinite(value)):
        raise ValueError(f"{name} must be a finite number > 0, got {value!r}")


def _probability(name: str, value: float) -> None:
    if not (isinstance(value, (int, float)) and 0 < value < 1):
        raise ValueError(f"{name} must lie in (0, 1), got {value!r}")


def theorem3_sensitivity(*, rho: float, lam: float, c1: float, b1: float, d_m: float,
                         n_parties: int) -> float:
    """Theorem 3's L2 sensitivity ``C_m`` of party m's shared value ``D_m x_m`` in one epoch.

    Parameters
    ----------
    rho : float
        ADMM penalty.
    lam : float
        Weight of the regularizer ``R_m`` in the problem the run solves, on the paper's scale: the summed
        loss ``sum_i l_i + lam/2 ||x||^2`` (the paper's lambda; N times the weight of the mean-form f).
    c1 : float
        Bound on ``||grad R_m(x_m)||`` over the feasible region (Assumption 2).
    b1 : float
        Bound on ``||x_m||`` and on every sample's ``|z_i|`` and ``|y_i|`` (Assumption 2).
    d_m : float
        Smallest eigenvalue of ``D_m^T D_m``; must be > 0.
    n_parties : int
        Number of parties M.

    Returns
    -------
    float
        ``3 / (d_m rho) * (lam c1 + (1 + M rho) b1)``.
    """
    for name, value in (("rho", rho), ("c1", c1), ("b1", b1), ("d_m", d_m)):
        _positive(name, value)
    if not (isinstance(lam, (int, float)) and lam >= 0 and math.isfinite(lam)):
        raise ValueError(f"lam must be a finite number >= 0, got {lam!r}")
    if not (isinstance(n_parties, int) and n_parties >= 1):
        raise ValueError(f"n_parties must be an integer >= 1, got {n_parties!r}")
    return 3.0 / (d_m * rho) * (lam * c1 + (1.0 + n_parties * rho) * b1)


def theorem3_sigma(*, epsilon: float, delta: float, sensitivity: float) -> float:
    """Noise std making one release (epsilon, delta)-DP by the classical Gaussian mechanism (Theorem 3)."""
    _positive("epsilon", epsilon)
    _probability("delta", delta)
    _positive("sensitivity", sensitivity)
    return math.sqrt(2.0 * math.log(1.25 / delta)) * sensitivity / epsilon


def corollary1(*, epsilon: float, delta: float, epochs: int, delta_prime: float) -> dict[str, Any]:
    """Corollary 1: the privacy of ``epochs`` epochs, each (epsilon, delta)-DP, by advanced composition.

    Parameters
    ----------
    epsilon, delta : float
        The per-epoch guarantee of Theorem 3.
    epochs : int
        Number of epochs T that released shared values.
    delta_prime : float
        The slack of the advanced composition theorem.

    Returns
    -------
    dict
        ``epsilon`` and ``delta`` of the whole run, the inputs, and ``per_epoch_epsilon_below_1``: whether
        the classical Gaussian calibration behind Theorem 3 is proven for this per-epoch epsilon.

    Raises
    ------
    ValueError
        For inputs out of range, and when the composed epsilon is not a finite float (a per-epoch epsilon
        whose e^epsilon overflows).
    """
    _positive("epsilon", epsilon)
    _probability("delta", delta)
    _probability("delta_prime", delta_prime)
    if not (isinstance(epochs, int) and epochs >= 1):
        raise ValueError(f"epochs must be an integer >= 1, got {epochs!r}")
    try:
        total = (math.sqrt(2.0 * epochs * math.log(1.0 / delta_prime)) * epsilon
                 + epochs * epsilon * math.expm1(epsilon))
    except OverflowError:  # e^epsilon beyond every float (epsilon above about 709.8)
        total = math.inf
    if not math.isfinite(total):
        raise ValueError(f"no finite bound: T epsilon (e^epsilon - 1) overflows for epsilon = {epsilon!r} "
                         f"and T = {epochs}")
    return {
        "epsilon": total,
        "delta": epochs * delta + delta_prime,
        "per_epoch_epsilon": epsilon,
        "per_epoch_delta": delta,
        "epochs": epochs,
        "delta_prime": delta_prime,
        "per_epoch_epsilon_below_1": epsilon < 1.0,
    }
