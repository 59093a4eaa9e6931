"""Immutable privacy events, emitted by mechanisms and composed by accountants.

An event says what was released and how it was protected, not what it costs: the cost is the accountants'
business. Events serialize to plain dicts for a run's ``ledger.json``.
"""

from __future__ import annotations

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
class ZCDPEvent(PrivacyEvent):
    """A mechanism known to satisfy rho-zCDP."""

    kind: ClassVar[str] = "zcdp"
    rho: float = 0.0


EVENT_TYPES: dict[str, type[PrivacyEvent]] = {
    cls.kind: cls for cls in (GaussianEvent, LaplaceEvent, SVTEvent, ZCDPEvent)
}


def event_from_dict(data: dict[str, Any]) -> PrivacyEvent:
    kind = data.get("kind")
    if kind not in EVENT_TYPES:
        raise UnsupportedEventError(f"unknown privacy event kind {kind!r}")
    cls = EVENT_TYPES[kind]
    names = {f.name for f in fields(cls)}
    return cls(**{k: v for k, v in data.items() if k in names})
