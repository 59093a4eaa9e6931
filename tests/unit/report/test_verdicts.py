import math

import pytest

from ppml.report.base import FAIL, NOT_CHECKED, NOT_SHOWN, PASS, Claim, compare, verdict_of
from ppml.report.claims import claims_markdown, summary_metrics


@pytest.mark.parametrize("difference, margin, expected", [
    (0.01, 0.005, PASS), (-0.01, 0.005, FAIL), (0.004, 0.005, NOT_SHOWN), (-0.004, 0.005, NOT_SHOWN),
    (0.005, 0.005, NOT_SHOWN), (6e-5, 5e-4, NOT_SHOWN), (math.nan, 0.1, NOT_CHECKED), (1e-9, 0.0, PASS),
])
def test_compare_needs_the_margin(difference, margin, expected):
    assert compare(difference, margin) == expected


def test_compare_refuses_a_negative_margin():
    with pytest.raises(ValueError, match="margin must be >= 0"):
        compare(1.0, -0.1)


def test_claim_verdicts_in_json_and_markdown():
    claims = [Claim("a", "p", "s", "pub", "ours", compare(1e-4, 1e-3), margin="1e-3: seed std", source="Fig. 1",
                    cause="power", explanation="Too few seeds.", evidence=("reports/tables/t.md#x",)),
              Claim("b", "p", "s |S|", "pub", "ours", verdict_of(True), source="Table 1"),
              Claim("c", "p", "s", "pub", "ours", verdict_of(None), source="Sec. 5"),
              Claim("d", "q", "our check", "—", "ours", FAIL, kind="diagnostic")]
    assert [c.to_dict()["verdict"] for c in claims] == [NOT_SHOWN, PASS, NOT_CHECKED, FAIL]
    assert [c.passed for c in claims] == [None, True, None, False]
    assert summary_metrics(claims) == {
        "paper": {"claims": 3, "pass": 1, "fail": 0, "not_shown": 1, "not_checked": 1},
        "parts": {"claims": 3, "pass": 1, "fail": 0, "not_shown": 1, "not_checked": 1},
        "diagnostics": {"claims": 1, "pass": 0, "fail": 1, "not_shown": 0, "not_checked": 0}}
    md = claims_markdown(claims)
    assert ("**3 paper statements: 1 PASS, 0 FAIL, 1 NOT SHOWN, 1 NOT CHECKED (their 3 parts: 1 PASS, 0 FAIL, 1 "
            "NOT SHOWN, 1 NOT CHECKED); 1 diagnostics**") in md
    # the causes of non-PASS paper claims, in one table, with links from reports/ (where claims.md lives)
    why = md.split("## Why paper claims do not pass")[1].split("\n## ")[0]
    assert "| a | NOT SHOWN | power | Too few seeds. | [reports/tables/t.md#x](tables/t.md#x) |" in why
    assert "| d |" not in why  # a diagnostic is never among them
    assert "| a | Fig. 1 | s | pub | ours | 1e-3: seed std | **NOT SHOWN** |" in md
    assert "| b | Table 1 | s \\|S\\| | pub | ours | — | **PASS** |" in md  # a '|' in a cell is escaped
    assert md.index("## q") < md.index("### Diagnostics (our own checks)") < md.index("| d | our check |")
    with pytest.raises(ValueError, match="verdict must be one of"):
        Claim("e", "p", "s", "pub", "ours", "MAYBE", source="Fig. 1")
