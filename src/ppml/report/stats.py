"""The margins of the claims ledger: each function returns an estimate, its half-width and a text naming the test.

Changes to this interface since it was first shared: :func:`unpaired_summary` (Welch from means,
SDs and counts); ``matches`` (a difference inside its sampling error passed) replaced by :func:`equivalent` and
:func:`noninferior`, and :func:`against_published` takes ``se_published`` always (no default: the published side's
error is what the paper reports, never assumed equal to ours); ``base.check_evidence`` takes ``repo``, ``out`` and ``runs`` by keyword (the stage calls it);
``Claim.basis`` also accepts "simulated" and "cost model", which can never be PASS.

Interface shared by the report modules (changes to it are announced here, at the top):

- :func:`seed_mean` — a mean over seeds, Student t with n - 1 degrees of freedom;
- :func:`paired` — t on the per-seed (or per-row) differences, wherever the two arms share seeds or rows;
- :func:`unpaired` — Welch t, only where the arms share nothing; :func:`unpaired_summary` the same from means,
  SDs and counts (an upper bound for arms on the same rows whose per-row values were not recorded);
- :func:`against_published` — our number minus a published one, within the sampling error of the difference;
- :func:`auc_se`, :func:`proportion_se` — the sampling error of one AUC (Hanley-McNeil) or one error rate
  (binomial) on the test rows, for a single run; :func:`delong` — two AUCs on the same rows;
- :func:`verdict` — PASS / FAIL / NOT SHOWN of a directional claim; :func:`equivalent` — of a two-sided
  "matches" / "close to" (TOST: the whole interval inside a tolerance stated on the row);
  :func:`noninferior` — of a one-sided "closely approximates" / "no worse than" (the interval's worse end
  within a margin).

The claim fields themselves (``kind``, ``source``, ``cause``, ``explanation``, ``evidence``, ``basis``) are in
:class:`ppml.report.base.Claim`; ``base.why_not(verdict, cause, explanation, *evidence)`` gives the last three
only for a FAIL / NOT SHOWN verdict. Evidence paths are repository paths: ``reports/tables/<t>.md#anchor`` and
``reports/plots/...`` must be written by this report, anything else (``reports/runs/<algorithm>/<name>``,
``docs/...``, ``params.yaml``) must exist in the repository; the report stage fails naming the claim otherwise.

Every function returns an :class:`Estimate` ``(value, half_width, text)``; ``text`` goes into ``Claim.margin``.
A half-width is two-sided at ``level`` (0.95 unless stated). With fewer than 2 seeds there is no seed variance:
the half-width is infinite, the text says so, and :func:`verdict` answers NOT SHOWN, never PASS.
"""

from __future__ import annotations

import math
from typing import NamedTuple, Sequence

import numpy as np
from scipy import special as _sp  # the t and normal quantiles scipy.stats itself calls, without its import

from ppml.report.base import FAIL, NOT_CHECKED, NOT_SHOWN, PASS

#: the directions a comparison can claim: the difference is positive, or negative
GREATER, LESS = "greater", "less"


class Estimate(NamedTuple):
    """A difference (or mean), the half-width of its two-sided interval at the chosen level, and the test."""

    value: float
    half_width: float
    text: str


def _values(values: Sequence[float], what: str) -> np.ndarray:
    arr = np.asarray(values, dtype=float).ravel()
    if arr.size == 0:
        raise ValueError(f"{what}: no values")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{what}: values must be finite, got {arr.tolist()}")
    return arr


def _check_level(level: float) -> None:
    if not 0.0 < level < 1.0:
        raise ValueError(f"level must be in (0, 1), got {level}")


def _t(level: float, df: float) -> float:
    """The two-sided Student t quantile at `level` with `df` degrees of freedom (normal for df = inf)."""
    q = 1.0 - (1.0 - level) / 2.0
    return float(_sp.ndtri(q)) if math.isinf(df) else float(_sp.stdtrit(df, q))


def _ranks(values: np.ndarray) -> np.ndarray:
    """Ranks from 1, ties sharing the mean of their places (``scipy.stats.rankdata``'s default)."""
    order = np.argsort(values, kind="mergesort")
    ordered = values[order]
    first = np.concatenate(([True], ordered[1:] != ordered[:-1]))  # where each group of equal values starts
    starts = np.flatnonzero(first)
    ends = np.append(starts[1:], values.size)  # each group holds places starts+1 .. ends
    group = np.cumsum(first) - 1
    ranks = np.empty(values.size)
    ranks[order] = ((starts + 1 + ends) / 2.0)[group]
    return ranks


def _pct(level: float) -> str:
    return f"{100 * level:g} %"


def seed_mean(values: Sequence[float], level: float = 0.95) -> Estimate:
    """The mean over seeds and its Student t half-width with n - 1 degrees of freedom.

    One seed has no seed variance: the half-width is infinite and the text says so.
    """
    _check_level(level)
    arr = _values(values, "seed_mean")
    return _t_mean(arr, level, test="t", of="the mean of {n} seeds",
                   alone="1 seed: no seed variance, so no test against it")


def paired(a: Sequence[float], b: Sequence[float], level: float = 0.95) -> Estimate:
    """Mean of a - b over shared seeds (or rows), with the t half-width of the per-pair differences.

    `a` and `b` are aligned: element i of both comes from the same seed (or test row). Use it wherever the
    arms share seeds or rows; the pairs' common variation cancels, which the unpaired test would count twice.
    """
    _check_level(level)
    x, y = _values(a, "paired: a"), _values(b, "paired: b")
    if x.size != y.size:
        raise ValueError(f"paired: a has {x.size} values and b {y.size}; a paired test needs aligned pairs")
    return _t_mean(x - y, level, test="paired t", of="{n} per-pair differences",
                   alone="1 pair: no variance of the differences, so no paired test")


def _t_mean(values: np.ndarray, level: float, *, test: str, of: str, alone: str) -> Estimate:
    """The mean of `values` with its Student t half-width (n - 1 degrees of freedom); `of` names the n values
    (``{n}`` is filled in), `alone` is the text when there is only one."""
    n = values.size
    mean = float(values.mean())
    if n < 2:
        return Estimate(mean, math.inf, alone)
    se = float(values.std(ddof=1)) / math.sqrt(n)
    t = _t(level, n - 1)
    return Estimate(mean, t * se, f"±{t * se:.3g} = {test}({n - 1}) {t:.3g} × SE {se:.3g} of "
                                  f"{of.format(n=n)} ({_pct(level)})")


def unpaired(a: Sequence[float], b: Sequence[float], level: float = 0.95) -> Estimate:
    """Mean of a minus mean of b, with Welch's t half-width (Welch-Satterthwaite degrees of freedom).

    Only for arms that share nothing (no seeds, no rows); where they share either, use :func:`paired`.
    """
    _check_level(level)
    x, y = _values(a, "unpaired: a"), _values(b, "unpaired: b")
    diff = float(x.mean() - y.mean())
    if x.size < 2 or y.size < 2:
        return Estimate(diff, math.inf, f"{x.size} and {y.size} seeds: an arm with 1 seed has no seed variance, "
                                        "so no Welch test")
    va, vb = x.var(ddof=1) / x.size, y.var(ddof=1) / y.size
    se = math.sqrt(va + vb)
    if se == 0.0:
        df = math.inf
    else:
        df = (va + vb) ** 2 / (va ** 2 / (x.size - 1) + vb ** 2 / (y.size - 1))
    t = _t(level, df)
    return Estimate(diff, t * se, f"±{t * se:.3g} = Welch t({df:.3g}) {t:.3g} × SE {se:.3g} of the difference of "
                                  f"two means ({x.size} and {y.size} seeds, unpaired, {_pct(level)})")


def unpaired_summary(mean_a: float, sd_a: float, n_a: int, mean_b: float, sd_b: float, n_b: int,
                     level: float = 0.95) -> Estimate:
    """mean_a - mean_b from two means of per-row (or per-seed) values given by their SDs and counts: Welch's t.

    For two arms scored on the same rows whose per-row values were not recorded, this bounds the paired
    half-width from above when their per-row values correlate positively (the text says so); pair when you can.
    """
    _check_level(level)
    for name, value in (("sd_a", sd_a), ("sd_b", sd_b)):
        if not (math.isfinite(value) and value >= 0):
            raise ValueError(f"unpaired_summary: {name} must be finite and >= 0, got {value}")
    if n_a < 2 or n_b < 2:
        return Estimate(mean_a - mean_b, math.inf, f"{n_a} and {n_b} values: no variance, so no test")
    va, vb = sd_a ** 2 / n_a, sd_b ** 2 / n_b
    se = math.sqrt(va + vb)
    df = math.inf if se == 0.0 else (va + vb) ** 2 / (va ** 2 / (n_a - 1) + vb ** 2 / (n_b - 1))
    t = _t(level, df)
    return Estimate(mean_a - mean_b, t * se, f"±{t * se:.3g} = Welch t × SE {se:.3g} of the difference of two means "
                                             f"over {n_a} and {n_b} values (unpaired, {_pct(level)})")


def against_published(ours_values: Sequence[float], published: float, *, se_published: float,
                      se_metric: float | None = None, level: float = 0.95) -> Estimate:
    """Our mean minus a published number, with the half-width of the sampling error of that difference.

    The variance of the difference adds: the seed variance of our mean (when there are >= 2 seeds), the
    sampling error `se_metric` of our metric on the test rows (shared by all seeds, so it does not shrink
    with them: :func:`auc_se` for an AUC, :func:`proportion_se` for an error rate), and the published
    number's own `se_published`, from what the paper reports (its test rows or its spread over runs; 0 when
    it reports neither, or for an exact number such as a coin's AUC 0.5), never assumed equal to ours. The
    degrees of freedom are Welch-Satterthwaite's, the test-row terms counting as large-sample. With one run and no `se_metric`
    nothing can be resolved: the half-width is infinite.
    """
    _check_level(level)
    arr = _values(ours_values, "against_published")
    if se_published is None:
        raise ValueError("against_published: se_published is required: the published side's standard error from "
                         "what the paper reports, 0 when it reports none")
    for name, value in (("published", published), ("se_published", se_published), ("se_metric", se_metric)):
        if value is not None and not math.isfinite(value):
            raise ValueError(f"against_published: {name} must be finite, got {value}")
    for name, value in (("se_published", se_published), ("se_metric", se_metric)):
        if value is not None and value < 0:
            raise ValueError(f"against_published: {name} must be >= 0, got {value}")
    n = arr.size
    diff = float(arr.mean() - published)
    seed_var = float(arr.var(ddof=1)) / n if n >= 2 else 0.0
    metric_var = (se_metric or 0.0) ** 2
    pub_var = se_published ** 2
    if n < 2 and se_metric is None and not pub_var:
        return Estimate(diff, math.inf, "1 run and no sampling error of the metric: the difference cannot be "
                                        "resolved")
    var = seed_var + metric_var + pub_var
    se = math.sqrt(var)
    df = math.inf if seed_var == 0.0 else var ** 2 / (seed_var ** 2 / (n - 1))
    t = _t(level, df)
    parts = []
    if n >= 2:
        parts.append(f"seed SE {math.sqrt(seed_var):.3g} ({n} seeds)")
    if se_metric is not None:
        parts.append(f"test-row SE {se_metric:.3g}")
    parts.append(f"published SE {math.sqrt(pub_var):.3g}" if pub_var else "no error on the published side")
    return Estimate(diff, t * se, f"±{t * se:.3g} = {t:.3g} × SE {se:.3g} of the difference from the published "
                                  f"number ({', '.join(parts)}; {_pct(level)}): a smaller difference cannot be "
                                  "resolved")


def auc_se(auc: float, n_pos: int, n_neg: int) -> float:
    """Hanley & McNeil (1982) standard error of one AUC on `n_pos` positive and `n_neg` negative test rows."""
    if not 0.0 <= auc <= 1.0:
        raise ValueError(f"auc_se: auc must be in [0, 1], got {auc}")
    if n_pos < 1 or n_neg < 1:
        raise ValueError(f"auc_se: needs both classes, got {n_pos} positive and {n_neg} negative rows")
    q1, q2 = auc / (2.0 - auc), 2.0 * auc * auc / (1.0 + auc)
    var = (auc * (1 - auc) + (n_pos - 1) * (q1 - auc * auc) + (n_neg - 1) * (q2 - auc * auc)) / (n_pos * n_neg)
    return math.sqrt(max(var, 0.0))


def proportion_se(p: float, n: int) -> float:
    """Binomial standard error of an error rate `p` measured on `n` test rows."""
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"proportion_se: p must be in [0, 1], got {p}")
    if n < 1:
        raise ValueError(f"proportion_se: n must be >= 1, got {n}")
    return math.sqrt(p * (1.0 - p) / n)


def delong(y: Sequence[int], score_a: Sequence[float], score_b: Sequence[float], level: float = 0.95) -> Estimate:
    """AUC(a) - AUC(b) on the same test rows, with DeLong's (1988) paired standard error (normal half-width)."""
    _check_level(level)
    y = np.asarray(y).ravel()
    a, b = _values(score_a, "delong: score_a"), _values(score_b, "delong: score_b")
    if not (y.size == a.size == b.size):
        raise ValueError(f"delong: labels and scores must align, got {y.size}, {a.size}, {b.size} rows")
    pos, neg = y == 1, y == 0
    if not np.all(pos | neg):
        raise ValueError("delong: labels must be 0 or 1")
    m, n = int(pos.sum()), int(neg.sum())
    if m < 2 or n < 2:
        raise ValueError(f"delong: needs >= 2 rows of each class, got {m} positive and {n} negative")
    aucs, v10, v01 = [], [], []
    for s in (a, b):
        # placement values: for each positive, the share of negatives it outranks (ties count half), and back
        r_all = _ranks(s)
        r_pos, r_neg = _ranks(s[pos]), _ranks(s[neg])
        p10 = (r_all[pos] - r_pos) / n
        p01 = 1.0 - (r_all[neg] - r_neg) / m
        aucs.append(float(p10.mean()))
        v10.append(p10)
        v01.append(p01)
    s10, s01 = np.cov(np.vstack(v10)), np.cov(np.vstack(v01))
    var = (s10[0, 0] + s10[1, 1] - 2 * s10[0, 1]) / m + (s01[0, 0] + s01[1, 1] - 2 * s01[0, 1]) / n
    se = math.sqrt(max(float(var), 0.0))
    z = _t(level, math.inf)
    return Estimate(aucs[0] - aucs[1], z * se, f"±{z * se:.3g} = {z:.3g} × DeLong SE {se:.3g} of the difference "
                                               f"of two AUCs on the same {m + n} rows ({_pct(level)})")


def verdict(difference: float, half_width: float, direction: str) -> str:
    """PASS when `difference` lies beyond `half_width` in the claimed `direction` (:data:`GREATER`: positive,
    :data:`LESS`: negative), FAIL when beyond it the other way, NOT SHOWN inside. An infinite or nan half-width
    (fewer than 2 seeds: no variance to test against) is NOT SHOWN; a nan difference is NOT CHECKED."""
    if direction not in (GREATER, LESS):
        raise ValueError(f"direction must be {GREATER!r} or {LESS!r}, got {direction!r}")
    undecided = _undecided(difference, half_width)
    if undecided:
        return undecided
    d = difference if direction == GREATER else -difference
    return PASS if d > half_width else FAIL if d < -half_width else NOT_SHOWN


def equivalent(difference: float, half_width: float, tolerance: float) -> str:
    """The verdict of "matches" / "is close to" / "approximates" (two-sided): two one-sided tests, read off the
    interval. PASS when the whole interval ``difference ± half_width`` lies inside ``±tolerance`` (both one-sided
    tests reject at half the interval's level: TOST at 2.5 % per side for a 95 % interval), FAIL when it lies
    wholly outside (the difference is shown to exceed the tolerance), NOT SHOWN when it straddles a bound. A
    difference inside the tolerance is never enough: the interval must be. An infinite or nan half-width is
    NOT SHOWN; a nan difference NOT CHECKED."""
    if not tolerance > 0:
        raise ValueError(f"tolerance must be > 0 (an equivalence test needs a margin), got {tolerance}")
    undecided = _undecided(difference, half_width)
    if undecided:
        return undecided
    if abs(difference) + half_width <= tolerance:
        return PASS
    return FAIL if abs(difference) - half_width > tolerance else NOT_SHOWN


def noninferior(difference: float, half_width: float, margin: float, worse: str) -> str:
    """The verdict of a one-sided "closely approximates" / "is no worse than": the claimed arm minus the
    reference, where `worse` is the direction in which the claimed arm would be worse (:data:`GREATER` for a
    loss or an error, :data:`LESS` for an AUC or an accuracy). PASS when the interval's worse end stays within
    `margin` of no difference (non-inferiority at half the interval's level), FAIL when even its better end is
    beyond the margin (shown worse by more than it), NOT SHOWN otherwise. Being better by any amount passes."""
    if worse not in (GREATER, LESS):
        raise ValueError(f"worse must be {GREATER!r} or {LESS!r}, got {worse!r}")
    if not margin > 0:
        raise ValueError(f"margin must be > 0 (a non-inferiority test needs a margin), got {margin}")
    undecided = _undecided(difference, half_width)
    if undecided:
        return undecided
    d = difference if worse == GREATER else -difference  # positive: the claimed arm is worse
    if d + half_width <= margin:
        return PASS
    return FAIL if d - half_width > margin else NOT_SHOWN


def _undecided(difference: float, half_width: float) -> str | None:
    """NOT CHECKED for a nan difference, NOT SHOWN for a half-width that cannot decide (nan or infinite),
    else None; a negative half-width is an error."""
    if half_width < 0:
        raise ValueError(f"half_width must be >= 0, got {half_width}")
    if math.isnan(difference):
        return NOT_CHECKED
    if math.isnan(half_width) or math.isinf(half_width):
        return NOT_SHOWN
    return None
