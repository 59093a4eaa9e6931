import math

import pytest

from ppml.privacy.calibration import RTOL, largest_within


def test_largest_within_finds_the_inverse_of_a_smooth_spending():
    x = largest_within(lambda v: v * v / 4.0, 3.0)  # spent = x^2 / 4 <= 3 up to x = 2 sqrt(3)
    assert x * x / 4.0 <= 3.0
    assert x * x / 4.0 >= 3.0 * (1 - RTOL)
    assert x == pytest.approx(2 * math.sqrt(3.0), rel=RTOL)


def test_largest_within_starts_below_when_the_target_itself_overspends():
    x = largest_within(lambda v: 10.0 * v, 0.5)  # the start (0.5) spends 5: halve down, then bisect
    assert 10.0 * x <= 0.5 and 10.0 * x >= 0.5 * (1 - RTOL)


def test_largest_within_never_returns_an_overspending_point_of_a_step_function():
    def spent(v: float) -> float:  # jumps over the target's tolerance band at 1.5: the search stays below it
        return v / 2.0 if v < 1.5 else 1.0

    x = largest_within(spent, 0.8)
    assert spent(x) <= 0.8
    assert 1.5 * (1 - 1e-6) < x < 1.5


def test_largest_within_refuses_what_no_budget_meets_and_a_bad_target():
    with pytest.raises(ValueError, match="no budget found"):
        largest_within(lambda v: math.inf, 1.0)
    with pytest.raises(ValueError, match="positive number"):
        largest_within(lambda v: v, 0.0)
