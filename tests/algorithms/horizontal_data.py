"""Small horizontally partitioned logistic data for the decentralized algorithms' tests."""

from __future__ import annotations

from types import ModuleType
from typing import Any, Sequence

import numpy as np

from ppml.parties import Party


def horizontal(rng: np.random.Generator, *, agents: int = 5, n: int | Sequence[int] = 120, d: int = 5,
               n_test: int = 200) -> tuple[list[Party], Party]:
    """Agents with their own rows (in the unit ball; `n` rows each, or one count per agent) and an evaluator
    holding the test rows."""
    sizes = [n] * agents if isinstance(n, int) else list(n[:agents])
    total = sum(sizes) + n_test
    w = rng.normal(size=d) * 3
    X = rng.normal(size=(total, d))
    X /= np.maximum(1.0, np.linalg.norm(X, axis=1))[:, None]
    y = (rng.random(total) < 1 / (1 + np.exp(-X @ w))).astype(np.int8)
    cols = tuple(f"c{k}" for k in range(d))
    bounds = np.concatenate([[0], np.cumsum(sizes)])
    parties = [Party(name=f"agent{i + 1}", columns=cols, ids=np.array([f"r{k}" for k in range(lo, hi)]),
                     X=X[lo:hi], y=y[lo:hi]) for i, (lo, hi) in enumerate(zip(bounds[:-1], bounds[1:]))]
    evaluator = Party(name="evaluator", columns=cols, ids=np.array([f"t{k}" for k in range(n_test)]),
                      X=X[bounds[-1]:], y=y[bounds[-1]:])
    return parties, evaluator


def fit_module(module: ModuleType, parties: list[Party], evaluator: Party, *, lam: float, seed: int = 0,
               capture: bool = False, **kw: Any) -> tuple[Any, Any, Any]:
    """One seeded run of a decentralized algorithm module: (history, network, params)."""
    params = module.Params(lam=lam, **kw)
    rng = np.random.default_rng(seed)
    network = module.network_for(parties, params, rng=rng, capture=capture)
    return module.fit(parties, network, params, rng=rng, evaluation=evaluator), network, params
