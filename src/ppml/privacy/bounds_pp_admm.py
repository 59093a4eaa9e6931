"""PP-ADMM's and IPP-ADMM's own privacy accounting (Ding et al., CIKM 2020) and its inverse, the budget split.

The paper tracks each agent's privacy loss in zCDP and converts the total to (epsilon, delta)-DP with
``epsilon = rho + 2 sqrt(rho ln(1/delta))``. Per agent and iteration, Algorithm 1 spends

- rho_i1 on the objective perturbation, calibrated as an (epsilon_i1, delta_i1)-DP step with
  ``epsilon_i1 = rho_i1 + 2 sqrt(rho_i1 ln(1/delta_i1))`` (so rho_i1 is recovered from (epsilon_i1, delta_i1)
  by the exact inverse, :func:`ppml.privacy.zcdp.rho_exact`), and
- rho_i2 on the Gaussian output perturbation;

T iterations compose to ``T (rho_i1 + rho_i2)`` (Theorem 3.3); agents hold disjoint rows, so the run's rho is
the largest agent's (parallel composition; with the equal split of the paper all agents spend the same).
IPP-ADMM (Theorem 4.1, :func:`theorem_4_1`) charges the SVT ``rho'_1 = (eps1 + eps2)^2 / 2`` (Lemma 4.3)
plus **c** releases, ``rho'_i = rho'_1 + c (rho_i1 + rho_i2)``. The earlier reconstruction charged all T
rounds plus ``(eps1 + eps2)^2 / (2c)``; it stays as :func:`theorem_4_1_reconstructed` for
``variant: reconstructed`` runs.

Theorems 3.1, 3.3 and 4.1 are transcribed in ``docs/specs/pp_admm_paper.md``; how IPP-ADMM's budget is split
between the SVT and the c releases is not stated by the paper (:func:`ipp_admm_budget`, UNVERIFIED). Each bound function takes
its inputs as keywords (what a run's ledger records under ``paper_bound``) and returns ``epsilon``,
``delta``, ``rho`` and ``epsilon_cks`` (the same rho converted by Canonne-Kamath-Steinke).

The baselines (DVP, M-ADMM, R-ADMM) release pure-DP steps; :func:`pure_dp_composition` expresses their loss
the same way, each step of epsilon beta costing beta^2 / 2 in zCDP, as the paper compares them.

References
----------
.. [1] J. Ding, J. Wang, G. Liang, J. Bi, M. Pan, "Towards Plausible Differentially Private ADMM Based
   Distributed Machine Learning", CIKM 2020 (arXiv 2008.04500), Theorems 3.1, 3.3, 4.1 and Section 5.
.. [2] M. Bun, T. Steinke, "Concentrated Differential Privacy", TCC 2016.
.. [3] C. Canonne, G. Kamath, T. Steinke, "The Discrete Gaussian for Differential Privacy", NeurIPS 2020.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from ppml.privacy import svt, zcdp

__all__ = ["PPBudget", "pp_admm_budget", "ipp_admm_budget", "theorem_3_1", "theorem_3_3", "theorem_4_1",
           "theorem_4_1_reconstructed", "pure_dp_composition"]


def _result(rho: float, delta: float, **extra: Any) -> dict[str, Any]:
    return {"epsilon": zcdp.epsilon_paper(rho, delta), "delta": delta, "rho": rho,
            "epsilon_cks": zcdp.epsilon_cks(rho, delta), **extra}


def theorem_3_1(*, epsilon_i1: float, delta_i1: float, rho_i2: float, delta: float) -> dict[str, Any]:
    """One agent, one PP-ADMM iteration: ``rho = rho_i1 + rho_i2`` with rho_i1 from (epsilon_i1, delta_i1)."""
    rho_i1 = zcdp.rho_exact(epsilon_i1, delta_i1)
    return _result(rho_i1 + rho_i2, delta, rho_i1=rho_i1)


def theorem_3_3(*, epsilon_i1: float, delta_i1: float, rho_i2: float, T: int, delta: float) -> dict[str, Any]:
    """PP-ADMM over T iterations: ``rho = T (rho_i1 + rho_i2)`` for every agent (the max over agents)."""
    step = theorem_3_1(epsilon_i1=epsilon_i1, delta_i1=delta_i1, rho_i2=rho_i2, delta=delta)
    return _result(T * step["rho"], delta, rho_i1=step["rho_i1"])


def theorem_4_1(*, epsilon_i1: float, delta_i1: float, rho_i2: float, c: int, eps1: float, eps2: float,
                delta: float) -> dict[str, Any]:
    """IPP-ADMM as Theorem 4.1 states it: ``rho'_i = (eps1 + eps2)^2 / 2 + c (rho_i1 + rho_i2)``.

    At most c models are released; the paper charges only those (Lemma 4.2/4.3 cover the SVT's queries,
    which read the unreleased candidates).
    """
    step = theorem_3_1(epsilon_i1=epsilon_i1, delta_i1=delta_i1, rho_i2=rho_i2, delta=delta)
    rho_svt = zcdp.rho_pure(eps1 + eps2)
    rho_gaussian = c * step["rho"]
    return _result(rho_svt + rho_gaussian, delta, rho_gaussian=rho_gaussian, rho_svt=rho_svt)


def theorem_4_1_reconstructed(*, epsilon_i1: float, delta_i1: float, rho_i2: float, T: int, c: int,
                              eps1: float, eps2: float, delta: float) -> dict[str, Any]:
    """The earlier reconstruction (``variant: reconstructed``): IPP-ADMM over T iterations: the Gaussian steps of every iteration plus the SVT with c broadcasts.

    Every iteration computes a perturbed model that the SVT's quality function reads, so all T iterations
    pay ``rho_i1 + rho_i2`` whether or not the model is broadcast; the SVT adds ``(eps1 + eps2)^2 / (2c)``.
    """
    gaussian = theorem_3_3(epsilon_i1=epsilon_i1, delta_i1=delta_i1, rho_i2=rho_i2, T=T, delta=delta)
    rho_svt = zcdp.rho_svt(c=c, eps1=eps1, eps2=eps2)
    return _result(gaussian["rho"] + rho_svt, delta, rho_gaussian=gaussian["rho"], rho_svt=rho_svt)


def pure_dp_composition(*, step_epsilons: Mapping[str, Sequence[float]], delta: float) -> dict[str, Any]:
    """The baselines' loss in PP-ADMM's terms: each pure beta-DP step costs beta^2/2; the largest agent counts

    Parameters
    ----------
    step_epsilons : mapping of agent name to list of float
        The pure-DP epsilon of every release of that agent (an empty list for none).
    delta : float

    Returns
    -------
    dict
        ``epsilon`` and ``epsilon_cks`` (zCDP conversions), ``epsilon_linear`` (basic composition, the
        largest agent's sum of betas), ``rho`` and ``delta``.
    """
    if not step_epsilons:
        raise ValueError("step_epsilons names no agent")
    rho = max(sum(zcdp.rho_pure(b) for b in betas) for betas in step_epsilons.values())
    linear = max(math.fsum(betas) for betas in step_epsilons.values())
    return _result(rho, delta, epsilon_linear=linear)


@dataclass(frozen=True)
class PPBudget:
    """How a target (epsilon, delta) is spent by one agent of PP-ADMM or IPP-ADMM (paper §5 settings).

    Attributes
    ----------
    rho_total : float
        The agent's whole budget, from the target by the chosen calibration.
    rho_svt : float
        The SVT's share (IPP-ADMM only; 0 for PP-ADMM).
    rho_i1, rho_i2 : float
        Per iteration: objective perturbation and output perturbation.
    epsilon_i1, delta_i1 : float
        The objective-perturbation step as (epsilon, delta)-DP,
        ``epsilon_i1 = rho_i1 + 2 sqrt(rho_i1 ln 1/delta_i1)``.
    epsilon_i3 : float
        The part of epsilon_i1 left to the objective noise in Algorithm 1 (the rest bounds the Jacobian).
    eps1, eps2 : float
        SVT budgets of the threshold and the queries (0 for PP-ADMM).
    """

    rho_total: float
    rho_svt: float
    rho_i1: float
    rho_i2: float
    epsilon_i1: float
    delta_i1: float
    epsilon_i3: float
    eps1: float
    eps2: float


def ipp_admm_budget(*, epsilon: float, delta: float, c: int, splits: float, delta_i1: float,
                    eps3_ratio: float, calibration: str, svt_share: float) -> PPBudget:
    """IPP-ADMM's split of a target so that Theorem 4.1's bound meets it (the paper is silent: UNVERIFIED).

    Our choice: a fraction `svt_share` of rho_total pays the SVT, ``(eps1 + eps2)^2 / 2 = svt_share rho_total``
    (eps1 : eps2 = 1 : (2c)^(2/3), Lyu-Su-Li's balance); the rest pays the at most c releases,
    ``rho_i1 + rho_i2 = (1 - svt_share) rho_total / c``, split by `splits` as in §5.
    """
    if not 0 < splits < 1:
        raise ValueError(f"splits must lie in (0, 1), got {splits!r}")
    if not 0 < eps3_ratio < 1:
        raise ValueError(f"eps3_ratio must lie in (0, 1), got {eps3_ratio!r}")
    if not 0 < svt_share < 1:
        raise ValueError(f"svt_share must lie in (0, 1), got {svt_share!r}")
    if c < 1:
        raise ValueError(f"c must be >= 1, got {c!r}")
    rho_total = zcdp.rho_from_epsilon(epsilon, delta, calibration=calibration)
    rho_svt = svt_share * rho_total
    eps1, eps2 = svt.split_budget(math.sqrt(2.0 * rho_svt), c)
    per_release = (rho_total - rho_svt) / c
    rho_i1, rho_i2 = per_release * (1.0 - splits), per_release * splits
    epsilon_i1 = zcdp.epsilon_paper(rho_i1, delta_i1)
    return PPBudget(rho_total=rho_total, rho_svt=rho_svt, rho_i1=rho_i1, rho_i2=rho_i2, epsilon_i1=epsilon_i1,
                    delta_i1=delta_i1, epsilon_i3=eps3_ratio * epsilon_i1, eps1=eps1, eps2=eps2)


def pp_admm_budget(*, epsilon: float, delta: float, T: int, splits: float, delta_i1: float, eps3_ratio: float,
                   calibration: str, svt_share: float = 0.0, c: int = 1) -> PPBudget:
    """Split a target (epsilon, delta) as the paper does (DESIGN.md §8), optionally reserving an SVT share.

    ``rho_total`` comes from the target by `calibration`; a fraction `svt_share` goes to the SVT (spent as
    ``(eps1 + eps2)^2 / (2c)``, split 1 : (2c)^(2/3)); the rest is spread over T iterations, a fraction
    `splits` to the output perturbation: ``rho_i1 = rho_gauss (1 - splits) / T``,
    ``rho_i2 = rho_gauss splits / T``.
    With ``calibration="exact"`` the paper's bound of the result (:func:`theorem_3_3`, :func:`theorem_4_1`) is
    exactly the target epsilon.
    """
    if not 0 < splits < 1:
        raise ValueError(f"splits must lie in (0, 1), got {splits!r}")
    if not 0 < eps3_ratio < 1:
        raise ValueError(f"eps3_ratio must lie in (0, 1), got {eps3_ratio!r}")
    if not 0 <= svt_share < 1:
        raise ValueError(f"svt_share must lie in [0, 1), got {svt_share!r}")
    if T < 1:
        raise ValueError(f"T must be >= 1, got {T!r}")
    rho_total = zcdp.rho_from_epsilon(epsilon, delta, calibration=calibration)
    rho_svt = svt_share * rho_total
    eps1 = eps2 = 0.0
    if rho_svt > 0:
        # invert rho_svt = (eps1 + eps2)^2 / (2c)
        eps1, eps2 = svt.split_budget(math.sqrt(2.0 * c * rho_svt), c)
    rho_gauss = rho_total - rho_svt
    rho_i1 = rho_gauss * (1.0 - splits) / T
    rho_i2 = rho_gauss * splits / T
    epsilon_i1 = zcdp.epsilon_paper(rho_i1, delta_i1)
    return PPBudget(rho_total=rho_total, rho_svt=rho_svt, rho_i1=rho_i1, rho_i2=rho_i2, epsilon_i1=epsilon_i1,
                    delta_i1=delta_i1, epsilon_i3=eps3_ratio * epsilon_i1, eps1=eps1, eps2=eps2)
