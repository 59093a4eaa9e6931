"""metrics.json holds results only: every clock goes to timing.json, with what clock it is (issue 27)."""

from __future__ import annotations

import re
import warnings
from pathlib import Path

import numpy as np
import pytest
import yaml

from ppml.algorithms import ALGORITHMS
from ppml.config import flat_fields
from ppml.experiment import experiment_params, run
from ppml.history import ConvergenceWarning
from ppml.io import save_party, write_json
from ppml.parties import Party
from ppml.timing import MEASURED, SIMULATED, TIMING, basis, is_timing, timing_record
from tests.algorithms.horizontal_data import horizontal
from tests.algorithms.vertical_data import vertical

ROOT = Path(__file__).resolve().parents[2]

#: a field name that says it is a time
SAYS_TIME = re.compile(r"seconds|time|clock|wall|latency|per_second")

VERTICAL = {  # a small run of every vertical algorithm family
    "centralized": {"max_iter": 50},
    "local": {"max_iter": 50},
    "admm_sharing": {"max_epochs": 3, "sigma": 0.05},
    "fdml": {"epochs": 2, "batch_size": 40, "variant": "paper", "tau": 1, "seeds": 2},
    "paillier_sgd": {"encrypted": False, "batch_size": 40, "max_epochs": 2},
    "paillier_sqn": {"encrypted": False, "batch_size": 40, "max_epochs": 2, "L": 2, "M": 2},
}
HORIZONTAL = {  # ... and of every horizontal one (delta below 1/n = 1/120)
    "decentralized_admm": {"T": 3},
    "pp_admm": {"T": 3, "epsilon": 1.0, "delta": 1e-3, "delta_i1": 1e-3, "seeds": 2},
    "ipp_admm": {"T": 3, "epsilon": 1.0, "delta": 1e-3, "delta_i1": 1e-3},
    "dvp": {"T": 3},
    "m_admm": {"T": 3},
    "r_admm": {"T": 3},
}


def _vertical(rng: np.random.Generator, *, n: int = 120, n_test: int = 60, widths=(4, 3)) -> list[Party]:
    return vertical(rng, n=n, n_test=n_test, widths=widths)


def _write(directory: Path, parties: list[Party], evaluator: Party | None) -> Path:
    for p in parties + ([evaluator] if evaluator is not None else []):
        save_party(directory / f"{p.name}.npz", p)
    write_json(directory / "manifest.json", {
        "dataset": "toy", "available": True,
        "parties": [{"name": p.name, "file": f"{p.name}.npz"} for p in parties],
        "evaluator": None if evaluator is None else {"name": evaluator.name, "file": f"{evaluator.name}.npz"}})
    return directory


@pytest.fixture(scope="module")
def outputs(tmp_path_factory):
    """algorithm -> (its block, the outputs of experiment.run) for a small run of every algorithm family."""
    vertical = _write(tmp_path_factory.mktemp("vertical"), _vertical(np.random.default_rng(2)), None)
    agents, evaluator = horizontal(np.random.default_rng(3), n=120, d=4)
    flat = _write(tmp_path_factory.mktemp("horizontal"), agents, evaluator)
    out = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        for blocks, data in ((VERTICAL, vertical), (HORIZONTAL, flat)):
            for algorithm, extra in blocks.items():
                block = {"algorithm": algorithm, "dataset": "toy", **extra}
                out[algorithm] = block, run(f"{algorithm}-toy", block, data, seed=5)
    return out


def test_every_algorithm_family_is_run():
    assert set(VERTICAL) | set(HORIZONTAL) == set(ALGORITHMS)


@pytest.mark.parametrize("algorithm", sorted(ALGORITHMS))
def test_no_metrics_field_is_a_time(outputs, algorithm):
    block, out = outputs[algorithm]
    assert out["run"]["status"] == "ok"
    clocks = [k for k in out["metrics"] if SAYS_TIME.search(k)]
    assert not clocks, f"{algorithm}: timing fields in metrics.json: {clocks}"
    # a field of run.json that says it is a time is a parameter (FDML's cost-model latency), not a reading
    _, params, _ = experiment_params(f"{algorithm}-toy", block)
    assert {k for k in out["run"] if SAYS_TIME.search(k)} <= set(flat_fields(params))
    timing = out["timing"]
    assert timing["experiment"] == f"{algorithm}-toy" and "seconds" in timing["values"]
    assert all(SAYS_TIME.search(k) for k in timing["values"]), timing["values"]
    assert set(timing["basis"]) == set(timing["values"])
    for field, what in timing["basis"].items():
        assert what == basis(field) and what["kind"] in (MEASURED, SIMULATED) and what["clock"]


def test_seeds_spread_and_simulated_clocks_are_timing(outputs):
    _, fdml = outputs["fdml"]
    values, described = fdml["timing"]["values"], fdml["timing"]["basis"]
    assert {"seconds", "seconds_mean", "seconds_std", "seconds_per_epoch", "protocol_seconds", "sim_time",
            "sim_time_per_epoch", "cost_seconds", "cost_seconds_per_epoch"} <= set(values)
    assert values["seconds_std"] >= 0 and values["sim_time"] > 0 and values["cost_seconds"] > 0
    # a simulated clock and a cost model are not measurements; the wall clocks are
    assert {f for f, b in described.items() if b["kind"] == SIMULATED} == \
        {"sim_time", "sim_time_per_epoch", "cost_seconds", "cost_seconds_per_epoch"}
    assert described["sim_time"]["unit"].startswith("simulated time units")
    # the other results of the seeds stay metrics
    assert {"test_auc", "test_auc_std", "epochs"} <= set(fdml["metrics"])


def test_basis_of_seconds_says_which_process_clock():
    assert "train stage's process" in basis("seconds")["clock"]
    assert "slowest party's own wall clock" in basis("seconds", transport="grpc")["clock"]
    assert basis("seconds_std", transport="ray")["clock"].startswith("sample standard deviation")
    assert is_timing("cost_seconds_per_epoch") and is_timing("seconds_mean") and not is_timing("latency")
    with pytest.raises(KeyError, match="'wall' is not a timing field"):
        basis("wall")
    with pytest.raises(KeyError, match="transport 'mpi'"):
        basis("seconds", transport="mpi")
    record = timing_record("x", {"seconds": 1.5, "sim_time": None})
    assert record == {"experiment": "x", "values": {"seconds": 1.5, "sim_time": None},
                      "basis": {"seconds": basis("seconds"), "sim_time": basis("sim_time")}}
    assert all(SAYS_TIME.search(f) for f in TIMING)


def test_dvc_yaml_lists_timing_and_privacy_as_outputs_not_metrics():
    """Each train stage's output is its algorithm's folder of run directories, reports/runs/<algorithm> (every
    run's timing.json and privacy.json inside it, cache: false); its one metrics file gathers the runs'
    metrics.json, which hold no clock."""
    stages = yaml.safe_load((ROOT / "dvc.yaml").read_text())["stages"]
    groups = {name: stage for name, stage in stages.items() if name.startswith("train_")}
    assert set(groups) == {f"train_{a}" for a in ALGORITHMS}
    for name, stage in groups.items():
        algorithm = name.removeprefix("train_")
        outs = {path: spec for entry in stage["outs"] for path, spec in entry.items()}
        metrics = {path for entry in stage.get("metrics", []) for path in entry}
        runs = f"reports/runs/{algorithm}"
        assert (outs.get(runs) or {}).get("cache") is False, f"{name}: {runs} is not an out with cache: false"
        assert not [m for m in metrics if m.startswith(f"{runs}/")], f"{name}: a file of its runs is a metric"
        assert metrics == {f"reports/metrics/{algorithm}.json"}
