"""Tight privacy accountants over Google's ``dp-accounting``: privacy loss distributions where they are exact,
Rényi DP where they are not.

The papers bound their runs with the composition theorems they cite (advanced composition, zCDP
conversions); :mod:`ppml.privacy.paper_bounds` evaluates those. For the same mechanisms this module gives
the tighter bound a careful analyst would report today:

- :class:`PldAccountant` composes privacy loss distributions numerically [3]_. It takes the events whose
  privacy loss distribution is known exactly: a Gaussian or Laplace release (the loss between two noise
  distributions one sensitivity apart) and a pure epsilon-DP mechanism (the loss of binary randomized
  response with log-odds epsilon; every epsilon-DP mechanism is a post-processing of it, so composing these
  gives the optimal composition of pure-DP mechanisms [6]_). The discretization is pessimistic (losses
  rounded up onto a grid of step 1e-4, truncated tails moved to an infinite loss), so its epsilon is an upper
  bound. A Gaussian event (n Gaussian releases are one Gaussian of n^(-1/2) times the noise) and a pure-DP
  event (its n-fold loss is discretized once, :func:`randomized_response_pld`) lie at most one grid step
  above the exact value; a Laplace event of count n, and n separate events convolved, at most about n steps
  (each discretized distribution rounded up once; for Gaussians far less in practice). The tests check
  this against the analytic Gaussian mechanism [7]_ and against the exact optimal composition of pure DP.
  A loss-shift event (:class:`~ppml.privacy.events.LossShiftEvent`: another release's privacy loss moved by
  at most epsilon, deterministically) is not composed as a mechanism: it raises the composed privacy loss
  by its full epsilon, exactly (no grid), the worst case for every epsilon (:meth:`PldAccountant.delta`).
- :class:`RdpAccountant` composes Rényi DP curves [1]_: the Gaussian's and the Laplace's exactly, a pure
  epsilon-DP mechanism by the curve of randomized response (the largest an epsilon-DP mechanism can have, by
  the same post-processing argument [6]_), a rho-zCDP event by ``alpha * rho`` [4]_ and a loss shift of
  epsilon by adding epsilon at every order (``dp-accounting``'s (xi, rho)-zCDP event with xi = epsilon,
  rho = 0: a loss raised by at most epsilon at every output raises every Rényi divergence by at most
  epsilon); it converts to (epsilon, delta) by [2]_. Its epsilon is valid but looser than PLD's.
- :func:`tight_epsilon` composes each party's events on its own and reports the largest party epsilon (every
  paper protects each party's records separately, and a party's record enters only that party's releases:
  parallel composition across parties). A party whose events all have an exact privacy loss distribution (or
  are loss shifts) is composed by PLD; a party with a zCDP event is composed by RDP, because a zCDP guarantee
  bounds only Rényi divergences, which determine no privacy loss distribution. There is no silent fallback:
  the result names the accountant that produced each number (``method``: ``"pld"`` or ``"rdp"``) and, where
  PLD could not be used, why (``fallback_reason``, naming the event kind).

Events come from :mod:`ppml.privacy.events`. A Gaussian event's noise multiplier is ``sigma / sensitivity``
and a Laplace event's is ``scale / sensitivity``: the L2 (L1) sensitivity is stated for the neighbouring
relation the paper uses, so the accountants compose the mechanism's privacy loss between two Gaussians
(Laplaces) whose means are one sensitivity apart, which is exactly what ``dp-accounting`` computes for an
unsampled mechanism of noise multiplier ``sigma / sensitivity``. An event with zero noise (or a pure-DP event
of infinite epsilon) is not private: epsilon is infinite. Events an accountant cannot compose raise
:class:`UnsupportedEventError`.

References
----------
.. [1] I. Mironov, "Rényi Differential Privacy", CSF 2017.
.. [2] C. Canonne, G. Kamath, T. Steinke, "The Discrete Gaussian for Differential Privacy", NeurIPS 2020
   (RDP to (epsilon, delta) conversion, Proposition 12).
.. [3] S. Meiser, E. Mohammadi, "Tight on Budget?", CCS 2018; A. Koskela, J. Jälkö, A. Honkela,
   "Computing Tight Differential Privacy Guarantees Using FFT", AISTATS 2020 (privacy loss distributions).
.. [4] M. Bun, T. Steinke, "Concentrated Differential Privacy", TCC 2016 (rho-zCDP is the RDP curve
   alpha * rho).
.. [5] Google, ``dp-accounting`` (https://github.com/google/differential-privacy/tree/main/python).
.. [6] P. Kairouz, S. Oh, P. Viswanath, "The Composition Theorem for Differential Privacy", ICML 2015
   (every (epsilon, delta)-DP mechanism is a post-processing of randomized response; optimal composition).
.. [7] B. Balle, Y.-X. Wang, "Improving the Gaussian Mechanism for Differential Privacy: Analytical
   Calibration and Optimal Denoising", ICML 2018 (the exact (epsilon, delta) curve of a Gaussian, Theorem 8).
"""

from __future__ import annotations

import math
from collections import defaultdict
from typing import Any, Iterable

import dp_accounting
import numpy as np
from dp_accounting import rdp
from dp_accounting.pld import privacy_loss_distribution as pld_lib
from scipy import stats

from ppml.privacy.events import (GaussianEvent, LaplaceEvent, LossShiftEvent, PrivacyEvent, PureDPEvent,
                                 UnsupportedEventError, ZCDPEvent)

__all__ = ["RdpAccountant", "PldAccountant", "tight_epsilon", "to_dp_event", "randomized_response_pld",
           "PLD_KINDS", "NO_PLD", "UnsupportedEventError"]

#: Event kinds whose privacy loss distribution is known exactly (or, for a loss shift, its largest effect on
#: it), so that PLD composes them.
PLD_KINDS = frozenset({GaussianEvent.kind, LaplaceEvent.kind, PureDPEvent.kind, LossShiftEvent.kind})

#: Why PLD cannot compose an event kind (the ``fallback_reason`` of :func:`tight_epsilon` quotes it).
NO_PLD = {
    ZCDPEvent.kind: "a rho-zCDP guarantee bounds only Renyi divergences, which determine no privacy loss "
                    "distribution",
    "svt": "the sparse vector technique has no event in dp-accounting",
}
_NO_EXACT_PLD = "no exact privacy loss distribution is known"


def _noise_multiplier(event: GaussianEvent | LaplaceEvent) -> float:
    """``sigma / sensitivity`` (Gaussian) or ``scale / sensitivity`` (Laplace), checked."""
    noise = event.sigma if isinstance(event, GaussianEvent) else event.scale
    if not event.sensitivity > 0:
        raise ValueError(f"{event.kind} event of party {event.party!r}: sensitivity must be > 0, "
                         f"got {event.sensitivity}")
    if not noise >= 0:
        raise ValueError(f"{event.kind} event of party {event.party!r}: noise must be >= 0, got {noise}")
    return noise / event.sensitivity


def _pure_epsilon(event: PureDPEvent) -> float:
    if not event.epsilon >= 0:  # also refuses NaN
        raise ValueError(f"pure_dp event of party {event.party!r}: epsilon must be >= 0, got {event.epsilon}")
    return float(event.epsilon)


def to_dp_event(event: PrivacyEvent) -> dp_accounting.DpEvent:
    """The ``dp-accounting`` event the RDP accountant composes for one release of `event`.

    A pure epsilon-DP event becomes binary randomized response whose two outputs have probability ratio
    ``e^epsilon`` (noise parameter ``2 / (1 + e^epsilon)``), the RDP curve that dominates every
    epsilon-DP mechanism's. A loss shift of epsilon becomes (xi = epsilon, rho = 0)-zCDP, the curve
    ``alpha -> epsilon``: with L the other release's privacy loss and L' <= L + epsilon the shifted one,
    ``D_alpha = ln E_P[e^((alpha - 1) L')] / (alpha - 1) <= D_alpha(unshifted) + epsilon`` at every order.

    Raises
    ------
    UnsupportedEventError
        For event kinds with no ``dp-accounting`` counterpart (the sparse vector technique, for instance).
    """
    if isinstance(event, (GaussianEvent, LaplaceEvent)):
        z = _noise_multiplier(event)
        if z == 0:
            return dp_accounting.NonPrivateDpEvent()
        if isinstance(event, GaussianEvent):
            return dp_accounting.GaussianDpEvent(noise_multiplier=z)
        return dp_accounting.LaplaceDpEvent(noise_multiplier=z)
    if isinstance(event, PureDPEvent):
        epsilon = _pure_epsilon(event)
        if math.isinf(epsilon):
            return dp_accounting.NonPrivateDpEvent()
        # 2 / (1 + e^eps), written so that a large epsilon does not overflow
        tail = math.exp(-epsilon)
        return dp_accounting.RandomizedResponseDpEvent(noise_parameter=2.0 * tail / (1.0 + tail),
                                                       num_buckets=2)
    if isinstance(event, LossShiftEvent):
        return dp_accounting.ZCDpEvent(rho=0.0, xi=float(event.epsilon))
    if isinstance(event, ZCDPEvent):
        return dp_accounting.ZCDpEvent(rho=event.rho)
    raise UnsupportedEventError(f"no tight accounting for {event.kind!r} events (party {event.party!r})")


class _Accountant:
    """Composition of events, one accountant; subclasses say how an event is composed."""

    method = ""

    def compose(self, event: PrivacyEvent, count: int = 1) -> "_Accountant":
        """Add `count` repetitions of `event` (each itself ``event.count`` releases); returns self."""
        if not (isinstance(count, int) and count >= 1):
            raise ValueError(f"count must be an integer >= 1, got {count!r}")
        if not (isinstance(event.count, int) and event.count >= 1):
            raise ValueError(f"{event.kind} event of party {event.party!r}: count must be an integer >= 1, "
                             f"got {event.count!r}")
        self._compose(event, count * event.count)
        return self

    def epsilon(self, delta: float) -> float:
        """The smallest epsilon this accountant certifies at `delta` for everything composed so far."""
        if not 0 < delta < 1:
            raise ValueError(f"delta must lie in (0, 1), got {delta!r}")
        return float(self._epsilon(delta))

    def _compose(self, event: PrivacyEvent, releases: int) -> None:
        raise NotImplementedError

    def _epsilon(self, delta: float) -> float:
        raise NotImplementedError


class RdpAccountant(_Accountant):
    """Rényi DP composition (Gaussian, Laplace, pure-DP, loss-shift and zCDP events).

    Parameters
    ----------
    orders : sequence of float, optional
        The Rényi orders tracked; ``dp-accounting``'s default grid when omitted.

    Notes
    -----
    ``dp-accounting`` computes randomized response's curve only under its replace-one relation (the two
    inputs differ in the bucket they hold), which is the pair of distributions a pure-DP event stands for;
    its Gaussian, Laplace and zCDP curves do not depend on the relation.
    """

    method = "rdp"

    def __init__(self, orders: Iterable[float] | None = None) -> None:
        relation = dp_accounting.NeighboringRelation.REPLACE_ONE
        self._accountant = rdp.RdpAccountant(None if orders is None else list(orders),
                                             neighboring_relation=relation)

    def _compose(self, event: PrivacyEvent, releases: int) -> None:
        dp_event = to_dp_event(event)
        if not self._accountant.supports(dp_event):
            raise UnsupportedEventError(f"the RDP accountant cannot compose {event.kind!r} events")
        self._accountant.compose(dp_event, releases)

    def _epsilon(self, delta: float) -> float:
        return self._accountant.get_epsilon(delta)


class PldAccountant(_Accountant):
    """Privacy loss distribution composition of the events in :data:`PLD_KINDS`, pessimistically discretized.

    Loss-shift events (:class:`~ppml.privacy.events.LossShiftEvent`) are not convolved: their epsilons
    (times their counts) are summed into one shift S, and the composed privacy loss of everything else is
    moved up by S, a point mass at +S convolved with it, applied exactly rather than rounded onto the grid.
    Why +S is the worst case at every epsilon: the hockey-stick divergence is
    ``delta(eps) = E_P[(1 - e^(eps - L))_+]``, L the privacy loss at the output drawn from P, and its
    integrand is non-decreasing in L. The shifts are deterministic functions of the outputs, each at most
    its epsilon in absolute value whatever the earlier rounds released, so the true composed loss is at
    most L + S at every output (L the composition of the other events), and ``delta(eps) <= E_P[(1 -
    e^(eps - S - L))_+] = delta_unshifted(eps - S)``: every point of the curve at once, in both directions of
    the neighbouring pair. The shifted distribution is not that of a pair of probability distributions
    (``E_P[e^(-L - S)] = e^(-S) < 1``), so the bound need not be attained; it uses nothing about the shifts
    beyond ``|shift| <= epsilon``. Hence :meth:`delta` is ``delta_unshifted(eps - S)`` and
    :meth:`epsilon` is ``epsilon_unshifted(delta) + S``. A loss shift is never cheaper than the same epsilon
    read as an independent pure-DP release: randomized response's loss is at most epsilon too, so it is
    dominated by the constant +epsilon.

    Parameters
    ----------
    value_discretization_interval : float, default 1e-4
        Grid step of the privacy loss; smaller is tighter and slower.
    """

    method = "pld"

    def __init__(self, value_discretization_interval: float = 1e-4) -> None:
        if not value_discretization_interval > 0:
            raise ValueError("value_discretization_interval must be > 0, "
                             f"got {value_discretization_interval!r}")
        self._interval = value_discretization_interval
        self._pld = pld_lib.identity(value_discretization_interval=value_discretization_interval)
        self._non_private = False
        self._shift = 0.0

    @property
    def loss_shift(self) -> float:
        """S: the sum of the loss-shift events' epsilons (times their counts) composed so far."""
        return self._shift

    def delta(self, epsilon: float) -> float:
        """The hockey-stick divergence at `epsilon` of all composed: ``delta_unshifted(epsilon - S)``."""
        if math.isnan(epsilon):
            raise ValueError("epsilon must be a number, got nan")
        return 1.0 if self._non_private else float(self._pld.get_delta_for_epsilon(epsilon - self._shift))

    def _compose(self, event: PrivacyEvent, releases: int) -> None:
        if isinstance(event, LossShiftEvent):
            self._shift += releases * float(event.epsilon)
            return
        distribution = self._distribution(event, releases)
        if distribution is None:
            self._non_private = True
        else:
            self._pld = self._pld.compose(distribution)

    def _distribution(self, event: PrivacyEvent, releases: int) -> pld_lib.PrivacyLossDistribution | None:
        """The PLD of `releases` repetitions of `event`; None for a release without noise."""
        interval = self._interval
        if isinstance(event, GaussianEvent):
            z = _noise_multiplier(event)
            if z == 0:
                return None
            # n Gaussian releases compose exactly into one of noise multiplier z / sqrt(n): one discretization
            return pld_lib.from_gaussian_mechanism(standard_deviation=z / math.sqrt(releases),
                                                   value_discretization_interval=interval)
        if isinstance(event, LaplaceEvent):
            b = _noise_multiplier(event)
            return (pld_lib.from_laplace_mechanism(parameter=b, value_discretization_interval=interval)
                    .self_compose(releases) if b > 0 else None)
        if isinstance(event, PureDPEvent):
            epsilon = _pure_epsilon(event)
            return None if math.isinf(epsilon) else randomized_response_pld(epsilon, releases, interval)
        reason = NO_PLD.get(event.kind, _NO_EXACT_PLD)
        raise UnsupportedEventError(f"the PLD accountant cannot compose {event.kind!r} events "
                                    f"(party {event.party!r}): {reason}")

    def _epsilon(self, delta: float) -> float:
        return math.inf if self._non_private else self._pld.get_epsilon_for_delta(delta) + self._shift


def randomized_response_pld(epsilon: float, releases: int,
                            value_discretization_interval: float) -> pld_lib.PrivacyLossDistribution:
    """The PLD of `releases` pure `epsilon`-DP releases: that many randomized responses, discretized once.

    Each release's privacy loss is ``+epsilon`` with probability ``e^epsilon / (1 + e^epsilon)`` and
    ``-epsilon`` otherwise, so the composition's is ``(2 i - releases) epsilon`` with i binomial. Each of
    these losses is rounded up onto the grid (pessimistic), so the composition is overstated by at most one
    grid step; discretizing each release and convolving would round each of them up, up to `releases` steps.
    For one release it is ``dp-accounting``'s distribution of an (epsilon, 0)-DP mechanism.
    """
    if not (math.isfinite(epsilon) and epsilon >= 0):
        raise ValueError(f"epsilon must be finite and >= 0, got {epsilon!r}")
    if not (isinstance(releases, int) and releases >= 1):
        raise ValueError(f"releases must be an integer >= 1, got {releases!r}")
    i = np.arange(releases + 1)
    mass = stats.binom.pmf(i, releases, 1.0 / (1.0 + math.exp(-epsilon)))
    rounded: dict[int, float] = defaultdict(float)
    for step, p in zip(np.ceil((2 * i - releases) * epsilon / value_discretization_interval), mass):
        if p > 0:
            rounded[int(step)] += float(p)
    return pld_lib.PrivacyLossDistribution.create_from_rounded_probability(
        rounded, 0.0, value_discretization_interval)


def _epsilon_by(accountant: _Accountant, events: list[PrivacyEvent], delta: float) -> float:
    for event in events:
        accountant.compose(event)
    return accountant.epsilon(delta)


def _fallback_reason(events: list[PrivacyEvent]) -> str | None:
    """Why a party's events cannot be composed by PLD (naming each such kind and its count), or None."""
    counts: dict[str, int] = defaultdict(int)
    for event in events:
        if event.kind not in PLD_KINDS:
            counts[event.kind] += event.count
    if not counts:
        return None
    return "; ".join(f"{n} {kind!r} release(s): {NO_PLD.get(kind, _NO_EXACT_PLD)}"
                     for kind, n in sorted(counts.items()))


def _party_epsilon(events: list[PrivacyEvent], delta: float) -> dict[str, Any]:
    """One party's epsilon: by PLD when every event has an exact PLD, else by RDP, saying why."""
    reason = _fallback_reason(events)
    if reason is None:
        return {"epsilon": _epsilon_by(PldAccountant(), events, delta), "method": PldAccountant.method,
                "fallback_reason": None}
    try:
        epsilon = _epsilon_by(RdpAccountant(), events, delta)
    except UnsupportedEventError as error:
        raise UnsupportedEventError(f"neither PLD ({reason}) nor RDP ({error}) can compose "
                                    "these events") from error
    return {"epsilon": epsilon, "method": RdpAccountant.method,
            "fallback_reason": f"composed by RDP, not PLD: {reason}"}


def tight_epsilon(events: Iterable[PrivacyEvent], delta: float) -> dict[str, Any]:
    """The tight (epsilon, delta) of a run: each party's events composed apart, the largest party epsilon.

    Parameters
    ----------
    events : iterable of PrivacyEvent
        The run's ledger events; ``event.party`` names whose records the release depends on.
    delta : float
        The delta at which epsilon is reported (per party).

    Returns
    -------
    dict
        ``epsilon`` (max over parties; 0 when nothing was released, ``math.inf`` when a release had no
        noise), ``delta``; ``method`` and ``fallback_reason`` of the party attaining the max (below); and
        ``parties``: per party its ``epsilon``, the ``method`` that produced it (``"pld"`` when every event
        of the party has an exact privacy loss distribution or is a loss shift, :data:`PLD_KINDS`; ``"rdp"``
        otherwise),
        ``fallback_reason`` (None under PLD; else which event kinds, how many releases, and why PLD cannot
        take them).

    Raises
    ------
    UnsupportedEventError
        When some party's events can be composed by neither accountant (an ``svt`` event, for instance).
    """
    by_party: dict[str, list[PrivacyEvent]] = defaultdict(list)
    for event in events:
        by_party[event.party].append(event)
    parties = {party: _party_epsilon(evs, delta) for party, evs in sorted(by_party.items())}
    if not parties:
        return {"epsilon": 0.0, "delta": delta, "method": "none", "fallback_reason": None, "parties": {}}
    worst = max(parties, key=lambda p: parties[p]["epsilon"])
    return {"epsilon": parties[worst]["epsilon"], "delta": delta, "method": parties[worst]["method"],
            "fallback_reason": parties[worst]["fallback_reason"], "parties": parties}
