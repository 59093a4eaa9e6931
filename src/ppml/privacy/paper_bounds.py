"""The papers' own privacy bounds, by name.

A run's ledger names its paper bound, ``{"name": "<paper>.<function>", "inputs": {...}}``; the account stage
evaluates it here. By convention the function lives in ``ppml.privacy.bounds_<paper>`` (for instance
``admm_sharing.corollary1`` is :func:`ppml.privacy.bounds_admm_sharing.corollary1`). It takes the inputs as
keyword arguments and returns a dict with at least ``epsilon`` and ``delta``.
"""

from __future__ import annotations

import importlib
from typing import Any, Callable


def get_bound(name: str) -> Callable[..., dict[str, Any]]:
    paper, _, func = name.partition(".")
    if not paper or not func:
        raise KeyError(f"paper bound names are '<paper>.<function>', got {name!r}")
    try:
        module = importlib.import_module(f"ppml.privacy.bounds_{paper}")
    except ModuleNotFoundError:
        raise KeyError(f"unknown paper bound {name!r}: no module ppml.privacy.bounds_{paper}") from None
    if not hasattr(module, func):
        raise KeyError(f"unknown paper bound {name!r}: ppml.privacy.bounds_{paper} has no {func}()")
    return getattr(module, func)


def evaluate(paper_bound: dict[str, Any]) -> dict[str, Any]:
    """Evaluate a ledger's ``paper_bound`` entry."""
    return get_bound(paper_bound["name"])(**paper_bound["inputs"])
