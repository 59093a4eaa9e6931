"""Immutable privacy events, emitted by mechanisms and composed by accountants.

An event says what was released and how it was protected, not what it costs: the cost is the accountants'
business. A mechanism is recorded as what it is known to be: a Gaussian or Laplace release by its noise and
sensitivity, a mechanism known to be pure epsilon-DP as a :class:`PureDPEvent`, and only a mechanism whose
guarantee is known solely as rho-zCDP as a :class:`ZCDPEvent` (a pure epsilon-DP mechanism is also
epsilon^2/2-zCDP, but recording it so discards what the accountants need for a tight bound). A term that is
not a mechanism of its own but a bounded, deterministic change of another release's privacy loss is a
:class:`LossShiftEvent`. Events serialize to plain dicts for a run's ``ledger.json``; :func:`event_from_dict`
reads them back, including ledgers written before ``pure_dp`` existed, whose pure mechanisms were recorded as
``zcdp`` events (still valid, only looser).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, fields
from typing import Any, ClassVar


class UnsupportedEventError(TypeError):
    """An accountant was handed an event it cannot compose."""


@dataclass(frozen=True)
class PrivacyEvent:
    kind: ClassVar[str] = "event"
    count: int = 1
    party: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, **asdict(self)}


@dataclass(frozen=True)
class GaussianEvent(PrivacyEvent):
    """Gaussian noise of std `sigma` on a query of L2 sensitivity `sensitivity`, repeated `count` times."""

    kind: ClassVar[str] = "gaussian"
    sigma: float = 0.0
    sensitivity: float = 1.0

    @property
    def noise_multiplier(self) -> float:
        return self.sigma / self.sensitivity


@dataclass(frozen=True)
class LaplaceEvent(PrivacyEvent):
    """Laplace noise of scale `scale` on a query of L1 sensitivity `sensitivity`."""

    kind: ClassVar[str] = "laplace"
    scale: float = 0.0
    sensitivity: float = 1.0

    @property
    def epsilon(self) -> float:
        return self.sensitivity / self.scale


@dataclass(frozen=True)
class SVTEvent(PrivacyEvent):
    """Sparse vector technique answering up to `c` positive queries with budgets eps1 (threshold), eps2 (queries)."""

    kind: ClassVar[str] = "svt"
    c: int = 1
    eps1: float = 0.0
    eps2: float = 0.0


@dataclass(frozen=True)
class PureDPEvent(PrivacyEvent):
    """A mechanism known to satisfy pure `epsilon`-DP (delta = 0), repeated `count` times.

    For objective perturbation whose privacy loss is bounded at every output (Chaudhuri et al.'s change of
    variables) and for one AboveThreshold instance. Not for the Jacobian factor of a Gaussian objective
    perturbation: that is a :class:`LossShiftEvent`.
    """

    kind: ClassVar[str] = "pure_dp"
    epsilon: float = 0.0


@dataclass(frozen=True)
class LossShiftEvent(PrivacyEvent):
    """The privacy loss of another release of the same round is shifted by at most `epsilon`, in either
    direction, deterministically; `count` rounds.

    Not a mechanism: no randomness of its own, only a term of another release's privacy loss that is a
    function of that release's output, bounded by `epsilon` in absolute value at every output and for both
    orders of the two neighbouring data sets. The other release is recorded by its own event, which
    describes its loss without this term. PP-ADMM's objective perturbation is the case: the density of its
    output carries the Jacobian determinant of the map from noise to output, and the log-ratio of the two
    determinants (at most ``eps_J``) adds to the Gaussian noise's privacy loss at the same output
    (:mod:`ppml.algorithms.pp_admm`). How the accountants charge it is in :mod:`ppml.privacy.accountants`.

    Raises
    ------
    ValueError
        When `epsilon` is not a finite number >= 0.
    """

    kind: ClassVar[str] = "loss_shift"
    epsilon: float = 0.0

    def __post_init__(self) -> None:
        if not (math.isfinite(self.epsilon) and self.epsilon >= 0):
            raise ValueError(f"loss_shift event of party {self.party!r}: epsilon must be finite and >= 0, "
                             f"got {self.epsilon!r}")


@dataclass(frozen=True)
class ZCDPEvent(PrivacyEvent):
    """A mechanism known only to satisfy rho-zCDP (a Gaussian or a pure-DP mechanism has its own event)."""

    kind: ClassVar[str] = "zcdp"
    rho: float = 0.0


EVENT_TYPES: dict[str, type[PrivacyEvent]] = {
    cls.kind: cls for cls in (GaussianEvent, LaplaceEvent, LossShiftEvent, PureDPEvent, SVTEvent, ZCDPEvent)
}


def event_from_dict(data: dict[str, Any]) -> PrivacyEvent:
    kind = data.get("kind")
    if kind not in EVENT_TYPES:
        raise UnsupportedEventError(f"unknown privacy event kind {kind!r}")
    cls = EVENT_TYPES[kind]
    names = {f.name for f in fields(cls)}
    return cls(**{k: v for k, v in data.items() if k in names})
