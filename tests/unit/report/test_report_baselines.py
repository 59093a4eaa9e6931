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
    (0.39006, NOT_SHOWN),  # adult's 6e-5 tie: far inside 2 SE = 2 * sqrt(2 * 0.36 / 10000) = 0.017
    (0.40, NOT_SHOWN),
    (0.42, PASS),
    (0.36, FAIL),
])
def test_collaboration_needs_more_than_two_standard_errors(tmp_path, local_logloss, expected):
    claims = _claims(tmp_path, _run("centralized-ds", "centralized", test_logloss=0.39, test_error=0.18),
                     _run("local-ds", "local", test_logloss=local_logloss, test_error=0.18))
    claim = claims["baselines-ds-collaboration-helps"]
    assert claim.verdict == expected
    assert claim.margin.startswith("1.70e-02 = 2 SE")


@pytest.mark.parametrize("error, expected", [(0.18, PASS), (0.245, NOT_SHOWN), (0.30, FAIL)])
def test_centralized_must_beat_the_majority_class_by_a_margin(tmp_path, error, expected):
    claims = _claims(tmp_path, _run("centralized-ds", "centralized", test_logloss=0.39, test_error=error),
                     _run("local-ds", "local", test_logloss=0.5, test_error=0.2))
    claim = claims["baselines-ds-beats-majority-class"]
    assert claim.verdict == expected
    assert "vs majority class 0.2500" in claim.ours


def test_old_metrics_without_the_spread_are_not_checked(tmp_path):
    central = _run("centralized-ds", "centralized", test_logloss=0.3, test_error=0.1)
    del central.metrics["test_logloss_sd"], central.metrics["n_test"]
    claims = _claims(tmp_path, central, _run("local-ds", "local", test_logloss=0.5, test_error=0.2))
    assert claims["baselines-ds-collaboration-helps"].verdict == NOT_CHECKED
    assert "re-run train_centralized@centralized-ds" in claims["baselines-ds-collaboration-helps"].ours
    assert claims["baselines-ds-beats-majority-class"].verdict == NOT_CHECKED


def test_table_shows_the_majority_class_error(tmp_path):
    _claims(tmp_path, _run("centralized-ds", "centralized", test_logloss=0.39, test_error=0.18),
            _run("local-ds", "local", test_logloss=0.42, test_error=0.2))
    table = (tmp_path / "tables" / "baselines.md").read_text()
    assert "| test error | majority-class error |" in table
    assert ("| centralized-ds | ds | centralized | ok | 0.4000 | 0.3900 | 0.8000 | 0.8200 | 0.1800 | 0.2500 |"
            in table)
