"""dvc.yaml's top-level plots against the plot data the report writes and the templates that draw it.

The data are built by every report module from the committed runs (reports/runs, as the report stage reads
them; PNGs are not saved), so the checks see the experiment grid of params.yaml, not a hand-made one. A drawn
file may be missing only while an experiment of its family (the first word of both names: ``fdml``, ``pp``,
``admm``, ...) has not run: the report then writes no data for it.
"""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path
from typing import Any

import matplotlib
import pytest
import yaml

from ppml.config import all_experiments, load_params
from ppml.report import pp_admm
from ppml.report.base import REFERENCE, RUN, ReportOutput, Run, load_runs, read_privacy
from ppml.report.claims import build_all

matplotlib.use("Agg")

ROOT = Path(__file__).resolve().parents[3]
PLOTS = {path: spec for entry in yaml.safe_load((ROOT / "dvc.yaml").read_text())["plots"]
         for path, spec in entry.items()}
TEMPLATES = ROOT / ".dvc" / "plots"
#: plot data that is a table's, not a figure's (the wide-feature study)
NOT_DRAWN = {"admm_sharing-wide.csv"}


class _NoFigures(ReportOutput):
    """Writes tables and plot data; closes figures instead of saving them (the PNGs are not checked here)."""

    def figure(self, name: str, fig: Any, *, tight_layout: bool = False) -> Path:
        import matplotlib.pyplot as plt

        plt.close(fig)
        return self.plots_dir / f"{name}.png"


@pytest.fixture(scope="module")
def report(tmp_path_factory) -> tuple[Path, list[str]]:
    """The plot data the report writes from the committed runs, in a temporary directory, and the names of
    the experiments of params.yaml that have not run."""
    reports = ROOT / "reports"
    if not (reports / "runs").is_dir() or not (reports / "privacy.json").exists():
        pytest.skip("no committed runs (reports/runs, reports/privacy.json) to build the report from")
    params = load_params(ROOT / "params.yaml")
    experiments = {name: block for name, (_, block) in all_experiments(params).items()}
    runs = load_runs(reports / "runs", experiments, read_privacy(reports / "privacy.json"))
    dest = tmp_path_factory.mktemp("report")
    build_all(runs, _NoFigures(reports, dest=dest))
    return dest / "plots" / "data", sorted(run.name for run in runs if not run.available)


@pytest.fixture(scope="module")
def data_dir(report) -> Path:
    return report[0]


def _family(name: str) -> str:
    """The first word of a plot file's or an experiment's name (``fdml_curves-a9a-LR`` -> ``fdml``)."""
    return re.split(r"[-_]", Path(name).stem, maxsplit=1)[0]


def _unexcused(paths: set[str], not_run: list[str]) -> list[str]:
    """The `paths` whose family has no experiment that has not run."""
    return sorted(p for p in paths if _family(p) not in {_family(n) for n in not_run})


def _rows(path: Path) -> list[dict[str, str]]:
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh))


def _template(name: str) -> dict[str, Any]:
    return json.loads((TEMPLATES / f"{name}.json").read_text())


def _encodings(spec: dict[str, Any]) -> dict[str, Any]:
    """The encoding block of a template (a faceted template keeps it in its inner spec)."""
    return spec["spec"]["encoding"] if "spec" in spec else spec["encoding"]


def _colours(name: str) -> int:
    """How many colours the template's `series` scale has (its explicit range)."""
    color = _encodings(_template(name))["color"]
    assert color["field"] == "series", name
    return len(color["scale"]["range"])


def test_every_plot_names_a_data_file_the_report_writes(report):
    data_dir, not_run = report
    written = {f"reports/plots/data/{p.name}" for p in data_dir.glob("*.csv") if p.name not in NOT_DRAWN}
    assert written <= set(PLOTS), sorted(written - set(PLOTS))  # every figure's data is drawn
    missing = _unexcused(set(PLOTS) - written, not_run)
    assert not missing, f"{missing} not written although every experiment of their family has run"


@pytest.mark.parametrize("path", sorted(PLOTS), ids=lambda p: Path(p).stem)
def test_each_plot_has_its_columns_and_no_more_lines_than_colours(report, path):
    data_dir, not_run = report
    spec = PLOTS[path]
    if not (data_dir / Path(path).name).exists() and not _unexcused({path}, not_run):
        pytest.skip(f"not written while experiments of its family have not run ({_family(path)}*)")
    rows = _rows(data_dir / Path(path).name)
    assert rows, path
    assert {spec["x"], spec["y"], "series", "kind"} <= set(rows[0]), (path, list(rows[0]))
    assert {r["kind"] for r in rows} <= {RUN, REFERENCE}, path
    lines = {r["series"] for r in rows}
    assert len(lines) <= _colours(spec["template"]), (path, sorted(lines))


def test_bars_template_groups_revisions_side_by_side():
    bars = _template("bars")
    enc = bars["encoding"]
    assert "stack" in enc["x"] and enc["x"]["stack"] is None  # bars of two revisions never add up
    offset = enc["yOffset"]["field"]
    made = [t for t in bars.get("transform", []) if t.get("as") == offset]
    # one bar per series and revision: the offset is the revision, or an expression of series and revision
    assert offset == "rev" or (made and all(f"datum.{f}" in made[0]["calculate"] for f in ("rev", "series")))


@pytest.mark.parametrize("name", sorted(p.stem for p in TEMPLATES.glob("*.json")))
def test_templates_keep_revisions_apart_and_dash_references(name):
    enc = _encodings(_template(name))
    assert enc["color"]["field"] == "series" and len(enc["color"]["scale"]["range"]) >= 10
    if name != "bars":  # lines: one per series and revision; references dashed, revisions not
        assert enc["detail"]["field"] == "rev" and enc["strokeDash"]["field"] == "kind"
        assert enc["strokeDash"]["scale"]["domain"] == [RUN, REFERENCE]


def test_error_vs_epsilon_of_the_runs_has_majority_and_non_private_lines(data_dir):
    files = sorted(data_dir.glob("pp_admm_error_vs_epsilon-*.csv"))
    assert files
    for path in files:
        rows = _rows(path)
        runs = {float(r["epsilon"]) for r in rows if r["kind"] == RUN}
        for line in ("majority class", "non-private"):
            ref = [r for r in rows if r["series"] == line]
            assert ref and {r["kind"] for r in ref} == {REFERENCE}, (path.name, line)
            assert {float(r["epsilon"]) for r in ref} == runs, (path.name, line)  # across the whole ε axis


def _grid_run(algorithm: str, error: float, *, epsilon: float | None = None, seeds: int = 3) -> Run:
    fields = {"algorithm": algorithm, "dataset": "adult", "test_error": error, "test_error_std": 0.01,
              "seeds": seeds, "majority_error": 0.25, **({} if epsilon is None else {"epsilon": epsilon})}
    return Run(name=f"{algorithm}-{epsilon}", params=dict(fields), metrics=fields)


def test_error_vs_epsilon_draws_reference_lines_over_every_epsilon(tmp_path):
    grid = {"adult": {"pp_admm": {e: _grid_run("pp_admm", 0.3 - 0.01 * e, epsilon=e)
                                  for e in (0.5, 1.0, 10.0)},
                      "dvp": {e: _grid_run("dvp", 0.4 - 0.01 * e, epsilon=e, seeds=5) for e in (1.0, 10.0)}}}
    baseline = {"adult": _grid_run("decentralized_admm", 0.18)}
    out = ReportOutput(tmp_path)
    pp_admm._error_table(grid, baseline, ["adult"], out, {"adult": _grid_run("centralized", 0.17)})
    rows = _rows(tmp_path / "plots" / "data" / "pp_admm_error_vs_epsilon-adult-agents.csv")
    refs = {(r["series"], float(r["epsilon"]), float(r["test_error"]))
            for r in rows if r["kind"] == REFERENCE}
    assert refs == {(line, e, value) for line, value in (("majority class", 0.25), ("non-private", 0.18),
                                                          ("centralized", 0.17)) for e in (0.5, 1.0, 10.0)}
    assert [r["series"] for r in rows][-1] in ("majority class", "non-private", "centralized")  # drawn on top
    assert {r["series"] for r in rows if r["kind"] == RUN} == {"PP-ADMM", "DVP"}
    table = (tmp_path / "tables" / "pp_admm_error.md").read_text()
    assert "| PP-ADMM | 3 |" in table and "| DVP | 5 |" in table  # the seeds each mean is over


def test_plot_data_marks_lines_as_runs_unless_they_say_reference(tmp_path):
    out = ReportOutput(tmp_path)
    path = out.plot_data("f", [{"line": "ref", "kind": REFERENCE, "x": 1, "y": 0.5},
                               {"line": "a", "x": 1, "y": 0.4}, {"line": "a", "x": 2, "y": 0.3}],
                         series=("line",))
    rows = _rows(path)
    assert [(r["series"], r["kind"]) for r in rows] == [("a", RUN), ("a", RUN), ("ref", REFERENCE)]
