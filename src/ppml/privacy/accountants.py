"""Tight privacy accountants over Google's ``dp-accounting``: Rényi DP and privacy loss distributions.

The papers bound their runs with the composition theorems they cite (advanced composition, zCDP
conversions); :mod:`ppml.privacy.paper_bounds` evaluates those. For the same mechanisms this module gives
the tighter bound a careful analyst would report today:

- :class:`RdpAccountant` composes Rényi DP curves (Gaussian, Laplace, and zCDP events as the RDP curve
  ``alpha * rho``) and converts to (epsilon, delta) with the conversion of Canonne, Kamath and Steinke;
- :class:`PldAccountant` composes privacy loss distributions numerically (Gaussian and Laplace events),
  with a pessimistic discretization, so its epsilon remains an upper bound; it is the tighter of the two;
- :func:`tight_epsilon` composes each party's events on its own and reports the largest party epsilon:
  every paper protects each party's records separately, and a party's record enters only that party's
  releases (parallel composition across parties).

Events come from :mod:`ppml.privacy.events`. A Gaussian event's noise multiplier is ``sigma / sensitivity``
and a Laplace event's is ``scale / sensitivity``: the L2 (L1) sensitivity is stated for the neighbouring
relation the paper uses, so the accountants compose the mechanism's privacy loss between two Gaussians
(Laplaces) whose means are one sensitivity apart, which is exactly what ``dp-accounting`` computes for an
unsampled mechanism of noise multiplier ``sigma / sensitivity``. An event with zero noise is not private
(epsilon is infinite). Events an accountant cannot compose raise :class:`UnsupportedEventError`.

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
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any, Iterable

import dp_accounting
from dp_accounting import pld, rdp

from ppml.privacy.events import GaussianEvent, LaplaceEvent, PrivacyEvent, UnsupportedEventError, ZCDPEvent

__all__ = ["RdpAccountant", "PldAccountant", "tight_epsilon", "to_dp_event", "UnsupportedEventError"]


def to_dp_event(event: PrivacyEvent) -> dp_accounting.DpEvent:
    """The ``dp-accounting`` event for one release described by `event` (the caller applies its ``count``).

    Raises
    ------
    UnsupportedEventError
        For event kinds with no ``dp-accounting`` counterpart (the sparse vector technique, for instance).
    """
    if isinstance(event, GaussianEvent):
        if event.sensitivity <= 0:
            raise ValueError(f"Gaussian event of party {event.party!r}: sensitivity must be > 0, "
                             f"got {event.sensitivity}")
        if event.sigma == 0:
            return dp_accounting.NonPrivateDpEvent()
        return dp_accounting.GaussianDpEvent(noise_multiplier=event.sigma / event.sensitivity)
    if isinstance(event, LaplaceEvent):
        if event.sensitivity <= 0:
            raise ValueError(f"Laplace event of party {event.party!r}: sensitivity must be > 0, "
                             f"got {event.sensitivity}")
        return dp_accounting.LaplaceDpEvent(noise_multiplier=event.scale / event.sensitivity)
    if isinstance(event, ZCDPEvent):
        return dp_accounting.ZCDpEvent(rho=event.rho)
    raise UnsupportedEventError(f"no tight accounting for {event.kind!r} events (party {event.party!r})")


class _Accountant:
    """Composition over one ``dp-accounting`` accountant; subclasses choose which one."""

    method = ""

    def __init__(self, accountant: dp_accounting.PrivacyAccountant) -> None:
        self._accountant = accountant

    def compose(self, event: PrivacyEvent, count: int = 1) -> "_Accountant":
        """Add `count` repetitions of `event` (each itself ``event.count`` releases); returns self."""
        if not (isinstance(count, int) and count >= 1):
            raise ValueError(f"count must be an integer >= 1, got {count!r}")
        dp_event = to_dp_event(event)
        if not self._accountant.supports(dp_event):
            raise UnsupportedEventError(f"the {self.method.upper()} accountant cannot compose "
                                        f"{event.kind!r} events")
        self._accountant.compose(dp_event, count * event.count)
        return self

    def epsilon(self, delta: float) -> float:
        """The smallest epsilon this accountant certifies at `delta` for everything composed so far."""
        if not 0 < delta < 1:
            raise ValueError(f"delta must lie in (0, 1), got {delta!r}")
        return float(self._accountant.get_epsilon(delta))


class RdpAccountant(_Accountant):
    """Rényi DP composition (Gaussian, Laplace, zCDP events).

    Parameters
    ----------
    orders : sequence of float, optional
        The Rényi orders tracked; ``dp-accounting``'s default grid when omitted.
    """

    method = "rdp"

    def __init__(self, orders: Iterable[float] | None = None) -> None:
        super().__init__(rdp.RdpAccountant(None if orders is None else list(orders)))


class PldAccountant(_Accountant):
    """Privacy loss distribution composition (Gaussian and Laplace events), pessimistically discretized.

    Parameters
    ----------
    value_discretization_interval : float, default 1e-4
        Grid step of the privacy loss; smaller is tighter and slower.
    """

    method = "pld"

    def __init__(self, value_discretization_interval: float = 1e-4) -> None:
        super().__init__(pld.PLDAccountant(value_discretization_interval=value_discretization_interval))


def _party_epsilon(events: list[PrivacyEvent], delta: float) -> dict[str, Any]:
    """Both accountants on one party's events where they apply; the smaller valid epsilon wins."""
    values: dict[str, float] = {}
    for accountant in (PldAccountant(), RdpAccountant()):
        try:
            for event in events:
                accountant.compose(event)
        except UnsupportedEventError:
            continue
        values[accountant.method] = accountant.epsilon(delta)
    if not values:
        kinds = sorted({e.kind for e in events})
        raise UnsupportedEventError(f"neither PLD nor RDP accounting supports the event kinds {kinds}")
    method = min(values, key=values.get)
    return {"epsilon": values[method], "method": method, **{f"epsilon_{m}": v for m, v in values.items()}}


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
        noise), ``delta``, ``method`` (of the party attaining the max), and ``parties``: per party its
        epsilon, the method that gave it and every applicable accountant's value.

    Raises
    ------
    UnsupportedEventError
        When some party's events can be composed by neither accountant.
    """
    by_party: dict[str, list[PrivacyEvent]] = defaultdict(list)
    for event in events:
        by_party[event.party].append(event)
    parties = {party: _party_epsilon(evs, delta) for party, evs in sorted(by_party.items())}
    if not parties:
        return {"epsilon": 0.0, "delta": delta, "method": "none", "parties": {}}
    worst = max(parties, key=lambda p: parties[p]["epsilon"])
    return {"epsilon": parties[worst]["epsilon"], "delta": delta, "method": parties[worst]["method"],
            "parties": parties}
