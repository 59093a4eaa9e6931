import numpy as np
import pytest
from scipy import stats

from ppml.privacy.noise import OsEntropyGenerator, os_uniform, run_generator


def test_seeded_generator_is_default_rng():
    a, b = run_generator("seeded", [2020, 1]), np.random.default_rng([2020, 1])
    assert type(a) is np.random.Generator
    assert np.array_equal(a.normal(0.0, 1.0, 5), b.normal(0.0, 1.0, 5))


def test_os_noise_is_fresh_but_other_draws_stay_seeded():
    a, b = run_generator("os", [2020, 1]), run_generator("os", [2020, 1])
    assert isinstance(a, OsEntropyGenerator)
    assert not np.array_equal(a.normal(0.0, 1.0, 8), b.normal(0.0, 1.0, 8))
    assert not np.array_equal(a.laplace(0.0, 1.0, 8), b.laplace(0.0, 1.0, 8))
    # the graph, schedules and initial values are the seeded stream's
    assert np.array_equal(a.permutation(50), b.permutation(50))
    assert a.integers(2**62) == b.integers(2**62)
    child = a.spawn(2)[1]
    assert isinstance(child, OsEntropyGenerator)


def test_os_uniform_open_interval():
    u = os_uniform(100_000)
    assert u.shape == (100_000,) and 0.0 < u.min() and u.max() < 1.0


@pytest.mark.parametrize("draw, cdf", [
    (lambda g: g.normal(1.0, 2.0, size=20_000), stats.norm(1.0, 2.0).cdf),
    (lambda g: g.standard_normal(20_000), stats.norm().cdf),
    (lambda g: g.laplace(0.0, 3.0, size=20_000), stats.laplace(0.0, 3.0).cdf),
    (lambda g: g.exponential(2.0, size=20_000), stats.expon(scale=2.0).cdf),
    (lambda g: g.gamma(50.0, 0.1, size=20_000), stats.gamma(50.0, scale=0.1).cdf),
])
def test_os_noise_has_the_right_distribution(draw, cdf):
    # OS entropy cannot be seeded: a KS test at level 1e-6 fails a correct sampler once in a million runs
    sample = draw(OsEntropyGenerator(np.random.PCG64(0)))
    assert stats.kstest(sample, cdf).pvalue > 1e-6


def test_os_noise_shapes_scalars_and_refusals():
    g = OsEntropyGenerator(np.random.PCG64(0))
    assert isinstance(g.normal(0.0, 1.0), float) and isinstance(g.laplace(), float)
    assert isinstance(g.gamma(3.0, 1.0), float)
    assert g.normal(0.0, 1.0, size=(2, 3)).shape == (2, 3)
    assert g.normal(np.zeros(4), 1.0).shape == (4,)
    out = np.empty(6)
    assert g.standard_normal(out=out) is out and np.all(np.isfinite(out))
    assert np.array_equal(g.normal(0.0, 0.0, 3), np.zeros(3))
    with pytest.raises(ValueError, match="noise scale"):
        g.normal(0.0, -1.0, 3)
    with pytest.raises(ValueError, match="noise scale"):
        g.laplace(0.0, np.inf, 3)
    with pytest.raises(ValueError, match="gamma shape"):
        g.gamma(0.0, 1.0)
    with pytest.raises(ValueError, match="noise_source"):
        run_generator("urandom", [1])


# --- generators across processes: created from a description, never shipped, never silently seeded ---------


def _copies():
    import copy
    import pickle

    cloudpickle = pytest.importorskip("ray.cloudpickle")
    return {"pickle": lambda g: pickle.loads(pickle.dumps(g)), "cloudpickle (Ray's)":
            lambda g: cloudpickle.loads(cloudpickle.dumps(g)), "deepcopy": copy.deepcopy, "copy": copy.copy}


@pytest.mark.parametrize("how", ["pickle", "cloudpickle (Ray's)", "deepcopy", "copy"])
def test_an_os_generator_stays_one_when_pickled_or_copied(how):
    g = run_generator("os", [2020, 0])
    g.permutation(7)  # somewhere along its seeded stream
    copied = _copies()[how](g)
    assert type(copied) is OsEntropyGenerator
    # its noise is fresh, not the public seed's ...
    seeded = run_generator("seeded", [2020, 0])
    seeded.permutation(7)
    noise = copied.normal(0.0, 1.0, 8)
    assert not np.array_equal(noise, seeded.normal(0.0, 1.0, 8))
    assert not np.array_equal(noise, g.normal(0.0, 1.0, 8))
    # ... and everything else continues the seeded stream where the original was
    assert np.array_equal(copied.permutation(50), g.permutation(50))
    assert type(copied.spawn(1)[0]) is OsEntropyGenerator


@pytest.mark.parametrize("source", ["seeded", "os"])
def test_a_generator_created_from_its_description_continues_its_stream(source):
    from ppml.privacy.noise import create, describe

    g = run_generator(source, [2020, 3])
    g.integers(10, size=5)
    g.spawn(2)
    spec = describe(g)
    assert spec.source == source
    made = create(spec)
    assert type(made) is type(g)
    assert np.array_equal(made.integers(2**62, size=4), g.integers(2**62, size=4))
    assert np.array_equal(made.spawn(1)[0].random(3), g.spawn(1)[0].random(3))  # the third child of both
    if source == "seeded":
        assert np.array_equal(made.normal(0.0, 1.0, 4), g.normal(0.0, 1.0, 4))


def test_describe_all_and_create_all_walk_the_kwargs_of_a_role():
    from ppml.privacy.noise import GeneratorSpec, create_all, describe_all

    g = run_generator("os", [1, 2])
    kwargs = {"rng": g, "timing": [g.spawn(1)[0], run_generator("seeded", [3])], "pair": (g, 4), "eta": 0.5}
    described = describe_all(kwargs)
    assert isinstance(described["rng"], GeneratorSpec) and isinstance(described["pair"], tuple)
    assert [type(s) for s in described["timing"]] == [GeneratorSpec, GeneratorSpec]
    assert described["eta"] == 0.5
    made = create_all(described)
    assert [type(made["rng"]), type(made["timing"][0]), type(made["timing"][1]), type(made["pair"][0])] == \
        [OsEntropyGenerator, OsEntropyGenerator, np.random.Generator, OsEntropyGenerator]


def test_only_known_generators_are_described_and_created():
    from dataclasses import replace

    from ppml.privacy.noise import create, describe

    class Other(np.random.Generator):
        pass

    with pytest.raises(TypeError, match="cannot describe a generator of type .*Other"):
        describe(Other(np.random.PCG64(0)))
    spec = describe(run_generator("seeded", [1]))
    with pytest.raises(ValueError, match="noise_source must be one of"):
        create(replace(spec, source="urandom"))
    with pytest.raises(ValueError, match="names bit generator 'Evil'"):
        create(replace(spec, state={**spec.state, "bit_generator": "Evil"}))
