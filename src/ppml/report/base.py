"""What paper report modules work with: the runs, the claims they check, and where outputs go.

Each paper has a module in this package exposing ``build(runs: Runs, out: ReportOutput) -> list[Claim]``;
it writes its tables and figures through `out` and returns its claims. The report stage calls every module
listed in :data:`ppml.report.PAPER_REPORTS`.
"""

from __future__ import annotations

import csv
import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

from ppml.config import run_dir
from ppml.io import atomic_path
from ppml.report import figcache
from ppml.timing import is_timing

#: the line colours of every figure, in the order its series first appear: the palette of the DVC templates
#: (.dvc/plots/*.json, Vega's "tableau10"), so a series has one colour in the PNGs and in `dvc plots show`
PALETTE = ("#4c78a8", "#f58518", "#e45756", "#72b7b2", "#54a24b", "#eeca3b", "#b279a2", "#ff9da6", "#9d755d",
           "#bab0ac")


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


#: what a claim is: a statement a paper makes, or a check of our own (beats the majority class, ...)
PAPER_CLAIM, DIAGNOSTIC = "paper", "diagnostic"
KINDS = (PAPER_CLAIM, DIAGNOSTIC)

#: why a paper claim is FAIL or NOT SHOWN: a property of the algorithm as printed; our reading of an ambiguous
#: text; data or scale we do not have; or a difference inside what our runs can resolve (statistical power)
PROPERTY, READING, DATA, POWER = "property", "reading", "data", "power"
CAUSES = (PROPERTY, READING, DATA, POWER)

#: how a timing claim was decided: wall clocks of real processes, a simulated clock, or a cost model. Only a
#: measured one can PASS; the others are NOT CHECKED with the reason.
MEASURED, SIMULATED, COST_MODEL = "measured", "simulated", "cost model"
BASES = (MEASURED, SIMULATED, COST_MODEL)


def combine(verdicts: Iterable[str]) -> str:
    """A statement's verdict from its counted parts' (the conjunction): FAIL when any part fails, PASS when
    every checked part passes, NOT SHOWN otherwise; parts NOT CHECKED (a run they need is absent) are left out,
    and a statement none of whose parts was checked is NOT CHECKED."""
    checked = [v for v in verdicts if v != NOT_CHECKED]
    if not checked:
        return NOT_CHECKED
    return FAIL if FAIL in checked else PASS if all(v == PASS for v in checked) else NOT_SHOWN


#: the rule :func:`combine` applies, in words (on every statement with parts)
RULE = ("PASS when every counted part passes, FAIL when any counted part fails, NOT SHOWN otherwise; a part "
        "NOT CHECKED (its run absent) is left out")


@dataclass(frozen=True)
class Part:
    """One reading, setting or dataset of a statement (:attr:`Claim.parts`), with its own verdict.

    ``id`` is the part's own id (the id it had as a row of its own, so ledgers compare across the change),
    ``name`` says in a few words which reading it is ("a9a, LR, model (8)"); ``counted`` is False for a
    reading shown beside the statement whose verdict does not enter the statement's rule (the statement's
    ``rule`` says why).
    """

    id: str
    name: str
    statement: str
    published: str
    ours: str
    verdict: str
    margin: str = ""
    counted: bool = True
    cause: str | None = None
    explanation: str | None = None
    evidence: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "name": self.name, "counted": self.counted, "statement": self.statement,
                "published": self.published, "ours": self.ours, "verdict": self.verdict, "margin": self.margin,
                "cause": self.cause, "explanation": self.explanation, "evidence": list(self.evidence)}


@dataclass(frozen=True)
class Claim:
    """A published claim as a checkable statement, or one of our own checks.

    ``verdict`` is one of :data:`VERDICTS`. NOT CHECKED: a run it needs is missing or its data unavailable
    (the reason is then in ``ours``). NOT SHOWN: the comparison's difference lies inside its ``margin``.
    ``margin`` says in words which test and margin a comparison used (empty for claims that are not
    comparisons); a PASS never rests on a difference below it.

    ``kind`` is :data:`PAPER_CLAIM` (a paper states it; ``source`` says where: figure, table, section,
    algorithm line or equation, and ``statement`` says in our words what it states) or :data:`DIAGNOSTIC`
    (our own check). A paper claim that is FAIL or NOT SHOWN carries ``cause`` (one of :data:`CAUSES`),
    ``explanation`` (one sentence) and ``evidence`` (repository paths, ``path#anchor`` allowed, of the
    tables or runs that show it, e.g. ``reports/tables/admm_sharing.md``, ``reports/runs/<algorithm>/<name>``
    (:attr:`Run.evidence`), ``docs/methods.md#anchor``; :func:`check_evidence` checks they exist). Use
    :func:`why_not` to attach them only when the verdict is FAIL or NOT SHOWN. ``basis`` is None, or for a
    timing claim one of :data:`BASES`; a timing claim can PASS only on measured wall clocks.

    ``parts`` (with ``rule``) make the row one statement checked several ways (datasets, settings, readings:
    :mod:`ppml.report.statements`): its verdict must be :func:`combine` of the counted parts'.
    """

    id: str
    paper: str
    statement: str
    published: str
    ours: str
    verdict: str
    margin: str = ""
    kind: str = PAPER_CLAIM
    source: str = ""
    cause: str | None = None
    explanation: str | None = None
    evidence: tuple[str, ...] = ()
    basis: str | None = None
    parts: tuple[Part, ...] = ()
    rule: str = ""

    def __post_init__(self) -> None:
        def bad(field_: str, why: str) -> ValueError:
            return ValueError(f"claim {self.id}: {field_} {why}")

        object.__setattr__(self, "parts", tuple(self.parts))
        if self.parts:
            if not all(isinstance(p, Part) for p in self.parts):
                raise bad("parts", f"must be Part objects, got {[type(p).__name__ for p in self.parts]}")
            if not self.rule.strip():
                raise bad("rule", "must say how the parts decide the verdict")
            expected = combine(p.verdict for p in self.parts if p.counted)
            if self.verdict != expected:
                raise bad("verdict", f"{self.verdict!r} is not what its counted parts give ({expected!r})")

        if self.verdict not in VERDICTS:
            raise bad("verdict", f"must be one of {VERDICTS}, got {self.verdict!r}")
        if self.kind not in KINDS:
            raise bad("kind", f"must be one of {KINDS}, got {self.kind!r}")
        if self.kind == PAPER_CLAIM and not (isinstance(self.source, str) and self.source.strip()):
            raise bad("source", "must say where the paper states it (figure, table, section, ...) for a "
                                f"paper claim, got {self.source!r}")
        if isinstance(self.evidence, str) or not isinstance(self.evidence, (tuple, list)):
            raise bad("evidence", f"must be a tuple of repository paths, got {self.evidence!r}")
        object.__setattr__(self, "evidence", tuple(self.evidence))
        for path in self.evidence:
            if not isinstance(path, str) or not path.split("#")[0].strip():
                raise bad("evidence", f"entries must be non-empty paths, got {path!r}")
            if path.startswith(("/", "~")) or ".." in Path(path.split("#")[0]).parts:
                raise bad("evidence", f"entries must be paths inside the repository, got {path!r}")
        needs_cause = self.kind == PAPER_CLAIM and self.verdict in (FAIL, NOT_SHOWN)
        if self.cause is None:
            if needs_cause:
                raise bad("cause", f"is required for a paper claim that is {self.verdict} (one of {CAUSES})")
        else:
            if self.cause not in CAUSES:
                raise bad("cause", f"must be one of {CAUSES}, got {self.cause!r}")
            if self.verdict not in (FAIL, NOT_SHOWN):
                raise bad("cause", f"is only for a FAIL or NOT SHOWN claim, this one is {self.verdict}")
            if not (isinstance(self.explanation, str) and self.explanation.strip()):
                raise bad("explanation", f"is required with cause {self.cause!r} (one sentence)")
            if not self.evidence:
                raise bad("evidence", f"is required with cause {self.cause!r} (repository paths that show it)")
        if self.explanation is not None and (not isinstance(self.explanation, str) or "\n" in self.explanation):
            raise bad("explanation", f"must be one sentence on one line, got {self.explanation!r}")
        if self.basis is not None:
            if self.basis not in BASES:
                raise bad("basis", f"must be None or one of {BASES}, got {self.basis!r}")
            if self.basis != MEASURED and self.verdict == PASS:
                raise bad("basis", f"{self.basis!r} cannot decide a PASS (only measured wall clocks can); "
                                   "the claim is NOT CHECKED with the reason")

    @property
    def passed(self) -> bool | None:
        """True for PASS, False for FAIL, None for NOT SHOWN and NOT CHECKED."""
        return {PASS: True, FAIL: False}.get(self.verdict)

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "paper": self.paper, "kind": self.kind, "source": self.source,
                "statement": self.statement, "published": self.published, "ours": self.ours,
                "verdict": self.verdict, "margin": self.margin, "pass": self.passed, "cause": self.cause,
                "explanation": self.explanation, "evidence": list(self.evidence), "basis": self.basis,
                **({"rule": self.rule, "parts": [p.to_dict() for p in self.parts]} if self.parts else {})}


def why_not(verdict: str, cause: str, explanation: str, *evidence: str) -> dict[str, Any]:
    """A claim's ``cause``, ``explanation`` and ``evidence`` keyword arguments, kept only when `verdict` is
    FAIL or NOT SHOWN (a PASS or NOT CHECKED claim carries no cause). Use as ``Claim(..., **why_not(...))``
    when the cause is known before the verdict is."""
    if verdict in (FAIL, NOT_SHOWN):
        return {"cause": cause, "explanation": explanation, "evidence": tuple(evidence)}
    return {}


def short_source(source: str) -> str:
    """A claim's source without the paper's name in front: "ADMM sharing paper, Fig. 3" -> "Fig. 3",
    "PP-ADMM paper (Ding et al., CIKM 2020), Fig. 1" -> "Fig. 1". The name is what comes before the first
    comma outside parentheses, when it says "paper" or "poster"."""
    source = (source or "").strip()
    depth = 0
    for i, char in enumerate(source):
        depth += {"(": 1, ")": -1}.get(char, 0)
        if char == "," and depth == 0:
            name, rest = source[:i], source[i + 1:].strip()
            return rest if re.search(r"\b(paper|poster)\b", name) and rest else source
    return source


#: where the report stage's outputs live in the repository (dvc.yaml's report stage: --out reports)
REPORT_DIR = "reports"
#: the report stage's own outputs under REPORT_DIR: evidence there must be in this report's output, not a stale
#: copy from an earlier run
REPORT_OUTPUTS = ("tables", "plots", "claims.md", "claims.json", "metrics")


#: inline Markdown whose text, not its marks, makes a heading's anchor: links and images, HTML tags, emphasis
_HEADING_MARKUP = ((re.compile(r"!?\[([^\]]*)\]\([^)]*\)"), r"\1"), (re.compile(r"<[^>]*>"), ""),
                   (re.compile(r"(?<!\w)_+([^_]+)_+(?!\w)"), r"\1"))
_ATX_HEADING = re.compile(r"^ {0,3}#{1,6}(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*$")
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
#: an explicit anchor: ``<a id="x">`` or ``<a name="x">``
_HTML_ANCHOR = re.compile(r"""<a\s[^>]*?\b(?:id|name)\s*=\s*["']([^"']+)["']""", re.I)


def heading_anchor(heading: str) -> str:
    """The anchor GitHub gives a Markdown heading of text `heading` (the text after the ``#`` marks): the
    rendered text (links, tags and emphasis marks removed) in lower case, every character but letters,
    digits, ``-``, ``_`` and spaces dropped, each space a ``-``. A repeated heading's anchor is numbered by
    :func:`markdown_anchors`."""
    text = heading.strip()
    for pattern, repl in _HEADING_MARKUP:
        text = pattern.sub(repl, text)
    return re.sub(r"[^\w\- ]", "", text.strip().lower()).replace(" ", "-")


def markdown_lines(text: str) -> Iterable[tuple[int, str]]:
    """(line number, line) of the Markdown `text` outside fenced code blocks."""
    fence = None
    for number, line in enumerate(text.splitlines(), 1):
        match = _FENCE.match(line)
        if match and (fence is None or match[1][0] == fence[0] and len(match[1]) >= len(fence)):
            fence = match[1] if fence is None else None
        elif fence is None:
            yield number, line


def markdown_anchors(text: str) -> set[str]:
    """Every ``#anchor`` the Markdown `text` defines, by GitHub's rules: each heading's
    :func:`heading_anchor`, the second heading of the same anchor with ``-1`` appended, the third ``-2``, ...;
    and every explicit ``<a id=...>`` or ``<a name=...>``."""
    anchors: set[str] = set()
    seen: dict[str, int] = {}
    for _, line in markdown_lines(text):
        heading = _ATX_HEADING.match(line)
        if heading:
            anchor = heading_anchor(heading[1] or "")
            n = seen.get(anchor, 0)
            seen[anchor] = n + 1
            anchors.add(anchor if n == 0 else f"{anchor}-{n}")
        anchors.update(_HTML_ANCHOR.findall(line))
    return anchors


def check_evidence(claims: Iterable[Claim], *, repo: str | Path, out: str | Path,
                   runs: str | Path | None = None) -> None:
    """Each claim's evidence path exists, and its ``#anchor`` (if any) is a heading or an explicit anchor of
    that Markdown file (:func:`markdown_anchors`); else a ReportInputError naming claim and path.

    Evidence paths are repository paths (``reports/tables/admm_sharing.md#a9a``,
    ``reports/runs/<algorithm>/<name>``, ``docs/methods.md#...``). One under the report's own outputs
    (:data:`REPORT_OUTPUTS` below :data:`REPORT_DIR`) must exist in `out`, the directory this report writes; one
    under ``reports/runs`` in `runs`, the run directories the report read (default: the repository's), at the
    same path below it (``<runs>/<algorithm>/<name>``); any other under `repo`.
    """
    repo, out = Path(repo), Path(out)
    runs = repo / REPORT_DIR / "runs" if runs is None else Path(runs)
    for claim in claims:
        for path in claim.evidence:
            rel, _, anchor = path.partition("#")
            rel = rel.rstrip("/")
            parts = Path(rel).parts
            if len(parts) > 1 and parts[0] == REPORT_DIR and parts[1] in REPORT_OUTPUTS:
                where, target = "this report's output", out / Path(*parts[1:])
            elif len(parts) > 2 and parts[:2] == (REPORT_DIR, "runs"):
                where, target = "the runs read", runs / Path(*parts[2:])
            else:
                where, target = "the repository", repo / rel
            if not target.exists():
                raise ReportInputError(f"claim {claim.id}: evidence {rel!r} does not exist in {where}")
            if anchor and not (target.suffix == ".md" and target.is_file()
                               and anchor in markdown_anchors(target.read_text())):
                raise ReportInputError(f"claim {claim.id}: evidence {path!r}: {rel} has no heading or <a id> "
                                       f"whose anchor is #{anchor}")


@dataclass
class Run:
    """One experiment's outputs as the train and account stages wrote them.

    ``metrics`` is its run.json and metrics.json merged; ``timing`` the values of its timing.json (seconds,
    simulated clocks, cost-model seconds: :mod:`ppml.timing` says what each clock is), apart from the metrics;
    :meth:`get` looks a field up in the metrics, then the timing, then the block of params.yaml.
    """

    name: str
    params: dict[str, Any]
    metrics: dict[str, Any]
    history: dict[str, Any] = field(default_factory=dict)
    privacy: dict[str, Any] | None = None
    timing: dict[str, Any] = field(default_factory=dict)

    @property
    def available(self) -> bool:
        return self.metrics.get("status", "ok") == "ok"

    @property
    def evidence(self) -> str:
        """The repository path of its run directory, as claims cite it: ``reports/runs/<algorithm>/<name>``
        (:func:`ppml.config.run_dir`, where :func:`load_runs` read it: the algorithm is its block's, else its
        run.json's)."""
        algorithm = self.params.get("algorithm", self.metrics.get("algorithm"))
        return run_dir(f"{REPORT_DIR}/runs", self.name, {"algorithm": algorithm}).as_posix()

    def get(self, key: str, default: Any = None) -> Any:
        if key in self.metrics:
            return self.metrics[key]
        if key in self.timing:
            return self.timing[key]
        return self.params.get(key, default)

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


#: the ``kind`` of a line in plot data: one of the runs, or a reference line drawn dashed (see
#: :meth:`ReportOutput.plot_data`)
RUN, REFERENCE = "run", "reference"


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
        column, which the project's DVC templates (.dvc/plots/) colour by, in the order the lines first
        appear. With `series`, a ``kind`` column says what each line is: :data:`REFERENCE` for a reference line
        (majority class, non-private, centralized, local, a target), which the templates dash, or :data:`RUN`
        (rows that do not say); reference rows are written after the runs' (drawn on top, listed last).
        """
        path = self.plots_dir / "data" / f"{name}.csv"
        if series:
            rows = [{"series": " / ".join(str(row.get(c, "")) for c in series), "kind": row.get("kind", RUN),
                     **row} for row in rows]
            rows.sort(key=lambda row: row["kind"] == REFERENCE)
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

    def figure(self, name: str, fig: Any, *, tight_layout: bool = False) -> Path:
        """Save a matplotlib figure as PNG (deterministic metadata, each legend moved beside its axes) and close
        it. Figures draw their lines in :data:`PALETTE`'s colours (:func:`use_palette`). A figure equal to the
        last report's (:mod:`ppml.report.figcache`: same code, same artists) keeps that PNG's bytes.

        `tight_layout` lays the axes out (``fig.tight_layout()``) only when the figure is drawn: the layout is a
        function of the artists the key already holds, and computing it costs as much as drawing."""
        import matplotlib.pyplot as plt

        path = self.plots_dir / f"{name}.png"
        content = figcache.key(fig)
        previous = self.root / "plots" / f"{name}.png"  # the last report's (the same file when not staged)
        if figcache.stored_key(previous) == content:  # the same figure: its drawing is re-used, not redone
            if previous.resolve() != path.resolve():
                with atomic_path(path) as tmp:
                    tmp.write_bytes(previous.read_bytes())
        else:
            if tight_layout:
                fig.tight_layout()
            for ax in fig.axes:  # legends beside the data, never over it
                legend = ax.get_legend()
                if legend is not None:
                    size = legend.get_texts()[0].get_fontsize() if legend.get_texts() else None
                    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0, fontsize=size)
            with atomic_path(path) as tmp:
                fig.savefig(tmp, format="png", dpi=110, bbox_inches="tight",
                            metadata={"Software": None, figcache.CHUNK: content})
        plt.close(fig)
        self.written.append(path)
        return path


def markdown_table(header: list[str], rows: list[list[Any]]) -> str:
    """A GitHub markdown table; floats with 4 decimals (integral ones as integers), None as '—'."""

    def cell(v: Any) -> str:
        if v is None:
            return "—"
        if isinstance(v, float):
            if math.isnan(v):
                return "nan"
            if v.is_integer() and abs(v) < 1e15:  # a count or a round parameter (eta 8, 38 epochs): no decimals
                return str(int(v))
            return f"{v:.4g}" if abs(v) >= 1e4 or (v != 0 and abs(v) < 1e-3) else f"{v:.4f}"
        return str(v)

    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in rows]
    return "\n".join(lines)


class ReportInputError(ValueError):
    """A report input (metrics, history or privacy file) is unreadable or malformed; the message names it."""


#: fields a run's metrics give as numbers (or null where a run cannot have them, e.g. AUC of one class)
NUMERIC_FIELDS = ("train_objective", "train_logloss", "train_error", "test_logloss", "test_auc", "test_error",
                  "test_accuracy", "epochs", "majority_error")


class RunFields(dict):
    """A run's merged run.json and metrics.json: a field a report needs but the run lacks is a
    :class:`ReportInputError` naming the files, not a bare ``KeyError``."""

    def __init__(self, fields: dict[str, Any], source: str) -> None:
        super().__init__(fields)
        self.source = source

    def __missing__(self, key: str) -> Any:
        raise ReportInputError(f"{self.source}: no field {key!r} (re-run the train stage of this experiment)")


def _merged(run_dir: Path) -> tuple[dict[str, Any], str]:
    """run.json and metrics.json of a run directory merged, and the name of that pair for errors."""
    run_path, metrics_path = run_dir / "run.json", run_dir / "metrics.json"
    described = read_object(run_path) if run_path.exists() else {}
    source = f"{run_path} + {metrics_path.name}" if run_path.exists() else str(metrics_path)
    return {**described, **read_object(metrics_path)}, source


def read_run(run_dir: str | Path) -> RunFields:
    """A run directory's run.json (what the run was) and metrics.json (its numbers), merged, the numeric
    fields checked; runs written before the split have everything in metrics.json. Timing fields are left
    out (runs written before timing.json have them in metrics.json): :func:`read_timing` reads them.
    Errors name the files."""
    merged, source = _merged(Path(run_dir))
    fields = RunFields({k: v for k, v in merged.items() if not is_timing(k)}, source)
    check_numeric(fields, source)
    return fields


def read_timing(run_dir: str | Path) -> dict[str, Any]:
    """The timing values of a run directory (field -> number or null): its timing.json's ``values``; a run
    written before timing.json has them in metrics.json (and run.json), read from there. What each clock is:
    timing.json's ``basis`` (:mod:`ppml.timing`). Errors name the file."""
    run_dir = Path(run_dir)
    path = run_dir / "timing.json"
    if path.exists():
        timing = read_object(path)
        if timing.get("experiment") != run_dir.name:
            raise ReportInputError(f"{path}: experiment is {timing.get('experiment')!r} but the run directory "
                                   f"is {run_dir.name!r}")
        values, source = timing.get("values"), str(path)
        if not isinstance(values, dict):
            raise ReportInputError(f"{path}: 'values' must be an object, got {type(values).__name__}")
    else:
        merged, source = _merged(run_dir)
        values = {k: v for k, v in merged.items() if is_timing(k)}
    for key, value in values.items():
        if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))):
            raise ReportInputError(f"{source}: {key} must be a number or null, got {value!r}")
    return values


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
    """Read reports/runs/<algorithm>/<name>/{run,metrics,timing,history}.json for every experiment in params
    (:func:`ppml.config.run_dir`).

    A run's ``metrics`` are its run.json (name, algorithm, status, parameters, labels) and its metrics.json
    (numbers) merged; runs written before the split have everything in metrics.json. Its ``timing`` is
    :func:`read_timing`'s (from metrics.json for runs written before timing.json).

    A file that cannot be read or parsed, or a metrics.json whose ``experiment`` is not its run directory's
    name, raises :class:`ReportInputError` naming the file.
    """
    by_name = {r["name"]: r for r in (privacy or {}).get("runs", [])}
    out = []
    for name, block in experiments.items():
        directory = run_dir(runs_dir, name, block)
        metrics_path = directory / "metrics.json"
        if not metrics_path.exists():  # in params but not trained yet: reports say so instead of guessing
            metrics = {**block, "experiment": name,
                       "status": f"not run: stage train_{block.get('algorithm')} has not trained it yet"}
            out.append(Run(name=name, params=dict(block), metrics=metrics))
            continue
        metrics = read_run(directory)
        if metrics.get("experiment") != name:
            raise ReportInputError(f"{metrics_path}: experiment is {metrics.get('experiment')!r} but the run "
                                   f"directory is {name!r}")
        hist_path = directory / "history.json"
        history = read_object(hist_path) if hist_path.exists() else {}
        out.append(Run(name=name, params=dict(block), metrics=metrics, history=history,
                       privacy=by_name.get(name), timing=read_timing(directory)))
    return Runs(out)


def use_palette() -> None:
    """Make :data:`PALETTE` matplotlib's colour cycle (the report stage calls it once, before any figure)."""
    import matplotlib
    from cycler import cycler

    matplotlib.rcParams["axes.prop_cycle"] = cycler(color=list(PALETTE))
