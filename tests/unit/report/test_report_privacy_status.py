"""A run whose accounting failed shows the account stage's status wherever a report lists privacy."""

import matplotlib

from ppml.report import admm_sharing, pp_admm
from ppml.report.base import ReportOutput, Run, Runs

matplotlib.use("Agg")

FAILED = {"name": "r", "algorithm": "x", "dataset": "d", "certified": False, "paper": None, "tight": None,
          "status": "accounting failed: OverflowError: math range error"}


def test_admm_sharing_privacy_table_shows_the_failure():
    run = Run(name="admm_sharing-d-eps1", params={}, privacy=FAILED,
              metrics={"algorithm": "admm_sharing", "dataset": "d", "epsilon": 1.0, "status": "ok"})
    table = admm_sharing._privacy_table(Runs([run]))
    assert "| admm_sharing-d-eps1 |" in table and "accounting failed: OverflowError: math range error" in table


def test_pp_admm_privacy_table_shows_the_failure(tmp_path):
    run = Run(name="pp_admm-d-eps1", params={}, privacy=FAILED,
              metrics={"algorithm": "pp_admm", "dataset": "d", "epsilon": 1.0, "test_error": 0.2})
    pp_admm._privacy_table({"d": {"pp_admm": {1.0: run}}}, ["d"], ReportOutput(tmp_path))
    table = (tmp_path / "tables" / "pp_admm_privacy.md").read_text()
    assert "accounting failed: OverflowError: math range error" in table
