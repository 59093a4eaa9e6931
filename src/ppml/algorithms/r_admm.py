"""R-ADMM: recycled ADMM (Zhang, Khalili & Liu, Allerton 2018), a PP-ADMM baseline.

The "R-ADMM" curves of Ding et al.'s Fig. 5-7. Rounds are numbered t = 1..T.

- Odd t (private, uses data): agent i draws epsilon_i with density ∝ exp(-alpha_i ||epsilon||) and solves
  exactly
  ``f_i(t) = argmin O(f, D_i) + 2 lambda_i^T f + eta sum_j ||(f_i + f_j)/2 - f||^2 + kappa epsilon_i^T f``
  with kappa = kappa_factor * eta V_i. From the optimality condition it keeps the noisy gradient
  ``g_i = ∇O(f_i(t)) + kappa epsilon_i = -2 lambda_i - 2 eta sum_j (f_i(t) - (f_i + f_j)/2)`` (computed from
  the right-hand side, never from the data).
- Even t (no data, no new noise): the linearized update in closed form,
  ``f_i(t) = (1/V_i) sum_j (f_i + f_j)/2 - (g_i + 2 lambda_i) / (2 eta V_i)`` (:func:`recycled_update`).

Every round sends f_i(t) and updates the dual with step eta. Even rounds are post-processing of released
models, so only odd rounds cost privacy:
``beta_i = 2 c1 w alpha_i / kappa + 2 ln(1 + c2 w / (r + 2 eta V_i))`` per odd round (c1 = 1, c2 = 1/4, w the
weight of one row's loss, r the local l2 weight); each agent's alpha_i is calibrated so that its ceil(T/2)
odd releases cost rho_total in zCDP, after an extra l2 weight phi where the Jacobian terms alone would cost
more than a quarter of it (as in :mod:`~ppml.algorithms.m_admm`).

UNVERIFIED (reconstructed in ``specs/r_admm.md`` from the abstracts; checked numerically there): the update
equations, the perturbation scaling kappa, and the privacy constants.

Threat model: honest-but-curious agents; each agent's rows are protected by its own noise.

References
----------
.. [1] X. Zhang, M. M. Khalili, M. Liu, "Recycled ADMM: Improve Privacy and Accuracy with Less Computation in
   Distributed Algorithms", Allerton 2018 (arXiv 1810.03197).
.. [2] J. Ding, J. Wang, G. Liang, J. Bi, M. Pan, "Towards Plausible Differentially Private ADMM Based
   Distributed Machine Learning", CIKM 2020 (the comparison setting).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from ppml.algorithms import _private_admm as private
from ppml.algorithms.decentralized_admm import (Agent, Evaluator, consensus_rounds, make_agents,
                                                network_for, stop_exact)
from ppml.history import History
from ppml.network import Network
from ppml.parties import Party
from ppml.privacy import zcdp
from ppml.privacy.events import ZCDPEvent

__all__ = ["MESSAGES", "Params", "network_for", "fit", "recycled_gradient", "recycled_update"]

#: the run draws differential-privacy noise (so ``noise_source`` applies; see :mod:`ppml.privacy.noise`)
DP_NOISE = True

MESSAGES = (
    {"tag": "theta", "src": "agent i", "dst": "each neighbour j of agent i",
     "content": "f_i(t): odd t the exact minimizer of the perturbed local problem, even t the recycled "
                "linearized update (d floats)",
     "protection": "objective perturbation on odd rounds (pure beta_i-DP); even rounds are post-processing"},
)


@dataclass(frozen=True)
class Params(private.PrivateParams):
    """R-ADMM parameters: consensus ADMM's and the privacy target, plus

    Attributes
    ----------
    kappa_factor : float
        kappa = kappa_factor * eta V_i, the weight of the linear noise term (UNVERIFIED scaling; default 1).
    tight_jacobian : bool
        Use one ln(1 + c2 w / Lambda) Jacobian term (valid for replace-one) instead of the paper-style two.
    """

    kappa_factor: float = field(default=1.0, metadata={"gt": 0})
    tight_jacobian: bool = False


def recycled_gradient(*, dual: np.ndarray, centre_sum: np.ndarray, theta: np.ndarray, degree: int,
                      eta: float) -> np.ndarray:
    """``g = -2 lambda - 2 eta (V theta - sum_j c_j)``: the noisy local gradient at an odd round's solution.

    Arguments are the dual and penalty centres the odd round's problem used and that problem's solution.
    """
    return -2.0 * dual - 2.0 * eta * (degree * theta - centre_sum)


def recycled_update(*, gradient: np.ndarray, dual: np.ndarray, centre_sum: np.ndarray, degree: int,
                    eta: float) -> np.ndarray:
    """The even round's closed form ``argmin g^T f + 2 lambda^T f + eta sum_j ||c_j - f||^2`` (no data)."""
    return centre_sum / degree - (gradient + 2.0 * dual) / (2.0 * eta * degree)


def fit(parties: list[Party], network: Network, params: Params, *, rng: np.random.Generator,
        evaluation: Party | None = None) -> History:
    """R-ADMM with exact odd-round solves; see the module docstring."""
    history = History("r_admm")
    agents = make_agents(parties, network, loss_scale=params.loss_scale, rng=rng)
    evaluator = Evaluator(parties, evaluation, lam=params.lam)
    odd_rounds = math.ceil(params.T / 2)
    terms = 1 if params.tight_jacobian else 2

    def beta(agent: Agent, rate: float, phi: float) -> float:
        return private.objective_perturbation_epsilon(
            rate=rate, kappa=params.kappa_factor * params.eta * agent.degree, row_weight=agent.row_weight,
            strong_convexity=agent.regularization(params.lam) + phi + 2.0 * params.eta * agent.degree,
            jacobian_terms=terms)

    phis = {a.name: 0.0 for a in agents}
    rates: dict[str, float] = {}
    if params.noise:
        phis = {a.name: private.jacobian_regularization(
                    lambda phi, a=a: odd_rounds * beta(a, 0.0, phi) ** 2 / 2.0, params.rho_total)
                for a in agents}
        rates = {a.name: private.calibrate_rate(lambda r, a=a: np.full(odd_rounds, beta(a, r, phis[a.name])),
                                                params.rho_total, what=f"r_admm {a.name}") for a in agents}
    gradients: dict[str, np.ndarray] = {}
    misses: list[tuple[str, int, float]] = []

    def local_step(agent: Agent, t: int) -> np.ndarray:
        if t % 2 == 0:
            return recycled_update(gradient=gradients[agent.name], dual=agent.dual,
                                   centre_sum=agent.centre_sum(), degree=agent.degree, eta=params.eta)
        linear = None
        if params.noise:
            noise = private.gamma_noise(agent.rng, agent.theta.shape[0], rate=rates[agent.name])
            linear = params.kappa_factor * params.eta * agent.degree * noise
        problem = agent.problem(reg=agent.regularization(params.lam) + phis[agent.name], penalty=params.eta,
                                linear=linear)
        solution = agent.solve(problem)
        if not solution.converged:
            misses.append((agent.name, t, solution.grad_norm))
        gradients[agent.name] = recycled_gradient(dual=agent.dual, centre_sum=agent.centre_sum(),
                                                  theta=solution.theta, degree=agent.degree, eta=params.eta)
        return solution.theta

    consensus_rounds(agents, network, T=params.T, local_step=local_step, dual_step=lambda t: params.eta,
                     evaluator=evaluator, history=history)
    stop_exact(history, misses, T=params.T)
    private.start_ledger(history, params, agents)
    history.ledger.notes.append(
        f"only the {odd_rounds} odd rounds use data and cost privacy (pure beta_i-DP each, composed in "
        f"zCDP); kappa = {params.kappa_factor} eta V_i; {terms} Jacobian term(s); extra l2 weight phi where "
        "the Jacobian terms alone would exceed rho/4 (our extension); equations reconstructed in "
        "specs/r_admm.md (UNVERIFIED)")
    if params.noise:
        betas = {a.name: beta(a, rates[a.name], phis[a.name]) for a in agents}
        history.extra["agents"] = {a.name: {"rate": rates[a.name], "phi": phis[a.name],
                                            "step_epsilon": betas[a.name]} for a in agents}
        history.ledger.events.extend(ZCDPEvent(rho=zcdp.rho_pure(betas[a.name]), count=odd_rounds,
                                               party=a.name) for a in agents)
        history.ledger.paper_bound = {"name": "pp_admm.pure_dp_composition", "inputs": {
            "step_epsilons": {name: [b] * odd_rounds for name, b in betas.items()}, "delta": params.delta}}
    evaluator.finish(history, [a.theta for a in agents], rho_total=params.rho_total,
                     noise_rate=min(rates.values(), default=None), phi=max(phis.values()))
    return history
