"""Noise mechanisms. Each returns the noise and the immutable event describing what it protected."""

from __future__ import annotations

import numpy as np

from ppml.privacy.events import GaussianEvent, LaplaceEvent


def gaussian(rng: np.random.Generator, shape: int | tuple[int, ...], *, sigma: float, sensitivity: float,
             party: str = "") -> tuple[np.ndarray, GaussianEvent]:
    """N(0, sigma^2) noise for one release of a query with L2 sensitivity `sensitivity`."""
    if sigma < 0:
        raise ValueError(f"sigma must be >= 0, got {sigma}")
    noise = rng.normal(0.0, sigma, size=shape) if sigma > 0 else np.zeros(shape)
    return noise, GaussianEvent(sigma=float(sigma), sensitivity=float(sensitivity), party=party)


def laplace(rng: np.random.Generator, shape: int | tuple[int, ...], *, scale: float, sensitivity: float,
            party: str = "") -> tuple[np.ndarray, LaplaceEvent]:
    """Lap(scale) noise for one release of a query with L1 sensitivity `sensitivity`."""
    if scale <= 0:
        raise ValueError(f"Laplace scale must be > 0, got {scale}")
    return rng.laplace(0.0, scale, size=shape), LaplaceEvent(scale=float(scale), sensitivity=float(sensitivity),
                                                             party=party)
