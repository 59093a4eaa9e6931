import json
import shutil
import subprocess

import pytest

from ppml.report import compare
from ppml.report.claims import entry_kind, entry_verdict
from ppml.timing import timing_record


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
    """Two commits of fake reports: the first with old-format claims (``pass``) and the flat run layout
    (reports/runs/<name>), the second with verdicts and one folder per algorithm (reports/runs/<algorithm>/<name>)."""
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
        {"id": "tie", "ours": "0.3900 vs 0.3900", "verdict": "NOT SHOWN", "margin": "2 SE", "pass": None,
         "kind": "paper", "cause": "power"},
        {"id": "same", "ours": "a", "verdict": "FAIL", "pass": False, "kind": "diagnostic"},
        {"id": "unchecked", "ours": "now 0.8", "verdict": "PASS", "pass": True, "kind": "paper"},
        {"id": "new", "ours": "y", "verdict": "PASS", "margin": "0.01", "pass": True, "kind": "diagnostic"},
    ])
    # the timing field changes on the unchanged run; the other run's error and bytes change. The first commit
    # has its timing inside metrics.json (as before timing.json), the second in timing.json. The runs move to
    # their algorithms' folders: matched by name, they are neither added nor removed
    shutil.rmtree(repo / "reports/runs")
    _write(repo, "reports/runs/centralized/central-a/metrics.json",
           _metrics("central-a", "centralized", test_error=0.20, test_logloss=0.40, epochs=10))
    _write(repo, "reports/runs/centralized/central-a/timing.json", timing_record("central-a", {"seconds": 9.0}))
    _write(repo, "reports/runs/pp_admm/ppadmm-a/metrics.json",
           _metrics("ppadmm-a", "pp_admm", test_error=0.2375, bytes_sent=150, seeds=2))
    _write(repo, "reports/runs/pp_admm/ppadmm-a/timing.json",
           timing_record("ppadmm-a", {"seconds": 30.0, "seconds_mean": 30.0, "seconds_std": 2.0}))
    _write(repo, "reports/runs/fdml/new-run/metrics.json", _metrics("new-run", "fdml", test_error=0.1))
    _write(repo, "reports/tables/baselines.md", "| a |\n|---|\n| 2 |\n")
    _write(repo, "reports/tables/fdml.md", "| b |\n")
    _write(repo, "reports/privacy.json", {"runs": [
        {"name": "ppadmm-a", "certified": True, "status": "certified", "paper": {"epsilon": 1.0},
         "tight": {"epsilon": 0.7}}]})
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", "second")
    return repo


def test_verdict_and_kind_read_every_ledger_format():
    assert entry_verdict({"pass": True}) == "PASS"
    assert entry_verdict({"pass": False}) == "FAIL"
    assert entry_verdict({"pass": None}) == "NOT CHECKED"
    assert entry_verdict({"verdict": "NOT SHOWN", "pass": None}) == "NOT SHOWN"
    assert entry_kind({"verdict": "PASS"}) == "paper" and entry_kind({"kind": "diagnostic"}) == "diagnostic"


def test_compare_two_commits(repo, capsys):
    assert compare.main(["HEAD~1", "HEAD", "--repo", str(repo)]) == 0
    out = capsys.readouterr().out
    assert "2 verdict changes, 1 claims added, 1 removed (4 → 4 claims)" in out
    # the old ledger has no kinds: its entries count as paper claims
    assert ("- HEAD~1: 4 paper statements: 2 PASS, 1 FAIL, 0 NOT SHOWN, 1 NOT CHECKED (their 4 parts: 2 PASS, 1 "
            "FAIL, 0 NOT SHOWN, 1 NOT CHECKED); 0 diagnostics") in out
    assert ("- HEAD: 2 paper statements: 1 PASS, 0 FAIL, 1 NOT SHOWN, 0 NOT CHECKED (their 2 parts: 1 PASS, 0 "
            "FAIL, 1 NOT SHOWN, 0 NOT CHECKED); 2 diagnostics") in out
    changed, added, removed = (out.split(f"### {t}\n")[1].split("###")[0] for t in ("Verdict changed", "Added",
                                                                                     "Removed"))
    assert "| tie | paper | PASS | NOT SHOWN | power | 0.3900 vs 0.3900 | 0.3900 vs 0.3900 |" in changed
    assert "| unchecked | paper | NOT CHECKED | PASS | — | not run | now 0.8 |" in changed
    assert "| same |" not in changed  # FAIL in both formats: its verdict did not move
    assert "| new | diagnostic | — | PASS | — | — | y |" in added
    assert "| gone | paper | PASS | — | — | x | — |" in removed
    assert "| same | paper | diagnostic | FAIL |" in out.split("### Kind changed, verdict not\n")[1]
    # metrics: only the changed headline fields of the run present at both revisions; never timing
    assert "### pp_admm" in out and "### centralized" not in out
    assert "| ppadmm-a | test_error | 0.2500 | 0.2375 | -0.0125 |" in out
    assert "bytes_sent" not in out  # traffic is not a headline metric
    assert "**Changed**: claims 5, runs 3, tables 2, privacy entries 1." in out
    assert "| seconds |" not in out and "| seconds_std |" not in out
    # timing apart, from metrics.json at the first commit and timing.json at the second (seconds x seeds)
    assert "| centralized | 1 / 1 | 1.0 | 9.0 |" in out
    assert "| pp_admm | 1 / 1 | 3.0 | 60.0 |" in out
    first, second = compare.load(repo, ["HEAD~1", "HEAD"])
    assert first.timing["central-a"] == {"seconds": 1.0} and "seconds" not in first.runs["central-a"]
    assert second.timing["ppadmm-a"]["seconds_std"] == 2.0
    assert "2 runs at both revisions: 1 changed, 1 unchanged." in out
    assert "Runs added (1): `new-run`" in out and "Runs removed (1): `old-run`" in out
    assert "| baselines.md | changed | 1 | 1 |" in out and "| fdml.md | added |" in out
    assert "| ppadmm-a | certified | false | true |" in out
    assert "| ppadmm-a | tight epsilon | — | 0.7000 |" in out


def test_a_flat_copy_left_beside_the_algorithms_folder_is_not_read(repo):
    """A revision holding a run both flat and in its algorithm's folder is read from the algorithm's folder;
    files deeper than <algorithm>/<name>/ or of another name are not run files."""
    _write(repo, "reports/runs/central-a/metrics.json", _metrics("central-a", "centralized", test_error=0.9))
    _write(repo, "reports/runs/central-a/timing.json", timing_record("central-a", {"seconds": 99.0}))
    _write(repo, "reports/runs/flat-only/metrics.json", _metrics("flat-only", "local", test_error=0.5))
    _write(repo, "reports/runs/fdml/new-run/parties/a/metrics.json", _metrics("a", "fdml", test_error=0.7))
    _write(repo, "reports/runs/fdml/new-run/notes.json", {"test_error": 0.7})
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", "stale copies")
    before, after = compare.load(repo, ["HEAD~1", "HEAD"])
    assert after.runs["central-a"] == before.runs["central-a"] and after.timing["central-a"] == {"seconds": 9.0}
    assert after.runs["new-run"] == before.runs["new-run"] and "a" not in after.runs
    assert set(after.runs) - set(before.runs) == {"flat-only"}  # a run only flat is still read


def test_same_revision_reports_nothing_changed(repo, capsys):
    assert compare.main(["HEAD", "HEAD", "--repo", str(repo)]) == 0
    out = capsys.readouterr().out
    assert "0 verdict changes, 0 claims added, 0 removed" in out
    assert "0 changed" in out and "No table" in out and "0 runs changed privacy" in out
    assert "**No changes**" in out


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

