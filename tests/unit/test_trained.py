"""A train stage trains exactly the runs whose inputs changed, writes each run directory whole, and refuses a bad
parameter before touching anything (ppml.trained, stages/train.py --algorithm)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import yaml

from ppml import trained
from stages.train import main
from tests.algorithms.vertical_data import vertical, write_prepared

BLOCK = {"algorithm": "centralized", "dataset": "toy", "lam": 0.01}


def _prepared(root: Path) -> Path:
    parties = vertical(np.random.default_rng(3), n=120, n_test=40, widths=(3, 2))
    return write_prepared(root / "toy", parties, dataset="toy")


@pytest.fixture
def stage(tmp_path):
    """A project with two centralized experiments on a prepared toy dataset; returns (run the stage, paths)."""
    _prepared(tmp_path / "prepared")
    (tmp_path / "code.txt").write_text("# train_centralized: fingerprint\n")
    paths = {"params": tmp_path / "params.yaml", "out": tmp_path / "runs" / "centralized",
             "metrics": tmp_path / "metrics" / "centralized.json", "code": tmp_path / "code.txt"}

    def write_params(experiments: dict) -> None:
        paths["params"].write_text(yaml.safe_dump({"seed": 7, "datasets": {"toy": {}},
                                                   "centralized_experiments": experiments}))

    def run(experiments: dict) -> int:
        write_params(experiments)
        return main(["--algorithm", "centralized", "--params", str(paths["params"]), "--code", str(paths["code"]),
                     "--data", str(tmp_path / "prepared"), "--out", str(paths["out"]),
                     "--metrics", str(paths["metrics"])])

    return run, paths


def _files(run_dir: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(run_dir.iterdir())}


def test_a_second_run_trains_nothing_and_an_edit_trains_that_run_alone(stage, capsys):
    run, paths = stage
    experiments = {"a": dict(BLOCK), "b": {**BLOCK, "lam": 0.1}}
    assert run(experiments) == 0
    assert "run 2 of 2: b" in capsys.readouterr().out
    first = {name: _files(paths["out"] / name) for name in experiments}
    assert set(first["a"]) == {f"{p}.json" for p in (*trained.PARTS, "inputs")}
    metrics = json.loads(paths["metrics"].read_text())
    assert set(metrics) == {"a", "b"} and metrics["a"] == json.loads(first["a"]["metrics.json"])

    assert run(experiments) == 0
    assert "run 1 of" not in capsys.readouterr().out
    assert {name: _files(paths["out"] / name) for name in experiments} == first  # timing.json too: not re-run

    assert run({**experiments, "a": {**BLOCK, "lam": 0.02}}) == 0
    out = capsys.readouterr().out
    assert "run 1 of 1: a" in out and ": b" not in out
    assert _files(paths["out"] / "b") == first["b"]
    assert json.loads((paths["out"] / "a" / "run.json").read_text())["lam"] == 0.02


def test_a_code_or_data_change_retrains_every_run(stage, capsys):
    run, paths = stage
    experiments = {"a": dict(BLOCK), "b": {**BLOCK, "lam": 0.1}}
    assert run(experiments) == 0
    paths["code"].write_text("# train_centralized: another fingerprint\n")
    capsys.readouterr()
    assert run(experiments) == 0
    assert "run 2 of 2: b" in capsys.readouterr().out


def test_a_bad_value_fails_before_anything_is_written(stage, capsys):
    run, paths = stage
    assert run({"a": dict(BLOCK)}) == 0
    before = (_files(paths["out"] / "a"), paths["metrics"].read_bytes())
    capsys.readouterr()
    assert run({"a": dict(BLOCK), "b": {**BLOCK, "lam": -1}}) == 2
    err = capsys.readouterr().err
    assert "centralized_experiments.b.lam" in err and "-1" in err and "git checkout -- params/" in err
    assert (_files(paths["out"] / "a"), paths["metrics"].read_bytes()) == before
    assert sorted(p.name for p in paths["out"].iterdir()) == ["a"]


def test_an_experiment_removed_from_the_parameters_loses_its_directory(stage):
    run, paths = stage
    assert run({"a": dict(BLOCK), "b": {**BLOCK, "lam": 0.1}}) == 0
    assert run({"a": dict(BLOCK)}) == 0
    assert sorted(p.name for p in paths["out"].iterdir()) == ["a"]
    assert set(json.loads(paths["metrics"].read_text())) == {"a"}


def test_digest_covers_every_input():
    base = dict(name="a", block=BLOCK, seed=7, data={"x.npz": "1"}, code="c")
    digest = trained.inputs(**{k: v for k, v in base.items() if k != "name"}, name="a")["digest"]
    for change in ({"block": {**BLOCK, "lam": 0.02}}, {"seed": 8}, {"data": {"x.npz": "2"}}, {"code": "d"},
                   {"name": "b"}):
        assert trained.inputs(**{**base, **change})["digest"] != digest, change
    assert trained.inputs(**base)["digest"] == digest


def test_an_incomplete_run_is_not_current_and_a_failed_write_keeps_the_old_run(tmp_path):
    run_dir = tmp_path / "a"
    recorded = trained.inputs("a", BLOCK, seed=7, data={}, code="c")
    outputs = {part: {"part": part} for part in trained.PARTS}
    trained.write_run(run_dir, outputs, recorded)
    assert trained.is_current(run_dir, recorded)
    old = _files(run_dir)
    with pytest.raises(KeyError):
        trained.write_run(run_dir, {k: v for k, v in outputs.items() if k != "metrics"}, recorded)
    assert _files(run_dir) == old and sorted(p.name for p in tmp_path.iterdir()) == ["a"]
    (run_dir / "timing.json").unlink()
    assert not trained.is_current(run_dir, recorded)


def test_prune_removes_leftovers_and_unknown_runs(tmp_path):
    for name in ("a", "b", ".partial-a"):
        (tmp_path / name).mkdir()
    (tmp_path / "stray.json").write_text("{}")
    assert trained.prune(tmp_path, {"a"}) == [".partial-a", "b", "stray.json"]
    assert [p.name for p in tmp_path.iterdir()] == ["a"]
