"""History: what one training run did, iteration by iteration, and what it cost.

An algorithm's ``fit`` returns a :class:`History`. It holds one record per iteration (epoch), the final
metrics, whether the stopping rule was met, the privacy ledger (the events the run's mechanisms emitted and
the inputs of the paper's own bound), and the communication totals of the network it ran on.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ppml.metrics import binary_metrics
from ppml.privacy.events import PrivacyEvent


class ConvergenceWarning(UserWarning):
    """A run stopped at its iteration cap without meeting its convergence criterion."""


@dataclass
class PrivacyLedger:
    """The privacy side of a run.

    Attributes
    ----------
    events : list of PrivacyEvent
        Everything the run's mechanisms released, as immutable events.
    paper_bound : dict or None
        ``{"name": <registered bound>, "inputs": {...}}``: how the paper accounts for this run; the account
        stage evaluates it with :mod:`ppml.privacy.paper_bounds`.
    certified : bool
        True only when every assumption behind the sensitivity held in the run (enforced, not assumed).
        A fixed-noise run has ``certified = False`` and reports its sigma, not an epsilon.
    target_epsilon, delta : float or None
        The budget the run was calibrated to, if any.
    notes : list of str
        Choices that affect the accounting (calibration rule, budget split, ...), in words.
    noise_source : {"seeded", "os"} or None
        Where the run's noise came from (:mod:`ppml.privacy.noise`); None for algorithms that add none.
    """

    events: list[PrivacyEvent] = field(default_factory=list)
    paper_bound: dict[str, Any] | None = None
    certified: bool = False
    target_epsilon: float | None = None
    delta: float | None = None
    notes: list[str] = field(default_factory=list)
    noise_source: str | None = None

    def spend(self, event: PrivacyEvent) -> None:
        self.events.append(event)

    def to_dict(self) -> dict[str, Any]:
        return {
            "certified": self.certified,
            "target_epsilon": self.target_epsilon,
            "delta": self.delta,
            "paper_bound": self.paper_bound,
            "notes": list(self.notes),
            "events": [e.to_dict() for e in self.events],
            **({} if self.noise_source is None else {"noise_source": self.noise_source}),
        }


def _plain(value: Any) -> Any:
    """JSON-friendly copy: numpy scalars to Python, non-finite floats to None."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, np.ndarray):
        return _plain(value.tolist())
    if isinstance(value, (np.integer,)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        value = float(value)
        return value if math.isfinite(value) else None
    if isinstance(value, np.bool_):
        return bool(value)
    return value


class History:
    """Per-iteration records and final results of one run."""

    def __init__(self, algorithm: str) -> None:
        self.algorithm = algorithm
        self.records: list[dict[str, Any]] = []
        self.converged: bool | None = None
        self.stop_reason: str = ""
        self.final: dict[str, Any] = {}
        self.extra: dict[str, Any] = {}
        self.ledger = PrivacyLedger()
        self.comm: dict[str, Any] = {}

    def log(self, **values: Any) -> None:
        """Record one iteration (epoch); values are numbers or small lists."""
        self.records.append(_plain(values))

    @property
    def epochs(self) -> int:
        return len(self.records)

    def stop(self, *, converged: bool, reason: str) -> None:
        """Record how the run ended; warn when it hit its cap without converging."""
        self.converged = bool(converged)
        self.stop_reason = reason
        if not converged:
            warnings.warn(f"{self.algorithm}: {reason}", ConvergenceWarning, stacklevel=2)

    def finish(self, *, train_objective: float, y_train: np.ndarray, train_scores: np.ndarray,
               y_test: np.ndarray | None, test_scores: np.ndarray | None, **extra: Any) -> None:
        """Final metrics from the model's decision scores on training and test rows."""
        train = binary_metrics(y_train, train_scores)
        self.final = {
            "epochs": self.epochs,
            "converged": self.converged,
            "train_objective": float(train_objective),
            "train_logloss": train["logloss"],
            "train_error": train["error"],
        }
        if y_test is not None and test_scores is not None:
            test = binary_metrics(y_test, test_scores)
            self.final.update(test_logloss=test["logloss"], test_auc=test["auc"], test_error=test["error"],
                              test_accuracy=test["accuracy"])
        self.final.update(_plain(extra))

    def to_dict(self) -> dict[str, Any]:
        return _plain({
            "algorithm": self.algorithm,
            "converged": self.converged,
            "stop_reason": self.stop_reason,
            "epochs": self.epochs,
            "records": self.records,
            "final": self.final,
            "extra": self.extra,
        })
