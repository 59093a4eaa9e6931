import math

import numpy as np
import pytest

from ppml.privacy import svt, zcdp


def test_budget_split_follows_lyu_su_li():
    eps1, eps2 = svt.split_budget(1.0, 15)
    assert eps1 + eps2 == pytest.approx(1.0)
    assert eps2 / eps1 == pytest.approx(30 ** (2 / 3))
    with pytest.raises(ValueError, match="SVT epsilon must be > 0"):
        svt.split_budget(0.0, 15)


def test_noise_scales_are_the_papers_for_the_clipped_loss():
    # IPP-ADMM: Delta = 2 C_loss on the summed clipped loss -> Lap(2 c C / eps1) and Lap(4 c C / eps2)
    c, C, eps1, eps2 = 15, 2.0, 0.1, 0.9
    assert svt.threshold_scale(c=c, eps1=eps1, sensitivity=2 * C) == pytest.approx(2 * c * C / eps1)
    assert svt.query_scale(c=c, eps2=eps2, sensitivity=2 * C) == pytest.approx(4 * c * C / eps2)


def make(threshold, *, c=3, seed=0, noise=True):
    return svt.SparseVector(threshold=threshold, c=c, eps1=0.5, eps2=0.5, sensitivity=1.0,
                            rng=np.random.default_rng(seed), party="agent1", noise=noise)


def test_huge_threshold_never_answers_yes():
    mech = make(1e12)
    assert not any(mech.above(10.0) for _ in range(50))
    assert mech.count == 0 and not mech.halted and mech.queries == 50


def test_minus_infinity_answers_yes_until_c_then_halts():
    mech = make(-math.inf, c=3)
    assert [mech.above(-1e9) for _ in range(3)] == [True, True, True]
    assert mech.halted and mech.count == 3
    with pytest.raises(RuntimeError, match="halted after 3 positive answers"):
        mech.above(0.0)


def test_without_noise_it_is_an_exact_threshold_test():
    mech = make(0.5, c=10, noise=False)
    assert [mech.above(v) for v in (0.4, 0.5, 0.6, -1.0)] == [False, True, True, False]


def test_threshold_noise_is_redrawn_after_each_yes():
    # with a huge query signal every answer is yes; the threshold noise is redrawn each time
    mech = make(0.0, c=5, seed=3)
    thresholds = []
    for _ in range(5):
        thresholds.append(mech._noisy_threshold)
        assert mech.above(1e9)
    assert len(set(thresholds)) == 5


def test_answers_follow_the_laplace_noise_distribution():
    # P(q + Lap(b2) >= T + Lap(b1)) at q = T is 1/2 by symmetry; far above T it tends to 1
    at = [make(0.0, c=1, seed=s).above(0.0) for s in range(4000)]
    assert np.mean(at) == pytest.approx(0.5, abs=0.03)
    far = [make(0.0, c=1, seed=s).above(200.0) for s in range(500)]
    assert np.mean(far) > 0.97


def test_event_and_its_zcdp_cost():
    mech = make(0.0, c=4)
    event = mech.event
    assert (event.c, event.eps1, event.eps2, event.party) == (4, 0.5, 0.5, "agent1")
    assert zcdp.rho_svt(c=4, eps1=0.5, eps2=0.5) == pytest.approx(4 * (1.0 / 4) ** 2 / 2)
