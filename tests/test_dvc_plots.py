"""dvc.yaml's top-level plots draw real axes: each names a data file the report commits, with its x and y
columns and the `series` column the project's templates colour by."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
PLOTS = yaml.safe_load((ROOT / "dvc.yaml").read_text())["plots"]


def test_every_data_figure_of_the_report_has_a_plot():
    drawn = {next(iter(p)) for p in PLOTS}
    written = {f"reports/plots/data/{f.name}" for f in (ROOT / "reports/plots/data").glob("*.csv")}
    assert written - drawn <= {"reports/plots/data/admm_sharing-wide.csv"}  # a table's data, not a figure


@pytest.mark.parametrize("plot", PLOTS, ids=lambda p: next(iter(p)))
def test_plot_names_columns_its_file_has(plot):
    (path, spec), = plot.items()
    header = next(csv.reader((ROOT / path).open()))
    assert spec["x"] in header and spec["y"] in header and "series" in header, (path, header)
    template = json.loads((ROOT / ".dvc" / "plots" / f"{spec['template']}.json").read_text())
    assert "<DVC_METRIC_DATA>" in json.dumps(template)
