"""What paper report modules work with: the runs, the claims they check, and where outputs go.

Each paper has a module in this package exposing ``build(runs: Runs, out: ReportOutput) -> list[Claim]``;
it writes its tables and figures through `out` and returns its claims. The report stage calls every module
listed in :data:`ppml.report.PAPER_REPORTS`.
"""

from __future__ import annotations

import csv
import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

from ppml.io import atomic_path


#: what a claim's check can say
PASS, FAIL, NOT_SHOWN, NOT_CHECKED = "PASS", "FAIL", "NOT SHOWN", "NOT CHECKED"
VERDICTS = (PASS, FAIL, NOT_SHOWN, NOT_CHECKED)


def verdict_of(passed: bool | None) -> str:
    """The verdict of a check that is not a comparison with a margin: True, False, or None (not checked)."""
    return NOT_CHECKED if passed is None else PASS if passed else FAIL


def compare(difference: float, margin: float) -> str:
    """The verdict of a comparison: `difference` is oriented so that positive means the claim holds.

    PASS only when the difference exceeds `margin`, FAIL when it is below ``-margin``, NOT SHOWN in between:
    a difference inside the margin (a tie, seed noise) supports neither side. A nan difference is NOT CHECKED.
    """
    if margin < 0:
        raise ValueError(f"margin must be >= 0, got {margin}")
    if math.isnan(difference):
        return NOT_CHECKED
    return PASS if difference > margin else FAIL if difference < -margin else NOT_SHOWN


@dataclass(frozen=True)
class Claim:
    """A published claim as a checkable statement.

    ``verdict`` is one of :data:`VERDICTS`. NOT CHECKED: a run it needs is missing or its data unavailable
    (the reason is then in ``ours``). NOT SHOWN: the comparison's difference lies inside its ``margin``.
    ``margin`` says in words which margin a comparison used and why (empty for claims that are not
    comparisons); a PASS never rests on a difference below it.
    """

    id: str
    paper: str
    statement: str
    published: str
    ours: str
    verdict: str
    margin: str = ""

    def __post_init__(self) -> None:
        if self.verdict not in VERDICTS:
            raise ValueError(f"claim {self.id}: verdict must be one of {VERDICTS}, got {self.verdict!r}")

    @property
    def passed(self) -> bool | None:
        """True for PASS, False for FAIL, None for NOT SHOWN and NOT CHECKED."""
        return {PASS: True, FAIL: False}.get(self.verdict)

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "paper": self.paper, "statement": self.statement, "published": self.published,
                "ours": self.ours, "verdict": self.verdict, "margin": self.margin, "pass": self.passed}


@dataclass
class Run:
    """One experiment's outputs as the train and account stages wrote them."""

    name: str
    params: dict[str, Any]
    metrics: dict[str, Any]
    history: dict[str, Any] = field(default_factory=dict)
    privacy: dict[str, Any] | None = None

    @property
    def available(self) -> bool:
        return self.metrics.get("status", "ok") == "ok"

    def get(self, key: str, default: Any = None) -> Any:
        return self.metrics.get(key, self.params.get(key, default))

    def records(self, seed: int = 0) -> list[dict[str, Any]]:
        """Per-epoch records of one seed of an available run ([] when the run is missing or was not run)."""
        if not self.available:
            return []
        seeds = (self.history or {}).get("runs") or []
        return seeds[seed].get("records", []) if len(seeds) > seed else []


class Runs:
    """All runs, selectable by metric or parameter fields."""

    def __init__(self, runs: Iterable[Run]) -> None:
        self._runs = {r.name: r for r in runs}

    def __iter__(self):
        return iter(self._runs.values())

    def __len__(self) -> int:
        return len(self._runs)

    def __getitem__(self, name: str) -> Run:
        return self._runs[name]

    def get(self, name: str) -> Run | None:
        return self._runs.get(name)

    def select(self, **fields: Any) -> list[Run]:
        """Runs whose fields equal the given values (``select(algorithm="admm_sharing", dataset="a9a")``)."""
        out = []
        for run in self._runs.values():
            if all(_same(run.get(k), v) for k, v in fields.items()):
                out.append(run)
        return out

    def one(self, **fields: Any) -> Run | None:
        """The single run matching the fields, or None when there is none; an error if several match."""
        found = self.select(**fields)
        if len(found) > 1:
            raise LookupError(f"{len(found)} runs match {fields}: {[r.name for r in found]}")
        return found[0] if found else None


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, float) and isinstance(b, (int, float)) and not isinstance(b, bool):
        return math.isclose(a, float(b), rel_tol=1e-12, abs_tol=0.0)
    return a == b


class ReportOutput:
    """Where a paper module puts tables (markdown), plot data (DVC plots CSV) and figures (PNG).

    ``root`` is the report directory, where inputs such as ``published/`` are read; files are written under
    ``dest``, which is ``root`` unless the stage builds its outputs in a staging directory and swaps them in
    at the end (see :func:`ppml.io.staged_outputs`).
    """

    def __init__(self, root: str | Path, *, dest: str | Path | None = None) -> None:
        self.root = Path(root)
        self.dest = self.root if dest is None else Path(dest)
        self.tables_dir = self.dest / "tables"
        self.plots_dir = self.dest / "plots"
        self.written: list[Path] = []

    def text(self, relpath: str, text: str) -> Path:
        """Write a text file under the report's output directory."""
        path = self.dest / relpath
        with atomic_path(path) as tmp:
            tmp.write_text(text.rstrip() + "\n")
        self.written.append(path)
        return path

    def table(self, name: str, markdown: str) -> Path:
        return self.text(f"tables/{name}.md", markdown)

    def plot_data(self, name: str, rows: list[dict[str, Any]], *, series: tuple[str, ...] = ()) -> Path:
        """Long-format rows for ``dvc plots``: one CSV per figure, whose x and y dvc.yaml's ``plots`` names.

        `series` names the columns that tell one line from another; their values, joined, become a ``series``
        column, which the project's DVC templates (.dvc/plots/) colour by.
        """
        path = self.plots_dir / "data" / f"{name}.csv"
        if series:
            rows = [{"series": " / ".join(str(row.get(c, "")) for c in series), **row} for row in rows]
        columns: list[str] = []
        for row in rows:
            columns.extend(k for k in row if k not in columns)
        with atomic_path(path) as tmp:
            with open(tmp, "w", newline="") as fh:
                writer = csv.DictWriter(fh, fieldnames=columns)
                writer.writeheader()
                writer.writerows(rows)
        self.written.append(path)
        return path

    def figure(self, name: str, fig: Any) -> Path:
        """Save a matplotlib figure as PNG (deterministic metadata) and close it."""
        import matplotlib.pyplot as plt

        path = self.plots_dir / f"{name}.png"
        with atomic_path(path) as tmp:
            fig.savefig(tmp, format="png", dpi=110, bbox_inches="tight", metadata={"Software": None})
        plt.close(fig)
        self.written.append(path)
        return path


def markdown_table(header: list[str], rows: list[list[Any]]) -> str:
    """A GitHub markdown table; floats with 4 significant decimals, None as '—'."""

    def cell(v: Any) -> str:
        if v is None:
            return "—"
        if isinstance(v, float):
            return "nan" if math.isnan(v) else f"{v:.4g}" if abs(v) >= 1e4 or (v != 0 and abs(v) < 1e-3) else f"{v:.4f}"
        return str(v)

    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in rows]
    return "\n".join(lines)


class ReportInputError(ValueError):
    """A report input (metrics, history or privacy file) is unreadable or malformed; the message names it."""


#: fields a run's metrics give as numbers (or null where a run cannot have them, e.g. AUC of one class)
NUMERIC_FIELDS = ("train_objective", "train_logloss", "train_error", "test_logloss", "test_auc", "test_error",
                  "test_accuracy", "epochs", "seconds", "bytes_sent", "messages", "majority_error")


class RunFields(dict):
    """A run's merged run.json and metrics.json: a field a report needs but the run lacks is a
    :class:`ReportInputError` naming the files, not a bare ``KeyError``."""

    def __init__(self, fields: dict[str, Any], source: str) -> None:
        super().__init__(fields)
        self.source = source

    def __missing__(self, key: str) -> Any:
        raise ReportInputError(f"{self.source}: no field {key!r} (re-run the train stage of this experiment)")


def read_run(run_dir: str | Path) -> RunFields:
    """A run directory's run.json (what the run was) and metrics.json (its numbers), merged, the numeric
    fields checked; runs written before the split have everything in metrics.json. Errors name the files."""
    run_dir = Path(run_dir)
    run_path, metrics_path = run_dir / "run.json", run_dir / "metrics.json"
    described = read_object(run_path) if run_path.exists() else {}
    source = f"{run_path} + {metrics_path.name}" if run_path.exists() else str(metrics_path)
    fields = RunFields({**described, **read_object(metrics_path)}, source)
    check_numeric(fields, source)
    return fields


def check_numeric(fields: dict[str, Any], source: str) -> None:
    """Each of :data:`NUMERIC_FIELDS` present in `fields` is a number or null; else a ReportInputError."""
    for key in NUMERIC_FIELDS:
        value = fields.get(key)
        if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))):
            raise ReportInputError(f"{source}: {key} must be a number, got {value!r}")


def read_object(path: str | Path) -> dict[str, Any]:
    """A JSON object from `path`; any problem is a one-line :class:`ReportInputError` naming the file."""
    path = Path(path)
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        raise ReportInputError(f"{path}: not found (run the stage that writes it first)") from None
    except OSError as exc:
        raise ReportInputError(f"{path}: cannot be read ({exc.strerror or exc})") from None
    except UnicodeDecodeError as exc:
        raise ReportInputError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    except json.JSONDecodeError as exc:
        where = f"line {exc.lineno} column {exc.colno}"
        raise ReportInputError(f"{path}: not valid JSON ({exc.msg} at {where})") from None
    if not isinstance(data, dict):
        raise ReportInputError(f"{path}: expected a JSON object, got {type(data).__name__}")
    return data


def read_privacy(path: str | Path) -> dict[str, Any]:
    """The account stage's privacy.json, checked: ``runs`` is a list of objects, each with a name."""
    privacy = read_object(path)
    entries = privacy.get("runs", [])
    if not isinstance(entries, list):
        raise ReportInputError(f"{path}: 'runs' must be a list, got {type(entries).__name__}")
    for i, entry in enumerate(entries):
        if not isinstance(entry, dict) or not isinstance(entry.get("name"), str):
            raise ReportInputError(f"{path}: runs[{i}] must be an object with a string 'name'")
    return privacy


def load_runs(runs_dir: str | Path, experiments: dict[str, dict[str, Any]],
              privacy: dict[str, Any] | None = None) -> Runs:
    """Read reports/runs/<name>/{run,metrics,history}.json for every experiment in params.

    A run's ``metrics`` are its run.json (name, algorithm, status, parameters, labels) and its metrics.json
    (numbers) merged; runs written before the split have everything in metrics.json.

    A file that cannot be read or parsed, or a metrics.json whose ``experiment`` is not its run directory's
    name, raises :class:`ReportInputError` naming the file.
    """
    runs_dir = Path(runs_dir)
    by_name = {r["name"]: r for r in (privacy or {}).get("runs", [])}
    out = []
    for name, block in experiments.items():
        metrics_path = runs_dir / name / "metrics.json"
        if not metrics_path.exists():  # in params but not trained yet: reports say so instead of guessing
            metrics = {**block, "experiment": name,
                       "status": f"not run: train_{block.get('algorithm')}@{name} has not run yet"}
            out.append(Run(name=name, params=dict(block), metrics=metrics))
            continue
        metrics = read_run(runs_dir / name)
        if metrics.get("experiment") != name:
            raise ReportInputError(f"{metrics_path}: experiment is {metrics.get('experiment')!r} but the run "
                                   f"directory is {name!r}")
        hist_path = runs_dir / name / "history.json"
        history = read_object(hist_path) if hist_path.exists() else {}
        out.append(Run(name=name, params=dict(block), metrics=metrics, history=history,
                       privacy=by_name.get(name)))
    return Runs(out)
