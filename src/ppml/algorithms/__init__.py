"""Algorithms, one module per paper method, dispatched by name.

Every module exposes

- ``Params``: a frozen dataclass of its parameters (built and validated by :func:`ppml.config.build`);
- ``MESSAGES``: its protocol's messages (tag, from, to, content, protection);
- ``fit(parties, network, params, *, rng) -> History``.

The registry maps the algorithm key used in params.yaml and metrics.json to its module; modules are imported
on first use so that one algorithm's optional dependencies never burden another's runs.
"""

from __future__ import annotations

import importlib
from types import ModuleType

ALGORITHMS: dict[str, str] = {
    "centralized": "ppml.algorithms.centralized",
    "local": "ppml.algorithms.local",
    "admm_sharing": "ppml.algorithms.admm_sharing",
    "fdml": "ppml.algorithms.fdml",
    "decentralized_admm": "ppml.algorithms.decentralized_admm",
    "pp_admm": "ppml.algorithms.pp_admm",
    "ipp_admm": "ppml.algorithms.ipp_admm",
    "dvp": "ppml.algorithms.dvp",
    "m_admm": "ppml.algorithms.m_admm",
    "r_admm": "ppml.algorithms.r_admm",
    "paillier_sgd": "ppml.algorithms.paillier_sgd",
    "paillier_sqn": "ppml.algorithms.paillier_sqn",
}


def get_algorithm(key: str) -> ModuleType:
    """The module implementing algorithm `key`; an error lists the known keys."""
    if key not in ALGORITHMS:
        raise KeyError(f"unknown algorithm {key!r}; known: {', '.join(sorted(ALGORITHMS))}")
    return importlib.import_module(ALGORITHMS[key])


def default_network(parties, *, capture: bool = False):
    """A network joining the parties by name; modules needing other roles or a graph define ``network_for``."""
    from ppml.network import Network

    return Network([p.name for p in parties], capture=capture)


def make_network(module: ModuleType, parties, params, *, rng, capture: bool = False):
    """The network an algorithm runs on: its ``network_for`` if it has one, else :func:`default_network`."""
    if hasattr(module, "network_for"):
        return module.network_for(parties, params, rng=rng, capture=capture)
    return default_network(parties, capture=capture)
