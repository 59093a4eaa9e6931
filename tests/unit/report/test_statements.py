"""One ledger row per statement: parts, the rule over them, and the ledger comparison across the change."""

import json
import subprocess
from pathlib import Path

import pytest

from ppml.report import compare
from ppml.report.base import FAIL, NOT_CHECKED, NOT_SHOWN, PASS, RULE, Claim, Part, combine
from ppml.report.claims import counts
from ppml.report.statements import Statement, group

REPO = Path(__file__).resolve().parents[3]


def _claim(cid, verdict, **kw):
    why = {"cause": "power", "explanation": f"{cid} is inside its margin", "evidence": (f"reports/runs/p/{cid}",)}
    return Claim(cid, "p", f"statement of {cid}", "pub", f"ours of {cid}", verdict, source=f"Fig. {cid}",
                 **(why if verdict in (FAIL, NOT_SHOWN) else {}), **kw)


@pytest.mark.parametrize("verdicts, expected", [
    ([PASS, PASS], PASS), ([PASS, FAIL], FAIL), ([PASS, NOT_SHOWN], NOT_SHOWN), ([NOT_SHOWN, FAIL], FAIL),
    ([PASS, NOT_CHECKED], PASS), ([NOT_CHECKED, NOT_CHECKED], NOT_CHECKED), ([NOT_SHOWN, NOT_CHECKED], NOT_SHOWN),
])
def test_the_rule_is_the_conjunction_of_the_checked_parts(verdicts, expected):
    assert combine(verdicts) == expected


def test_a_statement_replaces_its_parts_at_the_first_ones_place():
    claims = [_claim("x", PASS), _claim("a1", PASS), _claim("y", FAIL), _claim("a2", NOT_SHOWN),
              _claim("a3", FAIL), _claim("diag", PASS, kind="diagnostic")]
    spec = Statement("s", "the statement", (("a1", "on a9a"), ("a2", "on Credit 1"), ("a3", "literal"),
                                            ("absent", "not configured")),
                     shown=("a3",), why_shown="the literal reading is not the paper's model")
    out = group(claims, [spec])
    assert [c.id for c in out] == ["x", "s", "y", "diag"]
    row = out[1]
    # a3's FAIL is shown but does not count: the counted parts are PASS and NOT SHOWN
    assert row.verdict == NOT_SHOWN and row.cause == "power"
    assert [(p.id, p.name, p.counted) for p in row.parts] == [("a1", "on a9a", True), ("a2", "on Credit 1", True),
                                                              ("a3", "literal", False)]
    assert row.explanation == "on Credit 1: a2 is inside its margin."
    assert row.evidence == ("reports/runs/p/a2",)
    assert row.rule.startswith(RULE) and "shown, not counted: literal (the literal reading" in row.rule
    assert row.ours == "on a9a: PASS · on Credit 1: NOT SHOWN · literal: FAIL (not counted)"
    assert row.source == "Fig. a1; Fig. a2; Fig. a3" and row.to_dict()["parts"][2]["verdict"] == FAIL
    c = counts([e.to_dict() for e in out])
    assert (c["paper"]["claims"], c["parts"]["claims"], c["diagnostics"]["claims"]) == (3, 5, 1)


def test_a_statement_none_of_whose_parts_ran_has_no_row():
    claims = [_claim("x", PASS)]
    assert group(claims, [Statement("s", "t", (("a", "a"),))]) == claims


@pytest.mark.parametrize("claims, specs, message", [
    ([_claim("a", PASS)], [Statement("s", "t", (("a", "x"),)), Statement("u", "t", (("a", "y"),))],
     "part of both s and u"),
    ([_claim("a", PASS, kind="diagnostic")], [Statement("s", "t", (("a", "x"),))], "is a diagnostic"),
    ([_claim("s", PASS), _claim("a", PASS)], [Statement("s", "t", (("a", "x"),))], "already has this id"),
])
def test_bad_statements_are_refused(claims, specs, message):
    with pytest.raises(ValueError, match=message):
        group(claims, specs)


def test_a_shown_part_needs_a_reason_and_a_row_its_parts_verdict():
    with pytest.raises(ValueError, match="why_shown"):
        Statement("s", "t", (("a", "x"),), shown=("a",))
    part = Part("a", "x", "s", "p", "o", FAIL)
    with pytest.raises(ValueError, match="not what its counted parts give"):
        Claim("s", "p", "t", "p", "o", PASS, source="Fig. 1", parts=(part,), rule=RULE)


def _commit(repo, claims, message):
    (repo / "reports").mkdir(exist_ok=True)
    (repo / "reports" / "claims.json").write_text(json.dumps(claims))
    subprocess.run(["git", "-C", str(repo), "add", "-A"], check=True)
    subprocess.run(["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", message],
                   check=True)


def test_compare_matches_parts_across_the_change_to_statements(tmp_path, capsys):
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    before = [_claim("a1", PASS).to_dict(), _claim("a2", PASS).to_dict()]
    _commit(tmp_path, before, "rows")
    after = group([_claim("a1", PASS), _claim("a2", NOT_SHOWN)], [Statement("s", "t", (("a1", "x"), ("a2", "y")))])
    _commit(tmp_path, [c.to_dict() for c in after], "statements")
    assert compare.main(["HEAD~1", "HEAD", "--repo", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "Parts of the paper statements, matched by id: 1 verdict changes, 0 added, 0 removed (2 → 2 parts)." in out
    assert "| a2 | PASS | NOT SHOWN |" in out


def test_the_committed_ledger_has_no_second_reading_as_a_row_of_its_own():
    """Readings and settings (Algorithm 1 as printed, ρ = 1, eq. (16) noise, λ = 0) are parts of their
    statement, not paper rows."""
    ledger = json.loads((REPO / "reports" / "claims.json").read_text())
    rows = [c["id"] for c in ledger if c["kind"] == "paper"]
    assert not [i for i in rows if any(k in i for k in ("own_stored", "-rho1", "-eq16-", "-lam0-"))]
    parts = [p["id"] for c in ledger for p in c.get("parts") or []]
    assert len(parts) == len(set(parts)) and not set(parts) & set(c["id"] for c in ledger)
