"""Small vertically partitioned logistic data: every party holds a feature block of the same rows."""

from __future__ import annotations

from typing import Sequence

import numpy as np

from ppml.parties import Party


def vertical(rng: np.random.Generator, *, n: int, n_test: int, widths: Sequence[int]) -> list[Party]:
    """Parties party1.. holding `widths` columns each of rows in the unit ball; party1 holds the labels."""
    X = rng.normal(size=(n + n_test, sum(widths)))
    X /= np.linalg.norm(X, axis=1, keepdims=True)
    y = (rng.random(n + n_test) < 1 / (1 + np.exp(-4 * X @ rng.normal(size=X.shape[1])))).astype(np.int8)
    ids = np.array([f"e{i}" for i in range(n + n_test)])
    parties, start = [], 0
    for k, w in enumerate(widths):
        block, start = X[:, start:start + w], start + w
        holder = k == 0
        parties.append(Party(f"party{k + 1}", tuple(f"f{start - w + j}" for j in range(w)), ids[:n], block[:n],
                             y[:n] if holder else None, ids[n:], block[n:], y[n:] if holder else None))
    return parties


def hosts_of(parties: list[Party], widths: tuple[int, ...]) -> list[Party]:
    """The guest and the host of `parties` with the host's columns dealt to ``host1``, ``host2``, ... in
    blocks of `widths` (in order)."""
    guest, host = parties
    assert sum(widths) == host.n_features
    out, start = [guest], 0
    for k, width in enumerate(widths, start=1):
        cut = slice(start, start + width)
        out.append(Party(f"host{k}", host.columns[cut], host.ids, host.X[:, cut], None, host.test_ids,
                         host.X_test[:, cut], None))
        start += width
    return out
