"""Generators never cross into a party's process: every role's kwargs go there as descriptions (no cluster).

The one place a generator would cross a process boundary is the role a transport ships to its party's process
(:func:`ppml.launch.ray_runner._ship`, used by ``run_ray``); the Ray test of ``noise_source: os``
(tests/transport/test_ray.py) runs it end to end.
"""

from __future__ import annotations

import io
import pickle
import warnings

import numpy as np
import pytest

from ppml import runtime
from ppml.algorithms import ALGORITHMS, get_algorithm, make_network
from ppml.config import build
from ppml.launch.ray_runner import _ship
from ppml.privacy.noise import GeneratorSpec, OsEntropyGenerator, create_all, run_generator
from tests.algorithms.horizontal_data import horizontal
from tests.transport.test_ray import vertical_parties

VERTICAL = ("admm_sharing", "fdml", "paillier_sgd", "paillier_sqn")
EXTRA = {
    "pp_admm": {"epsilon": 1.0, "delta": 1e-3, "delta_i1": 1e-3},
    "ipp_admm": {"epsilon": 1.0, "delta": 1e-3, "delta_i1": 1e-3},
    "paillier_sgd": {"batch_size": 20},
    "paillier_sqn": {"batch_size": 20},
}


class _Finder(pickle.Pickler):
    """Pickles like Ray does, noting every generator it meets at any depth (inside objects too)."""

    def __init__(self) -> None:
        super().__init__(io.BytesIO())
        self.found: list[str] = []

    def reducer_override(self, obj):
        if isinstance(obj, np.random.Generator):
            self.found.append(type(obj).__name__)
        return NotImplemented


def _generators_in(value) -> list[str]:
    finder = _Finder()
    finder.dump(value)
    return finder.found


def _specs_in(value) -> int:
    if isinstance(value, GeneratorSpec):
        return 1
    if isinstance(value, dict):
        return sum(_specs_in(v) for v in value.values())
    if isinstance(value, (list, tuple)):
        return sum(_specs_in(v) for v in value)
    return 0


def _roles(key: str):
    module = get_algorithm(key)
    if key in VERTICAL:
        parties, evaluation = vertical_parties(np.random.default_rng(0), n=60, n_test=20, widths=(3, 2)), None
        values = EXTRA.get(key, {})
    else:
        parties, evaluation = horizontal(np.random.default_rng(4), agents=4, n=40, d=4, n_test=20)
        values = {"agents": 4, **EXTRA.get(key, {})} if "agents" in module.Params.__dataclass_fields__ else {}
    params = build(module.Params, values, "test")
    rng = run_generator("os", [2020, 0])
    public = runtime.Public.from_parties(parties, evaluation)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        network = make_network(module, list(public.parties), params, rng=rng)
        return module.roles(public, params, rng=rng, network=network)


@pytest.mark.parametrize("key", [k for k in ALGORITHMS if hasattr(get_algorithm(k), "roles")])
def test_no_role_ships_a_generator(key):
    roles = _roles(key)
    shipped = [_ship(role) for role in roles]
    assert not any(_generators_in(role) for role in shipped)
    # what the party's process creates from them is what the roles held: OS generators stay OS generators
    for role, sent in zip(roles, shipped):
        made = _generators_in(create_all(sent.kwargs))
        assert made == _generators_in(role.kwargs)
        assert all(name == OsEntropyGenerator.__name__ for name in made)
    if key != "local":  # every other protocol hands its parties a random stream
        assert sum(_specs_in(role.kwargs) for role in shipped) > 0
