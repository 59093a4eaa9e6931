"""Local baseline: the first party alone (the label holder's own features, or the first agent's own rows).

What a party could learn without collaborating; every paper's collaborative method should beat it.
Same objective and solver as :mod:`ppml.algorithms.centralized` (with ``objective: sum``, n is the rows this
party trains on: on vertical data the same rows as the centralized run, so both use the same weight of f).
Its ``test_majority_error`` is the majority class of the rows this party trains on, measured on the same test
rows as the centralized run.

Role programs: only the party whose model the baseline reports runs one (the others would train a model
nobody reads). On vertical data the label holder trains and scores its own test columns. On horizontal data
the first agent trains on its rows and sends its model, with its training scores and labels, to the
evaluator (``eval/model``, evaluation traffic), which scores it on the held-out rows and keeps the record.
No training message crosses the network.
"""

from __future__ import annotations

import sys
from typing import Any

import numpy as np

from ppml import runtime
from ppml.algorithms.centralized import Params, logistic_history, test_rows, train_logistic
from ppml.config import ParamError
from ppml.history import History
from ppml.network import EVALUATION, Endpoint, Network, expect
from ppml.parties import Party
from ppml.runtime import EVALUATOR, Public, Role

MESSAGES: tuple = ()  # no protocol: one party trains on its own data

TAG_MODEL = EVALUATION + "model"  # the first agent -> evaluator (horizontal data)

SIDE_MESSAGES: tuple[dict[str, str], ...] = (
    {"tag": TAG_MODEL, "src": "the first agent (horizontal data)", "dst": "evaluator",
     "content": "its model w, its training rows' scores and labels, the solver's facts, once (evaluation)"},
)

__all__ = ["MESSAGES", "SIDE_MESSAGES", "Params", "network_for", "roles", "assemble", "fit"]


def network_for(parties: list[Party], params: Params, *, rng: np.random.Generator | None = None,
                capture: bool = False) -> Network:
    """The parties and the evaluator's address (used on horizontal data only)."""
    return Network([*(p.name for p in parties), EVALUATOR], capture=capture)


def _holder_program(endpoint: Endpoint, party: Party, *, params: Params) -> dict[str, Any]:
    """Vertical data: the label holder trains on its own features and scores its own test columns."""
    if party.y is None:
        raise ValueError(f"party {party.name!r} runs the local baseline but holds no labels")
    return {"history": logistic_history(train_logistic(party.X, party.y, params), party.y, party.X_test,
                                        party.y_test, algorithm="local")}


def _agent_program(endpoint: Endpoint, party: Party, *, params: Params, evaluator: str) -> None:
    """Horizontal data: the first agent trains on its own rows and hands its model to the evaluator."""
    if party.y is None:
        raise ValueError(f"agent {party.name!r} runs the local baseline but holds no labels")
    endpoint.send(evaluator, TAG_MODEL, {**train_logistic(party.X, party.y, params), "y": np.asarray(party.y)})


def _fitted(payload: Any, *, owner: str, rows: int | None, columns: int | None) -> dict[str, Any]:
    """The owner's model message, checked: :func:`train_logistic`'s fields for `rows` rows and `columns`
    columns (plus the bias) and the rows' 0/1 labels."""
    tag = TAG_MODEL
    expect.mapping(payload, ("w", "lam", "objective", "train_scores", "n_iter", "converged", "n_features",
                             "n_samples", "y"), sender=owner, tag=tag, optional=("stuck",))
    expect.vector(payload["w"], sender=owner, tag=tag, length=None if columns is None else columns + 1, what="w")
    expect.vector(payload["train_scores"], sender=owner, tag=tag, length=rows, what="train_scores")
    expect.vector(payload["y"], sender=owner, tag=tag, length=rows, dtype="number", low=0, high=1, what="y")
    for key in ("lam", "objective"):
        expect.scalar(payload[key], sender=owner, tag=tag, low=0.0, what=key)
    for key in ("n_iter", "n_features", "n_samples"):
        expect.integer(payload[key], sender=owner, tag=tag, low=0, what=key)
    expect.flag(payload["converged"], sender=owner, tag=tag, what="converged")
    if "stuck" in payload:
        expect.text(payload["stuck"], sender=owner, tag=tag, what="stuck")
    return payload


def _evaluator_program(endpoint: Endpoint, party: Party, *, owner: str, rows: int | None = None,
                       columns: int | None = None) -> dict[str, Any]:
    """Horizontal data: the owner's model scored on the held-out rows; the run's record.

    The model message is checked against the owner's public row and column counts (`rows`, `columns`) before
    use (:mod:`ppml.network.expect`)."""
    fitted = _fitted(endpoint.recv(owner, TAG_MODEL), owner=owner, rows=rows, columns=columns)
    X_test, y_test = test_rows(party)
    return {"history": logistic_history(fitted, fitted.pop("y"), X_test, y_test, algorithm="local")}


def roles(public: Public, params: Params, *, rng: np.random.Generator, network: Network) -> list[Role]:
    """The label holder's program (vertical), or the first agent's and the evaluator's (horizontal)."""
    if public.evaluator is None:
        holders = public.label_holders
        if len(holders) != 1:
            raise ParamError(f"dataset must give labels to exactly one party, found label holders {holders}")
        return [Role(holders[0], _holder_program, holders[0], {"params": params})]
    owner = public.names[0]
    return [Role(owner, _agent_program, owner, {"params": params, "evaluator": EVALUATOR}),
            Role(EVALUATOR, _evaluator_program, EVALUATOR,
                 {"owner": owner, "rows": public.info(owner).train_rows, "columns": public.info(owner).columns})]


def assemble(public: Public, params: Params, results: dict[str, Any]) -> History:
    """The record of whichever program held the test rows."""
    return results[EVALUATOR if public.evaluator is not None else public.label_holders[0]]["history"]


def fit(parties: list[Party], network: Network | None, params: Params, *, rng: np.random.Generator,
        evaluation: Party | None = None) -> History:
    """Logistic regression on the label holder's features (vertical) or the first agent's rows (horizontal).

    `network` may be None (the baseline needs none): then one of :func:`network_for` is used.
    """
    if network is None:
        network = network_for(parties, params)
    return runtime.fit(sys.modules[__name__], parties, network, params, rng=rng, evaluation=evaluation)
