"""The ledger's margins: Student t for few seeds, paired where arms share seeds, the sampling error of a
difference from a published number, DeLong against a brute-force reference."""

import math

import numpy as np
import pytest

from ppml.report.base import FAIL, NOT_CHECKED, NOT_SHOWN, PASS, compare
from ppml.report import stats


def test_three_seeds_that_pass_a_2se_z_rule_are_not_shown_under_t2():
    diffs = [0.5, 1.0, 1.5]  # mean 1.0, SE 0.289: 2 SE = 0.577 < 1.0, but t(2) x SE = 1.24 > 1.0
    se = np.std(diffs, ddof=1) / math.sqrt(3)
    assert compare(np.mean(diffs), 2 * se) == PASS  # the old rule
    est = stats.seed_mean(diffs)
    assert est.value == pytest.approx(1.0)
    assert est.half_width == pytest.approx(4.302653 * se, rel=1e-6)
    assert stats.verdict(est.value, est.half_width, stats.GREATER) == NOT_SHOWN
    assert "t(2)" in est.text and "3 seeds" in est.text


def test_one_seed_is_never_pass():
    est = stats.seed_mean([0.9])
    assert math.isinf(est.half_width) and "1 seed" in est.text
    assert stats.verdict(est.value, est.half_width, stats.GREATER) == NOT_SHOWN
    d = stats.paired([0.9], [0.1])
    assert stats.verdict(d.value, d.half_width, stats.GREATER) == NOT_SHOWN
    w = stats.unpaired([0.9], [0.1, 0.2])
    assert stats.verdict(w.value, w.half_width, stats.GREATER) == NOT_SHOWN


def test_paired_decides_where_unpaired_cannot_on_shared_seeds():
    # five seeds whose level varies far more than the effect; both arms share each seed's level
    level = np.array([0.0, 1.0, 2.0, 3.0, 4.0])
    a = level + 0.1 + np.array([0.01, -0.01, 0.0, 0.005, -0.005])
    b = level
    p, u = stats.paired(a, b), stats.unpaired(a, b)
    assert p.value == pytest.approx(0.1) and u.value == pytest.approx(0.1)
    assert p.half_width < 0.02 < 1.0 < u.half_width
    assert stats.verdict(p.value, p.half_width, stats.GREATER) == PASS
    assert stats.verdict(u.value, u.half_width, stats.GREATER) == NOT_SHOWN
    assert "paired t(4)" in p.text and "Welch" in u.text


def test_welch_matches_scipy():
    rng = np.random.default_rng(3)
    a, b = rng.normal(0.0, 1.0, 6), rng.normal(0.5, 3.0, 4)
    est = stats.unpaired(a, b)
    from scipy import stats as st

    res = st.ttest_ind(a, b, equal_var=False)
    ci = res.confidence_interval(0.95)
    assert est.half_width == pytest.approx((ci.high - ci.low) / 2, rel=1e-9)


def test_quantiles_and_ranks_equal_scipy_stats():
    """The margins use scipy.special's quantiles and a numpy rank (a faster import than scipy.stats): they must
    give scipy.stats's numbers exactly, ties included."""
    from scipy import stats as st

    for level in (0.9, 0.95, 0.99):
        q = 1.0 - (1.0 - level) / 2.0
        assert stats._t(level, math.inf) == float(st.norm.ppf(q))
        for df in (1, 2, 3.5, 10, 250):
            assert stats._t(level, df) == float(st.t.ppf(q, df))
    rng = np.random.default_rng(11)
    for n, distinct in ((1, 1), (2, 1), (7, 3), (500, 20), (500, 10**9)):
        values = rng.integers(0, distinct, n).astype(float)
        assert np.array_equal(stats._ranks(values), st.rankdata(values))


def test_verdict_directions_and_edges():
    assert stats.verdict(-0.3, 0.1, stats.LESS) == PASS
    assert stats.verdict(0.3, 0.1, stats.LESS) == FAIL
    assert stats.verdict(0.05, 0.1, stats.LESS) == NOT_SHOWN
    assert stats.verdict(math.nan, 0.1, stats.GREATER) == NOT_CHECKED
    with pytest.raises(ValueError, match="direction"):
        stats.verdict(0.1, 0.1, "up")
    with pytest.raises(ValueError, match="aligned pairs"):
        stats.paired([1, 2, 3], [1, 2])


def test_against_published_uses_only_the_errors_it_is_given():
    se = stats.auc_se(0.75, 1470, 4410)
    exact = stats.against_published([0.735], 0.75, se_published=0.0, se_metric=se)
    assert exact.half_width == pytest.approx(1.959964 * se, rel=1e-6)
    assert "no error on the published side" in exact.text and "cannot be resolved" in exact.text
    both = stats.against_published([0.735], 0.75, se_published=se, se_metric=se)
    assert both.half_width == pytest.approx(math.sqrt(2) * exact.half_width)
    nothing = stats.against_published([0.735], 0.75, se_published=0.0)
    assert math.isinf(nothing.half_width)
    with pytest.raises(ValueError, match="se_published is required"):
        stats.against_published([0.735], 0.75, se_published=None)


def test_equivalence_needs_the_whole_interval_inside_the_tolerance():
    assert stats.equivalent(0.004, 0.005, 0.01) == PASS
    assert stats.equivalent(-0.004, 0.007, 0.01) == NOT_SHOWN  # the difference is inside, the interval is not
    assert stats.equivalent(0.03, 0.01, 0.01) == FAIL
    assert stats.equivalent(0.0, math.inf, 0.01) == NOT_SHOWN
    assert stats.equivalent(math.nan, 0.1, 0.01) == NOT_CHECKED
    with pytest.raises(ValueError, match="needs a margin"):
        stats.equivalent(0.0, 0.1, 0.0)


def test_noninferiority_is_one_sided():
    # a loss (worse = greater): better by any amount passes, worse only within the margin
    assert stats.noninferior(-0.0040, 0.0041, 0.0044, stats.GREATER) == PASS
    assert stats.noninferior(0.0030, 0.0020, 0.0044, stats.GREATER) == NOT_SHOWN
    assert stats.noninferior(0.0100, 0.0020, 0.0044, stats.GREATER) == FAIL
    # an AUC (worse = less)
    assert stats.noninferior(-0.0050, 0.0030, 0.01, stats.LESS) == PASS
    assert stats.noninferior(-0.0200, 0.0030, 0.01, stats.LESS) == FAIL
    with pytest.raises(ValueError, match="worse"):
        stats.noninferior(0.0, 0.1, 0.01, "up")


def test_against_published_with_seeds_adds_seed_and_row_terms():
    est = stats.against_published([0.80, 0.82, 0.81], 0.80, se_published=0.0, se_metric=0.0)
    assert est.half_width == pytest.approx(stats.seed_mean([0.80, 0.82, 0.81]).half_width)


def test_sampling_errors():
    assert stats.proportion_se(0.5, 100) == pytest.approx(0.05)
    # Hanley-McNeil at AUC 0.5 with equal classes of n: about sqrt((n + 1) / (12 n^2)) * ... check symmetry
    assert stats.auc_se(0.8, 100, 300) > stats.auc_se(0.8, 1000, 3000)
    with pytest.raises(ValueError, match="both classes"):
        stats.auc_se(0.8, 0, 10)


def _auc(y, s):
    pos, neg = s[y == 1][:, None], s[y == 0][None, :]  # every positive against every negative, ties half
    return float(np.mean((pos > neg) + 0.5 * (pos == neg)))


def test_delong_difference_and_its_se_against_a_bootstrap():
    rng = np.random.default_rng(7)
    y = rng.integers(0, 2, 300)
    common = rng.normal(0, 1, 300)
    a = y * 1.0 + common + rng.normal(0, 0.5, 300)
    b = y * 0.6 + common + rng.normal(0, 0.5, 300)
    est = stats.delong(y, a, b)
    assert est.value == pytest.approx(_auc(y, a) - _auc(y, b))
    boots = []
    for _ in range(300):
        i = rng.integers(0, 300, 300)
        boots.append(_auc(y[i], a[i]) - _auc(y[i], b[i]))
    assert est.half_width / 1.96 == pytest.approx(np.std(boots), rel=0.25)


def test_unpaired_summary_is_welch_from_the_summaries():
    rng = np.random.default_rng(11)
    a, b = rng.normal(0.3, 0.6, 400), rng.normal(0.35, 0.5, 300)
    direct = stats.unpaired(a, b)
    summary = stats.unpaired_summary(a.mean(), a.std(ddof=1), 400, b.mean(), b.std(ddof=1), 300)
    assert summary.value == pytest.approx(direct.value) and summary.half_width == pytest.approx(direct.half_width)
    assert math.isinf(stats.unpaired_summary(0.3, 0.1, 1, 0.2, 0.1, 5).half_width)
