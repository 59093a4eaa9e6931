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

UNVERIFIED (reconstructed in docs/specs/r_admm.md from the abstracts; checked numerically there): the update
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
import sys
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ppml import runtime
from ppml.algorithms import _private_admm as private
from ppml.algorithms.decentralized_admm import (SIDE_MESSAGES, Agent, Update, agent_roles, consensus_rounds,
                                                finish, merge_misses, network_for, stop_exact)
from ppml.history import History
from ppml.network import Endpoint, Network
from ppml.parties import Party
from ppml.privacy.events import PureDPEvent
from ppml.runtime import EVALUATOR, Public, Role

__all__ = ["MESSAGES", "SIDE_MESSAGES", "Params", "network_for", "fit", "roles", "assemble",
           "recycled_gradient", "recycled_update", "calibration", "planned_events"]

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


def calibration(params: Params, agent: Any) -> tuple[float, float | None, float | None]:
    """(phi, noise rate, beta_i of each odd round) of an agent (an :class:`Agent` or its public
    :class:`~ppml.algorithms._private_admm.AgentFacts`); (0, None, None) without noise."""
    if not params.noise:
        return 0.0, None, None
    odd_rounds = math.ceil(params.T / 2)
    terms = 1 if params.tight_jacobian else 2
    kappa = params.kappa_factor * params.eta * agent.degree

    def beta(rate: float, phi: float) -> float:
        return private.objective_perturbation_epsilon(
            rate=rate, kappa=kappa, row_weight=agent.row_weight,
            strong_convexity=agent.regularization(params.lam) + phi + 2.0 * params.eta * agent.degree,
            jacobian_terms=terms)

    phi = private.jacobian_regularization(lambda p: odd_rounds * beta(0.0, p) ** 2 / 2.0, params.rho_total)
    rate = private.calibrate_rate(lambda r: np.full(odd_rounds, beta(r, phi)), params.rho_total,
                                  what=f"r_admm {agent.name}")
    return phi, rate, beta(rate, phi)


def planned_events(params: Params, facts: list[private.AgentFacts]) -> list[PureDPEvent]:
    """The events a run under `params`'s budget records, from public facts: beta_i on each odd round."""
    odd_rounds = math.ceil(params.T / 2)
    return [PureDPEvent(epsilon=calibration(params, f)[2], count=odd_rounds, party=f.name) for f in facts]


def _agent_program(endpoint: Endpoint, party: Party, *, neighbours: tuple[str, ...], scale: float,
                   row_weight: float, rng: np.random.Generator, params: Params) -> dict[str, Any]:
    """R-ADMM at one agent: its noise rate and phi from its own degree and row weight, then T rounds (odd:
    perturbed exact solve, even: recycled closed form). Returns its calibration and its missed solves."""
    agent = Agent(party, endpoint, neighbours, scale=scale, row_weight=row_weight, rng=rng)
    phi, rate, step_epsilon = calibration(params, agent)
    gradient: np.ndarray | None = None
    misses: list[tuple[str, int, float]] = []

    def local_step(t: int) -> Update:
        nonlocal gradient
        if t % 2 == 0:
            return recycled_update(gradient=gradient, dual=agent.dual, centre_sum=agent.centre_sum(),
                                   degree=agent.degree, eta=params.eta), {}
        linear = None
        if params.noise:
            noise = private.gamma_noise(agent.rng, agent.theta.shape[0], rate=rate)
            linear = params.kappa_factor * params.eta * agent.degree * noise
        problem = agent.problem(reg=agent.regularization(params.lam) + phi, penalty=params.eta, linear=linear)
        solution = agent.solve(problem)
        if not solution.converged:
            misses.append((agent.name, t, solution.grad_norm))
        gradient = recycled_gradient(dual=agent.dual, centre_sum=agent.centre_sum(), theta=solution.theta,
                                     degree=agent.degree, eta=params.eta)
        return solution.theta, {}

    consensus_rounds(agent, T=params.T, local_step=local_step, dual_step=lambda t: params.eta,
                     agents=params.agents)
    return {"misses": misses, "rate": rate, "phi": phi, "rows_in_unit_ball": agent.rows_in_unit_ball,
            "step_epsilon": step_epsilon, "nominal_epsilon": params.nominal_epsilon}


def roles(public: Public, params: Params, *, rng: np.random.Generator, network: Network) -> list[Role]:
    """An agent program per party and the evaluator's."""
    facts = private.agent_facts(public, network, loss_scale=params.loss_scale)
    params = private.resolve_tight(params, lambda p: planned_events(p, facts), facts=tuple(facts))
    return agent_roles(public, params, rng=rng, network=network, program=_agent_program, algorithm="r_admm",
                       loss_scale=params.loss_scale)


def assemble(public: Public, params: Params, results: dict[str, Any]) -> History:
    """The evaluator's records; the ledger and calibration from every agent's own report."""
    names = public.names
    params = private.adopt_nominal(params, results, names)
    evaluated = results[EVALUATOR]
    history = evaluated["history"]
    odd_rounds = math.ceil(params.T / 2)
    terms = 1 if params.tight_jacobian else 2
    phis = {name: results[name]["phi"] for name in names}
    rates = {name: results[name]["rate"] for name in names if results[name]["rate"] is not None}
    stop_exact(history, merge_misses(names, results), T=params.T)
    private.start_ledger(history, params, {name: results[name]["rows_in_unit_ball"] for name in names})
    history.ledger.notes.append(
        f"only the {odd_rounds} odd rounds use data and cost privacy (pure beta_i-DP each, composed in "
        f"zCDP); kappa = {params.kappa_factor} eta V_i; {terms} Jacobian term(s); extra l2 weight phi where "
        "the Jacobian terms alone would exceed rho/4 (our extension); equations reconstructed in "
        "specs/r_admm.md (UNVERIFIED)")
    if params.noise:
        betas = {name: results[name]["step_epsilon"] for name in names}
        history.extra["agents"] = {name: {"rate": rates[name], "phi": phis[name],
                                          "step_epsilon": betas[name]} for name in names}
        history.ledger.events.extend(PureDPEvent(epsilon=betas[name], count=odd_rounds, party=name)
                                     for name in names)
        history.ledger.paper_bound = {"name": "pp_admm.pure_dp_composition", "inputs": {
            "step_epsilons": {name: [b] * odd_rounds for name, b in betas.items()}, "delta": params.delta}}
    return finish(history, evaluated, rho_total=params.rho_total, noise_rate=min(rates.values(), default=None),
                  phi=max(phis.values()))


def fit(parties: list[Party], network: Network, params: Params, *, rng: np.random.Generator,
        evaluation: Party | None = None) -> History:
    """R-ADMM with exact odd-round solves; see the module docstring."""
    return runtime.fit(sys.modules[__name__], parties, network, params, rng=rng, evaluation=evaluation)
