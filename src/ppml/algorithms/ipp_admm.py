"""IPP-ADMM: PP-ADMM broadcasting only models the sparse vector technique finds better (Ding et al., Alg. 2).

Reproduces the IPP-ADMM curves of the paper's Fig. 5-7 and its parameter studies (Fig. 3-4: the clipping
bound C_loss and the threshold alpha). Each round, an agent that has not yet broadcast c times

1. computes a perturbed model exactly as PP-ADMM does (:func:`ppml.algorithms.pp_admm.perturbed_update`),
   except that sigma_i1 is calibrated with epsilon_i1 instead of epsilon_i3, as Algorithm 2 writes it;
2. measures its quality: the decrease of its clipped local loss from its last broadcast model to the new one,
   ``q = w sum_{x,y in D_i} [min(l(theta_i; x, y), C_loss) - min(l(theta_new; x, y), C_loss)]`` (w the weight
   of one row's loss in the local objective: 1 on the default ``loss_scale: sum``, so q is the decrease of
   the summed clipped loss; 1/B_i on ``mean``), whose sensitivity is ``2 C_loss w``;
3. asks its SVT (:class:`ppml.privacy.svt.SparseVector`) whether q exceeds alpha (in the units of q):
   threshold noise ``Lap(c Delta / eps1)`` and query noise ``Lap(2 c Delta / eps2)`` with Delta = 2 C_loss w,
   i.e. the paper's ``Lap(2 c C_loss / eps1)`` and ``Lap(4 c C_loss / eps2)`` on the sum scale, a fresh
   threshold noise after each positive answer;
4. if yes, broadcasts the new model (it becomes its model); if not, discards it and sends nothing. After c
   broadcasts the agent stops computing and keeps its model. Neighbours that receive nothing keep the stale
   model they last received; every agent still updates its dual each round.

Budget split (our choice; the paper leaves it open): a fraction ``svt_share`` of rho_total pays the SVT,
``(eps1 + eps2)^2 / (2c) = svt_share * rho_total`` with eps1 : eps2 = 1 : (2c)^(2/3); the rest is split over
the T rounds as in PP-ADMM (splits, delta_i1, eps3_ratio). Every round's perturbed model feeds the SVT's
quality, so all T rounds pay the Gaussian steps, broadcast or not (a data-dependent number of rounds could
not be composed). The total, by the paper's own conversion (Theorem 4.1,
:func:`ppml.privacy.bounds_pp_admm.theorem_4_1`), equals the target epsilon. The SVT enters the ledger as its
zCDP cost (a :class:`~ppml.privacy.events.ZCDPEvent`), which the tight accountant composes.

Threat model: as PP-ADMM; in addition, whether an agent broadcasts in a round is itself released (by SVT).

References
----------
.. [1] J. Ding, J. Wang, G. Liang, J. Bi, M. Pan, "Towards Plausible Differentially Private ADMM Based
   Distributed Machine Learning", CIKM 2020 (arXiv 2008.04500), Algorithm 2, Theorem 4.1, Fig. 3-7.
.. [2] C. Dwork, A. Roth, "The Algorithmic Foundations of Differential Privacy", 2014, Section 3.6.
.. [3] M. Lyu, D. Su, N. Li, "Understanding the Sparse Vector Technique for Differential Privacy",
   PVLDB 10(6), 2017.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ppml.algorithms import pp_admm
from ppml.algorithms.decentralized_admm import Agent, Evaluator, consensus_rounds, make_agents, network_for
from ppml.history import History
from ppml.network import Network
from ppml.parties import Party
from ppml.privacy import zcdp
from ppml.privacy.events import ZCDPEvent
from ppml.privacy.svt import SparseVector

__all__ = ["MESSAGES", "Params", "network_for", "fit", "clipped_loss_decrease"]

#: the run draws differential-privacy noise (so ``noise_source`` applies; see :mod:`ppml.privacy.noise`)
DP_NOISE = True

MESSAGES = (
    {"tag": "theta", "src": "agent i", "dst": "each neighbour j of agent i",
     "content": "theta_i + b_i2 as in PP-ADMM, sent only in rounds where the SVT answers yes "
                "(at most c times)",
     "protection": "objective and output perturbation (zCDP); the send decision by the sparse vector "
                   "technique"},
)


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
        SVT threshold on the quality q (paper: 1e-3; q is a summed loss decrease on the default scale);
        ``-inf`` broadcasts every round (until c), ``+inf`` never (in params.yaml keep it finite:
        metrics.json cannot hold an infinite value).
    svt_share : float
        Fraction of the zCDP budget spent on the SVT (our choice, see the module docstring).
    """

    c: int = field(default=15, metadata={"ge": 1})
    C_loss: float = field(default=2.0, metadata={"gt": 0})
    alpha: float = 1e-3
    svt_share: float = field(default=0.1, metadata={"gt": 0, "lt": 1})


def clipped_loss_decrease(X: np.ndarray, y: np.ndarray, old: np.ndarray, new: np.ndarray, *, clip: float,
                          row_weight: float) -> float:
    """``row_weight * sum_k [min(l_k(old), clip) - min(l_k(new), clip)]``, l_k the logistic loss of row k."""
    old_loss = np.minimum(np.logaddexp(0.0, -y * (X @ old)), clip)
    new_loss = np.minimum(np.logaddexp(0.0, -y * (X @ new)), clip)
    return row_weight * float(np.sum(old_loss - new_loss))


def fit(parties: list[Party], network: Network, params: Params, *, rng: np.random.Generator,
        evaluation: Party | None = None) -> History:
    """IPP-ADMM (Algorithm 2) on horizontally split data; see the module docstring."""
    history = History("ipp_admm")
    agents = make_agents(parties, network, loss_scale=params.loss_scale, rng=rng)
    evaluator = Evaluator(parties, evaluation, lam=params.lam)
    budget = params.budget(svt_share=params.svt_share, c=params.c)
    noises = {a.name: pp_admm.calibrate_agent(a, params, budget, sigma1_epsilon=budget.epsilon_i1)
              for a in agents}
    svts = {a.name: SparseVector(threshold=params.alpha, c=params.c, eps1=budget.eps1, eps2=budget.eps2,
                                 sensitivity=2.0 * params.C_loss * a.row_weight, rng=a.rng, party=a.name,
                                 noise=params.noise)
            for a in agents}
    sent: list[str] = []

    def local_step(agent: Agent, t: int) -> np.ndarray | None:
        svt = svts[agent.name]
        if svt.halted:
            return None
        candidate, _ = pp_admm.perturbed_update(agent, noises[agent.name], eta=params.eta)
        quality = clipped_loss_decrease(agent.X, agent.y, agent.theta, candidate, clip=params.C_loss,
                                        row_weight=agent.row_weight)
        if svt.above(quality):
            sent.append(agent.name)
            return candidate
        return None

    def extra_record(t: int) -> dict[str, int]:
        record = {"broadcasts": len(sent), "broadcasts_total": sum(s.count for s in svts.values())}
        sent.clear()
        return record

    consensus_rounds(agents, network, T=params.T, local_step=local_step, dual_step=lambda t: params.eta,
                     evaluator=evaluator, history=history, stale_ok=True, extra_record=extra_record)
    history.stop(converged=True, reason=f"ran the T = {params.T} rounds; every perturbed solve reached its "
                                        "gradient tolerance (verified)")
    pp_admm.record_privacy(history, params, agents, noises, budget, sigma1_from="epsilon_i1")
    history.ledger.notes.append(
        f"SVT: c = {params.c}, eps1 = {budget.eps1:.6g}, eps2 = {budget.eps2:.6g}, sensitivity 2 C_loss w, "
        f"threshold alpha = {params.alpha}; recorded as its zCDP cost (eps1 + eps2)^2 / (2c) = "
        f"{budget.rho_svt:.6g} (svt_share = {params.svt_share} of rho_total; our split, the paper leaves it "
        "open)")
    history.extra["broadcasts"] = {name: s.count for name, s in svts.items()}
    if params.noise:
        rho_svt = zcdp.rho_svt(c=params.c, eps1=budget.eps1, eps2=budget.eps2)
        for agent in agents:
            history.ledger.events.extend(pp_admm.gaussian_events(agent, noises[agent.name], count=params.T))
            history.ledger.events.append(ZCDPEvent(rho=rho_svt, party=agent.name))
        history.ledger.paper_bound = {"name": "pp_admm.theorem_4_1", "inputs": {
            "epsilon_i1": budget.epsilon_i1, "delta_i1": budget.delta_i1, "rho_i2": budget.rho_i2,
            "T": params.T, "c": params.c, "eps1": budget.eps1, "eps2": budget.eps2, "delta": params.delta}}
    evaluator.finish(history, [a.theta for a in agents], **pp_admm.final_privacy(noises, budget, params),
                     eps1=budget.eps1, eps2=budget.eps2,
                     broadcasts_mean=float(np.mean([s.count for s in svts.values()])))
    return history
