"""The Ray transport runs the same role programs as in-process, a process per party, with the same numbers."""

from __future__ import annotations

import os
import sys
import time
import warnings

import numpy as np
import pytest

from ppml import runtime
from ppml.algorithms import admm_sharing
from ppml.config import build
from ppml.history import ConvergenceWarning
from ppml.io import save_party
from ppml.launch.ray_runner import run_ray
from ppml.network import Network, ProtocolError
from tests.algorithms.vertical_data import vertical, write_prepared

pytestmark = pytest.mark.usefixtures("ray_cluster")


def vertical_parties(rng, *, n=240, n_test=80, widths=(6, 5, 4)):
    return vertical(rng, n=n, n_test=n_test, widths=widths)


def save_shards(parties, directory, evaluation=None):
    paths = {}
    for p in parties + ([] if evaluation is None else [evaluation]):
        name = p.name if p is not evaluation else runtime.EVALUATOR
        paths[name] = str(directory / f"{name}.npz")
        save_party(paths[name], p)
    return paths


def _without_timing(value):
    if isinstance(value, dict):
        return {k: _without_timing(v) for k, v in value.items() if "seconds" not in k}
    if isinstance(value, list):
        return [_without_timing(v) for v in value]
    return value


def run_both(module, parties, params, tmp_path, *, seed=3, evaluation=None, make_network=None):
    """(in-process history, network), (ray history, network) of the same run."""
    from ppml.algorithms import make_network as default_make_network

    make_network = make_network or default_make_network
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        rng = np.random.default_rng(seed)
        net_a = make_network(module, parties, params, rng=rng)
        hist_a = module.fit(parties, net_a, params, rng=rng, evaluation=evaluation)
        rng = np.random.default_rng(seed)
        public = runtime.Public.from_parties(parties, evaluation)
        net_b = make_network(module, list(public.parties), params, rng=rng)
        roles = module.roles(public, params, rng=rng, network=net_b)
        hist_b = module.assemble(public, params, run_ray(roles, net_b, save_shards(parties, tmp_path, evaluation)))
    return (hist_a, net_a), (hist_b, net_b)


def assert_same_run(a, b):
    (hist_a, net_a), (hist_b, net_b) = a, b
    assert _without_timing(hist_a.final) == _without_timing(hist_b.final)
    assert _without_timing(hist_a.records) == _without_timing(hist_b.records)
    assert hist_a.ledger.to_dict() == hist_b.ledger.to_dict()
    assert net_a.summary() == net_b.summary()
    pids = {w["pid"] for w in net_b.where.values()}
    assert len(pids) == len(net_b.where) >= 3 and os.getpid() not in pids
    for where in net_b.where.values():  # placement can be checked against `ray list nodes`
        assert len(where["node_id"]) == 56 and where["node_ip"].count(".") == 3, where


def test_admm_sharing_same_numbers_on_ray(tmp_path):
    parties = vertical_parties(np.random.default_rng(0))
    params = build(admm_sharing.Params, {"max_epochs": 6, "sigma": 0.1}, "test")
    assert_same_run(*run_both(admm_sharing, parties, params, tmp_path))


@pytest.mark.parametrize("algorithm, extra", [
    ("pp_admm", {"epsilon": 1.0, "delta": 1e-3, "delta_i1": 1e-3}),
    ("ipp_admm", {"epsilon": 1.0, "delta": 1e-3, "delta_i1": 1e-3}),  # silent rounds: ctl/silent
])
def test_decentralized_same_numbers_on_ray(algorithm, extra, tmp_path):
    from ppml.algorithms import get_algorithm
    from tests.algorithms.horizontal_data import horizontal

    module = get_algorithm(algorithm)
    parties, evaluator = horizontal(np.random.default_rng(4), agents=4, n=80, d=4, n_test=60)
    params = build(module.Params, {"agents": 4, "T": 4, "lam": 0.01, **extra}, "test")
    assert_same_run(*run_both(module, parties, params, tmp_path, evaluation=evaluator))


def test_os_noise_on_ray_is_fresh_in_every_run(tmp_path):
    """noise_source: os on Ray: each party's process draws its noise from OS entropy (the generators are
    created there from their descriptions), so two runs differ from each other and from the seeded run."""
    from ppml.algorithms import make_network, pp_admm
    from ppml.privacy.noise import run_generator
    from tests.algorithms.horizontal_data import horizontal

    parties, evaluator = horizontal(np.random.default_rng(4), agents=4, n=80, d=4, n_test=60)
    params = build(pp_admm.Params, {"agents": 4, "T": 4, "lam": 0.01, "epsilon": 1.0, "delta": 1e-3,
                                    "delta_i1": 1e-3}, "test")
    public = runtime.Public.from_parties(parties, evaluator)
    shards = save_shards(parties, tmp_path, evaluator)
    objectives = {}
    for run, source in (("os 1", "os"), ("os 2", "os"), ("seeded", "seeded")):
        rng = run_generator(source, [3, 0])
        network = make_network(pp_admm, list(public.parties), params, rng=rng)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            roles = pp_admm.roles(public, params, rng=rng, network=network)
            history = pp_admm.assemble(public, params, run_ray(roles, network, shards))
        objectives[run] = [r["train_objective"] for r in history.records]
    assert objectives["os 1"] != objectives["os 2"]
    assert objectives["seeded"] not in (objectives["os 1"], objectives["os 2"])
    # the seeded run is the in-process one, draw for draw
    rng = run_generator("seeded", [3, 0])
    network = make_network(pp_admm, parties, params, rng=rng)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        local = pp_admm.fit(parties, network, params, rng=rng, evaluation=evaluator)
    assert objectives["seeded"] == [r["train_objective"] for r in local.records]


def test_paillier_sqn_same_numbers_on_ray(tmp_path):
    """Guest, host and arbiter in three processes; the 1024-bit key pair is made inside the arbiter's."""
    from ppml.algorithms import paillier_sqn
    from ppml.crypto.paillier import KeyLengthWarning

    parties = vertical_parties(np.random.default_rng(5), n=240, n_test=60, widths=(5, 4))
    params = build(paillier_sqn.Params, {"batch_size": 100, "encrypted": True, "key_bits": 1024, "eta": 0.15,
                                         "lam": 0.01, "max_epochs": 2, "L": 2, "M": 3}, "test")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", KeyLengthWarning)
        local, remote = run_both(paillier_sqn, parties, params, tmp_path)
    # ciphertexts are fresh random numbers, written at the width of the widest: byte counts may differ by a few
    for run in (local, remote):
        run[0].final = {k: v for k, v in run[0].final.items() if "bytes" not in k}
        run[0].records = [{k: v for k, v in r.items() if "bytes" not in k} for r in run[0].records]
        for m in run[1].messages:
            object.__setattr__(m, "nbytes", 0)
    assert_same_run(local, remote)
    assert remote[1].summary()["ciphertexts"] == local[1].summary()["ciphertexts"] > 0


def test_fdml_same_numbers_on_ray(tmp_path):
    """Server and three workers in four processes; tau = 0 on the simulated clock is deterministic."""
    from ppml.algorithms import fdml

    parties = vertical_parties(np.random.default_rng(6))
    params = build(fdml.Params, {"variant": "paper", "local_model": "lr", "tau": 0, "batch_size": 40,
                                 "eta": 1.0, "lam": 1e-3, "epochs": 2}, "test")
    assert_same_run(*run_both(fdml, parties, params, tmp_path))


def test_fdml_threads_on_ray_is_asynchronous_within_its_bound(tmp_path):
    """Under real asynchrony the order is the processes' own: the clock gap stays within tau and the
    staleness the pushes really had is recorded."""
    from ppml.algorithms import fdml

    parties = vertical_parties(np.random.default_rng(7))
    tau = 2
    params = build(fdml.Params, {"variant": "paper", "local_model": "lr", "tau": tau, "speeds": [1, 1, 4],
                                 "mode": "threads", "tick": 0.002, "batch_size": 40, "eta": 1.0, "lam": 1e-3,
                                 "epochs": 2}, "test")
    (_, _), (history, network) = run_both(fdml, parties, params, tmp_path)
    assert history.final["max_gap"] <= tau
    observed = history.extra["observed_staleness"]
    assert sum(observed["histogram"]) == 3 * 2 * 6  # every push of 3 workers, 2 epochs of 6 batches
    assert len({w["pid"] for w in network.where.values()}) == 4


# --- faults: a party that fails, dies or never sends ends the run with an error naming it, without a hang -----


def _fails(endpoint, party):
    endpoint.recv("b", "hello")
    raise ValueError("the shard is corrupt")


def _greets_then_waits(endpoint, party):
    endpoint.send("a", "hello", 1)
    return endpoint.recv("a", "never")


def _dies(endpoint, party):
    endpoint.recv("b", "hello")
    os._exit(3)


def _finishes(endpoint, party):
    return "done"


def _waits(endpoint, party):
    return endpoint.recv("a", "never")


@pytest.fixture
def by_value(ray_cluster):
    """Ship this module's fault programs by value: Ray's workers cannot import the tests."""
    ray_cluster.cloudpickle.register_pickle_by_value(sys.modules[__name__])
    yield
    ray_cluster.cloudpickle.unregister_pickle_by_value(sys.modules[__name__])


@pytest.mark.usefixtures("by_value")
@pytest.mark.parametrize("program, expected", [
    (_fails, r"party 'a' failed \(ValueError: the shard is corrupt\); the others were at: b: round 0: waiting "
             r"for 'never' from 'a'"),
    (_dies, r"party 'a' failed \(its process died\)"),
])
def test_a_failing_or_dying_party_ends_the_run_naming_it(program, expected):
    net = Network(["a", "b"], timeout=60)
    roles = [runtime.Role("a", program), runtime.Role("b", _greets_then_waits)]
    with pytest.raises(ProtocolError, match=expected):
        run_ray(roles, net, {})


def _niceness(endpoint, party):
    return os.nice(0)


@pytest.mark.usefixtures("by_value")
def test_parties_run_at_niceness_0_not_rays_15():
    """Ray starts its workers at niceness 15; a party waiting for the CPU at every message on a busy machine
    ran FDML 10-50 times slower, so every party's process runs at 0."""
    net = Network(["a", "b"], timeout=60)
    results = run_ray([runtime.Role("a", _niceness), runtime.Role("b", _niceness)], net, {})
    assert results == {"a": 0, "b": 0}


def _waits_on_b(endpoint, party):
    return endpoint.recv("b", "never")


@pytest.mark.usefixtures("by_value")
def test_a_message_that_never_arrives_times_out_naming_the_wait():
    net = Network(["a", "b"], timeout=1.5)
    roles = [runtime.Role("a", _waits_on_b), runtime.Role("b", _waits)]
    with pytest.raises(ProtocolError, match=r"'(a|b)' waited 1.5 s for 'never' from '(b|a)' in its round 0"):
        run_ray(roles, net, {})


@pytest.mark.usefixtures("by_value")
def test_a_wait_for_a_peer_that_finished_ends_at_once_naming_it():
    """'a' returns without sending what 'b' waits for: its bye ends b's wait at once, not at the timeout."""
    net = Network(["a", "b"], timeout=60.0)
    roles = [runtime.Role("a", _finishes), runtime.Role("b", _waits)]
    start = time.monotonic()
    with pytest.raises(ProtocolError, match=r"'a' finished its run while 'b' waited for 'never' from 'a' in its "
                                            r"round 0"):
        run_ray(roles, net, {})
    assert time.monotonic() - start < 45.0  # not the 60 s timeout


# --- the train stage with transport: ray ----------------------------------------------------------------------


@pytest.fixture(scope="module")
def prepared_vertical(tmp_path_factory):
    """A prepared vertical dataset (three parties' shards and their manifest) as the prepare stage writes it."""
    return write_prepared(tmp_path_factory.mktemp("toy_vertical"), vertical_parties(np.random.default_rng(1)))


def train_stage_pair(block, transport, data, tmp_path, *, seed=7):
    """The train stage on `block` in-process and with `transport`: both run dicts (run, metrics, comm, history),
    checked to agree in everything but timing, the transport and where the parties ran."""
    import yaml

    from ppml.io import read_json
    from stages.train import main

    params = tmp_path / "params.yaml"
    params.write_text(yaml.safe_dump({"seed": seed, "experiments": {"local": block,
                                                                    "remote": {**block, "transport": transport}}}))
    runs = {}
    for name in ("local", "remote"):
        out = tmp_path / name
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            assert main(["--experiment", name, "--params", str(params), "--data", str(data),
                         "--out", str(out)]) == 0
        runs[name] = {part: read_json(out / f"{part}.json") for part in ("run", "metrics", "comm", "history")}
    local, remote = runs["local"], runs["remote"]
    assert (local["run"]["transport"], remote["run"]["transport"]) == ("inprocess", transport)
    assert {k: v for k, v in local["run"].items() if k not in ("experiment", "transport")} == \
        {k: v for k, v in remote["run"].items() if k not in ("experiment", "transport")}
    assert _without_timing({k: v for k, v in local["metrics"].items() if k != "experiment"}) == \
        _without_timing({k: v for k, v in remote["metrics"].items() if k != "experiment"})
    assert [r["bytes"] for r in local["comm"]["runs"]] == [r["bytes"] for r in remote["comm"]["runs"]]
    assert local["comm"]["runs"][0]["bytes"] > 0
    assert _without_timing(local["history"]) == _without_timing(remote["history"])
    assert len(local["comm"]["runs"]) == len(remote["comm"]["runs"])
    for comm_local, comm_remote in zip(local["comm"]["runs"], remote["comm"]["runs"]):
        assert (comm_local["transport"], comm_remote["transport"]) == ("inprocess", transport)
        assert {k: v for k, v in comm_local.items() if k not in ("transport", "parties")} == \
            {k: v for k, v in comm_remote.items() if k not in ("transport", "parties")}
    return local, remote


def test_train_stage_runs_a_block_with_transport_ray(prepared_vertical, tmp_path):
    block = {"algorithm": "admm_sharing", "dataset": "toy_vertical", "max_epochs": 5, "sigma": 0.05, "seeds": 2}
    local, remote = train_stage_pair(block, "ray", prepared_vertical, tmp_path)
    for comm_local, comm_remote in zip(local["comm"]["runs"], remote["comm"]["runs"]):
        assert len({w["pid"] for w in comm_remote["parties"].values()}) == 3
        assert len({w["pid"] for w in comm_local["parties"].values()}) == 1


def test_a_damaged_shard_on_ray_is_one_line_naming_the_file(prepared_vertical, tmp_path, capsys):
    import shutil

    import yaml

    from stages.train import main

    data = tmp_path / "data"
    shutil.copytree(prepared_vertical, data)
    shard = sorted(data.glob("*.npz"))[1]
    shard.write_bytes(shard.read_bytes()[:100])
    params = tmp_path / "params.yaml"
    block = {"algorithm": "admm_sharing", "dataset": "toy_vertical", "max_epochs": 2, "transport": "ray"}
    params.write_text(yaml.safe_dump({"seed": 7, "experiments": {"remote": block}}))
    capsys.readouterr()
    assert main(["--experiment", "remote", "--params", str(params), "--data", str(data),
                 "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and shard.name in err, err
    assert not (tmp_path / "out").exists()


def test_an_inprocess_train_run_loads_nothing_its_code_deps_leave_out(prepared_vertical, tmp_path):
    """The train stage, run in-process, loads only files of its group's code deps: no links, no launcher (so
    an edit to them does not re-run the in-process experiments, ppml.codegraph); with transport ray, the
    Ray launcher and the links load."""
    import json
    import subprocess
    from pathlib import Path

    import yaml

    root = Path(__file__).resolve().parents[2]
    from ppml import codegraph as code_deps
    block = {"algorithm": "admm_sharing", "dataset": "toy_vertical", "max_epochs": 3, "sigma": 0.05}
    params = tmp_path / "params.yaml"
    params.write_text(yaml.safe_dump({"seed": 3, "experiments": {"here": block}}))
    code = "\n".join([
        "import json, sys, warnings",
        "sys.path.insert(0, '.')",
        "from stages.train import main",
        "warnings.simplefilter('ignore')",
        "assert main(sys.argv[1:]) == 0",
        "print(json.dumps(sorted(m.__file__ for n, m in sys.modules.items()",
        "                        if n.split('.')[0] == 'ppml' and getattr(m, '__file__', None))))",
    ])
    out = subprocess.run([sys.executable, "-c", code, "--experiment", "here", "--params", str(params), "--data",
                          str(prepared_vertical), "--out", str(tmp_path / "here")], cwd=root, capture_output=True,
                         text=True, check=True)
    loaded = {str(Path(f).resolve().relative_to(root.resolve())) for f in json.loads(out.stdout.splitlines()[-1])}
    allowed = set(code_deps.closure("stages/train.py", ("ppml.algorithms.admm_sharing",)))
    assert loaded <= allowed, sorted(loaded - allowed)
    assert "src/ppml/network/links.py" not in allowed
    linked = set(code_deps.closure("stages/train.py", ("ppml.algorithms.admm_sharing", "ppml.launch.ray_runner")))
    assert {"src/ppml/network/links.py", "src/ppml/network/tls_links.py", "src/ppml/network/grpc_links.py",
            "src/ppml/network/peer.py"} <= linked
    # transport grpc: the launcher and the program each party process runs (python -m ppml.party)
    local = set(code_deps.closure("stages/train.py", ("ppml.algorithms.admm_sharing", "ppml.launch.local")))
    assert {"src/ppml/party.py", "src/ppml/launch/party.py", "src/ppml/network/links.py",
            "src/ppml/network/tls_links.py", "src/ppml/network/grpc_links.py"} <= local
