"""FDML report: Table I analogue, staleness study and claims from hand-made runs."""

import shutil
from pathlib import Path

import matplotlib
import pytest

from ppml.report import fdml as report
from ppml.report.base import ReportOutput, Run, Runs

matplotlib.use("Agg")

PUBLISHED = Path(__file__).resolve().parents[3] / "reports" / "published" / "fdml_table1.csv"


def _records(objectives, *, per_epoch=1.0):
    return {"records": [{"epoch": e + 1, "train_objective": f, "test_logloss": f,
                         "sim_time": per_epoch * (e + 1), "seconds": 0.1 * (e + 1)}
                        for e, f in enumerate(objectives)]}


def _table_run(dataset, model, features, auc):
    metrics = {"algorithm": "fdml", "dataset": dataset, "local_model": model, "features": features, "tau": 0,
               "mode": "simulated", "train_objective": 0.35, "test_logloss": 0.34, "test_auc": auc,
               "seconds": 2.0, "sim_time": 300.0}
    # As the train stage writes it: one history per seed.
    return Run(name=f"fdml_table1-{dataset}-{model}-{features}", params={}, metrics=metrics,
               history={"runs": [_records([0.4, 0.36, 0.35])]})


def _staleness_run(tau, per_epoch, *, mode="simulated"):
    metrics = {"algorithm": "fdml", "dataset": "synth_d100", "tau": tau, "mode": mode, "speeds": [1, 1, 4],
               "epochs": 3, "train_objective": 0.44, "sim_time_per_epoch": per_epoch,
               "seconds_per_epoch": 0.1, "max_delay": tau, "mean_delay": tau / 2}
    return Run(name=f"fdml_staleness-{mode}-tau{tau}", params={}, metrics=metrics,
               history=_records([0.5, 0.45, 0.44], per_epoch=per_epoch))


@pytest.fixture
def out(tmp_path):
    (tmp_path / "published").mkdir()
    shutil.copy(PUBLISHED, tmp_path / "published" / "fdml_table1.csv")
    return ReportOutput(tmp_path)


def _a9a_runs(fdml_lr_auc):
    aucs = {("lr", "local"): 0.88, ("lr", "all"): 0.899, ("lr", "split"): fdml_lr_auc,
            ("nn", "local"): 0.885, ("nn", "all"): 0.902, ("nn", "split"): 0.903}
    return [_table_run("a9a", m, f, auc) for (m, f), auc in aucs.items()]


def test_claims_tables_and_figures(out):
    staleness = [_staleness_run(0, 88.0), _staleness_run(1, 72.0), _staleness_run(4, 64.0),
                 _staleness_run(16, 2.0, mode="threads")]
    runs = Runs(_a9a_runs(0.8985) + staleness)
    claims = {c.id: c for c in report.build(runs, out)}

    near = claims["fdml-lr-auc-near-centralized-a9a"]
    assert near.passed is True and "gap 0.0005" in near.ours and "0.6971" in near.published
    assert claims["fdml-beats-local-a9a"].passed is True
    for dataset_claim in ("fdml-lr-auc-near-centralized-default_credit", "fdml-beats-local-default_credit"):
        assert claims[dataset_claim].passed is None and "not run" in claims[dataset_claim].ours
    stale = claims["fdml-staleness-lowers-wallclock"]
    assert stale.passed is True and "tau=4: 64.00" in stale.ours and "tau=16" not in stale.ours

    table = (out.root / "tables" / "fdml_table1.md").read_text()
    assert "paper (Tencent, private)" in table and "not run" in table
    staleness = (out.root / "tables" / "fdml_staleness.md").read_text()
    assert "threads" in staleness and "0.44440" in staleness  # target = 0.44 * 1.01
    curves = (out.root / "plots" / "data" / "fdml_curves.csv").read_text().splitlines()
    assert len(curves) == 1 + 6 * 3  # header, then 3 epochs of each a9a run
    for name in ("fdml_curves", "fdml_staleness"):
        assert (out.root / "plots" / f"{name}.png").stat().st_size > 0
        assert (out.root / "plots" / "data" / f"{name}.csv").exists()


def test_claims_fail_on_the_numbers(out):
    runs = Runs(_a9a_runs(0.87) + [_staleness_run(0, 60.0), _staleness_run(4, 70.0)])
    claims = {c.id: c for c in report.build(runs, out)}
    assert claims["fdml-lr-auc-near-centralized-a9a"].passed is False
    assert claims["fdml-beats-local-a9a"].passed is False  # LR: 0.87 < local 0.88
    assert claims["fdml-staleness-lowers-wallclock"].passed is False


def test_no_runs_at_all(out):
    claims = report.build(Runs([]), out)
    assert len(claims) == 5 and all(c.passed is None for c in claims)
    assert "not run" in (out.root / "tables" / "fdml_staleness.md").read_text()


def test_duplicate_table_rows_are_an_error(out):
    run = _table_run("a9a", "lr", "split", 0.9)
    twin = Run(name="fdml_table1-a9a-again", params={}, metrics=dict(run.metrics), history=run.history)
    with pytest.raises(LookupError, match="two Table I runs"):
        report.build(Runs([run, twin]), out)
