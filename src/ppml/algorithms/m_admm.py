"""M-ADMM with penalty perturbation (Zhang, Khalili & Liu, ICML 2018), a PP-ADMM baseline.

The "M-ADMM" curves of Ding et al.'s Fig. 5-7. Modified ADMM lets each agent grow its own penalty,
``eta_i(t) = q^t eta`` (capped at ``eta_max`` when given), while the dual step stays eta; the privacy noise
enters through the penalty, shifting every penalty centre by half a noise vector:

    f_i(t) = argmin_f O(f, D_i) + 2 lambda_i^T f + eta_i(t) sum_j ||(f_i + f_j)/2 - epsilon_i(t)/2 - f||^2,

i.e. the non-private update plus the linear term kappa epsilon_i(t)^T f with kappa = eta_i(t) V_i, where
epsilon_i(t) has density ∝ exp(-alpha_i ||epsilon||). Local problems are solved exactly (Newton). Each
release is beta_i(t)-DP with
``beta_i(t) = 2 c1 w alpha_i / (eta_i(t) V_i) + 2 ln(1 + c2 w / (r + 2 eta_i(t) V_i))``
(c1 = 1, c2 = 1/4, w the weight of one row's loss, C/B_i in the paper, r the local l2 weight): both terms
shrink as the penalty grows, the paper's point. For a target (epsilon, delta), each agent's alpha_i is found
by bisection so that its releases cost ``sum_t beta_i(t)^2 / 2 = rho_total`` in zCDP (Ding et al.'s
comparison). When the Jacobian terms alone would cost more than a quarter of the budget, an extra l2 weight
phi brings them down to it first (:func:`ppml.algorithms._private_admm.jacobian_regularization`; our
extension, recorded in the run).

UNVERIFIED (reconstructed in docs/specs/m_admm.md from the abstract; the paper body was not available): the
noise scaling, the privacy constants and the default q.

Threat model: honest-but-curious agents; each agent's rows are protected by its own noise.

References
----------
.. [1] X. Zhang, M. M. Khalili, M. Liu, "Improving the Privacy and Accuracy of ADMM-Based Distributed
   Algorithms", ICML 2018 (arXiv 1806.02246).
.. [2] J. Ding, J. Wang, G. Liang, J. Bi, M. Pan, "Towards Plausible Differentially Private ADMM Based
   Distributed Machine Learning", CIKM 2020 (the comparison setting).
"""

from __future__ import annotations

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

__all__ = ["MESSAGES", "SIDE_MESSAGES", "Params", "network_for", "fit", "roles", "assemble", "penalties",
           "step_epsilons", "calibration", "planned_events"]

#: the run draws differential-privacy noise (so ``noise_source`` applies; see :mod:`ppml.privacy.noise`)
DP_NOISE = True

MESSAGES = (
    {"tag": "theta", "src": "agent i", "dst": "each neighbour j of agent i",
     "content": "f_i(t), the exact minimizer of the penalty-perturbed local problem (d floats)",
     "protection": "penalty perturbation (objective perturbation, pure beta_i(t)-DP per round)"},
)


@dataclass(frozen=True)
class Params(private.PrivateParams):
    """M-ADMM parameters: consensus ADMM's and the privacy target, plus

    Attributes
    ----------
    q : float
        Growth factor of each agent's penalty, eta_i(t) = q^t eta (q = 1: plain ADMM penalties).
    eta_max : float or None
        Cap on eta_i(t) (None: no cap).
    tight_jacobian : bool
        Use one ln(1 + c2 w / Lambda) Jacobian term (valid for replace-one) instead of the paper-style two.
    """

    q: float = field(default=1.05, metadata={"ge": 1})
    eta_max: float | None = field(default=None, metadata={"gt": 0})
    tight_jacobian: bool = False


def penalties(params: Params) -> np.ndarray:
    """eta_i(t) for t = 1..T (the same schedule at every agent)."""
    schedule = params.eta * params.q ** np.arange(1, params.T + 1)
    return schedule if params.eta_max is None else np.minimum(schedule, params.eta_max)


def step_epsilons(rate: float, *, etas: np.ndarray, degree: int, row_weight: float, reg: float,
                  jacobian_terms: int) -> np.ndarray:
    """beta_i(t) of every round for noise rate `rate`; `reg` is the local l2 weight (module docstring)."""
    return np.array([private.objective_perturbation_epsilon(rate=rate, kappa=eta * degree,
                                                            row_weight=row_weight,
                                                            strong_convexity=reg + 2.0 * eta * degree,
                                                            jacobian_terms=jacobian_terms) for eta in etas])


def _betas(params: Params, *, degree: int, row_weight: float, reg: float, rate: float, phi: float) -> np.ndarray:
    return step_epsilons(rate, etas=penalties(params), degree=degree, row_weight=row_weight, reg=reg + phi,
                         jacobian_terms=1 if params.tight_jacobian else 2)


def calibration(params: Params, agent: Any) -> tuple[float, float | None, np.ndarray | None]:
    """(phi, noise rate, beta_i(t) of every round) of an agent (an :class:`Agent` or its public
    :class:`~ppml.algorithms._private_admm.AgentFacts`): phi keeps the Jacobian terms within rho/4, the rate
    makes the releases cost rho_total; (0, None, None) without noise."""
    if not params.noise:
        return 0.0, None, None
    reg = agent.regularization(params.lam)

    def betas(rate: float, phi: float) -> np.ndarray:
        return _betas(params, degree=agent.degree, row_weight=agent.row_weight, reg=reg, rate=rate, phi=phi)

    phi = private.jacobian_regularization(lambda p: float(np.sum(betas(0.0, p) ** 2)) / 2.0, params.rho_total)
    rate = private.calibrate_rate(lambda r: betas(r, phi), params.rho_total, what=f"m_admm {agent.name}")
    return phi, rate, betas(rate, phi)


def planned_events(params: Params, facts: list[private.AgentFacts]) -> list[PureDPEvent]:
    """The events a run under `params`'s budget records, from public facts: each round's beta_i(t)."""
    return [PureDPEvent(epsilon=float(b), party=f.name) for f in facts for b in calibration(params, f)[2]]


def _agent_program(endpoint: Endpoint, party: Party, *, neighbours: tuple[str, ...], scale: float,
                   row_weight: float, rng: np.random.Generator, params: Params) -> dict[str, Any]:
    """M-ADMM at one agent: its noise rate and phi from its own degree and row weight, then T rounds of
    penalty-perturbed exact solves. Returns its calibration, its per-round epsilons and its missed solves."""
    agent = Agent(party, endpoint, neighbours, scale=scale, row_weight=row_weight, rng=rng)
    etas = penalties(params)
    reg = agent.regularization(params.lam)
    phi, rate, steps = calibration(params, agent)
    misses: list[tuple[str, int, float]] = []

    def local_step(t: int) -> Update:
        eta_t = etas[t - 1]
        linear = None
        if params.noise:
            noise = private.gamma_noise(agent.rng, agent.theta.shape[0], rate=rate)
            linear = eta_t * agent.degree * noise
        problem = agent.problem(reg=reg + phi, penalty=eta_t, linear=linear)
        solution = agent.solve(problem)
        if not solution.converged:
            misses.append((agent.name, t, solution.grad_norm))
        return solution.theta, {}

    consensus_rounds(agent, T=params.T, local_step=local_step, dual_step=lambda t: params.eta,
                     agents=params.agents)
    return {"misses": misses, "rate": rate, "phi": phi, "rows_in_unit_ball": agent.rows_in_unit_ball,
            "step_epsilons": None if steps is None else steps.tolist(), "nominal_epsilon": params.nominal_epsilon}


def _round_record(params: Params, t: int, facts: list[dict[str, Any]]) -> dict[str, float]:
    """The penalty of round t (public: the same schedule at every agent)."""
    return {"penalty": float(penalties(params)[t - 1])}


def roles(public: Public, params: Params, *, rng: np.random.Generator, network: Network) -> list[Role]:
    """An agent program per party and the evaluator's (which records each round's public penalty)."""
    facts = private.agent_facts(public, network, loss_scale=params.loss_scale)
    params = private.resolve_tight(params, lambda p: planned_events(p, facts), facts=tuple(facts))
    return agent_roles(public, params, rng=rng, network=network, program=_agent_program, algorithm="m_admm",
                       loss_scale=params.loss_scale, round_record=_round_record)


def assemble(public: Public, params: Params, results: dict[str, Any]) -> History:
    """The evaluator's records; the ledger and calibration from every agent's own report."""
    names = public.names
    params = private.adopt_nominal(params, results, names)
    evaluated = results[EVALUATOR]
    history = evaluated["history"]
    terms = 1 if params.tight_jacobian else 2
    phis = {name: results[name]["phi"] for name in names}
    rates = {name: results[name]["rate"] for name in names if results[name]["rate"] is not None}
    stop_exact(history, merge_misses(names, results), T=params.T)
    private.start_ledger(history, params, {name: results[name]["rows_in_unit_ball"] for name in names})
    cap = f" capped at {params.eta_max}" if params.eta_max is not None else ""
    history.ledger.notes.append(
        f"penalties eta_i(t) = {params.q}^t * {params.eta}{cap}; each agent's noise rate calibrated so that "
        "sum_t beta_i(t)^2/2 = rho_total, with an extra l2 weight phi where the Jacobian terms alone would "
        f"exceed rho/4 (our extension); {terms} Jacobian term(s); constants reconstructed in specs/m_admm.md "
        "(UNVERIFIED)")
    if params.noise:
        step_eps = {name: results[name]["step_epsilons"] for name in names}
        history.extra["agents"] = {name: {"rate": rates[name], "phi": phis[name],
                                          "step_epsilons": step_eps[name]} for name in names}
        history.ledger.events.extend(PureDPEvent(epsilon=b, party=name)
                                     for name, steps in step_eps.items() for b in steps)
        history.ledger.paper_bound = {"name": "pp_admm.pure_dp_composition",
                                      "inputs": {"step_epsilons": step_eps, "delta": params.delta}}
    return finish(history, evaluated, rho_total=params.rho_total, noise_rate=min(rates.values(), default=None),
                  phi=max(phis.values()))


def fit(parties: list[Party], network: Network, params: Params, *, rng: np.random.Generator,
        evaluation: Party | None = None) -> History:
    """M-ADMM with penalty perturbation and exact local solves; see the module docstring."""
    return runtime.fit(sys.modules[__name__], parties, network, params, rng=rng, evaluation=evaluation)
