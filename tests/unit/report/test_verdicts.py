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
    claims = [Claim("a", "p", "s", "pub", "ours", compare(1e-4, 1e-3), margin="1e-3: seed std"),
              Claim("b", "p", "s", "pub", "ours", verdict_of(True)),
              Claim("c", "p", "s", "pub", "ours", verdict_of(None))]
    assert [c.to_dict()["verdict"] for c in claims] == [NOT_SHOWN, PASS, NOT_CHECKED]
    assert [c.passed for c in claims] == [None, True, None]
    assert summary_metrics(claims) == {"claims": 3, "pass": 1, "fail": 0, "not_shown": 1, "not_checked": 1}
    md = claims_markdown(claims)
    assert "1 PASS, 0 FAIL, 1 NOT SHOWN, 1 NOT CHECKED" in md
    assert "| a | s | pub | ours | 1e-3: seed std | NOT SHOWN |" in md
    with pytest.raises(ValueError, match="verdict must be one of"):
        Claim("d", "p", "s", "pub", "ours", "MAYBE")
    assert FAIL == "FAIL"
