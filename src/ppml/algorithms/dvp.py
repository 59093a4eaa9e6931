"""DVP: dual variable perturbation for consensus ADMM (Zhang & Zhu, IEEE TIFS 2017), a PP-ADMM baseline.

The "DVP" curves of Ding et al.'s Fig. 5-7. Each round t, agent p perturbs its dual with Chaudhuri et al.'s
objective-perturbation noise and solves its local problem exactly (Newton, as Ding et al. did for all
baselines, for fairness):

1. ``eps' = alpha - 2 ln(1 + c1 w / Lambda_p)`` with Lambda_p = lam + 2 eta V_p, c1 = 1/4 and w = N/n the
   weight of one row's loss (C^R / B_p); if eps' <= 0, add ``(Phi/2)||f||^2`` with
   ``Phi = c1 w / (e^{alpha/4} - 1) - Lambda_p`` and use eps' = alpha / 2;
2. draw epsilon_p with density ∝ exp(-(eps'/2) ||epsilon||);
3. ``mu_p = lambda_p + (w/2) epsilon_p`` and ``f_p = argmin L_p(f) + 2 mu_p^T f + (Phi/2)||f||^2
   + eta sum_n ||f - (f_p + f_n)/2||^2``;
4. send f_p; update lambda_p from the un-noised lambda_p (``dual_from_perturbed``: continue from mu_p).

Each release is alpha-DP for the rows of agent p (Chaudhuri's change of variables); T releases cost
``T alpha^2 / 2`` in zCDP, so a target (epsilon, delta) gives ``alpha = sqrt(2 rho_total / T)`` (rho_total by
the run's calibration). The paper-style bound is :func:`ppml.privacy.bounds_pp_admm.pure_dp_composition`.

UNVERIFIED (reconstructed in docs/specs/dvp.md; the paper body was not available): the mapping of Chaudhuri's
constants onto the ADMM subproblem, and whether the dual continues from lambda or from mu.

Threat model: honest-but-curious agents; each agent's rows are protected by its own noise.

References
----------
.. [1] T. Zhang, Q. Zhu, "Dynamic Differential Privacy for ADMM-Based Distributed Classification Learning",
   IEEE TIFS 12(1):172-187, 2017.
.. [2] K. Chaudhuri, C. Monteleoni, A. D. Sarwate, "Differentially Private Empirical Risk Minimization",
   JMLR 12, 2011 (Algorithm 2).
.. [3] J. Ding, J. Wang, G. Liang, J. Bi, M. Pan, "Towards Plausible Differentially Private ADMM Based
   Distributed Machine Learning", CIKM 2020 (the comparison setting).
"""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass
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

__all__ = ["MESSAGES", "SIDE_MESSAGES", "Params", "network_for", "fit", "roles", "assemble", "dvp_constants",
           "planned_events"]

#: the run draws differential-privacy noise (so ``noise_source`` applies; see :mod:`ppml.privacy.noise`)
DP_NOISE = True

MESSAGES = (
    {"tag": "theta", "src": "agent p", "dst": "each neighbour n of agent p",
     "content": "f_p(t+1), the exact minimizer of the dual-perturbed local problem (d floats)",
     "protection": "dual variable perturbation (objective perturbation, pure alpha-DP per round)"},
)


@dataclass(frozen=True)
class Params(private.PrivateParams):
    """DVP parameters: consensus ADMM's and the privacy target, plus

    Attributes
    ----------
    dual_from_perturbed : bool
        Continue the dual recursion from the perturbed mu_p (UNVERIFIED alternative; default False).
    """

    dual_from_perturbed: bool = False


def dvp_constants(*, alpha: float, row_weight: float, strong_convexity: float) -> tuple[float, float, float]:
    """(eps', zeta, Phi) of one DVP step of privacy alpha (step 1 above; zeta = eps'/2 is the noise rate)."""
    if alpha <= 0:
        raise ValueError(f"alpha must be > 0, got {alpha!r}")
    c1w = private.LOSS_SMOOTHNESS * row_weight
    eps_prime = alpha - 2.0 * math.log1p(c1w / strong_convexity)
    phi = 0.0
    if eps_prime <= 0:
        phi = c1w / math.expm1(alpha / 4.0) - strong_convexity
        eps_prime = alpha / 2.0
    return eps_prime, eps_prime / 2.0, phi


def _agent_program(endpoint: Endpoint, party: Party, *, neighbours: tuple[str, ...], scale: float,
                   row_weight: float, rng: np.random.Generator, params: Params, alpha: float) -> dict[str, Any]:
    """DVP at one agent: its constants from its own degree, per round a dual-perturbed exact solve.

    Returns its constants (eps', zeta, Phi), whether its rows lie in the unit ball and its missed solves.
    """
    agent = Agent(party, endpoint, neighbours, scale=scale, row_weight=row_weight, rng=rng)
    constants = dvp_constants(alpha=alpha, row_weight=agent.row_weight,
                              strong_convexity=agent.regularization(params.lam) + 2.0 * params.eta * agent.degree)
    _, zeta, phi = constants
    misses: list[tuple[str, int, float]] = []

    def local_step(t: int) -> Update:
        linear, reg = None, agent.regularization(params.lam)
        if params.noise:
            noise = private.gamma_noise(agent.rng, agent.theta.shape[0], rate=zeta)
            # 2 mu^T f = 2 lambda^T f + w noise^T f
            linear, reg = agent.row_weight * noise, agent.regularization(params.lam) + phi
        solution = agent.solve(agent.problem(reg=reg, penalty=params.eta, linear=linear))
        if not solution.converged:
            misses.append((agent.name, t, solution.grad_norm))
        if params.noise and params.dual_from_perturbed:
            agent.dual = agent.dual + 0.5 * linear
        return solution.theta, {}

    consensus_rounds(agent, T=params.T, local_step=local_step, dual_step=lambda t: params.eta,
                     agents=params.agents)
    return {"misses": misses, "constants": constants, "rows_in_unit_ball": agent.rows_in_unit_ball,
            "nominal_epsilon": params.nominal_epsilon}


def _alpha(params: Params) -> float:
    return math.sqrt(2.0 * params.rho_total / params.T)


def planned_events(params: Params, names: list[str]) -> list[PureDPEvent]:
    """The events a run under `params`'s budget records: T alpha-DP rounds per agent (alpha is public)."""
    return [PureDPEvent(epsilon=_alpha(params), count=params.T, party=name) for name in names]


def roles(public: Public, params: Params, *, rng: np.random.Generator, network: Network) -> list[Role]:
    """An agent program per party (alpha is public: it follows from the target) and the evaluator's."""
    params = private.resolve_tight(params, lambda p: planned_events(p, public.names),
                                    facts=tuple(public.names))
    return agent_roles(public, params, rng=rng, network=network, program=_agent_program, algorithm="dvp",
                       loss_scale=params.loss_scale, alpha=_alpha(params))


def assemble(public: Public, params: Params, results: dict[str, Any]) -> History:
    """The evaluator's records; the ledger and the constants from every agent's own report."""
    names = public.names
    params = private.adopt_nominal(params, results, names)
    evaluated = results[EVALUATOR]
    history = evaluated["history"]
    alpha = _alpha(params)
    constants = {name: tuple(results[name]["constants"]) for name in names}
    stop_exact(history, merge_misses(names, results), T=params.T)
    private.start_ledger(history, params, {name: results[name]["rows_in_unit_ball"] for name in names})
    history.ledger.notes.append(f"every round is alpha = {alpha:.6g}-DP per agent (pure), composed in zCDP "
                                "as "
                                f"alpha^2/2; constants reconstructed in specs/dvp.md (UNVERIFIED); dual from "
                                f"{'mu (perturbed)' if params.dual_from_perturbed else 'lambda (un-noised)'}")
    history.extra["agents"] = {name: {"eps_prime": c[0], "zeta": c[1], "phi": c[2]}
                               for name, c in constants.items()}
    if params.noise:
        history.ledger.events.extend(planned_events(params, names))
        history.ledger.paper_bound = {"name": "pp_admm.pure_dp_composition", "inputs": {
            "step_epsilons": {name: [alpha] * params.T for name in names}, "delta": params.delta}}
    return finish(history, evaluated, alpha=alpha, rho_total=params.rho_total,
                  phi=max(c[2] for c in constants.values()))


def fit(parties: list[Party], network: Network, params: Params, *, rng: np.random.Generator,
        evaluation: Party | None = None) -> History:
    """DVP with exact local solves on horizontally split data; see the module docstring."""
    return runtime.fit(sys.modules[__name__], parties, network, params, rng=rng, evaluation=evaluation)
