"""FDML report: Table I analogue at epoch 10, curves, staleness study and claims from hand-made runs."""

import shutil
from pathlib import Path

import matplotlib
import pytest

from ppml.report import fdml as report
from ppml.report.base import ReportOutput, Run, Runs

matplotlib.use("Agg")

PUBLISHED = Path(__file__).resolve().parents[3] / "reports" / "published" / "fdml_table1.csv"
SETTINGS = {"local": "local", "all": "centralized", "split": "fdml"}


def _records(objectives, *, per_epoch=1.0, auc=0.9, cost=1.0):
    return {"records": [{"epoch": e + 1, "train_objective": f, "test_logloss": f, "test_auc": auc,
                         "sim_time": per_epoch * (e + 1), "seconds": 0.1 * (e + 1),
                         "cost_seconds": cost * (e + 1)}
                        for e, f in enumerate(objectives)]}


def _table_run(dataset, model, features, aucs, *, cost=1.0, tau=4, own="fresh", eta=1.0, name=None):
    """A Table I run with one seed per entry of `aucs` (the AUC is constant over the 12 epochs)."""
    metrics = {"algorithm": "fdml", "dataset": dataset, "local_model": model, "features": features,
               "tau": tau if features == "split" else 0, "mode": "simulated", "eta": eta,
               "protocol": "paper" if features == "split" else "sgd", "train_objective": 0.35}
    if features == "split":
        metrics["own"] = own
    default = f"fdml_table1-{dataset}-{model}-{SETTINGS[features]}" + ("_stored" if own == "stored" else "")
    return Run(name=name or default, params={}, metrics=metrics,
               history={"runs": [_records([0.4 - 0.001 * e for e in range(12)], auc=a, cost=cost)
                                 for a in aucs]})


def _staleness_run(tau, per_epoch, *, mode="simulated", own="fresh"):
    metrics = {"algorithm": "fdml", "dataset": "synth_d100", "tau": tau, "mode": mode, "speeds": [1, 1, 4],
               "epochs": 3, "train_objective": 0.44, "sim_time_per_epoch": per_epoch, "protocol": "paper",
               "seconds_per_epoch": 0.1, "max_delay": 30, "mean_delay": 15.0, "max_gap": tau, "rejections": 7,
               "own": own, "eta": 16.0 if own == "fresh" else 1.0}
    return Run(name=f"fdml_staleness-{mode}-{own}-tau{tau}", params={}, metrics=metrics,
               history={"runs": [_records([0.5, 0.45, 0.44], per_epoch=per_epoch)]})


@pytest.fixture
def out(tmp_path):
    (tmp_path / "published").mkdir()
    shutil.copy(PUBLISHED, tmp_path / "published" / "fdml_table1.csv")
    return ReportOutput(tmp_path)


def _a9a_runs(fdml_lr, *, central_nn=(0.905, 0.907), costs=None, tau=4):
    aucs = {("lr", "local"): (0.880, 0.882), ("lr", "all"): (0.899, 0.901), ("lr", "split"): fdml_lr,
            ("nn", "local"): (0.885, 0.886), ("nn", "all"): central_nn, ("nn", "split"): (0.900, 0.901)}
    costs = costs or {("lr", "local"): 0.1, ("lr", "all"): 0.2, ("lr", "split"): 3.0,
                      ("nn", "local"): 0.3, ("nn", "all"): 5.0, ("nn", "split"): 3.5}
    return [_table_run("a9a", m, f, a, cost=costs[(m, f)], tau=tau) for (m, f), a in aucs.items()]


def _stored_runs():
    """Algorithm 1's literal own term at its smaller step size (eta 0.25), and centralized SGD at that eta."""
    return [_table_run("a9a", "lr", "split", (0.8810, 0.8816), own="stored", eta=0.25),
            _table_run("a9a", "lr", "all", (0.8811, 0.8815), eta=0.25, name="fdml_table1-a9a-lr-centralized-eta0_25"),
            _table_run("a9a", "nn", "split", (0.8720, 0.8730), own="stored", eta=0.25),
            _table_run("a9a", "nn", "all", (0.8900, 0.8902), eta=0.25, name="fdml_table1-a9a-nn-centralized-eta0_25")]


def test_claims_tables_and_figures(out):
    staleness = [_staleness_run(0, 88.0), _staleness_run(1, 72.0), _staleness_run(4, 64.0),
                 _staleness_run(16, 2.0, mode="threads"), _staleness_run(0, 88.0, own="stored"),
                 _staleness_run(4, 90.0, own="stored")]
    runs = Runs(_a9a_runs((0.8975, 0.8985)) + _stored_runs() + staleness)
    claims = {c.id: c for c in report.build(runs, out)}
    assert len(claims) >= 7 and all(cid.startswith("fdml") for cid in claims)

    near = claims["fdml-lr-near-centralized-a9a"]
    assert near.verdict == "PASS" and "gap +0.0020" in near.ours and "0.6971" in near.published
    assert "standard error" in near.margin and "own term fresh" in near.statement
    assert "at equal step size (eta 1) centralized 0.9000 ± 0.0010, FDML - it -0.0020" in near.ours
    for model in ("lr", "nn"):
        assert claims[f"fdml-beats-local-{model}-a9a"].verdict == "PASS"
    assert claims["fdml-centralized-nn-better-a9a"].verdict == "PASS"  # 0.906 vs 0.9005, margin ~0.0016
    assert claims["fdml-local-fastest-a9a"].verdict == "PASS"
    assert claims["fdml-lr-slower-than-centralized-a9a"].verdict == "PASS"
    assert claims["fdml-centralized-nn-slower-a9a"].verdict == "PASS"
    assert "cost model" in claims["fdml-centralized-nn-slower-a9a"].statement
    for cid, claim in claims.items():
        if cid.endswith("default_credit"):
            assert claim.verdict == "NOT CHECKED" and "not run" in claim.ours
    stale = claims["fdml-staleness-lowers-wallclock"]
    assert stale.verdict == "PASS" and "tau=4: 64.00" in stale.ours and "tau=16" not in stale.ours
    assert claims["fdml-staleness-lowers-wallclock-own_stored"].verdict == "FAIL"  # 88 -> 90

    # Algorithm 1's literal own term, at its own (smaller) step size: below centralized at centralized's
    # step size, level with centralized at its own step size (the control), and below local for NN
    stored = claims["fdml-lr-near-centralized-a9a-own_stored"]
    assert stored.verdict == "FAIL" and "gap +0.0187" in stored.ours and "own term stored" in stored.statement
    assert "at equal step size (eta 0.25) centralized 0.8813 ± 0.0002, FDML - it +0.0000" in stored.ours
    assert claims["fdml-beats-local-nn-a9a-own_stored"].verdict == "FAIL"
    assert claims["fdml-centralized-nn-better-a9a-own_stored"].verdict == "PASS"

    table = (out.root / "tables" / "fdml_table1.md").read_text()
    assert "paper (Tencent, private)" in table and "not run" in table and "epoch 10" in table
    assert "0.8980 ± 0.0005" in table  # FDML LR at epoch 10, mean ± standard error over two seeds
    assert "| LR | FDML, own stored | a9a | paper | 0.2500 | 2 |" in table
    assert "| LR | centralized at FDML own stored's step size | a9a | sgd | 0.2500 | 2 |" in table
    assert "AUC - centralized at equal eta" in table
    # the fresh row's control is the centralized row itself (same eta): not repeated
    assert "centralized at FDML own fresh's step size" not in table
    staleness = (out.root / "tables" / "fdml_staleness.md").read_text()
    assert "threads" in staleness and "0.44440" in staleness and "rejected pulls" in staleness
    assert "| simulated | paper | stored | 1.0000 | 4 |" in staleness
    curves = (out.root / "plots" / "data" / "fdml_curves.csv").read_text().splitlines()
    assert len(curves) == 1 + 10 * 12  # header, then 12 epochs of each a9a run
    for name in ("fdml_curves", "fdml_staleness"):
        assert (out.root / "plots" / f"{name}.png").stat().st_size > 0


def test_claims_fail_or_are_not_shown_on_the_numbers(out):
    costs = {("lr", "local"): 0.1, ("lr", "all"): 3.0, ("lr", "split"): 2.0,
             ("nn", "local"): 0.3, ("nn", "all"): 1.0, ("nn", "split"): 3.5}
    runs = Runs(_a9a_runs((0.870, 0.871), central_nn=(0.9005, 0.9010), costs=costs)
                + [_staleness_run(0, 60.0), _staleness_run(4, 70.0)])
    claims = {c.id: c for c in report.build(runs, out)}
    assert claims["fdml-lr-near-centralized-a9a"].verdict == "FAIL"  # gap 0.0295 > 0.01
    assert claims["fdml-beats-local-lr-a9a"].verdict == "FAIL"  # 0.8705 < local 0.881
    assert claims["fdml-centralized-nn-better-a9a"].verdict == "NOT SHOWN"  # a tie within the seed margin
    assert claims["fdml-lr-slower-than-centralized-a9a"].verdict == "FAIL"
    assert claims["fdml-centralized-nn-slower-a9a"].verdict == "FAIL"
    assert claims["fdml-staleness-lowers-wallclock"].verdict == "FAIL"


def test_near_centralized_is_not_checked_for_a_synchronous_fdml_run(out):
    claims = {c.id: c for c in report.build(Runs(_a9a_runs((0.8995, 0.9)) + [], ), out)}
    assert claims["fdml-lr-near-centralized-a9a"].verdict == "PASS"
    claims = {c.id: c for c in report.build(Runs(_a9a_runs((0.8995, 0.9), tau=0)), out)}
    assert claims["fdml-lr-near-centralized-a9a"].verdict == "NOT CHECKED"


def test_single_seed_uses_the_fixed_margin(out):
    runs = [_table_run("a9a", m, f, (a,)) for (m, f), a in
            {("lr", "split"): 0.884, ("lr", "local"): 0.880}.items()]
    claims = {c.id: c for c in report.build(Runs(runs), out)}
    claim = claims["fdml-beats-local-lr-a9a"]
    assert claim.verdict == "NOT SHOWN" and "single seed" in claim.margin  # 0.004 < 0.005


def test_no_runs_at_all(out):
    claims = report.build(Runs([]), out)
    # per dataset: 4 AUC claims per own term and 3 timing claims; one staleness claim per own term
    assert len(claims) == 2 * (2 * 4 + 3) + 2 and all(c.verdict == "NOT CHECKED" for c in claims)
    assert "not run" in (out.root / "tables" / "fdml_staleness.md").read_text()


def test_duplicate_table_rows_are_an_error(out):
    run = _table_run("a9a", "lr", "split", (0.9,))
    twin = Run(name="fdml_table1-a9a-again", params={}, metrics=dict(run.metrics), history=run.history)
    with pytest.raises(LookupError, match="two Table I runs"):
        report.build(Runs([run, twin]), out)
    central = _table_run("a9a", "lr", "all", (0.9,), eta=2.0)
    twin = _table_run("a9a", "lr", "all", (0.9,), eta=2.0, name="fdml_table1-a9a-lr-centralized-eta2")
    with pytest.raises(LookupError, match="two Table I runs"):
        report.build(Runs([central, twin]), out)


def test_the_centralized_row_is_at_the_local_rows_step_size(out):
    # two centralized runs: the one at the local row's eta is Table I's row, the other the FDML run's control
    runs = [_table_run("a9a", "lr", "local", (0.880, 0.882), eta=8.0),
            _table_run("a9a", "lr", "all", (0.899, 0.901), eta=8.0),
            _table_run("a9a", "lr", "split", (0.8990, 0.9010), eta=2.0),
            _table_run("a9a", "lr", "all", (0.895, 0.897), eta=2.0, name="fdml_table1-a9a-lr-centralized-eta2")]
    claims = {c.id: c for c in report.build(Runs(runs), out)}
    near = claims["fdml-lr-near-centralized-a9a"]
    assert "vs centralized 0.9000 ± 0.0010 (eta 8)" in near.ours
    assert "at equal step size (eta 2) centralized 0.8960 ± 0.0010, FDML - it +0.0040" in near.ours
    table = (out.root / "tables" / "fdml_table1.md").read_text()
    assert "| LR | centralized at FDML own fresh's step size | a9a | sgd | 2.0000 |" in table
    assert "| LR | FDML, own stored | a9a | not run |" in table


def test_runs_from_before_the_own_option_are_algorithm_1_literal(out):
    run = _table_run("a9a", "lr", "split", (0.9,))
    del run.metrics["own"]
    claims = {c.id: c for c in report.build(Runs([run]), out)}
    assert "not run" in claims["fdml-beats-local-lr-a9a"].ours  # no fresh run
    table = (out.root / "tables" / "fdml_table1.md").read_text()
    assert "| LR | FDML, own stored | a9a | paper | 1.0000 | 1 |" in table
