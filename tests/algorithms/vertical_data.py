"""Small vertically partitioned logistic data: every party holds a feature block of the same rows."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Sequence

import numpy as np

from ppml.algorithms import _hetero_lr
from ppml.io import save_party, write_json
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


def merged(parties: list[Party]) -> tuple[np.ndarray, np.ndarray]:
    """(X, y +-1) of the joint model: the hosts' columns in order, the guest's, the intercept."""
    guest, *hosts = parties
    X = np.hstack([*(h.X for h in hosts), guest.X, np.ones((guest.n_samples, 1))])
    return X, 2.0 * guest.y - 1.0


def reference_losses(parties: list[Party], p, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Plain numpy Taylor-loss mini-batch SGD on the merged features with the protocol's batches: (weights,
    epoch losses), the batch losses computed from the whole scores u = sum_k u_k + u_B (cross terms and all)."""
    X, y = merged(parties)
    penalized = np.r_[np.ones(X.shape[1] - 1), 0.0]
    w, losses = np.zeros(X.shape[1]), []
    partitions = _hetero_lr.batch_partitions(seed, len(y), p.batch_size, shuffle=p.shuffle)
    for epoch in range(p.max_epochs):
        eta = p.eta / math.sqrt(1.0 + p.decay * epoch)
        batch = []
        for rows in next(partitions):
            u = X[rows] @ w
            batch.append(np.mean(np.log(2) - 0.5 * y[rows] * u + 0.125 * u * u)
                         + 0.5 * p.lam * float((penalized * w) @ (penalized * w)))
            w = w - eta * (X[rows].T @ (0.25 * u - 0.5 * y[rows]) / len(rows) + p.lam * penalized * w)
        losses.append(np.mean(batch))
    return w, np.array(losses)


def write_prepared(directory: Path, parties: list[Party], *, dataset: str = "toy_vertical") -> Path:
    """`parties`' shards and the manifest of dataset `dataset` in `directory`, as the prepare stage writes them."""
    directory.mkdir(parents=True, exist_ok=True)
    for p in parties:
        save_party(directory / f"{p.name}.npz", p)
    write_json(directory / "manifest.json", {
        "dataset": dataset, "available": True, "partition": "vertical", "evaluator": None,
        "parties": [{"name": p.name, "file": f"{p.name}.npz", "label_holder": p.is_label_holder,
                     "columns": p.n_features, "train_rows": p.n_samples, "test_rows": p.X_test.shape[0]}
                    for p in parties]})
    return directory
