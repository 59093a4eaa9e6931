"""FDML report: Table I analogue at epoch 10, curves, staleness, timing and claims from hand-made runs."""

import csv
import shutil
from pathlib import Path

import matplotlib
import pytest

from ppml.report import fdml as report
from ppml.report import stats
from ppml.report.base import ReportOutput, Run, Runs

matplotlib.use("Agg")

PUBLISHED = Path(__file__).resolve().parents[3] / "reports" / "published" / "fdml_table1.csv"
SETTINGS = {"local": "local", "all": "centralized", "split": "fdml"}
EPOCHS = 24


def _records(aucs, *, per_epoch=1.0, seconds=0.1, cost=1.0, objective=0.4):
    """One seed's records: `aucs` is the test AUC of every epoch (or one number for all)."""
    aucs = [aucs] * EPOCHS if isinstance(aucs, float) else list(aucs)
    return {"records": [{"epoch": e + 1, "train_objective": objective - 0.001 * e,
                         "test_logloss": 1.2 - a, "test_auc": a, "sim_time": per_epoch * (e + 1),
                         "seconds": seconds * (e + 1), "cost_seconds": cost * (e + 1)}
                        for e, a in enumerate(aucs)]}


def _table_run(dataset, model, features, aucs, *, tau=4, own="fresh", eta=1.0, name=None, epochs=EPOCHS):
    """A Table I run with one seed per entry of `aucs` (each a number, constant over the epochs, or a
    curve)."""
    metrics = {"algorithm": "fdml", "dataset": dataset, "local_model": model, "features": features,
               "tau": tau if features == "split" else 0, "mode": "simulated", "eta": eta,
               "protocol": "paper" if features == "split" else "sgd", "train_objective": 0.35,
               "epochs": epochs}
    if features == "split":
        metrics["own"] = own
    default = f"fdml_table1-{dataset}-{model}-{SETTINGS[features]}" + ("_stored" if own == "stored" else "")
    return Run(name=name or default, params={}, metrics=metrics,
               history={"runs": [_records(a) for a in aucs]})


def _staleness_run(tau, per_epoch, *, mode="simulated", own="fresh", seconds=(0.1,)):
    metrics = {"algorithm": "fdml", "dataset": "synth_d100", "tau": tau, "mode": mode, "speeds": [1, 1, 4],
               "epochs": 3, "train_objective": 0.44, "sim_time_per_epoch": per_epoch, "protocol": "paper",
               "seconds_per_epoch": seconds[0], "max_delay": 30, "mean_delay": 15.0, "max_gap": tau,
               "rejections": 7, "own": own, "eta": 16.0 if own == "fresh" else 1.0}
    if mode == "threads":
        metrics["transport"] = "grpc"
    params = {"transport": "grpc"} if mode == "threads" else {}  # what params.yaml says of it
    return Run(name=f"fdml_staleness-{mode}-{own}-tau{tau}", params=params, metrics=metrics,
               history={"runs": [_records(0.85, per_epoch=per_epoch, seconds=s) for s in seconds]})


def _timing_run(shape, model, features, seconds, *, hidden=32):
    metrics = {"algorithm": "fdml", "dataset": shape, "local_model": model, "features": features,
               "hidden": hidden, "tau": 4 if features == "split" else 0, "epochs": 4,
               "transport": "grpc" if features == "split" else "inprocess"}
    return Run(name=f"fdml_timing-{shape}-{model}-{SETTINGS[features]}",
               params={"transport": metrics["transport"]}, metrics=metrics,
               history={"runs": [{"records": [{"epoch": e + 1, "seconds": s * (e + 1)} for e in range(4)],
                                  "extra": {"n_batches": 100}} for s in seconds]})


@pytest.fixture
def out(tmp_path):
    (tmp_path / "published").mkdir()
    shutil.copy(PUBLISHED, tmp_path / "published" / "fdml_table1.csv")
    return ReportOutput(tmp_path)


def _a9a_runs(fdml_lr, *, central_nn=(0.905, 0.9065), tau=4):
    aucs = {("lr", "local"): (0.880, 0.882), ("lr", "all"): (0.899, 0.901), ("lr", "split"): fdml_lr,
            ("nn", "local"): (0.885, 0.886), ("nn", "all"): central_nn, ("nn", "split"): (0.900, 0.901)}
    return [_table_run("a9a", m, f, a, tau=tau) for (m, f), a in aucs.items()]


def _stored_runs():
    """Algorithm 1's literal own term at its smaller step size (eta 0.25), and the baselines at that eta."""
    return [_table_run("a9a", "lr", "split", (0.8806, 0.8820), own="stored", eta=0.25),
            _table_run("a9a", "lr", "all", (0.8811, 0.8815), eta=0.25,
                       name="fdml_table1-a9a-lr-centralized-eta0_25"),
            _table_run("a9a", "nn", "split", (0.8720, 0.8730), own="stored", eta=0.25),
            _table_run("a9a", "nn", "all", (0.8900, 0.8902), eta=0.25,
                       name="fdml_table1-a9a-nn-centralized-eta0_25"),
            _table_run("a9a", "nn", "local", (0.8600, 0.8610), eta=0.25,
                       name="fdml_table1-a9a-nn-local-eta0_25")]


def _timing_runs(shape="a9a", **seconds):
    default = {("lr", "local"): (0.10, 0.11, 0.10), ("lr", "all"): (0.15, 0.16, 0.15),
               ("lr", "split"): (0.80, 0.85, 0.82), ("nn", "local"): (0.12, 0.12, 0.13),
               ("nn", "all"): (0.30, 0.31, 0.30), ("nn", "split"): (0.90, 0.95, 0.92)}
    default.update({tuple(k.split("_")): v for k, v in seconds.items()})
    return [_timing_run(shape, m, f, s, hidden=64 if f == "all" and m == "nn" else 32)
            for (m, f), s in default.items()]


def test_claims_tables_and_figures(out):
    staleness = [_staleness_run(0, 88.0), _staleness_run(1, 72.0), _staleness_run(4, 64.0),
                 _staleness_run(0, 2.0, mode="threads", seconds=(0.30, 0.31, 0.29)),
                 _staleness_run(16, 2.0, mode="threads", seconds=(0.15, 0.16, 0.14)),
                 _staleness_run(0, 88.0, own="stored"), _staleness_run(4, 90.0, own="stored")]
    runs = Runs(_a9a_runs((0.8975, 0.8985)) + _stored_runs() + staleness + _timing_runs())
    claims = {c.id: c for c in report.build(runs, out)}
    assert all(cid.startswith("fdml") and c.source for cid, c in claims.items())
    # our equal-step-size controls are diagnostics; every other row is a paper's statement
    assert all((c.kind == "diagnostic") == cid.endswith("-equal_eta") for cid, c in claims.items())
    for claim in claims.values():  # every miss of a paper claim says why, and where to look
        if claim.verdict in ("FAIL", "NOT SHOWN"):
            assert claim.cause and claim.explanation and claim.evidence, claim.id

    near = claims["fdml-lr-near-centralized-a9a"]  # -0.002 ± 12.7 x 0.0005 inside 0.01: equivalent
    assert near.verdict == "PASS" and "FDML - centralized -0.0020" in near.ours and "0.6971" in near.published
    assert "paired t(1)" in near.margin and "equivalence margin ±0.0100 (TOST)" in near.margin
    assert "own term fresh" in near.statement and "Table I" in near.source
    for model in ("lr", "nn"):
        assert claims[f"fdml-beats-local-{model}-a9a"].verdict == "PASS"
        assert claims[f"fdml-beats-local-logloss-{model}-a9a"].verdict == "PASS"  # log loss = 1.2 - AUC here
    assert claims["fdml-centralized-nn-better-a9a"].verdict == "PASS"  # +0.00525 ± 12.7 x 0.00025
    assert claims["fdml-stable-at-epoch10-a9a"].verdict == "PASS"  # constant curves

    # timing: measured wall clocks only, and they decide
    for cid in ("fdml-local-fastest-a9a", "fdml-lr-slower-than-centralized-a9a",
                "fdml-centralized-nn-slower-a9a"):
        assert claims[cid].basis == "measured" and "Welch" in claims[cid].margin
    assert claims["fdml-local-fastest-a9a"].verdict == "PASS"
    assert claims["fdml-lr-slower-than-centralized-a9a"].verdict == "PASS"
    slower = claims["fdml-centralized-nn-slower-a9a"]  # 0.30 s against FDML's 0.92 s: not the paper's regime
    assert slower.verdict == "FAIL" and slower.cause == "data"
    assert slower.evidence == ("reports/tables/fdml_timing.md",)
    assert claims["fdml-local-fastest-synth_d5000"].verdict == "NOT CHECKED"
    assert "fdml_timing-synth_d5000" not in claims["fdml-local-fastest-synth_d5000"].ours  # no such runs
    assert "no such experiment" in claims["fdml-local-fastest-synth_d5000"].ours
    stale = claims["fdml-staleness-lowers-wallclock"]  # measured: 0.15 s against 0.30 s per epoch
    assert stale.verdict == "PASS" and stale.basis == "measured" and "tau 16: 0.15 s/epoch" in stale.ours
    twin = claims["fdml-staleness-lowers-wallclock-own_stored"]
    assert twin.verdict == "NOT CHECKED" and "count one measurement twice" in twin.ours

    # Algorithm 1's literal own term at its own (smaller) step size: below centralized at centralized's step
    # size (a property of the stored term, its ablation named), level with centralized at its own step size
    stored = claims["fdml-lr-near-centralized-a9a-own_stored"]
    assert stored.verdict == "FAIL" and "FDML - centralized -0.0187" in stored.ours
    assert stored.cause == "property" and "own_stored-equal_eta" in stored.explanation
    assert "at equal step size (eta 0.25) centralized 0.8813 ± 0.0002, FDML - it +0.0000" in stored.ours
    assert claims["fdml-beats-local-nn-a9a-own_stored"].verdict == "FAIL"
    assert claims["fdml-centralized-nn-better-a9a-own_stored"].verdict == "PASS"
    ablation = claims["fdml-beats-local-nn-a9a-own_stored-equal_eta"]  # 0.8725 against local 0.8605 at 0.25
    assert ablation.verdict == "PASS" and ablation.ours.startswith("epoch 10:")
    assert "Ablation" in ablation.statement
    assert claims["fdml-lr-near-centralized-a9a-own_stored-equal_eta"].verdict == "PASS"
    assert claims["fdml-beats-local-lr-a9a-own_stored-equal_eta"].verdict == "NOT CHECKED"  # no local at 0.25
    for cid, claim in claims.items():
        if cid.endswith("default_credit"):
            assert claim.verdict == "NOT CHECKED" and "no such experiment" in claim.ours

    table = (out.root / "tables" / "fdml_table1.md").read_text()
    assert "paper (Tencent, private)" in table and "not run" in table and "epoch 10" in table
    assert "0.8980 ± 0.0005" in table  # FDML LR at epoch 10, mean ± standard error over two seeds
    assert "| LR | FDML, own stored | a9a | paper | 0.2500 | 2 |" in table
    assert "| LR | centralized at FDML own stored's step size | a9a | sgd | 0.2500 | 2 |" in table
    assert "| NN | local at FDML own stored's step size | a9a | sgd | 0.2500 | 2 |" in table
    assert "AUC - centralized at equal eta" in table
    # the fresh row's control is the centralized row itself (same eta): not repeated
    assert "centralized at FDML own fresh's step size" not in table
    timing = (out.root / "tables" / "fdml_timing.md").read_text()
    assert "| a9a | NN | centralized | one process | 64 | 3 |" in timing and "grpc" in timing
    staleness = (out.root / "tables" / "fdml_staleness.md").read_text()
    assert "rejected pulls" in staleness and "| simulated | paper | stored | 1 | 4 |" in staleness
    for name in ("fdml_curves", "fdml_staleness"):
        assert (out.root / "plots" / f"{name}.png").stat().st_size > 0


def test_arms_that_share_seeds_are_compared_paired(out):
    # seed-to-seed spread 0.01, FDML 0.002 above local in every seed: the per-seed differences decide (paired
    # t: PASS) where two unpaired means could not (their Welch half-width is about 0.01)
    local = (0.870, 0.880, 0.890, 0.875, 0.885)
    fdml = tuple(a + 0.002 + 0.0001 * i for i, a in enumerate(local))
    claims = {c.id: c for c in report.build(Runs([_table_run("a9a", "lr", "split", fdml),
                                                  _table_run("a9a", "lr", "local", local)]), out)}
    claim = claims["fdml-beats-local-lr-a9a"]
    assert claim.verdict == "PASS" and "paired t(4)" in claim.margin and "difference +0.0022" in claim.ours


def test_a_single_seed_cannot_pass_and_says_what_would_resolve_it(out):
    runs = [_table_run("a9a", "lr", "split", (0.884,)), _table_run("a9a", "lr", "local", (0.880,))]
    claims = {c.id: c for c in report.build(Runs(runs), out)}
    claim = claims["fdml-beats-local-lr-a9a"]
    assert claim.verdict == "NOT SHOWN" and "no paired test" in claim.margin
    assert claim.cause == "power" and "more seeds" in claim.explanation


def test_claims_fail_or_are_not_shown_on_the_numbers(out):
    runs = Runs(_a9a_runs((0.870, 0.871), central_nn=(0.8995, 0.9030))
                + _timing_runs(lr_split=(0.080, 0.085, 0.080), nn_all=(2.0, 2.1, 2.05))
                + [_staleness_run(0, 1.0, mode="threads", seconds=(0.30, 0.31, 0.29)),
                   _staleness_run(16, 1.0, mode="threads", seconds=(0.40, 0.41, 0.42))])
    claims = {c.id: c for c in report.build(runs, out)}
    assert claims["fdml-lr-near-centralized-a9a"].verdict == "FAIL"  # gap 0.0295 > 0.01
    assert claims["fdml-beats-local-lr-a9a"].verdict == "FAIL"  # 0.8705 < local 0.881
    assert claims["fdml-centralized-nn-better-a9a"].verdict == "NOT SHOWN"  # +0.0007 inside t(1)'s half-width
    assert claims["fdml-centralized-nn-better-a9a"].cause == "power"
    assert claims["fdml-lr-slower-than-centralized-a9a"].verdict == "FAIL"  # 0.08 s against 0.15 s
    assert claims["fdml-centralized-nn-slower-a9a"].verdict == "PASS"  # 2.05 s against 0.92 s
    assert claims["fdml-local-fastest-a9a"].verdict == "FAIL"  # FDML LR (0.08 s) faster than local (0.10 s)
    assert claims["fdml-staleness-lowers-wallclock"].verdict == "FAIL"
    for claim in claims.values():
        if claim.verdict in ("FAIL", "NOT SHOWN"):
            assert claim.cause in ("property", "reading", "data", "power") and claim.evidence, claim.id


def test_a_fail_that_reverses_at_equal_step_size_is_a_reading(out):
    # FDML NN (eta 2) below local NN (eta 4) at the rule's step sizes, above local at FDML's own eta 2
    runs = [_table_run("a9a", "nn", "split", (0.880, 0.881), eta=2.0),
            _table_run("a9a", "nn", "local", (0.885, 0.886), eta=4.0),
            _table_run("a9a", "nn", "local", (0.870, 0.871), eta=2.0, name="fdml_table1-a9a-nn-local-eta2")]
    claims = {c.id: c for c in report.build(Runs(runs), out)}
    claim = claims["fdml-beats-local-nn-a9a"]
    assert claim.verdict == "FAIL" and claim.cause == "reading"
    assert "equal step size (eta 2)" in claim.explanation


def test_stability_of_epoch_10_and_the_ablation_read_where_both_are_stable(out):
    rising = [0.80 + 0.002 * e for e in range(20)] + [0.84] * 20  # 40 epochs, flat from epoch 20
    flat = [0.85] * 40
    runs = _a9a_runs((0.8975, 0.8985)) + [
        _table_run("a9a", "lr", "split", (0.8810, 0.8816), own="stored", eta=0.25),
        _table_run("a9a", "nn", "split", (rising, [a + 0.0005 for a in rising]), own="stored", eta=0.25),
        _table_run("a9a", "nn", "local", (flat, flat), eta=0.25, name="fdml_table1-a9a-nn-local-eta0_25")]
    claims = {c.id: c for c in report.build(Runs(runs), out)}
    stable = claims["fdml-stable-at-epoch10-a9a-own_stored"]  # the stored FDML NN climbs 0.02 after epoch 10
    assert stable.verdict == "FAIL" and stable.cause == "property" and "NN FDML +0.0200" in stable.explanation
    ablation = claims["fdml-beats-local-nn-a9a-own_stored-equal_eta"]
    # from epoch 18 the stored arm still rises 0.006 over the next 10 epochs, from epoch 19 0.004: read there
    assert ablation.ours.startswith("epoch 19:") and ablation.verdict == "FAIL"
    assert ablation.cause == "property"


def test_runs_from_older_parameters_are_not_read(out):
    run = _table_run("a9a", "lr", "split", (0.9, 0.9))
    old = Run(name=run.name, params={"eta": 8.0, "seeds": 2}, metrics={**run.metrics, "seeds": 2},
              history=run.history)  # run.json says eta 1.0, params.yaml now 8.0
    claims = {c.id: c for c in report.build(Runs([old, _table_run("a9a", "lr", "local", (0.8, 0.8))]), out)}
    claim = claims["fdml-beats-local-lr-a9a"]
    assert claim.verdict == "NOT CHECKED"
    assert ("fdml_table1-a9a-lr-fdml is from older parameters (eta 1.0 on disk, 8.0 in params.yaml)"
            in claim.ours)


def test_near_centralized_is_not_checked_for_a_synchronous_fdml_run(out):
    claims = {c.id: c for c in report.build(Runs(_a9a_runs((0.8995, 0.9))), out)}
    assert claims["fdml-lr-near-centralized-a9a"].verdict == "PASS"
    claims = {c.id: c for c in report.build(Runs(_a9a_runs((0.8995, 0.9), tau=0)), out)}
    assert claims["fdml-lr-near-centralized-a9a"].verdict == "NOT CHECKED"


def test_no_runs_at_all(out):
    claims = report.build(Runs([]), out)
    # per dataset and own term: 6 against local, 4 against centralized, 1 stability; 4 stored ablations per
    # dataset; 3 timing claims per shape; the staleness claim and its stored twin
    assert len(claims) == 2 * (2 * 11 + 4 + 5) + 2 * 3 + 4 and all(c.verdict == "NOT CHECKED" for c in claims)
    assert "not run" in (out.root / "tables" / "fdml_staleness.md").read_text()
    assert "not run" in (out.root / "tables" / "fdml_timing.md").read_text()


def test_duplicate_table_rows_are_an_error(out):
    run = _table_run("a9a", "lr", "split", (0.9,))
    twin = Run(name="fdml_table1-a9a-again", params={}, metrics=dict(run.metrics), history=run.history)
    with pytest.raises(LookupError, match="two Table I runs"):
        report.build(Runs([run, twin]), out)
    control = _table_run("a9a", "lr", "all", (0.9,), eta=2.0, name="fdml_table1-a9a-lr-centralized-eta2")
    twin = _table_run("a9a", "lr", "all", (0.9,), eta=2.0, name="fdml_table1-a9a-lr-centralized-eta2_0")
    with pytest.raises(LookupError, match="two Table I runs"):
        report.build(Runs([control, twin]), out)


def test_table_i_rows_are_named_and_controls_are_at_an_fdml_step_size(out):
    # the centralized row is the run named ...-centralized, whatever its step size; the other is a control
    runs = [_table_run("a9a", "lr", "local", (0.880, 0.882), eta=8.0),
            _table_run("a9a", "lr", "all", (0.899, 0.901), eta=4.0),
            _table_run("a9a", "lr", "split", (0.8990, 0.9010), eta=2.0),
            _table_run("a9a", "lr", "all", (0.895, 0.897), eta=2.0,
                       name="fdml_table1-a9a-lr-centralized-eta2")]
    claims = {c.id: c for c in report.build(Runs(runs), out)}
    near = claims["fdml-lr-near-centralized-a9a"]
    assert "vs centralized 0.9000 ± 0.0010 (eta 4)" in near.ours
    assert "at equal step size (eta 2) centralized 0.8960 ± 0.0010, FDML - it +0.0040" in near.ours
    table = (out.root / "tables" / "fdml_table1.md").read_text()
    assert "| LR | centralized at FDML own fresh's step size | a9a | sgd | 2 |" in table
    assert "| LR | FDML, own stored | a9a | not run |" in table


def test_runs_from_before_the_own_option_are_algorithm_1_literal(out):
    run = _table_run("a9a", "lr", "split", (0.9,))
    del run.metrics["own"]
    claims = {c.id: c for c in report.build(Runs([run]), out)}
    assert "no such experiment" in claims["fdml-beats-local-lr-a9a"].ours  # no fresh run
    table = (out.root / "tables" / "fdml_table1.md").read_text()
    assert "| LR | FDML, own stored | a9a | paper | 1 | 1 |" in table


def test_the_near_centralized_statements_read_as_sentences(out):
    """Each names FDML's model, the measure and the tolerance once, and centralized's model once."""
    claims = {c.id: c for c in report.build(Runs(_a9a_runs((0.8975, 0.8985))), out)}
    near = {cid: c.statement.split(" at epoch")[0] for cid, c in claims.items()
            if "near-centralized" in cid and not cid.endswith("-equal_eta")}  # the ablations have their own
    expected = {"fdml-lr-near-centralized-a9a": "FDML LR comes within 0.01 test AUC of centralized LR",
                "fdml-logloss-near-centralized-lr-a9a":
                    "FDML LR's test log loss is at most 1 % (relative) above centralized LR's",
                "fdml-logloss-near-centralized-nn-a9a":
                    "FDML NN's test log loss is at most 1 % (relative) above centralized NN's"}
    assert {cid: near[cid] for cid in expected} == expected
    assert len(near) > len(expected)  # the other datasets' and own terms' claims, built alike
    assert all(text.count("centralized") == 1 for text in near.values()), near


def test_closely_approximate_is_non_inferiority(out):
    """FDML's log loss below centralized's by more than the tolerance passes ("closely approximate" is
    one-sided); above it by more than the tolerance, shown, fails."""
    claims = {c.id: c for c in report.build(Runs(_a9a_runs((0.8975, 0.8985))), out)}
    near = claims["fdml-logloss-near-centralized-lr-a9a"]
    assert "non-inferiority" in near.statement and "non-inferiority margin +" in near.margin
    assert report._near_verdict(stats.Estimate(-0.0040, 0.0041, ""), 0.0044, "test_logloss") == "PASS"
    assert report._near_verdict(stats.Estimate(-0.0040, 0.0041, ""), 0.0044, "test_auc") == "NOT SHOWN"
    assert report._near_verdict(stats.Estimate(0.0100, 0.0041, ""), 0.0044, "test_logloss") == "FAIL"


def test_a_source_quoting_table_i_reads_its_numbers_from_the_published_table(out):
    claims = {c.id: c for c in report.build(Runs(_a9a_runs((0.8975, 0.8985))), out)}
    published = {(r["model"], r["setting"]): r for r in csv.DictReader(PUBLISHED.open())}
    fdml, local = (published[("NN", setting)]["train_objective"] for setting in ("FDML", "local"))
    assert f"({fdml} vs {local};" in claims["fdml-train-objective-below-local-nn-a9a"].source


def test_centralized_beats_local_and_the_synchronous_run_needs_no_more_epochs(out):
    runs = Runs(_a9a_runs((0.898, 0.899)) + [_staleness_run(tau, 100.0 / (1 + tau)) for tau in (0, 4)])
    claims = {c.id: c for c in report.build(runs, out)}
    auc = claims["fdml-centralized-beats-local-lr-test-auc-a9a"]
    assert auc.verdict == "PASS" and "centralized 0.9000" in auc.ours and "local 0.8810" in auc.ours
    assert claims["fdml-centralized-beats-local-nn-test-auc-a9a"].verdict == "PASS"
    missing = claims["fdml-centralized-beats-local-nn-test-auc-default_credit"]
    assert missing.verdict == "NOT CHECKED" and missing.ours.startswith("not checked: default_credit NN")
    # both staleness runs have the same objective curve: the target is met at the same epoch, a tie
    sync = claims["fdml-sync-fewest-iterations"]
    assert sync.verdict == "NOT SHOWN" and sync.cause == "power" and "tau 0: 1, tau 4: 1" in sync.ours
    assert claims["fdml-proposition1-regret"].verdict == "NOT CHECKED"
