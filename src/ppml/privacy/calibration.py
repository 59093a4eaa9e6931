"""The largest budget whose spending stays within a target: the search behind ``calibration: tight``.

A tight calibration asks the accountant that certifies a run (``ppml.privacy.accountants.tight_epsilon``)
rather than a closed-form conversion: it looks for the largest nominal epsilon whose planned mechanisms spend
at most the target. :func:`largest_within` is that search for any spending that grows with its argument.
"""

from __future__ import annotations

import math
from typing import Callable

#: The search stops when the spending is within this fraction below the target.
RTOL = 1e-4
#: At most this many evaluations of the spending (each is an accountant's composition).
MAX_EVALUATIONS = 80


def largest_within(spent: Callable[[float], float], target: float, *, rtol: float = RTOL) -> float:
    """The largest x > 0 (to within `rtol` of the target's spending) with ``spent(x) <= target``.

    `spent` must not decrease in x. The search starts at x = target (the exact conversion's nominal value,
    which the tight accountant rarely exceeds), halves until the spending is within the target, doubles
    until it is not, then bisects geometrically until ``spent(x) >= target (1 - rtol)``. The returned x always
    satisfies ``spent(x) <= target``.

    Raises
    ------
    ValueError
        When the target is not a positive number, or no x within :data:`MAX_EVALUATIONS` evaluations spends
        at most the target (the mechanisms cost more than it even at a vanishing budget).
    """
    if not (math.isfinite(target) and target > 0):
        raise ValueError(f"the target epsilon must be a positive number, got {target!r}")
    calls = 0

    def within(x: float) -> tuple[bool, float]:
        nonlocal calls
        calls += 1
        if calls > MAX_EVALUATIONS:
            raise ValueError(f"no budget found within {MAX_EVALUATIONS} evaluations for the target {target:g}")
        value = spent(x)
        return value <= target, value

    lo = target
    ok, value = within(lo)
    while not ok:
        lo /= 2.0
        ok, value = within(lo)
    if value >= target * (1.0 - rtol):
        return lo
    hi = 2.0 * lo
    while True:
        ok, high = within(hi)
        if not ok:
            break
        lo, value = hi, high
        if value >= target * (1.0 - rtol):
            return lo
        hi *= 2.0
    while hi / lo - 1.0 > 1e-9:
        mid = math.sqrt(lo * hi)
        ok, spent_mid = within(mid)
        if ok:
            lo, value = mid, spent_mid
            if value >= target * (1.0 - rtol):
                break
        else:
            hi = mid
    return lo
