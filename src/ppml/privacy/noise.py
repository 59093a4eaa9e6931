"""Where differential-privacy noise comes from: a seeded stream (reproducible tables) or OS entropy (releases).

Every algorithm draws its DP noise from the ``numpy.random.Generator`` it is given (``rng.normal``,
``rng.laplace``, ``rng.gamma``, ``rng.standard_normal``). The pipeline's default, ``noise_source: seeded``,
hands it ``default_rng([seed, s])`` with the public ``seed`` of params.yaml: anyone can regenerate the noise
and subtract it, so such a run's certificate is a research comparison between algorithms, not a guarantee
for a model that is released. ``noise_source: os`` hands it an :class:`OsEntropyGenerator`, whose noise draws
read fresh bytes from the operating system's CSPRNG (``os.urandom``) on every call; its other draws (the
agents' graph, batch schedules, initial values) stay on the seeded stream, so a release run differs from the
seeded one only in its noise.

Generators do not cross between processes (DESIGN.md §4). A transport that runs a party elsewhere ships the
:class:`GeneratorSpec` of each of its generators (:func:`describe`: the source and the exact position of the
seeded stream) and the party's process creates its own generator from it (:func:`create`), so an ``os``
generator reads its noise from the entropy of the machine the party runs on and can never come back as a
seeded one. Should a generator be pickled all the same (inside some object), :class:`OsEntropyGenerator`
pickles as its description too: it is re-created as an :class:`OsEntropyGenerator`, never as numpy's plain
``Generator`` with the public seed.

Limits, said plainly: the noise is sampled in double precision by inverting the distribution function of a
53-bit uniform, so it inherits the floating-point caveats of every such sampler (Mironov, CCS 2012: the set
of reachable doubles can leak); a release against a capable adversary wants a discrete sampler (Canonne,
Kamath and Steinke, NeurIPS 2020) on top of this.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
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

    def __reduce__(self) -> tuple[Any, tuple[GeneratorSpec]]:
        # numpy's Generator pickles (and copies) as a plain Generator of its bit generator: unpickled, an OS
        # generator would quietly draw its noise from the public seed. Its description keeps the source.
        return create, (describe(self),)

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


#: the bit generators a :class:`GeneratorSpec` may name (numpy's own; run_generator uses PCG64)
_BIT_GENERATORS = ("PCG64", "PCG64DXSM", "Philox", "SFC64", "MT19937")


@dataclass(frozen=True)
class GeneratorSpec:
    """The description a party's process creates its generator from: source and seeded state, no generator.

    Attributes
    ----------
    source : {"seeded", "os"}
        Where the noise draws come from (see :data:`NOISE_SOURCES`).
    state : dict
        The bit generator's ``state``: the seeded stream exactly where the generator being described is, so
        the created generator continues it draw for draw.
    entropy, spawn_key, pool_size, n_children_spawned
        Its ``SeedSequence``, so that :meth:`~numpy.random.Generator.spawn` on the created generator gives the
        children the described one would have given.
    """

    source: str
    state: dict[str, Any]
    entropy: Any
    spawn_key: tuple[int, ...]
    pool_size: int
    n_children_spawned: int


def describe(rng: np.random.Generator) -> GeneratorSpec:
    """The :class:`GeneratorSpec` of `rng`, a seeded ``numpy.random.Generator`` or an OsEntropyGenerator."""
    if type(rng) is OsEntropyGenerator:
        source = "os"
    elif type(rng) is np.random.Generator:
        source = "seeded"
    else:  # a subclass could draw its noise differently: refuse rather than describe it as seeded
        what = f"{type(rng).__module__}.{type(rng).__qualname__}"
        raise TypeError(f"cannot describe a generator of type {what}; only numpy.random.Generator and "
                        "OsEntropyGenerator")
    bit_generator = rng.bit_generator
    seq = bit_generator.seed_seq
    if not isinstance(seq, np.random.SeedSequence):
        raise TypeError(f"cannot describe a generator whose bit generator was seeded by a "
                        f"{type(seq).__name__}; seed it with a SeedSequence (default_rng, run_generator)")
    return GeneratorSpec(source, bit_generator.state, seq.entropy, tuple(seq.spawn_key), seq.pool_size,
                         seq.n_children_spawned)


def create(spec: GeneratorSpec) -> np.random.Generator:
    """The generator `spec` describes, created in this process: for ``os`` an :class:`OsEntropyGenerator`."""
    if spec.source not in NOISE_SOURCES:
        raise ValueError(f"noise_source must be one of {list(NOISE_SOURCES)}, got {spec.source!r}")
    name = spec.state.get("bit_generator")
    if name not in _BIT_GENERATORS:
        raise ValueError(f"a generator description names bit generator {name!r}; expected one of "
                         f"{list(_BIT_GENERATORS)}")
    seq = np.random.SeedSequence(spec.entropy, spawn_key=spec.spawn_key, pool_size=spec.pool_size,
                                 n_children_spawned=spec.n_children_spawned)
    bit_generator = getattr(np.random, name)(seq)
    bit_generator.state = spec.state
    return OsEntropyGenerator(bit_generator) if spec.source == "os" else np.random.Generator(bit_generator)


def _replaced(value: Any, kind: type, replace: Any) -> Any:
    """`value` with every instance of `kind` in it (through dicts, lists and tuples) replaced by `replace(it)`."""
    if isinstance(value, kind):
        return replace(value)
    if type(value) is dict:
        return {key: _replaced(item, kind, replace) for key, item in value.items()}
    if type(value) in (list, tuple):
        return type(value)(_replaced(item, kind, replace) for item in value)
    return value


def describe_all(value: Any) -> Any:
    """`value` with every generator in it (through dicts, lists and tuples) replaced by its description."""
    return _replaced(value, np.random.Generator, describe)


def create_all(value: Any) -> Any:
    """The inverse of :func:`describe_all`, where the draws happen: each description becomes its generator."""
    return _replaced(value, GeneratorSpec, create)


def run_generator(source: str, entropy: Any) -> np.random.Generator:
    """The generator one run (one seed) is given: seeded by `entropy`, with OS-entropy noise for ``os``."""
    if source == "seeded":
        return np.random.default_rng(entropy)
    if source == "os":
        return OsEntropyGenerator(np.random.PCG64(entropy))
    raise ValueError(f"noise_source must be one of {list(NOISE_SOURCES)}, got {source!r}")
