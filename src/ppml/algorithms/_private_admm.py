"""What the differentially private consensus-ADMM variants share: parameters, noise, calibration, ledger.

Used by :mod:`~ppml.algorithms.pp_admm`, :mod:`~ppml.algorithms.ipp_admm`, :mod:`~ppml.algorithms.dvp`,
:mod:`~ppml.algorithms.m_admm` and :mod:`~ppml.algorithms.r_admm`. The sensitivities below assume what those
papers assume and what :attr:`Agent.rows_in_unit_ball` checks in every run: rows of L2 norm at most 1, labels
±1 and the logistic loss, whose derivative is bounded by 1 (c1 = 1 in M-ADMM's notation) and whose second
derivative by 1/4.

References
----------
.. [1] K. Chaudhuri, C. Monteleoni, A. D. Sarwate, "Differentially Private Empirical Risk Minimization",
   JMLR 12, 2011 (objective perturbation, Algorithm 2; noise density proportional to exp(-zeta ||b||)).
.. [2] X. Zhang, M. M. Khalili, M. Liu, "Improving the Privacy and Accuracy of ADMM-Based Distributed
   Algorithms", ICML 2018 (the per-iteration objective-perturbation bound, reconstructed in
   ``docs/specs/m_admm.md``).
.. [3] J. Ding, J. Wang, G. Liang, J. Bi, M. Pan, "Towards Plausible Differentially Private ADMM Based
   Distributed Machine Learning", CIKM 2020 (all baselines calibrated to the same total zCDP budget).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Literal

import numpy as np

from ppml.algorithms import decentralized_admm
from ppml.config import fail
from ppml.history import History
from ppml.privacy import zcdp
from ppml.privacy.calibration import largest_within
from ppml.privacy.events import PrivacyEvent

#: Bound on |loss'| of the logistic loss (with ||x|| <= 1 also the per-row gradient norm bound).
LOSS_LIPSCHITZ = 1.0
#: Bound on loss'' of the logistic loss.
LOSS_SMOOTHNESS = 0.25


@dataclass(frozen=True)
class PrivateParams(decentralized_admm.Params):
    """Consensus ADMM parameters plus the privacy target every private variant is calibrated to.

    Attributes
    ----------
    epsilon, delta : float
        Target (epsilon, delta) of the whole run (DESIGN.md §8: epsilon in {0.5, 1, 1.5, 2, 10},
        delta = 1e-4).
    calibration : {"exact", "paper", "tight"}
        How the total zCDP budget follows from (epsilon, delta): the exact inverse of
        ``epsilon = rho + 2 sqrt(rho ln 1/delta)`` (default), PP-ADMM's ``epsilon^2 / (4 ln 1/delta)``, or
        ``tight``: the largest budget whose mechanisms, as the run will record them, have a tight epsilon (the
        accountant of ``ppml.privacy.accountants.tight_epsilon``, every party apart) of at most epsilon. Each
        run finds it before its first round from public facts (row counts, the graph): the budget of the exact
        calibration at a larger nominal epsilon (:func:`resolve_tight`), so that private algorithms compare
        at one tight epsilon.
    noise : bool
        False switches every noise off (not private; for the convergence tests and ablations).

    A ``tight`` run's nominal epsilon is not a parameter (nor a field: run.json lists parameters): see
    :attr:`nominal_epsilon`.
    """

    epsilon: float = field(default=1.0, metadata={"gt": 0})
    delta: float = field(default=1e-4, metadata={"gt": 0, "lt": 1})
    calibration: Literal["exact", "paper", "tight"] = "exact"
    noise: bool = True

    def __post_init__(self) -> None:
        # a target the calibration cannot turn into a finite budget (epsilon = 1e300: epsilon^2 overflows) is a
        # parameter error here, not an OverflowError in the middle of training; a tight budget is at least the
        # exact one at the target
        calibration = "exact" if self.calibration == "tight" else self.calibration
        try:
            rho = zcdp.rho_from_epsilon(self.epsilon, self.delta, calibration=calibration)
        except (OverflowError, ValueError) as exc:
            fail("epsilon", f"cannot be calibrated with calibration {self.calibration!r} at delta {self.delta!r}: "
                            f"{exc}; got {self.epsilon!r}")
        if not math.isfinite(rho):
            fail("epsilon", f"gives a budget rho = {rho!r}; got {self.epsilon!r}")

    @property
    def nominal_epsilon(self) -> float | None:
        """The nominal epsilon a ``tight`` run found (:func:`with_nominal`); None before, and for the others."""
        return self.__dict__.get("_nominal_epsilon")

    @property
    def budget_epsilon(self) -> float:
        """The epsilon the budget is calibrated from: the target, or a tight run's nominal epsilon."""
        if self.calibration != "tight":
            return self.epsilon
        if self.nominal_epsilon is None:
            if not self.noise:  # nothing is released: no budget to find
                return self.epsilon
            raise RuntimeError("calibration 'tight' has no budget before resolve_tight() has found it")
        return self.nominal_epsilon

    @property
    def budget_calibration(self) -> str:
        """The closed-form calibration applied to :attr:`budget_epsilon` ("exact" for a tight run)."""
        return "exact" if self.calibration == "tight" else self.calibration

    @property
    def rho_total(self) -> float:
        """The run's zCDP budget per agent."""
        return zcdp.rho_from_epsilon(self.budget_epsilon, self.delta, calibration=self.budget_calibration)


def with_nominal(params: PrivateParams, nominal: float) -> PrivateParams:
    """A copy of `params` with the nominal epsilon of a tight calibration set (an attribute of the instance,
    not a dataclass field: ``dataclasses.replace`` drops it, and run.json does not list it)."""
    out = replace(params)
    object.__setattr__(out, "_nominal_epsilon", float(nominal))
    return out


#: Nominal epsilons found in this process, by (params, the public facts they were planned from): the seeds
#: of a run share them, and each search composes a few dozen accountants.
_NOMINAL: dict[tuple[Any, ...], float] = {}


def resolve_tight(params: PrivateParams, planned: Callable[[PrivateParams], list[PrivacyEvent]], *,
                  facts: tuple[Any, ...]) -> PrivateParams:
    """`params` with its tight budget found, or `params` itself when its calibration is not ``tight``.

    `planned(p)` are the events the run will record under the budget of `p`, a function of the public
    `facts` alone (the variant's, the same one its agents calibrate by); the nominal epsilon is the largest
    whose events' tight epsilon is at most the target (:func:`ppml.privacy.calibration.largest_within`).
    """
    if params.calibration != "tight" or not params.noise:
        return params
    from ppml.privacy.accountants import tight_epsilon

    def spent(nominal: float) -> float:
        # the tight epsilon is the largest party's: agents with the same events (equal row counts) are composed once
        by_party: dict[str, list[PrivacyEvent]] = {}
        for event in planned(with_nominal(params, nominal)):
            by_party.setdefault(event.party, []).append(event)
        distinct: dict[str, list[PrivacyEvent]] = {}
        for events in by_party.values():
            distinct.setdefault(repr([{k: v for k, v in e.to_dict().items() if k != "party"} for e in events]),
                                events)
        return float(tight_epsilon([e for events in distinct.values() for e in events], params.delta)["epsilon"])

    key = (type(params).__qualname__, params, facts)
    if key not in _NOMINAL:
        _NOMINAL[key] = largest_within(spent, params.epsilon)
    return with_nominal(params, _NOMINAL[key])


def adopt_nominal(params: PrivateParams, results: dict[str, Any], names: list[str]) -> PrivateParams:
    """The evaluator's `params` with the nominal epsilon every agent reports it calibrated by (a tight run)."""
    if params.calibration != "tight" or not params.noise:
        return params
    reported = {name: results[name].get("nominal_epsilon") for name in names}
    for name, value in reported.items():
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not (math.isfinite(value) and value > 0):
            raise ValueError(f"agent {name!r} reports the nominal epsilon {value!r}: not a positive finite number")
    values = set(reported.values())
    if len(values) != 1:
        raise ValueError(f"the agents report different nominal epsilons: {reported}")
    return with_nominal(params, values.pop())


@dataclass(frozen=True)
class AgentFacts:
    """What every party knows of an agent before a run (its name, row count and degree, the objective's scale
    and row weight): enough to plan its calibration."""

    name: str
    rows: int
    degree: int
    scale: float
    row_weight: float

    def regularization(self, lam: float) -> float:
        """The agent's local l2 weight, as :meth:`~ppml.algorithms.decentralized_admm.Agent.regularization`."""
        return self.scale * lam


def agent_facts(public: Any, network: Any, *, loss_scale: str,
                row_weights: dict[str, float] | None = None) -> list[AgentFacts]:
    """Every agent's :class:`AgentFacts`, as :func:`~ppml.algorithms.decentralized_admm.agent_roles` gives
    them to the agents' programs."""
    names = public.names
    nbrs = decentralized_admm.graph_neighbours(network, names)
    rows = [p.train_rows for p in public.parties]
    scale, row_weight = decentralized_admm.objective_scale(rows, loss_scale=loss_scale)
    return [AgentFacts(name, n, len(nbrs[name]), scale, row_weight if row_weights is None else row_weights[name])
            for name, n in zip(names, rows)]


def gamma_noise(rng: np.random.Generator, d: int, *, rate: float) -> np.ndarray:
    """A draw from the density proportional to ``exp(-rate ||b||)`` on R^d.

    Its norm is Gamma(shape d, scale 1/rate) and its direction uniform on the sphere ([1]_, Alg. 2).
    """
    if rate <= 0:
        raise ValueError(f"the noise rate must be > 0, got {rate!r}")
    direction = rng.standard_normal(d)
    return rng.gamma(d, 1.0 / rate) * direction / np.linalg.norm(direction)


def objective_perturbation_epsilon(*, rate: float, kappa: float, row_weight: float, strong_convexity: float,
                                   jacobian_terms: int = 2) -> float:
    """Pure-DP epsilon of one release ``argmin G_D(f) + kappa b^T f`` with density(b) ∝ exp(-rate ||b||).

    ``2 c1 row_weight rate / kappa + jacobian_terms * ln(1 + c2 row_weight / strong_convexity)``, where
    row_weight (C/B_i) multiplies each row's loss in G_D and strong_convexity is G_D's modulus without the
    data ([2]_, lemma reconstructed in ``docs/specs/m_admm.md``: swapping one row moves ∇G_D by at most
    2 c1 row_weight; the Jacobian ratio is bounded as in [1]_). ``jacobian_terms = 2`` is the paper-style
    bound, 1 the tighter one valid for replace-one neighbours.
    """
    if kappa <= 0 or strong_convexity <= 0:
        raise ValueError(f"kappa and the strong convexity must be > 0, got {kappa!r} and "
                         f"{strong_convexity!r}")
    return (2.0 * LOSS_LIPSCHITZ * row_weight * rate / kappa
            + jacobian_terms * math.log1p(LOSS_SMOOTHNESS * row_weight / strong_convexity))


def calibrate_rate(step_epsilons: Callable[[float], np.ndarray], rho: float, *, what: str) -> float:
    """The noise rate whose releases cost exactly `rho` in zCDP: ``sum_t step_epsilons(rate)_t^2 / 2 = rho``.

    `step_epsilons` must increase with the rate (more concentrated noise, less privacy). Solved by
    bisection on log(rate) to a relative 1e-12.

    Raises
    ------
    ValueError
        When even a vanishing rate exceeds the budget (the Jacobian terms alone): the budget is infeasible.
    """

    def cost(rate: float) -> float:
        return float(np.sum(np.square(step_epsilons(rate)))) / 2.0

    floor = cost(0.0)
    if floor >= rho:
        raise ValueError(f"{what}: budget infeasible: the Jacobian terms alone cost rho = {floor:.4g} "
                         f">= the budget {rho:.4g}")
    lo, hi = 0.0, 1.0
    while cost(hi) < rho:
        lo, hi = hi, 2.0 * hi
    while hi - lo > 1e-12 * hi:
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if cost(mid) < rho else (lo, mid)
    return lo


def jacobian_regularization(jacobian_cost: Callable[[float], float], rho: float) -> float:
    """Extra l2 weight phi >= 0 that keeps the Jacobian terms of a run's releases within a quarter of `rho`.

    `jacobian_cost(phi)` is the zCDP cost of the Jacobian terms alone, ``sum_t J_t^2 / 2``, when phi is added
    to the local strong convexity (it decreases in phi). Returns 0 when they already cost at most rho/4,
    else the phi that makes them cost exactly rho/4, so that they take at most half of each release's
    epsilon: Chaudhuri et al.'s remedy ([1]_, Algorithm 2, the Delta term; DVP's Phi) carried over to M-ADMM
    and R-ADMM, whose own papers raise no such case (our extension; without it a small budget is infeasible
    when the penalty is small against the per-row loss weight).
    """
    target = rho / 4.0
    if jacobian_cost(0.0) <= target:
        return 0.0
    lo, hi = 0.0, 1.0
    while jacobian_cost(hi) > target:
        lo, hi = hi, 2.0 * hi
    while hi - lo > 1e-12 * hi:
        mid = 0.5 * (lo + hi)
        lo, hi = (lo, mid) if jacobian_cost(mid) <= target else (mid, hi)
    return hi


def start_ledger(history: History, params: PrivateParams, in_unit_ball: dict[str, bool]) -> None:
    """Fill the ledger's target, calibration note and certification.

    A run is certified only when its noise is on and every agent's rows lie in the unit ball (the
    assumption behind every sensitivity here; `in_unit_ball` is each agent's own report of
    :attr:`Agent.rows_in_unit_ball`); otherwise it reports no epsilon.
    """
    ledger = history.ledger
    ledger.target_epsilon = params.epsilon
    ledger.delta = params.delta
    ledger.notes.append(f"budget rho_total = {params.rho_total:.6g} from epsilon = {params.epsilon}, "
                        f"delta = {params.delta} by the {params.calibration!r} calibration"
                        + ("" if params.calibration != "tight" or not params.noise else
                           f" (the exact calibration at the nominal epsilon {params.nominal_epsilon:.6g}, the "
                           "largest whose planned mechanisms have a tight epsilon of at most the target)"))
    if not params.noise:
        ledger.notes.append("noise switched off (noise: false): not private, nothing certified")
        return
    outside = [name for name, inside in in_unit_ball.items() if not inside]
    if outside:
        ledger.notes.append(f"rows of {outside} have L2 norm > 1: the sensitivities do not hold, no epsilon "
                            "is certified")
        return
    ledger.certified = True
