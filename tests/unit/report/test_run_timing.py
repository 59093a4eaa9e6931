"""Report inputs: a run's timing comes from its timing.json, or from metrics.json for runs written before it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ppml.report.base import ReportInputError, Run, load_runs, read_timing
from ppml.timing import timing_record


def _write(run_dir: Path, **files: dict) -> None:
    run_dir.mkdir(parents=True)
    for stem, data in files.items():
        (run_dir / f"{stem}.json").write_text(json.dumps(data))


@pytest.fixture
def runs_dir(tmp_path):
    runs = tmp_path / "runs"
    _write(runs / "fdml" / "new", run={"experiment": "new", "algorithm": "fdml", "status": "ok", "latency": 1e-3},
           metrics={"test_auc": 0.9, "epochs": 2},
           timing=timing_record("new", {"seconds": 4.0, "sim_time": None, "cost_seconds": 0.5}))
    # before timing.json: the clocks are in metrics.json (and, when not a number, in run.json)
    _write(runs / "fdml" / "old", run={"experiment": "old", "algorithm": "fdml", "status": "ok", "sim_time": None},
           metrics={"test_auc": 0.8, "seconds": 3.0, "seconds_std": 0.5, "sim_time_per_epoch": 2.0})
    return runs


def test_timing_is_read_apart_from_the_metrics_in_both_layouts(runs_dir):
    runs = load_runs(runs_dir, {"new": {"algorithm": "fdml"}, "old": {"algorithm": "fdml"},
                                "untrained": {"algorithm": "fdml"}})
    new, old = runs["new"], runs["old"]
    assert new.timing == {"seconds": 4.0, "sim_time": None, "cost_seconds": 0.5}
    assert old.timing == {"seconds": 3.0, "seconds_std": 0.5, "sim_time_per_epoch": 2.0, "sim_time": None}
    for run in (new, old):
        assert not {"seconds", "seconds_std", "sim_time", "sim_time_per_epoch"} & set(run.metrics)
    # the lookup report modules use falls back to the timing; a parameter named like a time stays a parameter
    assert new.get("seconds") == 4.0 and old.get("sim_time_per_epoch") == 2.0 and new.get("latency") == 1e-3
    assert new.get("test_auc") == 0.9 and new.get("nothing", "x") == "x"
    assert runs["untrained"].timing == {} and runs["untrained"].get("seconds") is None


def test_runs_are_read_from_their_algorithms_folder_and_cite_it(runs_dir):
    """A run directory is runs/<algorithm>/<name> (ppml.config.run_dir); a flat runs/<name> is not read."""
    _write(runs_dir / "flat", run={"experiment": "flat", "algorithm": "fdml", "status": "ok"}, metrics={})
    runs = load_runs(runs_dir, {"new": {"algorithm": "fdml"}, "flat": {"algorithm": "fdml"}})
    assert runs["new"].available and runs["new"].get("test_auc") == 0.9
    assert runs["flat"].get("status") == "not run: stage train_fdml has not trained it yet"
    assert [r.evidence for r in runs] == ["reports/runs/fdml/new", "reports/runs/fdml/flat"]
    # a run built by hand cites its run.json's algorithm when it has no block
    assert Run(name="r", params={}, metrics={"algorithm": "local"}).evidence == "reports/runs/local/r"


def test_get_prefers_metrics_then_timing_then_params():
    run = Run(name="r", params={"seconds": 1.0, "lam": 0.1}, metrics={"test_auc": 0.7},
              timing={"seconds": 2.0, "test_auc": 0.0})
    assert run.get("test_auc") == 0.7 and run.get("seconds") == 2.0 and run.get("lam") == 0.1


@pytest.mark.parametrize("problem", ["not a number", "another run", "no values"])
def test_a_bad_timing_json_is_an_error_naming_it(runs_dir, problem):
    path = runs_dir / "fdml" / "new" / "timing.json"
    record = timing_record("new", {"seconds": 4.0})
    if problem == "not a number":
        record["values"]["seconds"] = "4 s"
    elif problem == "another run":
        record["experiment"] = "old"
    else:
        del record["values"]
    path.write_text(json.dumps(record))
    with pytest.raises(ReportInputError, match=str(path)) as caught:
        read_timing(runs_dir / "fdml" / "new")
    assert {"not a number": "seconds must be a number or null, got '4 s'", "another run": "experiment is 'old'",
            "no values": "'values' must be an object"}[problem] in str(caught.value)
