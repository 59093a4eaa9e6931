"""IPP-ADMM: PP-ADMM broadcasting only models the sparse vector technique finds better (Ding et al., Alg. 2).

Reproduces the IPP-ADMM curves of the paper's Fig. 5-7 and its parameter studies (Fig. 3-4: the clipping
bound C_loss and the threshold alpha).

``variant: paper`` (default), Algorithm 2 as written (``docs/specs/pp_admm_paper.md``) with eta, beta and the
objective on the agent's summed loss, as PP-ADMM's paper variant (:mod:`~ppml.algorithms.pp_admm`;
``variant: literal`` reads them on the mean loss as printed). Each round, an agent that has not yet broadcast
c times computes PP-ADMM's candidate theta_hat (line 8, with line 3's lam_hat; line 6's sigma_i1 uses
epsilon_i1 as printed, probably a typo for epsilon_i3) and releases ``theta_hat + b_i2`` only if

    Clip[F_i(theta_i^t) - F_i(theta_hat)] + Lap(4 c C_loss / eps2) >= alpha + Lap(2 c C_loss / eps1),

F_i = s_i f_i the regularized objective on the reading's scale (s_i = |D_i|: the sum of the rows' losses,
each clipped at C_loss, plus |D_i| (lam_hat/N) R; literal: s_i = 1, the clipped mean). The quality's
sensitivity is 2 C_loss as Lemma 4.2 states it: on the summed scale that is the per-record value (replacing
one record moves its clipped term in each of the two sums by at most C_loss), so the paper variant's quality
and SVT noise are on one consistent scale. The threshold alpha is read on the mean loss, the scale of the
paper's f_i (``alpha_scale: mean``, :func:`svt_threshold`: alpha |D_i| on the summed scale); ``alpha_scale:
sum`` reads it on the summed loss, the earlier reading, where 1e-3..10 is far below the threshold noise's
Laplace scale (hundreds at eps = 10 on Adult). On the mean scale one record moves the clipped mean by at
most C_loss/|D_i|, and Lemma 4.2's 2 C_loss is |D_i| (7000 on Adult) times too large there.
``svt_sensitivity: per_record`` uses ``2 C_loss s_i/|D_i|``: the same as ``paper`` in the paper variant,
2 C_loss/|D_i| in the literal one.
Either way the quality also reads theta_hat, which itself depends on the data, a dependence Lemma 4.2 does not
address. The noisy threshold is redrawn after each positive answer (Dwork-Roth's Sparse; the paper does not
say: UNVERIFIED).
After c releases the agent stops (abort); silent rounds keep theta, and the agent tells each neighbour so
with a control message (``ctl/silent``, counted apart from the protocol's traffic), upon which the neighbour
keeps the model it last received; every agent updates its dual each round.

Accounting (Theorem 4.1): ``rho'_i = (eps1 + eps2)^2 / 2 + c (rho_i1 + rho_i2)``. The paper does not say how a
target is split between the SVT and the c releases; our choice (UNVERIFIED, :func:`ipp_admm_budget
<ppml.privacy.bounds_pp_admm.ipp_admm_budget>`): ``svt_share`` (0.1) of rho_total pays the SVT, the rest
the c releases (so each release gets T/c times PP-ADMM's per-round budget). The ledger for the tight
accountant describes the same mechanism: c times PP-ADMM's per-round events (two Gaussian releases and the
Jacobian factor as a loss shift of eps_J, :mod:`~ppml.algorithms.pp_admm`) and the SVT as c AboveThreshold
instances, each a pure ``(eps1 + eps2) / c``-DP event (dp-accounting has no SVT event), so that PLD composes
the whole ledger; their zCDP cost ``(eps1 + eps2)^2 / (2c)`` is the budget's SVT term.

``variant: reconstructed``: the earlier form (summed scale with ``loss_scale: sum``, quality without the
regularizer on the release, all T rounds charged plus ``(eps1 + eps2)^2/(2c)``).

Threat model: as PP-ADMM; in addition, whether an agent broadcasts in a round is itself released (by SVT).

References
----------
.. [1] J. Ding, J. Wang, G. Liang, J. Bi, M. Pan, "Towards Plausible Differentially Private ADMM Based
   Distributed Machine Learning", CIKM 2020 (arXiv 2008.04500), Algorithm 2, Lemmas 4.2-4.3, Theorem 4.1.
.. [2] C. Dwork, A. Roth, "The Algorithmic Foundations of Differential Privacy", 2014, Section 3.6.
.. [3] M. Lyu, D. Su, N. Li, "Understanding the Sparse Vector Technique for Differential Privacy",
   PVLDB 10(6), 2017.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

from ppml import runtime
from ppml.algorithms import _private_admm as private
from ppml.algorithms import pp_admm
from ppml.algorithms.decentralized_admm import (SIDE_MESSAGES as _SIDE, SILENT_MESSAGE, Agent, Update,
                                                consensus_rounds, finish, network_for)
from ppml.history import History
from ppml.network import Endpoint, Network
from ppml.parties import Party
from ppml.privacy import zcdp
from ppml.privacy.bounds_pp_admm import PPBudget, ipp_admm_budget
from ppml.privacy.events import PureDPEvent
from ppml.privacy.svt import SparseVector
from ppml.runtime import EVALUATOR, Public, Role

__all__ = ["MESSAGES", "SIDE_MESSAGES", "Params", "network_for", "fit", "roles", "assemble",
           "clipped_loss_decrease", "clipped_objective", "svt_threshold", "svt_sensitivity",
           "agent_events", "planned_events"]

#: the run draws differential-privacy noise (so ``noise_source`` applies; see :mod:`ppml.privacy.noise`)
DP_NOISE = True

MESSAGES = (
    {"tag": "theta", "src": "agent i", "dst": "each neighbour j of agent i",
     "content": "theta_i + b_i2 as in PP-ADMM, sent only in rounds where the SVT answers yes "
                "(at most c times)",
     "protection": "objective and output perturbation (zCDP); the send decision by the sparse vector "
                   "technique"},
)


#: evaluation messages as every variant's, and the control message of a silent round
SIDE_MESSAGES = (SILENT_MESSAGE, *_SIDE)

@dataclass(frozen=True)
class Params(pp_admm.Params):
    """IPP-ADMM parameters: PP-ADMM's plus the SVT's (DESIGN.md §8 defaults).

    Attributes
    ----------
    c : int
        Maximum number of broadcasts per agent (paper: 15).
    C_loss : float
        Clipping bound of each row's loss in the quality function (paper: 2).
    alpha : float
        SVT threshold on the quality q (paper: 1e-3), on the loss scale ``alpha_scale`` names;
        ``-inf`` broadcasts every round (until c), ``+inf`` never (in params.yaml keep it finite:
        metrics.json cannot hold an infinite value).
    alpha_scale : {"mean", "sum"}
        The scale alpha is read on (:func:`svt_threshold`): ``mean`` (default), a decrease of the paper's
        f_i, the agent's mean loss (Algorithm 2 line 9 and Lemma 4.2 define f_i with 1/|D_i|), so on the
        summed objective of the paper variant the threshold is alpha |D_i|; ``sum``, a decrease of the
        agent's summed loss (the earlier reading, kept as an ablation: there alpha is about 1 % of the
        threshold noise's Laplace scale and changes nothing).
    svt_share : float
        Fraction of the zCDP budget spent on the SVT (our choice, see the module docstring).
    svt_sensitivity : {"paper", "per_record"}
        The quality's sensitivity: 2 C_loss (Lemma 4.2 as written) or 2 C_loss s_i/|D_i| (paper and literal
        variants; the two coincide in the paper variant).
    """

    c: int = field(default=15, metadata={"ge": 1})
    C_loss: float = field(default=2.0, metadata={"gt": 0})
    alpha: float = 1e-3
    alpha_scale: Literal["mean", "sum"] = "mean"
    svt_share: float = field(default=0.1, metadata={"gt": 0, "lt": 1})
    svt_sensitivity: Literal["paper", "per_record"] = "paper"

    def budget(self, *, svt_share: float = 0.0, c: int = 1) -> PPBudget:
        """Theorem 4.1's split (paper and literal variants) or the earlier T-round split (reconstructed)."""
        if self.variant == "reconstructed":
            return super().budget(svt_share=svt_share, c=c)
        return ipp_admm_budget(epsilon=self.budget_epsilon, delta=self.delta, c=c, splits=self.splits,
                               delta_i1=self.delta_i1, eps3_ratio=self.eps3_ratio,
                               calibration=self.budget_calibration, svt_share=svt_share)


def clipped_loss_decrease(X: np.ndarray, y: np.ndarray, old: np.ndarray, new: np.ndarray, *, clip: float,
                          row_weight: float) -> float:
    """``row_weight * sum_k [min(l_k(old), clip) - min(l_k(new), clip)]``, l_k the logistic loss of row k."""
    old_loss = np.minimum(np.logaddexp(0.0, -y * (X @ old)), clip)
    new_loss = np.minimum(np.logaddexp(0.0, -y * (X @ new)), clip)
    return row_weight * float(np.sum(old_loss - new_loss))


def clipped_objective(X: np.ndarray, y: np.ndarray, theta: np.ndarray, *, clip: float, reg: float,
                      row_weight: float) -> float:
    """``row_weight sum_k min(l_k(theta), clip) + (reg/2) ||theta||^2``: Alg. 2's clipped f_i on the reading's
    scale (row_weight = s_i/|D_i|, reg = s_i lam_hat/N; the printed mean form has s_i = 1)."""
    loss = np.minimum(np.logaddexp(0.0, -y * (X @ theta)), clip)
    return row_weight * float(np.sum(loss)) + 0.5 * reg * float(theta @ theta)


def svt_threshold(params: Params, *, row_weight: float, rows: int) -> float:
    """alpha in the units of the quality an agent computes (row_weight times its summed clipped loss).

    ``alpha_scale: mean``: alpha is a decrease of the mean loss, so the threshold is ``alpha row_weight
    |D_i|`` (alpha |D_i| on the summed loss of the paper variant, alpha itself on the literal variant's mean
    loss); ``sum``: alpha is a decrease of the summed loss, the threshold ``alpha row_weight``.
    """
    if rows < 1:
        raise ValueError(f"an agent needs at least one row, got rows = {rows}")
    per_sum = params.alpha * row_weight
    return per_sum * rows if params.alpha_scale == "mean" else per_sum


def svt_sensitivity(params: Params, *, row_weight: float) -> float:
    """The quality's sensitivity at an agent whose rows' losses weigh `row_weight` in the quality.

    2 C_loss as Lemma 4.2 states it (``svt_sensitivity: paper``), or 2 C_loss row_weight (``per_record``, and
    always in the reconstructed variant): the per-record value, which is 2 C_loss itself on the summed scale.
    """
    if params.variant != "reconstructed" and params.svt_sensitivity == "paper":
        return 2.0 * params.C_loss
    return 2.0 * params.C_loss * row_weight


def _agent_program(endpoint: Endpoint, party: Party, *, neighbours: tuple[str, ...], scale: float,
                   row_weight: float, rng: np.random.Generator, params: Params, budget: PPBudget,
                   lam_info: dict[str, float], agents: int) -> dict[str, Any]:
    """IPP-ADMM (Algorithm 2) at one agent: its calibration and SVT, then T rounds.

    In a round where the SVT says no (or after its c releases) the agent sends ``ctl/silent`` to its
    neighbours instead of a model. Reports to the evaluator whether it broadcast and its broadcasts so far;
    returns its calibration, its SVT's sensitivity and count, and whether its rows lie in the unit ball.
    """
    printed = params.variant != "reconstructed"  # Algorithm 2 as printed (paper or literal reading)
    agent = Agent(party, endpoint, neighbours, scale=scale, row_weight=row_weight, rng=rng)
    noise = pp_admm.calibrate(agent, params, budget, sigma1_from="epsilon_i1", lam_info=lam_info, agents=agents)
    sensitivity = svt_sensitivity(params, row_weight=agent.row_weight)
    threshold = svt_threshold(params, row_weight=agent.row_weight, rows=agent.X.shape[0])
    svt = SparseVector(threshold=threshold, c=params.c, eps1=budget.eps1, eps2=budget.eps2,
                       sensitivity=sensitivity, rng=agent.rng, party=agent.name, noise=params.noise)

    def local_step(t: int) -> Update:
        if svt.halted:
            return None, {"sent": False, "broadcasts": svt.count}
        release, solution = pp_admm.perturbed_update(agent, noise, eta=params.eta)
        if printed:
            before, after = (clipped_objective(agent.X, agent.y, theta, clip=params.C_loss, reg=noise.reg,
                                               row_weight=agent.row_weight)
                             for theta in (agent.theta, solution.theta))
            quality = before - after
        else:
            quality = clipped_loss_decrease(agent.X, agent.y, agent.theta, release, clip=params.C_loss,
                                            row_weight=agent.row_weight)
        sent = svt.above(quality)
        return (release if sent else None), {"sent": sent, "broadcasts": svt.count}

    consensus_rounds(agent, T=params.T, local_step=local_step, dual_step=lambda t: params.eta,
                     agents=params.agents)
    return {"noise": noise, "rows_in_unit_ball": agent.rows_in_unit_ball, "svt_sensitivity": sensitivity,
            "broadcasts": svt.count, "nominal_epsilon": params.nominal_epsilon}


def _round_record(params: Params, t: int, facts: list[dict[str, Any]]) -> dict[str, int]:
    """How many agents broadcast in the round, and how many broadcasts all agents made so far."""
    return {"broadcasts": sum(1 for f in facts if f["sent"]),
            "broadcasts_total": sum(f["broadcasts"] for f in facts)}


def _budget(params: Params) -> PPBudget:
    return params.budget(svt_share=params.svt_share, c=params.c)


def agent_events(name: str, noise: pp_admm.AgentNoise, params: Params, budget: PPBudget) -> list:
    """The ledger events of agent `name`: its releases (paper: at most c are charged, Theorem 4.1;
    reconstructed: all T rounds) and its SVT.

    The SVT (ppml.privacy.svt) is c AboveThreshold instances run one after another (a fresh threshold noise
    after each positive answer), each pure (eps1 + eps2)/c-DP whatever it answers: c pure-DP releases (fewer
    may run; charging c is an upper bound). rho_svt in the notes is only their zCDP summary, which PLD
    cannot compose.
    """
    count = params.c if params.variant != "reconstructed" else params.T
    return [*pp_admm.gaussian_events(name, noise, count=count),
            PureDPEvent(epsilon=(budget.eps1 + budget.eps2) / params.c, count=params.c, party=name)]


def planned_events(params: Params, facts: list[private.AgentFacts]) -> list:
    """The events a run under `params`'s budget records, from public facts (each agent's calibration as it
    makes it, :func:`agent_events`)."""
    budget = _budget(params)
    lam_info = pp_admm.lam_hat_info(params, budget, [f.rows for f in facts])
    return [event for f in facts for event in agent_events(
        f.name, pp_admm.calibrate(f, params, budget, sigma1_from="epsilon_i1", lam_info=lam_info,
                                  agents=len(facts)), params, budget)]


def roles(public: Public, params: Params, *, rng: np.random.Generator, network: Network) -> list[Role]:
    """An agent program per party and the evaluator's (which records each round's broadcasts)."""
    facts = pp_admm.agent_facts(public, params, network)
    params = private.resolve_tight(params, lambda p: planned_events(p, facts), facts=tuple(facts))
    return pp_admm.private_roles(public, params, rng=rng, network=network, program=_agent_program,
                                 algorithm="ipp_admm", budget=_budget(params), round_record=_round_record,
                                 facts={"sent": "bool", "broadcasts": "int"})


def assemble(public: Public, params: Params, results: dict[str, Any]) -> History:
    """The evaluator's records; the ledger from every agent's own calibration and SVT."""
    printed = params.variant != "reconstructed"  # Algorithm 2 as printed (paper or literal reading)
    names = public.names
    params = private.adopt_nominal(params, results, names)
    evaluated = results[EVALUATOR]
    history = evaluated["history"]
    budget = _budget(params)
    lam_info = pp_admm.lam_hat_info(params, budget, [p.train_rows for p in public.parties])
    noises = {name: results[name]["noise"] for name in names}
    history.stop(converged=True, reason=f"ran the T = {params.T} rounds; every perturbed solve reached its "
                                        "gradient tolerance (verified)")
    pp_admm.record_privacy(history, params, {name: results[name]["rows_in_unit_ball"] for name in names},
                           noises, budget, sigma1_from="epsilon_i1", lam_info=lam_info)
    rho_svt = zcdp.rho_svt(c=params.c, eps1=budget.eps1, eps2=budget.eps2)
    history.ledger.notes.append(
        f"SVT: c = {params.c}, eps1 = {budget.eps1:.6g}, eps2 = {budget.eps2:.6g}, quality sensitivity "
        f"{max(results[name]['svt_sensitivity'] for name in names):.6g} "
        f"({params.svt_sensitivity if printed else 'reconstructed'}),"
        f" threshold alpha = {params.alpha} on the {params.alpha_scale} loss; svt_share = {params.svt_share}"
        " of rho_total (our split, the paper leaves it open); the tight ledger records it as c "
        f"AboveThreshold instances, each pure (eps1 + eps2)/c = {(budget.eps1 + budget.eps2) / params.c:.6g}"
        f"-DP (their zCDP cost (eps1 + eps2)^2 / (2c) = {rho_svt:.6g})")
    history.extra["broadcasts"] = {name: results[name]["broadcasts"] for name in names}
    if params.noise:
        for name in names:
            history.ledger.events.extend(agent_events(name, noises[name], params, budget))
        inputs = {"epsilon_i1": budget.epsilon_i1, "delta_i1": budget.delta_i1, "rho_i2": budget.rho_i2,
                  "c": params.c, "eps1": budget.eps1, "eps2": budget.eps2, "delta": params.delta}
        if printed:
            history.ledger.paper_bound = {"name": "pp_admm.theorem_4_1", "inputs": inputs}
        else:
            history.ledger.paper_bound = {"name": "pp_admm.theorem_4_1_reconstructed",
                                          "inputs": {**inputs, "T": params.T}}
    pp_admm.certify_lam_hat(history, params, lam_info)
    return finish(history, evaluated, **pp_admm.final_privacy(noises, budget, params), eps1=budget.eps1,
                  eps2=budget.eps2,
                  broadcasts_mean=float(np.mean([results[name]["broadcasts"] for name in names])))


def fit(parties: list[Party], network: Network, params: Params, *, rng: np.random.Generator,
        evaluation: Party | None = None) -> History:
    """IPP-ADMM (Algorithm 2) on horizontally split data; see the module docstring."""
    return runtime.fit(sys.modules[__name__], parties, network, params, rng=rng, evaluation=evaluation)
