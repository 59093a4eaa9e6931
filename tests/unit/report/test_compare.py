import json
import subprocess

import pytest

from ppml.report import compare


def _git(repo, *args):
    subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True)


def _write(repo, rel, data):
    path = repo / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(data if isinstance(data, str) else json.dumps(data))


def _metrics(name, algorithm, **values):
    return {"experiment": name, "algorithm": algorithm, "status": "ok", **values}


@pytest.fixture()
def repo(tmp_path):
    """Two commits of fake reports: the first with old-format claims (``pass``), the second with verdicts."""
    repo = tmp_path / "repo"
    repo.mkdir()
    _git(repo, "init", "-q")
    _git(repo, "config", "user.email", "t@example.org")
    _git(repo, "config", "user.name", "t")
    _write(repo, "reports/claims.json", [
        {"id": "tie", "ours": "0.3900 vs 0.3900", "pass": True},
        {"id": "same", "ours": "a", "pass": False},
        {"id": "unchecked", "ours": "not run", "pass": None},
        {"id": "gone", "ours": "x", "pass": True},
    ])
    _write(repo, "reports/runs/central-a/metrics.json",
           _metrics("central-a", "centralized", test_error=0.20, test_logloss=0.40, seconds=1.0, epochs=10))
    _write(repo, "reports/runs/ppadmm-a/metrics.json",
           _metrics("ppadmm-a", "pp_admm", test_error=0.25, bytes_sent=100, seconds=3.0))
    _write(repo, "reports/runs/old-run/metrics.json", _metrics("old-run", "local", test_error=0.3))
    _write(repo, "reports/tables/baselines.md", "| a |\n|---|\n| 1 |\n")
    _write(repo, "reports/privacy.json", {"runs": [
        {"name": "ppadmm-a", "certified": False, "status": "not certified", "paper": None, "tight": None}]})
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", "first")
    _write(repo, "reports/claims.json", [
        {"id": "tie", "ours": "0.3900 vs 0.3900", "verdict": "NOT SHOWN", "margin": "2 SE", "pass": None},
        {"id": "same", "ours": "a", "verdict": "FAIL", "pass": False},
        {"id": "unchecked", "ours": "now 0.8", "verdict": "PASS", "pass": True},
        {"id": "new", "ours": "y", "verdict": "PASS", "margin": "0.01", "pass": True},
    ])
    # the timing field changes on the unchanged run; the other run's error and bytes change
    _write(repo, "reports/runs/central-a/metrics.json",
           _metrics("central-a", "centralized", test_error=0.20, test_logloss=0.40, seconds=9.0, epochs=10))
    _write(repo, "reports/runs/ppadmm-a/metrics.json",
           _metrics("ppadmm-a", "pp_admm", test_error=0.2375, bytes_sent=150, seconds=30.0))
    (repo / "reports/runs/old-run/metrics.json").unlink()
    _write(repo, "reports/runs/new-run/metrics.json", _metrics("new-run", "fdml", test_error=0.1))
    _write(repo, "reports/tables/baselines.md", "| a |\n|---|\n| 2 |\n")
    _write(repo, "reports/tables/fdml.md", "| b |\n")
    _write(repo, "reports/privacy.json", {"runs": [
        {"name": "ppadmm-a", "certified": True, "status": "certified", "paper": {"epsilon": 1.0},
         "tight": {"epsilon": 0.7}}]})
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", "second")
    return repo


def test_verdict_reads_both_claim_formats():
    assert compare.verdict({"pass": True}) == "PASS"
    assert compare.verdict({"pass": False}) == "FAIL"
    assert compare.verdict({"pass": None}) == "NOT CHECKED"
    assert compare.verdict({"verdict": "NOT SHOWN", "pass": None}) == "NOT SHOWN"


def test_compare_two_commits(repo, capsys):
    assert compare.main(["HEAD~1", "HEAD", "--repo", str(repo)]) == 0
    out = capsys.readouterr().out
    assert "2 verdict changes, 1 claims added, 1 removed (4 → 4 claims)" in out
    assert "| tie | PASS → NOT SHOWN | 0.3900 vs 0.3900 | 0.3900 vs 0.3900 |" in out
    assert "| unchecked | NOT CHECKED → PASS | not run | now 0.8 |" in out
    assert "| same |" not in out  # FAIL in both formats: unchanged
    assert "| new | PASS | y | 0.01 |" in out
    assert "| gone | PASS | x |" in out
    # metrics: only the changed headline fields of the run present at both revisions; never timing
    assert "### pp_admm" in out and "### centralized" not in out
    assert "| ppadmm-a | test_error | 0.2500 | 0.2375 | -0.0125 |" in out
    assert "| ppadmm-a | bytes_sent | 100 | 150 | +50 |" in out
    assert "seconds |" not in out
    assert "2 runs at both revisions: 1 changed, 1 unchanged." in out
    assert "Runs added (1): `new-run`" in out and "Runs removed (1): `old-run`" in out
    assert "| baselines.md | changed | 1 | 1 |" in out and "| fdml.md | added |" in out
    assert "| ppadmm-a | certified | false | true |" in out
    assert "| ppadmm-a | tight epsilon | — | 0.7000 |" in out


def test_same_revision_reports_nothing_changed(repo, capsys):
    assert compare.main(["HEAD", "HEAD", "--repo", str(repo)]) == 0
    out = capsys.readouterr().out
    assert "0 verdict changes, 0 claims added, 0 removed" in out
    assert "0 changed" in out and "No table" in out and "0 runs changed privacy" in out


def test_bad_revision_is_one_line_naming_it(repo, capsys):
    assert compare.main(["HEAD", "no-such-rev", "--repo", str(repo)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "'no-such-rev'" in err


def test_revision_without_reports(repo, capsys):
    head = subprocess.run(["git", "-C", str(repo), "rev-parse", "HEAD"], check=True, capture_output=True,
                          text=True).stdout.strip()
    _git(repo, "checkout", "-q", "--orphan", "empty")
    _git(repo, "rm", "-rq", "--cached", ".")
    _git(repo, "commit", "-q", "--allow-empty", "-m", "empty")
    assert compare.main(["empty", head, "--repo", str(repo)]) == 0
    out = capsys.readouterr().out
    assert "No `reports/claims.json` at empty" in out

