import pytest

from ppml.report import baselines
from ppml.report.base import FAIL, NOT_CHECKED, NOT_SHOWN, PASS, ReportOutput, Run, Runs


def _run(name, algorithm, **metrics):
    base = {"algorithm": algorithm, "dataset": "ds", "status": "ok", "train_objective": 0.4, "test_auc": 0.8,
            "n_test": 10000, "test_logloss_sd": 0.6, "test_majority_error": 0.25}
    base.update(metrics)
    base["test_accuracy"] = 1 - base.get("test_error", 0.2)
    return Run(name=name, params={"algorithm": algorithm, "dataset": "ds"}, metrics=base)


def _claims(tmp_path, central, local):
    claims = baselines.build(Runs([central, local]), ReportOutput(tmp_path))
    return {c.id: c for c in claims}


@pytest.mark.parametrize("local_logloss, expected", [
    (0.39006, NOT_SHOWN),  # adult's 6e-5 tie: far inside 1.96 * sqrt(2 * 0.36 / 10000) = 0.0166
    (0.40, NOT_SHOWN),
    (0.42, PASS),
    (0.36, FAIL),
])
def test_collaboration_needs_more_than_the_welch_half_width(tmp_path, local_logloss, expected):
    claims = _claims(tmp_path, _run("centralized-ds", "centralized", test_logloss=0.39, test_error=0.18),
                     _run("local-ds", "local", test_logloss=local_logloss, test_error=0.18))
    claim = claims["baselines-ds-collaboration-helps"]
    assert claim.verdict == expected and claim.kind == "diagnostic" and claim.paper == "baselines"
    assert claim.margin.startswith("±0.0166 = Welch t") and "bounds the paired half-width" in claim.margin


def test_collaboration_on_a9a_is_the_admm_sharing_papers_claim(tmp_path):
    central = _run("centralized-a9a", "centralized", test_logloss=0.39, test_error=0.18)
    local = _run("local-a9a", "local", test_logloss=0.36, test_error=0.18)
    for run in (central, local):
        run.metrics["dataset"] = run.params["dataset"] = "a9a"
    claim = _claims(tmp_path, central, local)["baselines-a9a-collaboration-helps"]
    assert claim.kind == "paper" and claim.paper == "admm_sharing" and "Fig. 3(a)" in claim.source
    assert claim.verdict == FAIL and claim.cause == "property"
    assert claim.evidence == ("reports/tables/baselines.md", "reports/runs/centralized/centralized-a9a",
                              "reports/runs/local/local-a9a")


@pytest.mark.parametrize("auc, expected", [(0.8, PASS), (0.51, NOT_SHOWN), (0.45, FAIL)])
def test_centralized_must_rank_better_than_the_majority_class(tmp_path, auc, expected):
    claims = _claims(tmp_path, _run("centralized-ds", "centralized", test_logloss=0.39, test_error=0.18,
                                    test_auc=auc),
                     _run("local-ds", "local", test_logloss=0.5, test_error=0.2))
    claim = claims["baselines-ds-beats-majority-class"]
    assert claim.verdict == expected and claim.kind == "diagnostic"
    assert "vs majority class 0.2500" in claim.ours and "Hanley-McNeil" in claim.margin
    assert "2500 + 7500 test rows" in claim.margin  # 25 % of 10 000 rows in the minority class


def test_old_metrics_without_the_spread_are_not_checked(tmp_path):
    central = _run("centralized-ds", "centralized", test_logloss=0.3, test_error=0.1)
    del central.metrics["test_logloss_sd"], central.metrics["n_test"]
    claims = _claims(tmp_path, central, _run("local-ds", "local", test_logloss=0.5, test_error=0.2))
    assert claims["baselines-ds-collaboration-helps"].verdict == NOT_CHECKED
    assert "re-run stage train_centralized" in claims["baselines-ds-collaboration-helps"].ours
    assert claims["baselines-ds-beats-majority-class"].verdict == NOT_CHECKED


def test_table_shows_the_majority_class_error(tmp_path):
    _claims(tmp_path, _run("centralized-ds", "centralized", test_logloss=0.39, test_error=0.18),
            _run("local-ds", "local", test_logloss=0.42, test_error=0.2))
    table = (tmp_path / "tables" / "baselines.md").read_text()
    assert "| test error | majority-class error |" in table
    assert ("| centralized-ds | ds | centralized | ok | 0.4000 | 0.3900 | 0.8000 | 0.8200 | 0.1800 | 0.2500 |"
            in table)
