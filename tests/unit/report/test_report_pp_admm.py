"""PP-ADMM report: tables, figures and claims from hand-made runs."""

import matplotlib
import pytest

from ppml.report import pp_admm as report
from ppml.report.base import ReportOutput, Run, Runs

matplotlib.use("Agg")

EPS = (0.5, 1.0, 10.0)


def _run(algorithm, error, *, epsilon=None, block=None, curve=(0.6, 0.5)):
    metrics = {"algorithm": algorithm, "dataset": "adult", "test_error": error, "test_error_mean": error,
               "test_error_std": 0.01, "seeds": 2}
    if epsilon is not None:
        metrics["epsilon"] = epsilon
    history = {"runs": [{"records": [{"epoch": i + 1, "train_loss": v} for i, v in enumerate(curve)]}] * 2}
    name = f"{algorithm}-adult" + (f"-eps{epsilon:g}" if epsilon is not None else "")
    name += "".join(f"-{k}{v}" for k, v in (block or {}).items())
    params = {"algorithm": algorithm, "dataset": "adult", **(block or {})}
    privacy = {"paper": {"epsilon": epsilon, "epsilon_cks": 0.8}, "tight": {"epsilon": 0.7, "method": "rdp"},
               "status": "certified"}
    return Run(name=name, params=params, metrics=metrics, history=history, privacy=privacy)


def _grid(errors):
    runs = [_run("decentralized_admm", 0.15)]
    for algorithm, by_eps in errors.items():
        runs += [_run(algorithm, e, epsilon=eps) for eps, e in zip(EPS, by_eps)]
    return runs


GOOD = {"pp_admm": (0.22, 0.2, 0.17), "ipp_admm": (0.21, 0.19, 0.16), "dvp": (0.4, 0.3, 0.25),
        "m_admm": (0.45, 0.35, 0.26), "r_admm": (0.42, 0.33, 0.24)}


def test_claims_pass_on_the_papers_pattern(tmp_path):
    runs = _grid(GOOD) + [_run("pp_admm", 0.2, epsilon=1.0, block={"splits": 0.01}),
                          _run("ipp_admm", 0.19, epsilon=1.0, block={"alpha": 0.01})]
    claims = report.build(Runs(runs), ReportOutput(tmp_path))
    assert {c.id: c.passed for c in claims} == {
        "pp_admm-adult-error-falls-with-epsilon": True, "pp_admm-adult-pp-admm-beats-baselines": True,
        "pp_admm-adult-ipp-admm-beats-baselines": True, "pp_admm-adult-ipp-at-most-pp": True,
        "pp_admm-adult-non-private-lower-bound": True}
    table = (tmp_path / "tables" / "pp_admm_error.md").read_text()
    assert "0.2000 ± 0.0100" in table and "ε = 10" in table
    assert "splits" in (tmp_path / "tables" / "pp_admm_studies.md").read_text()
    assert "0.7000 (rdp)" in (tmp_path / "tables" / "pp_admm_privacy.md").read_text()
    for name in ("pp_admm_error_vs_epsilon", "pp_admm_training_loss", "pp_admm_studies"):
        assert (tmp_path / "plots" / f"{name}.png").exists()
        assert (tmp_path / "plots" / "data" / f"{name}.csv").exists()


def test_claims_fail_when_the_pattern_breaks(tmp_path):
    bad = dict(GOOD, ipp_admm=(0.23, 0.21, 0.18), dvp=(0.2, 0.3, 0.1))
    claims = {c.id: c for c in report.build(Runs(_grid(bad)), ReportOutput(tmp_path))}
    assert claims["pp_admm-adult-ipp-at-most-pp"].passed is False
    assert claims["pp_admm-adult-pp-admm-beats-baselines"].passed is False
    assert "ε = 0.5" in claims["pp_admm-adult-pp-admm-beats-baselines"].ours
    assert claims["pp_admm-adult-error-falls-with-epsilon"].passed is False
    assert claims["pp_admm-adult-non-private-lower-bound"].passed is False


def test_missing_runs_leave_claims_unchecked(tmp_path):
    claims = report.build(Runs([]), ReportOutput(tmp_path))
    assert len(claims) == 5 and all(c.passed is None for c in claims)
    assert all("not checked" in c.ours for c in claims)


def test_duplicate_grid_runs_are_an_error(tmp_path):
    runs = [_run("pp_admm", 0.2, epsilon=1.0), _run("pp_admm", 0.2, epsilon=1.0, block={"T": 30})]
    with pytest.raises(LookupError, match="two pp_admm runs"):
        report.build(Runs(runs), ReportOutput(tmp_path))
