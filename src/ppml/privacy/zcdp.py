"""Zero-concentrated differential privacy (zCDP): mechanisms' rho, composition, conversion to (eps, delta).

A mechanism is rho-zCDP when every Rényi divergence of order alpha > 1 between its outputs on neighbouring
data sets is at most ``rho * alpha`` [1]_; (xi, rho)-zCDP allows ``xi + rho * alpha`` ([1]_ Def. 1.1). zCDP
composes by adding rho (and xi); over parties holding disjoint records it composes in parallel (the largest
party's epsilon). Two conversions to (epsilon, delta)-DP are offered, for xi = 0; a term xi adds to either
epsilon (both are an infimum over alpha of the Rényi bound plus a term free of it):

- :func:`epsilon_paper`: ``epsilon = rho + 2 sqrt(rho ln(1/delta))`` [1]_ (Prop. 1.3), PP-ADMM's [3]_;
- :func:`epsilon_cks`: the tighter conversion of Canonne, Kamath and Steinke [2]_ (Prop. 12, through the
  RDP curve ``alpha * rho``).

Budgets go the other way: :func:`rho_exact` is the exact inverse of :func:`epsilon_paper`; :func:`rho_paper`
is PP-ADMM's approximation ``epsilon^2 / (4 ln(1/delta))``, which overshoots the target (it certifies
epsilon = 1.027 for a target 1 at delta = 1e-4). :func:`rho_from_epsilon` picks one by name.

References
----------
.. [1] M. Bun, T. Steinke, "Concentrated Differential Privacy: Simplifications, Extensions, and Lower
   Bounds", TCC 2016 (Prop. 1.3: zCDP to DP; Prop. 1.4: pure epsilon-DP is epsilon^2/2-zCDP; Prop. 1.6:
   the Gaussian mechanism is Delta^2/(2 sigma^2)-zCDP; Lemma 2.3: composition).
.. [2] C. Canonne, G. Kamath, T. Steinke, "The Discrete Gaussian for Differential Privacy", NeurIPS 2020.
.. [3] J. Ding, J. Wang, G. Liang, J. Bi, M. Pan, "Towards Plausible Differentially Private ADMM Based
   Distributed Machine Learning", CIKM 2020 (arXiv 2008.04500), Section 3.
"""

from __future__ import annotations

import math
from collections import defaultdict
from typing import Callable

import numpy as np
from scipy.optimize import minimize_scalar

from ppml.privacy.events import (GaussianEvent, LaplaceEvent, LossShiftEvent, PrivacyEvent, PureDPEvent,
                                 SVTEvent, UnsupportedEventError, ZCDPEvent)

__all__ = ["rho_gaussian", "sigma_for_rho", "rho_pure", "rho_svt", "epsilon_paper", "rho_exact", "rho_paper",
           "CALIBRATIONS", "rho_from_epsilon", "epsilon_cks", "ZCDPAccountant"]


def _check_delta(delta: float) -> float:
    if not 0 < delta < 1:
        raise ValueError(f"delta must lie in (0, 1), got {delta!r}")
    return math.log(1.0 / delta)


def rho_gaussian(sigma: float, sensitivity: float) -> float:
    """rho of one Gaussian release: ``sensitivity^2 / (2 sigma^2)`` ([1]_ Prop. 1.6)."""
    if sigma <= 0:
        raise ValueError(f"sigma must be > 0 for a private release, got {sigma!r}")
    return sensitivity ** 2 / (2.0 * sigma ** 2)


def sigma_for_rho(rho: float, sensitivity: float) -> float:
    """The Gaussian noise std that makes one release of L2 sensitivity `sensitivity` exactly rho-zCDP."""
    if rho <= 0:
        raise ValueError(f"rho must be > 0, got {rho!r}")
    return sensitivity / math.sqrt(2.0 * rho)


def rho_pure(epsilon: float) -> float:
    """rho of a pure epsilon-DP mechanism: ``epsilon^2 / 2`` ([1]_ Prop. 1.4)."""
    if epsilon < 0:
        raise ValueError(f"epsilon must be >= 0, got {epsilon!r}")
    return 0.5 * epsilon ** 2


def rho_svt(*, c: int, eps1: float, eps2: float) -> float:
    """rho of the sparse vector technique of :mod:`ppml.privacy.svt` answering up to `c` positive queries.

    That mechanism runs `c` AboveThreshold instances one after the other, each pure ``(eps1 + eps2) / c``-DP;
    zCDP composition of the c instances gives ``(eps1 + eps2)^2 / (2 c)`` (smaller than the
    ``(eps1 + eps2)^2 / 2`` of converting the whole mechanism's pure DP at once).
    """
    if c < 1:
        raise ValueError(f"c must be >= 1, got {c!r}")
    return c * rho_pure((eps1 + eps2) / c)


def epsilon_paper(rho: float, delta: float) -> float:
    """``rho + 2 sqrt(rho ln(1/delta))``: the (epsilon, delta)-DP of a rho-zCDP mechanism ([1]_ Prop. 1.3)."""
    if rho < 0:
        raise ValueError(f"rho must be >= 0, got {rho!r}")
    return rho + 2.0 * math.sqrt(rho * _check_delta(delta))


def rho_exact(epsilon: float, delta: float) -> float:
    """The rho whose :func:`epsilon_paper` is exactly `epsilon`.

    ``(sqrt(ln(1/delta) + epsilon) - sqrt(ln(1/delta)))^2``.
    """
    if epsilon < 0:
        raise ValueError(f"epsilon must be >= 0, got {epsilon!r}")
    log_term = _check_delta(delta)
    # written as a difference of squares over a sum so that tiny epsilons keep their precision
    return (epsilon / (math.sqrt(log_term + epsilon) + math.sqrt(log_term))) ** 2


def rho_paper(epsilon: float, delta: float) -> float:
    """PP-ADMM's budget ``epsilon^2 / (4 ln(1/delta))`` ([3]_ §5); it drops the conversion's rho term."""
    if epsilon < 0:
        raise ValueError(f"epsilon must be >= 0, got {epsilon!r}")
    return epsilon ** 2 / (4.0 * _check_delta(delta))


#: Budget calibrations by the name ``params.yaml`` uses.
CALIBRATIONS: dict[str, Callable[[float, float], float]] = {"exact": rho_exact, "paper": rho_paper}


def rho_from_epsilon(epsilon: float, delta: float, *, calibration: str = "exact") -> float:
    """Total rho for a target (epsilon, delta) by the calibration `calibration` (:data:`CALIBRATIONS`)."""
    if calibration not in CALIBRATIONS:
        raise ValueError(f"calibration must be one of {sorted(CALIBRATIONS)}, got {calibration!r}")
    return CALIBRATIONS[calibration](epsilon, delta)


def epsilon_cks(rho: float, delta: float) -> float:
    """The (epsilon, delta)-DP of a rho-zCDP mechanism by the conversion of [2]_, Proposition 12.

    For the RDP curve ``alpha * rho``, ``epsilon = inf_{alpha > 1} alpha rho + ln(1 - 1/alpha)
    - (ln(alpha) + ln(delta)) / (alpha - 1)``; it is never larger than :func:`epsilon_paper`.
    """
    if rho < 0:
        raise ValueError(f"rho must be >= 0, got {rho!r}")
    log_delta = -_check_delta(delta)
    if rho == 0:
        return 0.0

    def bound(log_alpha_minus_1: float) -> float:
        am1 = math.exp(log_alpha_minus_1)
        alpha = 1.0 + am1
        return alpha * rho + math.log(am1 / alpha) - (math.log(alpha) + log_delta) / am1

    # the bound is unimodal in log(alpha - 1); a coarse grid brackets the minimum, Brent refines it
    grid = np.linspace(-12.0, 16.0, 113)
    values = [bound(g) for g in grid]
    k = int(np.argmin(values))
    lo, hi = grid[max(k - 1, 0)], grid[min(k + 1, len(grid) - 1)]
    best = minimize_scalar(bound, bounds=(lo, hi), method="bounded", options={"xatol": 1e-10})
    return max(0.0, min(float(best.fun), values[k]))


class ZCDPAccountant:
    """Composes events as zCDP, each party on its own; parties hold disjoint records (parallel composition).

    Gaussian events cost ``count * sensitivity^2 / (2 sigma^2)``; Laplace events are pure
    ``sensitivity / scale``-DP and pure-DP events pure ``epsilon``-DP (:func:`rho_pure`); SVT events follow
    :func:`rho_svt`; zCDP events cost their rho. A loss-shift event of epsilon adds ``count * epsilon`` to
    the party's xi and nothing to its rho: raising a privacy loss by at most epsilon at every output raises
    every Rényi divergence by at most epsilon. It is not charged ``epsilon^2 / 2`` like a pure-DP release:
    that bound ([1]_ Prop. 1.4) rests on the loss being a mechanism's own (``E_P[e^(-L)] = 1``, which keeps
    its mean near zero), whereas a shift may be +epsilon exactly where the other release's loss is large,
    which makes a divergence of order alpha grow by nearly epsilon, more than ``alpha epsilon^2 / 2`` for
    alpha < 2/epsilon (a test builds such a pair).

    Examples
    --------
    >>> acc = ZCDPAccountant().compose(GaussianEvent(sigma=2.0, sensitivity=1.0, count=8, party="a"))
    >>> acc.rho()
    1.0
    """

    def __init__(self) -> None:
        self._rho: dict[str, float] = defaultdict(float)
        self._xi: dict[str, float] = defaultdict(float)

    def compose(self, event: PrivacyEvent, count: int = 1) -> "ZCDPAccountant":
        """Add `count` repetitions of `event`; returns self."""
        if not (isinstance(count, int) and count >= 1):
            raise ValueError(f"count must be an integer >= 1, got {count!r}")
        if isinstance(event, LossShiftEvent):
            self._xi[event.party] += count * event.count * float(event.epsilon)
            self._rho[event.party] += 0.0  # the party exists even if it has no other event
            return self
        if isinstance(event, GaussianEvent):
            rho = rho_gaussian(event.sigma, event.sensitivity)
        elif isinstance(event, (LaplaceEvent, PureDPEvent)):
            rho = rho_pure(event.epsilon)
        elif isinstance(event, SVTEvent):
            rho = rho_svt(c=event.c, eps1=event.eps1, eps2=event.eps2)
        elif isinstance(event, ZCDPEvent):
            rho = event.rho
        else:
            raise UnsupportedEventError(f"the zCDP accountant cannot compose {event.kind!r} events")
        self._rho[event.party] += count * event.count * rho
        return self

    def rho(self, party: str | None = None) -> float:
        """One party's rho, or the largest over parties when `party` is None (0 before any event)."""
        if party is not None:
            return self._rho.get(party, 0.0)
        return max(self._rho.values(), default=0.0)

    def xi(self, party: str | None = None) -> float:
        """One party's xi (the sum of its loss shifts), or the largest over parties when `party` is None."""
        if party is not None:
            return self._xi.get(party, 0.0)
        return max(self._xi.values(), default=0.0)

    @property
    def parties(self) -> dict[str, float]:
        """Every party's rho."""
        return dict(self._rho)

    def epsilon(self, delta: float, *, conversion: str = "cks") -> float:
        """The largest party epsilon at `delta`: its rho by the ``"cks"`` ([2]_) or ``"paper"`` conversion,
        plus its xi (0 before any event)."""
        conversions = {"cks": epsilon_cks, "paper": epsilon_paper}
        if conversion not in conversions:
            raise ValueError(f"conversion must be one of {sorted(conversions)}, got {conversion!r}")
        _check_delta(delta)
        return max((conversions[conversion](rho, delta) + self._xi.get(party, 0.0)
                    for party, rho in self._rho.items()), default=0.0)
