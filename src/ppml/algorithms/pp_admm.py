"""PP-ADMM: plausible differentially private consensus ADMM (Ding et al., CIKM 2020, Algorithm 1).

Reproduces the PP-ADMM curves of the paper's Fig. 5-7 (test error rate versus epsilon on Adult, average
training loss per iteration) and its parameter studies (Fig. 1-2: the budget split and the gradient
tolerance beta).

``variant: paper`` (default) is Algorithm 1 as written (docs/specs/pp_admm_paper.md) with eta and beta read
on the agent's **summed** loss, the reading under which the printed values work (DESIGN.md §8). The paper
writes agent i's local objective as the mean loss plus a share of the regularizer,
``f_i(theta) = (1/|D_i|) sum_n L(y theta^T x) + (lam_hat/N) ||theta||^2 / 2``, and prints eta = 0.5 and
beta = 10^-3.5 beside it. Taken on that mean scale they freeze the iterates: each round is a proximal step of
about 1/(2 eta |B_i|) against a curvature of 0.01 or less in most directions, so on Adult even the noise-free
algorithm stays at the majority class for T = 30 (``variant: literal`` keeps that form, labelled "eta and beta
read on the mean-loss scale as printed"). The paper variant multiplies the whole objective the round solves by
s_i = |D_i| (loss, lam_hat term and objective perturbation together, so the data's problem is unchanged) and
puts eta's penalty and beta's tolerance on that scale; equivalently, it is the literal form run with
eta/|D_i| and beta/|D_i| (a test pins the equivalence). Lemma 4.2's sensitivity 2 C_loss is a summed-scale
value too (:mod:`~ppml.algorithms.ipp_admm`). Each round, each agent i

1. (line 3, once) ``lam_hat = max(N lam, max_i 2.8 N c1 / ((epsilon_i1 - epsilon_i3) |D_i|))``, c1 = 1/4;
   ``lam`` is only a floor (it sets lam_hat when the noise is off with ``lam_hat_rule: lam``). lam_hat is
   the same on both readings: it weighs against the loss, which is scaled with it;
2. (line 6) draws b_i1 ~ N(0, sigma_i1^2 I), ``sigma_i1 = 2 sqrt(2 ln(1.25/delta_i1)) / (|D_i| epsilon_i3)``
   (the Gaussian mechanism on a mean-loss gradient of L2 sensitivity 2/|D_i|; on the summed reading the
   objective carries s_i b_i1, noise of the same ratio to the summed gradient's sensitivity 2);
3. (line 8) solves
   ``L_per(theta) = s_i (f_i + b_i1^T theta) + 2 lambda_i^T theta + eta sum_j ||c_ij - theta||^2`` by Newton's
   method until ``||grad L_per|| <= beta`` (re-checked on the returned point; a miss raises
   :class:`InexactSolveError` and is never released);
4. (lines 9-10) releases ``theta_hat + b_i2``, ``sigma_i2 = beta / (sqrt(2 rho_i2) mu_i)`` with
   ``mu_i = s_i lam_hat/N + 2 eta |B_i|`` the strong convexity of the problem solved (line 9 as printed, with
   the reading's own eta, beta and scale; the literal variant has s_i = 1). Note: this is the Gaussian
   mechanism for an L2 sensitivity beta/mu; two beta-approximate minimizers of the same mu-strongly convex
   problem can lie 2 beta/mu apart (AMP [2]_ uses 2 beta/mu), so the tight accountant's ledger records the
   output release with sensitivity 2 beta/mu (the paper's bound uses rho_i2 as written);
5. (line 16) updates its dual from its neighbours' released models (on the scale of the problem solved).

Budget (§5): ``rho_total = epsilon^2 / (4 ln 1/delta)`` (``calibration: paper``, the default here; it
overshoots: the conversion of Theorem 3.3 then certifies 12.7 instead of 10 at epsilon = 10 and 1.03 instead
of 1; ``calibration: exact`` uses the exact inverse), ``rho_i1 = rho_total (1 - splits) / T``,
``rho_i2 = rho_total splits / T``, ``epsilon_i1 = rho_i1 + 2 sqrt(rho_i1 ln 1/delta_i1)``,
``epsilon_i3 = eps3_ratio epsilon_i1`` (0.99). The ledger records which calibration ran. The budget, lam_hat
and sigma_i1 are the same on both readings; only eta, beta and sigma_i2 (which depends on both) differ.

Consequence (measured, see the report's epsilon-split table): with 1 % of epsilon_i1 left to line 3,
lam_hat/N on Adult (|D_i| = 7000) is about 0.11, 0.055, 0.028, 0.005 at epsilon = 0.5, 1, 2, 10: at epsilon
<= 2 a ridge weight at which logistic regression on Adult predicts (nearly) the majority class. That error
comes from line 3's regularizer, not from the noise.

``lam_hat_rule: lam`` replaces line 3 by ``lam_hat = N lam`` (a fixed lam_hat; the run is certified only if
that is at least line 3's value). ``noise: false`` switches both noises off but keeps lam_hat by its rule.

``variant: reconstructed`` is the form this project used before the paper's text was available (the summed
or mean scale by ``loss_scale``, lam_hat = max(s lam, 2 c1 w/(epsilon_i1 - epsilon_i3)),
sigma_i1 = 2w(1 + sqrt(2 ln 1/delta_i1))/epsilon_i3, sigma_i2 = (2 beta/mu)/sqrt(2 rho_i2)); together with
``loss_scale: sum`` and ``calibration: exact`` it reproduces the earlier results. Each run's ledger notes
which variant ran, and its metrics say how eta and beta were read (``reading``).

Ledger for the tight accountant: per agent and round, a Gaussian release of sigma_i1 on a gradient of
sensitivity 2w (w = 1/|D_i| in the paper and literal variants), the Jacobian factor as a LossShiftEvent of
eps_J (not a mechanism of its own: the log-ratio of the two Jacobian determinants moves the same release's
privacy loss by at most eps_J; the accountants add eps_J to that loss, :mod:`ppml.privacy.accountants`) and
the Gaussian output release. In the paper and literal variants
``eps_J = 2 ln(1 + c1 N / (|D_i| lam_hat))``, the bound line 3 rests on (lam_hat's curvature alone, the
penalty's not credited), so that both readings hold the same ledger but for sigma_i2; in the reconstructed
one ``eps_J = 2 ln(1 + c1 w / mu_i)``.

Threat model: agents are honest-but-curious and may collude; each agent's rows are protected, against its
neighbours and anyone who sees the released models, by the noise it adds itself (no trusted party).

References
----------
.. [1] J. Ding, J. Wang, G. Liang, J. Bi, M. Pan, "Towards Plausible Differentially Private ADMM Based
   Distributed Machine Learning", CIKM 2020 (arXiv 2008.04500), Algorithm 1, Theorems 3.1 and 3.3.
.. [2] R. Iyengar, J. P. Near, D. Song, O. Thakkar, A. Thakurta, L. Wang, "Towards Practical Differentially
   Private Convex Optimization", IEEE S&P 2019 (Approximate Minima Perturbation, Algorithm 1).
.. [3] M. Bun, T. Steinke, "Concentrated Differential Privacy", TCC 2016.
"""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

from ppml import runtime
from ppml.algorithms import _private_admm as private
from ppml.algorithms.decentralized_admm import (SIDE_MESSAGES, Agent, LocalSolution, Update, agent_roles,
                                                consensus_rounds, finish, local_gradient, make_agents,
                                                network_for)
from ppml.config import fail
from ppml.history import History
from ppml.network import Endpoint, Network
from ppml.parties import Party
from ppml.privacy import zcdp
from ppml.privacy.bounds_pp_admm import PPBudget, pp_admm_budget
from ppml.privacy.events import GaussianEvent, LossShiftEvent
from ppml.runtime import EVALUATOR, Public, Role

__all__ = ["MESSAGES", "SIDE_MESSAGES", "Params", "network_for", "fit", "roles", "assemble", "private_roles",
           "InexactSolveError", "AgentNoise", "lambda_hat", "calibrate_agent", "paper_lambda_hat",
           "calibrate_paper", "READINGS", "reading_scale", "row_weights", "lam_hat_info", "calibrate",
           "build_agents", "calibrate_all", "perturbed_update", "gaussian_events", "unverified_notes",
           "record_privacy", "final_privacy", "agent_facts", "planned_events"]

#: the run draws differential-privacy noise (so ``noise_source`` applies; see :mod:`ppml.privacy.noise`)
DP_NOISE = True

MESSAGES = (
    {"tag": "theta", "src": "agent i", "dst": "each neighbour j of agent i",
     "content": "theta_i + b_i2: the approximate minimizer of the objective-perturbed local problem plus "
                "Gaussian output noise (d floats)",
     "protection": "objective perturbation N(0, sigma_i1^2) and output perturbation N(0, sigma_i2^2) (zCDP)"},
)

#: Rank of the change of one row's Hessian term under replace-one neighbours (AMP's r for GLMs).
JACOBIAN_RANK = 2
#: The constant of the paper's line 3 (Algorithm 1): lam_hat >= 2.8 N c1 / ((eps_i1 - eps_i3) |D_i|).
LINE3_CONSTANT = 2.8
#: How each variant reads the paper's eta and beta (recorded in the ledger's notes and the metrics).
READINGS = {
    "paper": "η and β read on the summed-loss scale (Σ over the agent's rows; η/|D_i| and β/|D_i| on the "
             "mean scale)",
    "literal": "η and β read on the mean-loss scale as printed",
    "reconstructed": "the earlier reconstruction (η and β on the loss_scale objective)",
}


class InexactSolveError(RuntimeError):
    """A perturbed local problem was not solved to the gradient tolerance the privacy analysis assumes."""


@dataclass(frozen=True)
class Params(private.PrivateParams):
    """PP-ADMM parameters (DESIGN.md §8 defaults).

    Attributes
    ----------
    variant : {"paper", "literal", "reconstructed"}
        Algorithm 1 as written with eta and beta on the summed loss (default), as written with eta and beta on
        the mean loss, or the earlier reconstruction (see the module docstring).
    splits : float
        Fraction of the budget given to the output perturbation (paper: 0.001).
    beta : float
        Gradient-norm tolerance of the inexact local solve (paper: 10^-3.5), on the scale of the problem
        solved (the summed loss in the paper variant, the mean loss in the literal one).
    delta_i1 : float
        delta of each objective-perturbation step (paper: 1e-4).
    eps3_ratio : float
        epsilon_i3 / epsilon_i1 (paper: 0.99).
    lam_hat_rule : {"line3", "lam"}
        Paper and literal variants: lam_hat by line 3 (floored at N lam), or fixed at N lam (not certified
        when below line 3's value; for the decomposition and epsilon-split studies).
    penalty_credit : bool
        Reconstructed variant only: count the ADMM penalty's strong convexity toward lam_hat.
    calibration : {"paper", "exact", "tight"}
        Budget from (epsilon, delta): the paper's ``epsilon^2 / (4 ln 1/delta)`` (default), the exact
        inverse of ``epsilon = rho + 2 sqrt(rho ln 1/delta)``, or the largest budget whose recorded mechanisms
        have a tight epsilon of at most the target (:func:`~ppml.algorithms._private_admm.resolve_tight`).
    loss_scale : {"mean", "sum"} or None
        Reconstructed variant only (unset: "mean"; its earlier runs set "sum"); the paper and literal variants
        set their scale themselves (:func:`reading_scale`).
    """

    variant: Literal["paper", "literal", "reconstructed"] = "paper"
    splits: float = field(default=0.001, metadata={"gt": 0, "lt": 1})
    beta: float = field(default=10 ** -3.5, metadata={"gt": 0})
    delta_i1: float = field(default=1e-4, metadata={"gt": 0, "lt": 1})
    eps3_ratio: float = field(default=0.99, metadata={"gt": 0, "lt": 1})
    lam_hat_rule: Literal["line3", "lam"] = "line3"
    penalty_credit: bool = False
    calibration: Literal["exact", "paper", "tight"] = "paper"
    loss_scale: Literal["sum", "mean"] | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.variant != "reconstructed" and self.loss_scale is not None:
            fail("loss_scale", f"applies to variant 'reconstructed' only (variant {self.variant!r} reads eta "
                               f"and beta on its own scale), got {self.loss_scale!r}")
        if self.variant != "reconstructed" and self.penalty_credit:
            fail("penalty_credit", "applies to variant 'reconstructed' only")
        if self.variant == "reconstructed" and self.lam_hat_rule != "line3":
            fail("lam_hat_rule", "applies to variants 'paper' and 'literal' only")

    @property
    def agent_loss_scale(self) -> str:
        """The :func:`~ppml.algorithms.decentralized_admm.objective_scale` of the agents' programs: the
        summed loss in the paper variant, the mean loss in the literal one, ``loss_scale`` (default mean) in
        the reconstructed one."""
        if self.variant == "reconstructed":
            return self.loss_scale or "mean"
        return "sum" if self.variant == "paper" else "mean"

    def budget(self, *, svt_share: float = 0.0, c: int = 1) -> PPBudget:
        """The per-agent budget split of §8 for this run (with an SVT share for IPP-ADMM)."""
        return pp_admm_budget(epsilon=self.budget_epsilon, delta=self.delta, T=self.T, splits=self.splits,
                              delta_i1=self.delta_i1, eps3_ratio=self.eps3_ratio,
                              calibration=self.budget_calibration, svt_share=svt_share, c=c)


@dataclass(frozen=True)
class AgentNoise:
    """One agent's calibration: its regularization, solve tolerance, noises and their sensitivities.

    ``scale`` multiplies the l2 weight ``lam_hat`` and the objective noise b_i1 in the problem solved (s_i of
    the module docstring: |D_i| in the paper variant, 1 otherwise); the solved problem is
    ``scale * (lam_hat/2 ||theta||^2 + b_i1^T theta) + row_weight * sum loss + ...``.
    """

    lam_hat: float
    strong_convexity: float
    gtol: float
    sigma1: float
    sensitivity1: float
    sigma2: float
    sensitivity2: float
    jacobian_epsilon: float
    scale: float = 1.0

    @property
    def reg(self) -> float:
        """The l2 weight of the problem solved."""
        return self.scale * self.lam_hat


def lambda_hat(*, lam: float, row_weight: float, epsilon_i1: float, epsilon_i3: float,
               penalty_strong_convexity: float = 0.0) -> float:
    """Line 3: the l2 weight keeping the objective perturbation's Jacobian cost <= epsilon_i1 - epsilon_i3.

    ``max(lam, r c1 row_weight / (epsilon_i1 - epsilon_i3) - penalty_strong_convexity)`` (AMP's
    ``Lambda >= r beta / (eps1 - eps3)`` on the per-row-weighted scale); `lam` is the local l2 weight.
    """
    if not epsilon_i1 > epsilon_i3 > 0:
        raise ValueError(f"need epsilon_i1 > epsilon_i3 > 0, got {epsilon_i1!r} and {epsilon_i3!r}")
    required = JACOBIAN_RANK * private.LOSS_SMOOTHNESS * row_weight / (epsilon_i1 - epsilon_i3)
    return max(lam, required - penalty_strong_convexity)


def calibrate_agent(agent: Agent, params: Params, budget: PPBudget, *, sigma1_epsilon: float) -> AgentNoise:
    """An agent's noise for `budget`; `sigma1_epsilon` is epsilon_i3 (Algorithm 1) or epsilon_i1 (Alg. 2).

    With ``params.noise`` false: lambda-hat = the local l2 weight and no noise (the non-private inexact
    iteration).
    """
    penalty = 2.0 * params.eta * agent.degree
    reg = agent.regularization(params.lam)
    gtol = params.beta
    sensitivity1 = 2.0 * private.LOSS_LIPSCHITZ * agent.row_weight
    if not params.noise:
        return AgentNoise(lam_hat=reg, strong_convexity=reg + penalty, gtol=gtol, sigma1=0.0,
                          sensitivity1=sensitivity1, sigma2=0.0, sensitivity2=0.0, jacobian_epsilon=0.0)
    lam_hat = lambda_hat(lam=reg, row_weight=agent.row_weight, epsilon_i1=budget.epsilon_i1,
                         epsilon_i3=budget.epsilon_i3,
                         penalty_strong_convexity=penalty if params.penalty_credit else 0.0)
    mu = lam_hat + penalty
    sensitivity2 = 2.0 * gtol / mu
    return AgentNoise(
        lam_hat=lam_hat, strong_convexity=mu, gtol=gtol,
        sigma1=sensitivity1 * (1.0 + math.sqrt(2.0 * math.log(1.0 / budget.delta_i1))) / sigma1_epsilon,
        sensitivity1=sensitivity1, sigma2=zcdp.sigma_for_rho(budget.rho_i2, sensitivity2),
        sensitivity2=sensitivity2,
        jacobian_epsilon=JACOBIAN_RANK * math.log1p(private.LOSS_SMOOTHNESS * agent.row_weight / mu))


def paper_lambda_hat(*, rows: list[int], agents: int, epsilon_i1: float, epsilon_i3: float) -> float:
    """Line 3 of Algorithm 1: ``max_i 2.8 N c1 / ((epsilon_i1 - epsilon_i3) |D_i|)`` (c1 = 1/4)."""
    if not epsilon_i1 > epsilon_i3 > 0:
        raise ValueError(f"need epsilon_i1 > epsilon_i3 > 0, got {epsilon_i1!r} and {epsilon_i3!r}")
    return max(LINE3_CONSTANT * agents * private.LOSS_SMOOTHNESS / ((epsilon_i1 - epsilon_i3) * n)
               for n in rows)


def reading_scale(params: Params, rows: int) -> float:
    """s_i, the factor on the paper's mean-loss objective f_i of an agent with `rows` rows: |D_i| when eta and
    beta are read on the summed loss (``variant: paper``), 1 when on the mean loss (``literal``)."""
    return float(rows) if params.variant == "paper" else 1.0


def calibrate_paper(agent: Agent, params: Params, budget: PPBudget, *, lam_hat: float, agents: int,
                    sigma1_epsilon: float) -> AgentNoise:
    """An agent's noise by Algorithm 1 (or 2) as written: lines 6 and 9 with the common `lam_hat`.

    `sigma1_epsilon` is epsilon_i3 (Algorithm 1) or epsilon_i1 (Algorithm 2's line 6 as printed). The problem
    solved is s_i times the mean-scale one (:func:`reading_scale`), so its strong convexity is
    ``mu = s_i lam_hat/N + 2 eta |B_i|`` and line 9's sigma_i2 = beta / (sqrt(2 rho_i2) mu) takes the
    reading's eta and beta. ``sensitivity2`` is 2 beta/mu, the sensitivity of a beta-approximate minimizer
    (what the tight accountant is told); the paper's sigma_i2 corresponds to beta/mu. The Jacobian term is
    line 3's bound, from lam_hat alone: the same on either reading.
    """
    n_i = agent.rows
    scale = reading_scale(params, n_i)
    reg = lam_hat / agents
    mu = scale * reg + 2.0 * params.eta * agent.degree
    sensitivity1 = 2.0 * private.LOSS_LIPSCHITZ / n_i
    if not params.noise:
        return AgentNoise(lam_hat=reg, strong_convexity=mu, gtol=params.beta, sigma1=0.0,
                          sensitivity1=sensitivity1, sigma2=0.0, sensitivity2=0.0, jacobian_epsilon=0.0,
                          scale=scale)
    jacobian = JACOBIAN_RANK * math.log1p(private.LOSS_SMOOTHNESS / (n_i * reg))
    sigma1 = 2.0 * math.sqrt(2.0 * math.log(1.25 / budget.delta_i1)) / (n_i * sigma1_epsilon)
    sigma2 = params.beta / (math.sqrt(2.0 * budget.rho_i2) * mu)
    return AgentNoise(lam_hat=reg, strong_convexity=mu, gtol=params.beta, sigma1=sigma1,
                      sensitivity1=sensitivity1, sigma2=sigma2, sensitivity2=2.0 * params.beta / mu,
                      jacobian_epsilon=jacobian, scale=scale)


def build_agents(parties: list[Party], network: Network, params: Params, *,
                 rng: np.random.Generator) -> list[Agent]:
    """Every agent in this process (unit tests), with the row weights of a run (:func:`row_weights`)."""
    agents = make_agents(parties, network, loss_scale=params.agent_loss_scale, rng=rng)
    weights = row_weights(Public.from_parties(parties), params)
    if weights is not None:
        for agent in agents:
            agent.row_weight = weights[agent.name]
    return agents


def row_weights(public: Public, params: Params) -> dict[str, float] | None:
    """Each row's loss weight s_i/|D_i| (:func:`reading_scale`): 1 in the paper variant (the agent's summed
    loss), 1/|D_i| in the literal one (its mean loss); None in the reconstructed one (the common weight of
    ``loss_scale``)."""
    if params.variant == "reconstructed":
        return None
    return {p.name: reading_scale(params, p.train_rows) / p.train_rows for p in public.parties}


def lam_hat_info(params: Params, budget: PPBudget, rows: list[int]) -> dict[str, float]:
    """What the paper (or literal) variant's lam_hat is (line 3 over every agent's row count, public) and what
    line 3 gives; empty for the reconstructed variant (each agent's own lambda-hat)."""
    if params.variant == "reconstructed":
        return {}
    n_agents = len(rows)
    line3 = paper_lambda_hat(rows=rows, agents=n_agents, epsilon_i1=budget.epsilon_i1,
                             epsilon_i3=budget.epsilon_i3)
    lam_hat = n_agents * params.lam if params.lam_hat_rule == "lam" else max(n_agents * params.lam, line3)
    return {"lam_hat": lam_hat, "lam_hat_line3": line3}


def calibrate(agent: Agent, params: Params, budget: PPBudget, *, sigma1_from: str, lam_info: dict[str, float],
              agents: int) -> AgentNoise:
    """One agent's calibration (it runs this itself): :func:`calibrate_agent` or :func:`calibrate_paper`."""
    sigma1_epsilon = getattr(budget, sigma1_from)
    if params.variant == "reconstructed":
        return calibrate_agent(agent, params, budget, sigma1_epsilon=sigma1_epsilon)
    return calibrate_paper(agent, params, budget, lam_hat=lam_info["lam_hat"], agents=agents,
                           sigma1_epsilon=sigma1_epsilon)


def calibrate_all(agents: list[Agent], params: Params, budget: PPBudget, *,
                  sigma1_from: str) -> tuple[dict[str, AgentNoise], dict[str, float]]:
    """Every agent's calibration in this process (unit tests), and what the ledger records about lam_hat."""
    lam_info = lam_hat_info(params, budget, [a.X.shape[0] for a in agents])
    return ({a.name: calibrate(a, params, budget, sigma1_from=sigma1_from, lam_info=lam_info, agents=len(agents))
             for a in agents}, lam_info)


def perturbed_update(agent: Agent, noise: AgentNoise, *, eta: float) -> tuple[np.ndarray, LocalSolution]:
    """Lines 4-6 for one agent: objective-perturbed inexact solve (verified), then output perturbation.

    Raises
    ------
    InexactSolveError
        When the solve did not reach the gradient tolerance (the privacy analysis would not hold).
    """
    d = agent.theta.shape[0]
    b1 = noise.scale * agent.rng.normal(0.0, noise.sigma1, d) if noise.sigma1 > 0 else None
    problem = agent.problem(reg=noise.reg, penalty=eta, linear=b1)
    solution = agent.solve(problem, gtol=noise.gtol)
    reached = float(np.linalg.norm(local_gradient(problem, solution.theta)))
    if not (solution.converged and reached <= noise.gtol):
        raise InexactSolveError(f"{agent.name}: the perturbed local problem reached |grad| = {reached:.3g} "
                                f"after {solution.iterations} Newton steps, not the tolerance "
                                f"{noise.gtol:.3g}")
    release = solution.theta
    if noise.sigma2 > 0:
        release = release + agent.rng.normal(0.0, noise.sigma2, d)
    return release, solution


def gaussian_events(name: str, noise: AgentNoise, *, count: int) -> list:
    """The ledger events of `count` rounds of lines 4-6 for agent `name` (see the module docstring)."""
    return [GaussianEvent(sigma=noise.sigma1, sensitivity=noise.sensitivity1, count=count, party=name),
            LossShiftEvent(epsilon=noise.jacobian_epsilon, count=count, party=name),
            GaussianEvent(sigma=noise.sigma2, sensitivity=noise.sensitivity2, count=count, party=name)]


def unverified_notes(params: Params, *, sigma1_from: str, lam_info: dict[str, float]) -> list[str]:
    """The run notes PP-ADMM and IPP-ADMM share: which variant ran, its choices, how the ledger reads."""
    algorithm = "1" if sigma1_from == "epsilon_i3" else "2"
    notes = [f"variant {params.variant!r} of Algorithm {algorithm}: {READINGS[params.variant]}; calibration "
             f"{params.calibration!r}"
             + (" (the paper's rho = epsilon^2/(4 ln 1/delta): overshoots the target, Theorem 3.3's "
                "conversion certifies more than epsilon)" if params.calibration == "paper" else "")]
    if params.variant != "reconstructed":
        objective = ("|D_i| f_i = sum L + |D_i| (lam_hat/N) R + |D_i| b_i1^T theta"
                     if params.variant == "paper" else "f_i = (1/|D_i|) sum L + (lam_hat/N) R + b_i1^T theta")
        notes += [
            f"local problems {objective}, plus 2 lambda_i^T theta and the penalty eta = {params.eta:g}; "
            f"solved to |grad| <= beta = {params.beta:.4g} on that scale",
            f"lam_hat = {lam_info['lam_hat']:.6g} (rule {params.lam_hat_rule!r}; line 3 gives "
            f"{lam_info['lam_hat_line3']:.6g}); lam_hat/N = {lam_info['lam_hat'] / params.agents:.6g}",
            f"sigma_i1 = 2 sqrt(2 ln(1.25/delta_i1)) / (|D_i| {sigma1_from}) as Algorithm {algorithm} line 6 "
            "prints it" + (" (epsilon_i1 in Algorithm 2 is probably a typo for epsilon_i3)"
                           if sigma1_from == "epsilon_i1" else ""),
            "sigma_i2 = beta / (sqrt(2 rho_i2) mu), mu = " + ("|D_i| " if params.variant == "paper" else "")
            + "lam_hat/N + 2 eta |B_i| the strong convexity of the problem solved, as line 9 prints it; the "
            "ledger records the output release with sensitivity 2 beta/mu (two beta-approximate minimizers)",
            "the Jacobian term is line 3's bound 2 ln(1 + c1 N/(|D_i| lam_hat)) (the penalty not credited)",
        ]
    else:
        notes += [
            f"local objectives on the {params.loss_scale!r} scale; beta = {params.beta:.4g} bounds the "
            "gradient on it",
            "lambda-hat = max(s lam, 2 c1 w / (epsilon_i1 - epsilon_i3)"
            + (" - 2 eta V_i" if params.penalty_credit else "") + ") (after AMP, not the paper's line 3)",
            f"sigma_i1 calibrated with {sigma1_from} as 2w(1 + sqrt(2 ln 1/delta_i1))/eps",
        ]
    notes.append("the objective perturbation is recorded as a Gaussian release (sigma_i1, sensitivity 2w) plus "
                 "its Jacobian factor as a loss shift of eps_J (that release's privacy loss raised by eps_J, "
                 "not a separate mechanism); the paper instead counts rho_i1 per step")
    return notes


def certify_lam_hat(history: History, params: Params, lam_info: dict[str, float]) -> None:
    """A fixed lam_hat below line 3's value voids the objective perturbation's guarantee: no epsilon."""
    if params.noise and lam_info and lam_info["lam_hat"] < lam_info["lam_hat_line3"] * (1 - 1e-12):
        history.ledger.certified = False
        history.ledger.notes.append("lam_hat is below line 3's value: the Jacobian bound fails, no epsilon is "
                                    "certified (an ablation, not a private run)")


def _agent_program(endpoint: Endpoint, party: Party, *, neighbours: tuple[str, ...], scale: float,
                   row_weight: float, rng: np.random.Generator, params: Params, budget: PPBudget,
                   lam_info: dict[str, float], agents: int) -> dict[str, Any]:
    """PP-ADMM (Algorithm 1) at one agent: its calibration, then T rounds of lines 4-16.

    Reports its Newton steps of each round to the evaluator; returns its calibration and whether its rows lie
    in the unit ball.
    """
    agent = Agent(party, endpoint, neighbours, scale=scale, row_weight=row_weight, rng=rng)
    noise = calibrate(agent, params, budget, sigma1_from="epsilon_i3", lam_info=lam_info, agents=agents)

    def local_step(t: int) -> Update:
        release, solution = perturbed_update(agent, noise, eta=params.eta)
        return release, {"newton_steps": solution.iterations}

    consensus_rounds(agent, T=params.T, local_step=local_step, dual_step=lambda t: params.eta,
                     agents=params.agents)
    return {"noise": noise, "rows_in_unit_ball": agent.rows_in_unit_ball,
            "nominal_epsilon": params.nominal_epsilon}


def _round_record(params: Params, t: int, facts: list[dict[str, Any]]) -> dict[str, int]:
    """The round's Newton steps over all agents."""
    return {"newton_steps": sum(f["newton_steps"] for f in facts)}


def private_roles(public: Public, params: Params, *, rng: np.random.Generator, network: Network,
                  program: Any, algorithm: str, budget: PPBudget, round_record: Any,
                  facts: dict[str, str] | None = None) -> list[Role]:
    """PP-ADMM's and IPP-ADMM's roles: each agent gets the public budget and lam_hat (line 3 reads every
    agent's row count, which is public). `facts`: the kinds of the round facts the agents report to the
    evaluator (:func:`~ppml.algorithms.decentralized_admm.evaluator_program` checks them)."""
    return agent_roles(public, params, rng=rng, network=network, program=program, algorithm=algorithm,
                       loss_scale=params.agent_loss_scale, row_weights=row_weights(public, params),
                       round_record=round_record, facts=facts, budget=budget,
                       lam_info=lam_hat_info(params, budget, [p.train_rows for p in public.parties]),
                       agents=len(public.parties))


def agent_facts(public: Public, params: Params, network: Network) -> list[private.AgentFacts]:
    """Every agent's public facts under `params`'s reading (the row weights of :func:`row_weights`)."""
    return private.agent_facts(public, network, loss_scale=params.agent_loss_scale,
                               row_weights=row_weights(public, params))


def planned_events(params: Params, facts: list[private.AgentFacts]) -> list:
    """The events a run under `params`'s budget records, from public facts: each agent's calibration as it
    makes it (:func:`calibrate`), T rounds of lines 4-6 (what :func:`assemble` records from the agents'
    reports)."""
    budget = params.budget()
    lam_info = lam_hat_info(params, budget, [f.rows for f in facts])
    return [event for f in facts for event in gaussian_events(
        f.name, calibrate(f, params, budget, sigma1_from="epsilon_i3", lam_info=lam_info, agents=len(facts)),
        count=params.T)]


def roles(public: Public, params: Params, *, rng: np.random.Generator, network: Network) -> list[Role]:
    """An agent program per party and the evaluator's (which records each round's Newton steps)."""
    facts = agent_facts(public, params, network)
    params = private.resolve_tight(params, lambda p: planned_events(p, facts), facts=tuple(facts))
    return private_roles(public, params, rng=rng, network=network, program=_agent_program,
                         algorithm="pp_admm", budget=params.budget(), round_record=_round_record,
                         facts={"newton_steps": "int"})


def assemble(public: Public, params: Params, results: dict[str, Any]) -> History:
    """The evaluator's records; the ledger from every agent's own calibration."""
    names = public.names
    params = private.adopt_nominal(params, results, names)
    evaluated = results[EVALUATOR]
    history = evaluated["history"]
    budget = params.budget()
    lam_info = lam_hat_info(params, budget, [p.train_rows for p in public.parties])
    noises = {name: results[name]["noise"] for name in names}
    history.stop(converged=True, reason=f"ran the T = {params.T} rounds; every perturbed solve reached "
                                        f"its gradient tolerance (verified)")
    record_privacy(history, params, {name: results[name]["rows_in_unit_ball"] for name in names}, noises,
                   budget, sigma1_from="epsilon_i3", lam_info=lam_info)
    if params.noise:
        for name in names:
            history.ledger.events.extend(gaussian_events(name, noises[name], count=params.T))
        history.ledger.paper_bound = {"name": "pp_admm.theorem_3_3", "inputs": {
            "epsilon_i1": budget.epsilon_i1, "delta_i1": budget.delta_i1, "rho_i2": budget.rho_i2,
            "T": params.T, "delta": params.delta}}
    certify_lam_hat(history, params, lam_info)
    return finish(history, evaluated, **final_privacy(noises, budget, params))


def fit(parties: list[Party], network: Network, params: Params, *, rng: np.random.Generator,
        evaluation: Party | None = None) -> History:
    """PP-ADMM (Algorithm 1) on horizontally split data; see the module docstring."""
    return runtime.fit(sys.modules[__name__], parties, network, params, rng=rng, evaluation=evaluation)


def record_privacy(history: History, params: Params, in_unit_ball: dict[str, bool],
                   noises: dict[str, AgentNoise], budget: PPBudget, *, sigma1_from: str,
                   lam_info: dict[str, float]) -> None:
    """Ledger target, certification and notes; the calibration of every agent in ``history.extra``."""
    private.start_ledger(history, params, in_unit_ball)
    history.ledger.notes.extend(unverified_notes(params, sigma1_from=sigma1_from, lam_info=lam_info))
    history.extra["variant"] = params.variant
    history.extra["calibration"] = params.calibration
    history.extra["lam_hat"] = dict(lam_info)
    history.extra["budget"] = {k: getattr(budget, k) for k in budget.__dataclass_fields__}
    history.extra["agents"] = {name: {k: getattr(n, k) for k in n.__dataclass_fields__}
                               for name, n in noises.items()}


def final_privacy(noises: dict[str, AgentNoise], budget: PPBudget, params: Params) -> dict[str, Any]:
    """Calibration values for metrics.json (the largest over agents where they differ) and the reading."""
    return {"reading": READINGS[params.variant], "rho_total": budget.rho_total if params.noise else 0.0,
            "epsilon_i1": budget.epsilon_i1, "rho_i2": budget.rho_i2,
            "sigma1": max(n.sigma1 for n in noises.values()),
            "sigma2": max(n.sigma2 for n in noises.values()),
            "lam_hat": max(n.lam_hat for n in noises.values())}
