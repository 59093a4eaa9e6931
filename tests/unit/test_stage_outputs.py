"""Nothing silent: the report stage replaces its outputs whole or not at all; account gathers each run's privacy.json."""

from __future__ import annotations

import importlib.util
import json
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from ppml.io import staged_outputs, write_json

ROOT = Path(__file__).resolve().parents[2]
OUTPUTS = ("tables", "plots", "claims.json", "claims.md", "metrics")
PREFIX = ".report-staging-"


def _stage(name: str):
    spec = importlib.util.spec_from_file_location(f"stage_{name}", ROOT / "stages" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _metrics(name: str, algorithm: str, dataset: str, logloss: float) -> dict:
    return {"experiment": name, "algorithm": algorithm, "dataset": dataset, "status": "ok", "seeds": 1,
            "train_objective": logloss - 0.01, "test_logloss": logloss, "test_auc": 0.9, "test_accuracy": 0.85}


@pytest.fixture
def project(tmp_path):
    """Ten baseline runs (centralized and local on five datasets), a privacy.json and the published numbers."""
    reports = tmp_path / "reports"
    shutil.copytree(ROOT / "reports" / "published", reports / "published")
    experiments = {}
    for i in range(5):
        for algorithm, loss in (("centralized", 0.3), ("local", 0.4)):
            name = f"{algorithm}-d{i}"
            experiments[name] = {"algorithm": algorithm, "dataset": f"d{i}", "lam": 0.01}
            run = reports / "runs" / algorithm / name
            run.mkdir(parents=True)
            (run / "metrics.json").write_text(json.dumps(_metrics(name, algorithm, f"d{i}", loss + i / 100)))
            (run / "history.json").write_text(json.dumps({"runs": [{"records": []}]}))
    (tmp_path / "params.yaml").write_text(yaml.safe_dump({"experiments": experiments}, sort_keys=False))
    (reports / "privacy.json").write_text(json.dumps({"runs": [], "missing": []}))
    return tmp_path


def _args(project: Path) -> list[str]:
    reports = project / "reports"
    return ["--params", str(project / "params.yaml"), "--runs", str(reports / "runs"),
            "--privacy", str(reports / "privacy.json"), "--out", str(reports)]


def _snapshot(reports: Path) -> dict[str, bytes]:
    files = {}
    for top in OUTPUTS:
        path = reports / top
        for f in ([path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file())):
            files[str(f.relative_to(reports))] = f.read_bytes()
    return files


def _tenth_metrics(project: Path) -> Path:
    tenth = list(yaml.safe_load((project / "params.yaml").read_text())["experiments"])[9]
    block = yaml.safe_load((project / "params.yaml").read_text())["experiments"][tenth]
    return project / "reports" / "runs" / block["algorithm"] / tenth / "metrics.json"


@pytest.mark.parametrize("problem", ["corrupt", "mismatch", "not an object", "missing key", "string number"])
def test_bad_tenth_metrics_fails_naming_the_file_and_leaves_outputs(project, problem, capsys):
    report = _stage("report")
    assert report.main(_args(project)) == 0
    before = _snapshot(project / "reports")
    assert "tables/baselines.md" in before and "plots/baselines_test_logloss.png" in before

    path = _tenth_metrics(project)
    if problem == "corrupt":
        path.write_text('{"experiment": "local-d4", "test_logloss": ')
    elif problem == "mismatch":
        path.write_text(json.dumps(_metrics("local-d3", "local", "d4", 0.5)))
    elif problem == "missing key":
        path.write_text(json.dumps({k: v for k, v in _metrics("local-d4", "local", "d4", 0.5).items()
                                    if k != "test_logloss"}))
    elif problem == "string number":
        path.write_text(json.dumps({**_metrics("local-d4", "local", "d4", 0.5), "test_logloss": "0.5"}))
    else:
        path.write_text("[1, 2]")
    capsys.readouterr()
    assert report.main(_args(project)) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and str(path) in err, err
    if problem == "mismatch":
        assert "'local-d3'" in err and "'local-d4'" in err
    if problem in ("missing key", "string number"):
        assert "test_logloss" in err
    assert _snapshot(project / "reports") == before
    assert not list((project / "reports").glob(f"{PREFIX}*"))


def test_unreadable_privacy_is_an_error_naming_it(project, capsys):
    (project / "reports" / "privacy.json").write_text('{"runs": [{"nom": 1}]}')
    assert _stage("report").main(_args(project)) == 2
    err = capsys.readouterr().err
    assert "privacy.json" in err and "runs[0]" in err
    (project / "reports" / "privacy.json").unlink()
    assert _stage("report").main(_args(project)) == 2
    assert "privacy.json: not found" in capsys.readouterr().err


def test_killed_report_leaves_previous_outputs_and_next_run_cleans_up(project):
    report = _stage("report")
    assert report.main(_args(project)) == 0
    reports = project / "reports"
    before = _snapshot(reports)
    metrics = reports / "runs" / "local" / "local-d0" / "metrics.json"  # the next run would change the tables
    metrics.write_text(json.dumps(_metrics("local-d0", "local", "d0", 0.777)))

    proc = subprocess.Popen([sys.executable, str(ROOT / "stages" / "report.py"), *_args(project)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while not list(reports.glob(f"{PREFIX}*")):
            assert proc.poll() is None, "the stage finished before its staging directory was seen"
            assert time.monotonic() < deadline
            time.sleep(0.002)
        proc.send_signal(signal.SIGKILL)
    finally:
        proc.wait(timeout=60)
    assert proc.returncode == -signal.SIGKILL
    assert list(reports.glob(f"{PREFIX}*")), "a killed run leaves its staging directory behind"
    assert _snapshot(reports) == before

    assert report.main(_args(project)) == 0
    assert not list(reports.glob(f"{PREFIX}*"))
    after = _snapshot(reports)
    assert after != before and "0.7770" in after["tables/baselines.md"].decode()


def _tree(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): p.read_text() for p in sorted(root.rglob("*")) if p.is_file()}


def test_staged_outputs_swaps_whole_or_not_at_all(tmp_path):
    (tmp_path / "tables").mkdir()
    (tmp_path / "tables" / "stale.md").write_text("old")
    (tmp_path / "claims.json").write_text("old")
    (tmp_path / "published.csv").write_text("input")
    with pytest.raises(RuntimeError):
        with staged_outputs(tmp_path, dirs=("tables",), files=("claims.json",), prefix=PREFIX) as new:
            (new / "tables" / "a.md").write_text("new")
            (new / "claims.json").write_text("new")
            raise RuntimeError("midway")
    assert _tree(tmp_path) == {"tables/stale.md": "old", "claims.json": "old", "published.csv": "input"}
    with pytest.raises(FileNotFoundError, match="claims.json"):
        with staged_outputs(tmp_path, dirs=("tables",), files=("claims.json",), prefix=PREFIX):
            pass
    with staged_outputs(tmp_path, dirs=("tables",), files=("claims.json",), prefix=PREFIX) as new:
        (new / "tables" / "a.md").write_text("new")
        (new / "claims.json").write_text("new")
    assert _tree(tmp_path) == {"tables/a.md": "new", "claims.json": "new", "published.csv": "input"}


def test_staged_outputs_finishes_a_swap_cut_short(tmp_path):
    # A run killed between its renames: tables swapped in already, claims.json not yet.
    (tmp_path / "tables").mkdir()
    (tmp_path / "tables" / "a.md").write_text("new")
    (tmp_path / "claims.json").write_text("old")
    leftover = tmp_path / f"{PREFIX}abc"
    (leftover / "new").mkdir(parents=True)
    (leftover / "new" / "claims.json").write_text("new")
    (leftover / "old" / "tables").mkdir(parents=True)
    (leftover / "READY").touch()
    unfinished = tmp_path / f"{PREFIX}def"  # killed while building: dropped
    (unfinished / "new" / "tables").mkdir(parents=True)
    (unfinished / "new" / "tables" / "half.md").write_text("half")
    with pytest.raises(RuntimeError):
        with staged_outputs(tmp_path, dirs=("tables",), files=("claims.json",), prefix=PREFIX):
            raise RuntimeError("stop after the clean-up")
    assert _tree(tmp_path) == {"tables/a.md": "new", "claims.json": "new"}


def _entries() -> dict[str, dict]:
    """Each kind of run privacy.json the train stage writes, by experiment name."""
    from ppml.accounting import failed_entry, no_privacy_entry

    block = {"algorithm": "pp_admm", "dataset": "d"}
    return {
        "certified": {"name": "certified", **block, "seeds": 1, "certified": True, "delta": 1e-5,
                      "paper": {"epsilon": 1.0}, "tight": {"epsilon": 0.8}, "status": "certified; seeded"},
        "plain": no_privacy_entry("plain", {"algorithm": "centralized", "dataset": "d"}),
        "failed": failed_entry("failed", block, OverflowError("math range error")),
        "fixed": {"name": "fixed", **block, "seeds": 1, "certified": False, "paper": None, "tight": None,
                  "status": "not certified: fixed noise level or assumptions not enforced in this run"},
    }


@pytest.fixture
def gathered(tmp_path):
    """params.yaml with five runs, four of which have their privacy.json; the account stage's arguments."""
    experiments = {name: {"algorithm": "pp_admm", "dataset": "d"}
                   for name in ("certified", "plain", "untrained", "failed", "fixed")}
    (tmp_path / "params.yaml").write_text(yaml.safe_dump({"experiments": experiments}, sort_keys=False))
    for name, entry in _entries().items():
        write_json(tmp_path / "runs" / "pp_admm" / name / "privacy.json", entry)
    return tmp_path, ["--params", str(tmp_path / "params.yaml"), "--runs", str(tmp_path / "runs"),
                      "--out", str(tmp_path / "privacy.json")]


def test_account_gathers_exactly_what_train_wrote(gathered, caplog):
    root, args = gathered
    caplog.set_level("INFO")
    assert _stage("account").main(args) == 0
    entries = _entries()
    # in params.yaml's order; a run with no privacy side has no entry; an untrained run is missing, with a warning
    assert json.loads((root / "privacy.json").read_text()) == {
        "runs": [entries["certified"], entries["failed"], entries["fixed"]], "missing": ["untrained"]}
    assert "untrained" in caplog.text and "listed as missing" in caplog.text
    assert "account: 3 runs" in caplog.text and "; 1 missing" in caplog.text  # one summary line, not one per run


@pytest.mark.parametrize("damage", ["not json", "another run", "no status"])
def test_account_refuses_a_damaged_privacy_json_naming_it(gathered, damage, capsys):
    root, args = gathered
    path = root / "runs" / "pp_admm" / "fixed" / "privacy.json"
    if damage == "not json":
        path.write_text('{"name": ')
    else:
        entry = _entries()["fixed"]
        path.write_text(json.dumps({**entry, "name": "certified"} if damage == "another run"
                                   else {k: v for k, v in entry.items() if k != "status"}))
    assert _stage("account").main(args) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"account: {path}: ") and "\n" not in err
    assert not (root / "privacy.json").exists()


def test_account_imports_no_accountant():
    """The stage only gathers: it runs in seconds and a change to the accounting re-runs the train stages."""
    import ast

    tree = ast.parse((ROOT / "stages" / "account.py").read_text())
    imported = {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    imported |= {a.name for node in ast.walk(tree) if isinstance(node, ast.Import) for a in node.names}
    assert not {m for m in imported if m and (m.startswith("ppml.privacy") or m == "ppml.accounting")}
