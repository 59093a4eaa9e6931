"""Claim's ledger fields: kind, source, cause, explanation, evidence, basis are validated and written."""

import pytest

from ppml.report.base import (FAIL, NOT_CHECKED, NOT_SHOWN, PASS, Claim, ReportInputError, check_evidence,
                              why_not)

BASE = dict(id="x-1", paper="P", statement="s", published="pub", ours="ours")


def test_a_paper_claim_needs_a_source():
    with pytest.raises(ValueError, match="claim x-1: source"):
        Claim(**BASE, verdict=PASS)
    Claim(**BASE, verdict=PASS, kind="diagnostic")  # our own check needs none


@pytest.mark.parametrize("verdict", [FAIL, NOT_SHOWN])
def test_a_non_pass_paper_claim_needs_cause_explanation_and_evidence(verdict):
    with pytest.raises(ValueError, match="claim x-1: cause is required"):
        Claim(**BASE, verdict=verdict, source="Fig. 1")
    with pytest.raises(ValueError, match="claim x-1: explanation is required"):
        Claim(**BASE, verdict=verdict, source="Fig. 1", cause="power", evidence=("reports/tables/t.md",))
    with pytest.raises(ValueError, match="claim x-1: evidence is required"):
        Claim(**BASE, verdict=verdict, source="Fig. 1", cause="power", explanation="Too few seeds.")
    c = Claim(**BASE, verdict=verdict, source="Fig. 1", cause="power", explanation="Too few seeds.",
              evidence=["reports/tables/t.md#row"])
    assert c.evidence == ("reports/tables/t.md#row",)
    # a diagnostic that fails needs no cause
    Claim(**BASE, verdict=verdict, kind="diagnostic")


@pytest.mark.parametrize("kwargs, field", [
    (dict(kind="implied"), "kind"),
    (dict(cause="bad luck", explanation="e", evidence=("a",)), "cause must be one of"),
    (dict(evidence="reports/tables/t.md"), "evidence must be a tuple"),
    (dict(evidence=("/abs/path",)), "evidence entries must be paths inside"),
    (dict(evidence=("../shared/papers/x.txt",)), "evidence entries must be paths inside"),
    (dict(evidence=("",)), "evidence entries must be non-empty"),
    (dict(basis="guessed"), "basis must be None"),
    (dict(explanation="two\nlines"), "explanation must be one sentence"),
])
def test_bad_fields_are_named(kwargs, field):
    with pytest.raises(ValueError, match=f"claim x-1: {field}"):
        Claim(**BASE, verdict=FAIL, source="Fig. 1", **{"cause": "data", "explanation": "e",
                                                        "evidence": ("a",), **kwargs})


def test_no_cause_on_pass_and_no_pass_without_measurement():
    with pytest.raises(ValueError, match="only for a FAIL or NOT SHOWN"):
        Claim(**BASE, verdict=PASS, source="Fig. 1", cause="power", explanation="e", evidence=("a",))
    for basis in ("simulated", "cost model"):
        with pytest.raises(ValueError, match="cannot decide a PASS"):
            Claim(**BASE, verdict=PASS, source="Sec. 5", basis=basis)
        Claim(**BASE, verdict=NOT_CHECKED, source="Sec. 5", basis=basis)
    Claim(**BASE, verdict=PASS, source="Sec. 5", basis="measured")


def test_why_not_only_for_fail_and_not_shown():
    assert why_not(PASS, "power", "e", "a") == {}
    assert why_not(NOT_CHECKED, "power", "e", "a") == {}
    kw = why_not(FAIL, "property", "e", "a", "b#c")
    assert Claim(**BASE, verdict=FAIL, source="Fig. 1", **kw).evidence == ("a", "b#c")


def test_to_dict_writes_the_new_fields():
    d = Claim(**BASE, verdict=FAIL, source="Fig. 2", cause="data", explanation="e.", evidence=("x",)).to_dict()
    assert {k: d[k] for k in ("kind", "source", "cause", "explanation", "evidence", "basis")} == {
        "kind": "paper", "source": "Fig. 2", "cause": "data", "explanation": "e.", "evidence": ["x"],
        "basis": None}


def test_check_evidence_names_claim_and_path(tmp_path):
    repo, out = tmp_path / "repo", tmp_path / "out"
    (repo / "docs").mkdir(parents=True)
    (repo / "docs" / "methods.md").write_text("# Methods\n\n## rho\n")
    (repo / "reports" / "runs" / "alg" / "r1").mkdir(parents=True)  # reports/runs/<algorithm>/<name>
    (repo / "reports" / "tables").mkdir(parents=True)
    (repo / "reports" / "tables" / "stale.md").write_text("an earlier report's table")
    (out / "tables").mkdir(parents=True)
    (out / "tables" / "t.md").write_text('<a id="a9a"></a>x')
    ok = Claim(**BASE, verdict=FAIL, source="Fig. 1", cause="data", explanation="e.",
               evidence=("docs/methods.md#rho", "reports/tables/t.md#a9a", "reports/runs/alg/r1"))
    check_evidence([ok], repo=repo, out=out)
    elsewhere = tmp_path / "scratch_runs"  # the stage's --runs: run directories are looked up there
    (elsewhere / "alg" / "r9").mkdir(parents=True)
    scratch = Claim(**{**BASE, "id": "x-9"}, verdict=FAIL, source="Fig. 1", cause="data", explanation="e.",
                    evidence=("reports/runs/alg/r9",))
    check_evidence([scratch], repo=repo, out=out, runs=elsewhere)
    with pytest.raises(ReportInputError, match="claim x-9: evidence 'reports/runs/alg/r9' does not exist in the "
                                                "runs"):
        check_evidence([scratch], repo=repo, out=out)
    for i, (path, where) in enumerate([("reports/tables/missing.md#a", "this report's output"),
                                       ("reports/tables/stale.md", "this report's output"),
                                       ("reports/runs/alg/r2", "the runs read"),
                                       ("reports/runs/r1", "the runs read"),  # the flat layout: not a run
                                       ("docs/missing.md#x", "the repository")]):
        bad = Claim(**{**BASE, "id": f"x-{i + 2}"}, verdict=FAIL, source="Fig. 1", cause="data",
                    explanation="e.", evidence=(path,))
        with pytest.raises(ReportInputError, match=f"claim x-{i + 2}: evidence '{path.split('#')[0]}' does not "
                                                   f"exist in {where}"):
            check_evidence([ok, bad], repo=repo, out=out)


def test_check_evidence_checks_the_anchor(tmp_path):
    """An evidence path#anchor must name a heading (GitHub's anchor) or an <a id> of that Markdown file."""
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "methods.md").write_text("# Methods\n\n## What each experiment does\n\n- FDML.\n")
    (tmp_path / "docs" / "notes.txt").write_text("x")
    ok = Claim(**BASE, verdict=FAIL, source="Fig. 1", cause="data", explanation="e.",
               evidence=("docs/methods.md#what-each-experiment-does",))
    check_evidence([ok], repo=tmp_path, out=tmp_path / "out")
    for path in ("docs/methods.md#fdml", "docs/methods.md#What-each-experiment-does", "docs/notes.txt#x"):
        bad = Claim(**BASE, verdict=FAIL, source="Fig. 1", cause="data", explanation="e.", evidence=(path,))
        with pytest.raises(ReportInputError, match=f"claim x-1: evidence '{path}': .* no heading"):
            check_evidence([bad], repo=tmp_path, out=tmp_path / "out")
