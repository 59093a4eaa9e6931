"""Local baseline: the first party alone (the label holder's own features, or the first agent's own rows).

What a party could learn without collaborating; every paper's collaborative method should beat it.
Same objective and solver as :mod:`ppml.algorithms.centralized` (with ``objective: sum``, n is the rows this
party trains on: on vertical data the same rows as the centralized run, so both use the same weight of f).
Its ``test_majority_error`` is the majority class of the rows this party trains on, measured on the same test
rows as the centralized run.
"""

from __future__ import annotations

import numpy as np

from ppml.algorithms.centralized import Params, fit_logistic, test_rows
from ppml.history import History
from ppml.parties import Party

MESSAGES: tuple = ()  # no protocol: one party trains on its own data

__all__ = ["MESSAGES", "Params", "fit"]


def fit(parties: list[Party], network, params: Params, *, rng: np.random.Generator,
        evaluation: Party | None = None) -> History:
    """Logistic regression on the label holder's features (vertical) or the first agent's rows (horizontal)."""
    if evaluation is not None:
        own = parties[0]
        X_test, y_test = test_rows(evaluation)
        return fit_logistic(own.X, own.y, X_test, y_test, params, algorithm="local")
    own = next(p for p in parties if p.is_label_holder)
    return fit_logistic(own.X, own.y, own.X_test, own.y_test, params, algorithm="local")
