"""Where differential-privacy noise comes from: a seeded stream (reproducible tables) or OS entropy (releases).

Every algorithm draws its DP noise from the ``numpy.random.Generator`` it is given (``rng.normal``,
``rng.laplace``, ``rng.gamma``, ``rng.standard_normal``). The pipeline's default, ``noise_source: seeded``,
hands it ``default_rng([seed, s])`` with the public ``seed`` of params.yaml: anyone can regenerate the noise
and subtract it, so such a run's certificate is a research comparison between algorithms, not a guarantee
for a model that is released. ``noise_source: os`` hands it an :class:`OsEntropyGenerator`, whose noise draws
read fresh bytes from the operating system's CSPRNG (``os.urandom``) on every call; its other draws (the
agents' graph, batch schedules, initial values) stay on the seeded stream, so a release run differs from the
seeded one only in its noise.

Limits, said plainly: the noise is sampled in double precision by inverting the distribution function of a
53-bit uniform, so it inherits the floating-point caveats of every such sampler (Mironov, CCS 2012: the set
of reachable doubles can leak); a release against a capable adversary wants a discrete sampler (Canonne,
Kamath and Steinke, NeurIPS 2020) on top of this.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np
from scipy import special

#: the values of an experiment's ``noise_source`` key
NOISE_SOURCES = ("seeded", "os")

#: ledger labels of the two sources (shown wherever a certificate appears)
LABELS = {
    "seeded": "noise reproducible from the public seed: a research comparison, not a release",
    "os": "noise drawn from OS entropy (os.urandom) on every draw",
}

_2_POW_M53 = 2.0**-53


def os_uniform(size: int) -> np.ndarray:
    """`size` uniforms in the open interval (0, 1) from 53 fresh OS-entropy bits each."""
    bits = np.frombuffer(os.urandom(8 * size), dtype=np.uint64) >> np.uint64(11)
    return (bits.astype(np.float64) + 0.5) * _2_POW_M53


class OsEntropyGenerator(np.random.Generator):
    """A ``numpy.random.Generator`` whose noise samplers read the operating system's entropy source.

    ``normal``, ``standard_normal``, ``laplace``, ``exponential`` and ``gamma`` invert their distribution
    functions at uniforms from :func:`os_uniform`; nothing about them can be reproduced from a seed. Every
    other method (``integers``, ``permutation``, ``choice``, ``random``, ``spawn``) is the wrapped bit
    generator's, so the rest of a run stays as seeded as the caller made it. Children from ``spawn`` are of
    this class too.
    """

    def _draw(self, size: Any, *params: Any) -> tuple[np.ndarray, tuple[int, ...]]:
        shape = tuple(np.broadcast_shapes(*(np.shape(p) for p in params))) if size is None else (
            (int(size),) if np.ndim(size) == 0 else tuple(int(s) for s in size))
        return os_uniform(int(np.prod(shape, dtype=np.int64))).reshape(shape), shape

    @staticmethod
    def _out(values: np.ndarray, size: Any) -> Any:
        return float(values) if size is None and values.ndim == 0 else values

    def standard_normal(self, size: Any = None, dtype: Any = np.float64, out: Any = None) -> Any:
        if out is not None:
            out[...] = self.standard_normal(np.shape(out))
            return out
        u, _ = self._draw(size)
        return self._out(special.ndtri(u).astype(dtype, copy=False), size)

    def normal(self, loc: Any = 0.0, scale: Any = 1.0, size: Any = None) -> Any:
        _check_scale(scale)
        u, _ = self._draw(size, loc, scale)
        return self._out(np.asarray(loc) + np.asarray(scale) * special.ndtri(u), size)

    def exponential(self, scale: Any = 1.0, size: Any = None) -> Any:
        _check_scale(scale)
        u, _ = self._draw(size, scale)
        return self._out(-np.asarray(scale) * np.log(u), size)

    def laplace(self, loc: Any = 0.0, scale: Any = 1.0, size: Any = None) -> Any:
        _check_scale(scale)
        u, _ = self._draw(size, loc, scale)
        centred = u - 0.5  # inverse CDF; |centred| < 1/2 strictly, so the log is finite
        return self._out(np.asarray(loc) - np.asarray(scale) * np.sign(centred) * np.log1p(-2.0 * np.abs(centred)),
                         size)

    def gamma(self, shape: Any, scale: Any = 1.0, size: Any = None) -> Any:
        _check_scale(scale)
        if np.any(np.asarray(shape) <= 0):
            raise ValueError(f"gamma shape must be > 0, got {shape!r}")
        u, _ = self._draw(size, shape, scale)
        return self._out(np.asarray(scale) * special.gammaincinv(shape, u), size)


def _check_scale(scale: Any) -> None:
    if np.any(np.asarray(scale) < 0) or not np.all(np.isfinite(scale)):
        raise ValueError(f"noise scale must be finite and >= 0, got {scale!r}")


def run_generator(source: str, entropy: Any) -> np.random.Generator:
    """The generator one run (one seed) is given: seeded by `entropy`, with OS-entropy noise for ``os``."""
    if source == "seeded":
        return np.random.default_rng(entropy)
    if source == "os":
        return OsEntropyGenerator(np.random.PCG64(entropy))
    raise ValueError(f"noise_source must be one of {list(NOISE_SOURCES)}, got {source!r}")
