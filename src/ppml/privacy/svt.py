"""The sparse vector technique (SVT) with up to c positive answers, as IPP-ADMM uses it.

One agent asks, round after round, whether a quality value of its private data (the decrease of its clipped
local loss since its last broadcast) exceeds a public threshold alpha. SVT answers with noise and spends
budget only on positive answers; after c of them it halts. This is the "Sparse" algorithm of Dwork and
Roth [1]_ (Alg. 2): a fresh threshold noise after every positive answer, so that the run is c AboveThreshold
instances in sequence. With budgets eps1 (threshold) and eps2 (queries) and a quality of sensitivity Delta:

- threshold noise ``Lap(c Delta / eps1)``, query noise ``Lap(2 c Delta / eps2)``;
- each instance is pure ``(eps1 + eps2) / c``-DP, the whole run pure ``(eps1 + eps2)``-DP, and
  ``(eps1 + eps2)^2 / (2c)``-zCDP by composing the instances in zCDP (:func:`ppml.privacy.zcdp.rho_svt`).

With IPP-ADMM's clipped loss difference (Delta = 2 C_loss on the summed loss) these are the paper's
``Lap(2 c C_loss / eps1)`` and ``Lap(4 c C_loss / eps2)`` [2]_. The split eps1 : eps2 = 1 : (2c)^(2/3)
(:func:`split_budget`) is the one Lyu, Su and Li [3]_ derive to balance the two noises.

References
----------
.. [1] C. Dwork, A. Roth, "The Algorithmic Foundations of Differential Privacy", 2014, Section 3.6.
.. [2] J. Ding, J. Wang, G. Liang, J. Bi, M. Pan, "Towards Plausible Differentially Private ADMM Based
   Distributed Machine Learning", CIKM 2020 (arXiv 2008.04500), Algorithm 2.
.. [3] M. Lyu, D. Su, N. Li, "Understanding the Sparse Vector Technique for Differential Privacy",
   PVLDB 10(6), 2017, Section 4.2.
"""

from __future__ import annotations

import math

import numpy as np

from ppml.privacy.events import SVTEvent

__all__ = ["split_budget", "threshold_scale", "query_scale", "SparseVector"]


def split_budget(epsilon: float, c: int) -> tuple[float, float]:
    """(eps1, eps2) with eps1 + eps2 = `epsilon` and eps1 : eps2 = 1 : (2c)^(2/3) ([3]_)."""
    if epsilon <= 0:
        raise ValueError(f"SVT epsilon must be > 0, got {epsilon!r}")
    if c < 1:
        raise ValueError(f"c must be >= 1, got {c!r}")
    ratio = (2.0 * c) ** (2.0 / 3.0)
    eps1 = epsilon / (1.0 + ratio)
    return eps1, epsilon - eps1


def threshold_scale(*, c: int, eps1: float, sensitivity: float) -> float:
    """Laplace scale of the threshold noise, ``c * sensitivity / eps1``."""
    return c * sensitivity / eps1


def query_scale(*, c: int, eps2: float, sensitivity: float) -> float:
    """Laplace scale of each query's noise, ``2 c * sensitivity / eps2``."""
    return 2.0 * c * sensitivity / eps2


class SparseVector:
    """One party's SVT: noisy "is the quality above the threshold?" answers, at most `c` of them positive.

    Parameters
    ----------
    threshold : float
        The public threshold alpha (``-inf``: every query is positive; ``+inf``: none is).
    c : int
        Number of positive answers after which the mechanism halts.
    eps1, eps2 : float
        Budgets of the threshold and of the queries (> 0).
    sensitivity : float
        L1 sensitivity of the quality function on one record of this party.
    rng : numpy.random.Generator
        This party's randomness.
    party : str
        Who runs it (recorded in :attr:`event`).
    noise : bool, default True
        False switches the Laplace noises off (exact threshold tests; not private, for tests and ablations).
    """

    def __init__(self, *, threshold: float, c: int, eps1: float, eps2: float, sensitivity: float,
                 rng: np.random.Generator, party: str = "", noise: bool = True) -> None:
        if not (isinstance(c, int) and c >= 1):
            raise ValueError(f"c must be an integer >= 1, got {c!r}")
        if eps1 <= 0 or eps2 <= 0:
            raise ValueError(f"eps1 and eps2 must be > 0, got {eps1!r} and {eps2!r}")
        if sensitivity <= 0:
            raise ValueError(f"sensitivity must be > 0, got {sensitivity!r}")
        if math.isnan(threshold):
            raise ValueError("threshold must be a number, got nan")
        self.threshold = float(threshold)
        self.c = c
        self.eps1, self.eps2 = float(eps1), float(eps2)
        self.sensitivity = float(sensitivity)
        self.noise = noise
        self.party = party
        self._rng = rng
        self._threshold_scale = threshold_scale(c=c, eps1=eps1, sensitivity=sensitivity)
        self._query_scale = query_scale(c=c, eps2=eps2, sensitivity=sensitivity)
        self.count = 0
        self.queries = 0
        self._noisy_threshold = self._draw_threshold()

    def _draw_threshold(self) -> float:
        if not self.noise:
            return self.threshold
        return self.threshold + float(self._rng.laplace(0.0, self._threshold_scale))

    @property
    def halted(self) -> bool:
        """True once `c` positive answers have been given; no further query is allowed."""
        return self.count >= self.c

    def above(self, value: float) -> bool:
        """Answer one query: is ``value`` (plus noise) at least the (noisy) threshold?"""
        if self.halted:
            raise RuntimeError(f"SVT of {self.party!r} halted after {self.c} positive answers; it answers no "
                               "more")
        if math.isnan(value):
            raise ValueError("the SVT quality value is nan")
        self.queries += 1
        noisy = value + (float(self._rng.laplace(0.0, self._query_scale)) if self.noise else 0.0)
        if noisy >= self._noisy_threshold:
            self.count += 1
            # a fresh threshold noise starts the next AboveThreshold instance
            self._noisy_threshold = self._draw_threshold()
            return True
        return False

    @property
    def event(self) -> SVTEvent:
        """The privacy event of this SVT (its a-priori worst case: all `c` instances)."""
        return SVTEvent(c=self.c, eps1=self.eps1, eps2=self.eps2, party=self.party)
