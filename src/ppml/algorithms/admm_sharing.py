"""ADMM sharing over vertically partitioned features, with Gaussian differential privacy.

Algorithm 1 (parallel ADMM sharing) of Hu, Niu, Yang and Zhou and its differentially private variant
(eq. 16), for l2-regularized logistic regression. Reproduces the paper's Fig. 1a/2a (loss vs epoch, ADMM
against SGD), Fig. 1b/2b (test log loss vs epoch per noise level) and Fig. 3 (final test log loss per noise
level); the figures are drawn by :mod:`ppml.report.admm_sharing`.

Setting and threat model
------------------------
Party m holds the block ``D_m`` (N x d_m) of every aligned sample's features. The label holder (``party1``)
also carries the bias column of ones and acts as the central node: it holds the labels, the auxiliary
variable ``z`` and the dual ``y``. Parties are honest but curious. Features ``D_m`` and local parameters
``x_m`` never leave their party and labels never leave the central node; per epoch each party sends one
value per sample (its share ``D_m x_m``) and the central node returns two values per sample
(``sum_k D_k x_k - z`` and ``y``). In the DP variant every party, the central node included, adds Gaussian
noise to its share before anything depends on it, so all traffic is post-processing of noised shares
(and of the labels, which the paper does not protect).

Problem solved
--------------
As in the authors' prototype the loss is a sum over samples:

    minimize  sum_i log(1 + exp(-b_i z_i)) + lam_s/2 sum_m ||x_m||^2   subject to   sum_m D_m x_m = z,

which is exactly N times the project's common objective f(w) = mean logistic loss + lam_mean/2 ||w||^2
(:mod:`ppml.models.losses`) with ``lam_s = N * lam_mean``. ``objective`` says which scale the given ``lam`` is
on: ``sum`` (the paper's, on which it uses lambda = 0.001 with rho = 1: lam_s = lam, lam_mean = lam / N) or
``mean`` (the default: lam_mean = lam, lam_s = N lam, i.e. N times stronger for the same number).
Every reported ``train_objective`` is f with lam_mean, comparable across algorithms; the metrics carry
``lam`` as given, ``objective`` and ``lam_mean``. ``rho``, the dual ``y``, the bounds ``b1``, ``c1`` and
Theorem 3's lambda (lam_s) keep the paper's per-sample scale of the summed loss.

One epoch of Algorithm 1 (zero initialization):

1. the central node sends ``q = s - z`` (``s`` the sum of the latest shares) and ``y`` to every party;
2. party m solves its x-update exactly, ``(lam_s I + rho D_m^T D_m) x_m = -D_m^T (y + rho (q - share_m))``,
   where ``share_m`` is the share it sent last (noised in the DP variant, so ``q - share_m`` is the sum of
   the other parties' noised shares minus z, as in eq. 16), and sends ``D_m x_m`` plus noise;
3. the central node sums the shares into ``s``, solves the per-sample z-update
   ``z_i = argmin log(1 + exp(-b_i z)) - y_i z + rho/2 (s_i - z)^2`` by safeguarded Newton, and updates
   ``y <- y + rho (s - z)``.

The x-update matrix is factored once per party (Cholesky of the d_m x d_m Gram form, or of the N x N form
``lam_s I + rho D_m D_m^T`` when d_m > N); sparse blocks stay sparse.

Noise
-----
- ``sigma > 0`` (the paper's figure sweeps): fixed noise, in one of two forms (``noise_form``):

  - ``shares`` (default): N(0, sigma^2) on every one of the N shared values ``D_m x_m``: Theorem 3's wording
    and what the authors' prototype does;
  - ``eq16``: equation (16) as printed: the party perturbs its parameters, ``x_m + xi_m`` with
    ``xi_m ~ N(0, sigma^2 (D_m^T D_m)^-1)``, and shares ``D_m (x_m + xi_m)``. ``D_m xi_m`` then has covariance
    ``sigma^2 P_m``, ``P_m`` the orthogonal projector onto the column space of ``D_m``: N(0, sigma^2) along
    each of the rank(D_m) <= d_m directions of that space and nothing outside it. Its total energy is
    ``sigma^2 rank(D_m)`` against ``sigma^2 N`` for ``shares`` (about 500 times less on a9a's blocks). Where
    ``D_m^T D_m`` is singular (a9a's one-hot groups sum to the bias column) the inverse is read as the
    pseudo-inverse: ``xi_m = sigma V_r E_r^{-1/2} u``, ``u ~ N(0, I_r)``, from the eigendecomposition
    ``D_m^T D_m = V E V^T`` restricted to its r nonzero eigenvalues (or ``D_m xi_m = sigma U_r u`` from the
    eigenvectors of ``D_m D_m^T`` when d_m > N), which is exact and costs one small eigendecomposition.

  No bound of Assumption 2 is enforced, so no sensitivity holds and epsilon is *not certified*; the ledger
  says so.
- ``epsilon``, ``delta`` (calibrated): Assumption 2 is enforced in the run: each party scales its rows of
  norm above 1 onto the unit sphere (the bias column included), the x-update is solved exactly over the
  ball ``||x_m|| <= b1``, ``z_i`` and ``y_i`` are projected onto ``[-b1, b1]``, and ``c1 >= b1`` bounds
  ``||grad R_m(x_m)|| = ||x_m||``. Each party calibrates its own noise by Theorem 3 (whose lambda is lam_s,
  the summed loss's weight, whichever ``objective`` states lam) from the smallest eigenvalue ``d_m`` of its
  ``D_m^T D_m`` (a singular ``D_m^T D_m`` has no finite sensitivity and is refused). The ledger then carries
  one Gaussian event per party (sigma, sensitivity, epochs) and the paper's Corollary 1 bound; the account
  stage adds the tight bound of :mod:`ppml.privacy.accountants`. Calibration uses the ``shares`` form only:
  Theorem 3 bounds the L2 sensitivity of the N-vector ``D_m x_m`` and the Gaussian mechanism it invokes adds
  iid noise to all N values. Under ``eq16`` the released share lies in the column space of ``D_m`` exactly,
  and changing one row of ``D_m`` changes that space; the released vectors of two neighbouring data sets
  then lie (almost surely) in different d_m-dimensional subspaces of R^N, so their distributions are mutually
  singular and no (epsilon, delta < 1) holds, whatever sigma. ``epsilon`` with ``noise_form: eq16`` is
  therefore refused.

References
----------
.. [1] Y. Hu, D. Niu, J. Yang, S. Zhou, "Learning Privately over Distributed Features: An ADMM Sharing
   Approach", AAAI 2020 (arXiv:1907.07735), Algorithm 1, eq. (16), Assumption 2, Theorem 3, Corollary 1.
.. [2] S. Boyd, N. Parikh, E. Chu, B. Peleato, J. Eckstein, "Distributed Optimization and Statistical
   Learning via the Alternating Direction Method of Multipliers", 2011, Sections 3.3 (residuals) and 7.3
   (sharing).
.. [3] Authors' prototype: https://github.com/hyclex/fdml_dp_admm_sharing (summed loss, bias column on the
   first party).
"""

from __future__ import annotations

import dataclasses
import hashlib
import logging
import math
import sys
import time
from dataclasses import dataclass, field
from typing import Literal

import numpy as np
import scipy.linalg
import scipy.sparse as sp
from scipy.special import expit

from ppml import runtime
from ppml.config import fail
from ppml.data.normalize import clip_rows
from ppml.history import History
from ppml.metrics import logistic_loss
from ppml.models.losses import Objective, logistic_objective, mean_form_lam, with_bias
from ppml.network import CONTROL, EVALUATION, Endpoint, Network, ProtocolError, expect
from ppml.parties import Matrix, Party, signed_labels
from ppml.privacy.bounds_admm_sharing import corollary1, theorem3_sensitivity, theorem3_sigma
from ppml.privacy.events import GaussianEvent
from ppml.privacy.mechanisms import gaussian
from ppml.runtime import Public, Role

__all__ = ["MESSAGES", "Params", "fit", "roles", "assemble", "z_update", "x_update_solver", "ColumnSpaceNoise", "TAG_BROADCAST",
           "TAG_SHARE"]

TAG_BROADCAST = "residual_dual"
TAG_SHARE = "share"

log = logging.getLogger(__name__)

#: the run draws differential-privacy noise (so ``noise_source`` applies; see :mod:`ppml.privacy.noise`)
DP_NOISE = True

MESSAGES: tuple[dict[str, str], ...] = (
    {"tag": TAG_BROADCAST, "src": "central node (label holder)", "dst": "every other party",
     "content": "sum_k D_k x_k - z and the dual y: two values per sample, every epoch",
     "protection": "none of its own; computed from the (noised, in the DP variant) shares and the labels"},
    {"tag": TAG_SHARE, "src": "every other party", "dst": "central node (label holder)",
     "content": "the party's share D_m x_m: one value per sample, every epoch",
     "protection": "DP variant: Gaussian noise N(0, sigma^2) on every value (noise_form shares), or "
                   "D_m xi_m with xi_m ~ N(0, sigma^2 (D_m^T D_m)^+) (noise_form eq16); exact otherwise"},
)

#: traffic outside the protocol, counted apart (comm.json "evaluation" and "control"): the run's diagnostics and
#: the role programs' own coordination. Evaluation messages carry exact scores, so they are outside the privacy
#: guarantee: a deployment that needs the guarantee evaluates only the final model, or not at all.
SIDE_MESSAGES: tuple[dict[str, str], ...] = (
    {"tag": "ctl/aligned", "src": "every other party", "dst": "central node (label holder)",
     "content": "SHA-256 of the party's row ids, once: the central node checks the rows are aligned"},
    {"tag": "eval/scores", "src": "every other party", "dst": "central node (label holder)",
     "content": "exact scores D_m x_m on the training and test rows and ||x_m||^2, every epoch (evaluation)"},
    {"tag": "ctl/stop", "src": "central node (label holder)", "dst": "every other party",
     "content": "nothing: training is over, once"},
)

Z_TOL = 1e-10  # absolute accuracy of every z_i

NoiseForm = Literal["shares", "eq16"]


@dataclass(frozen=True)
class Params:
    """Parameters of ADMM sharing (the paper's symbols).

    Attributes
    ----------
    rho : float
        ADMM penalty (per-sample scale of the summed loss; the prototype uses 1).
    lam : float
        l2 weight, on the scale `objective` names.
    objective : {"mean", "sum"}
        ``mean``: lam weighs f = mean loss + lam/2 ||w||^2 (so lam_s = N lam); ``sum``: lam weighs the
        summed loss, as the paper's lambda (lam_s = lam).
    max_epochs : int
        Epoch cap; reaching it without meeting the tolerances warns (ConvergenceWarning).
    tol_primal, tol_dual : float
        Stop when the root-mean-square primal residual ``||s - z|| / sqrt(N)`` and dual residual
        ``rho ||z - z_prev|| / sqrt(N)`` are both at most these.
    sigma : float
        Fixed noise std (the paper's sweeps); epsilon is then not certified.
    noise_form : {"shares", "eq16"}
        Where fixed noise goes: ``shares`` adds N(0, sigma^2) to each of the N shared values (Theorem 3, the
        authors' prototype); ``eq16`` perturbs x_m by N(0, sigma^2 (D_m^T D_m)^+) as equation (16) prints
        it, so the share's noise is sigma^2 times the projector onto D_m's column space. Calibrated runs
        (epsilon) need ``shares``.
    epsilon, delta : float or None
        Per-epoch (epsilon, delta) for calibrated noise by Theorem 3; set both, and leave sigma at 0.
    b1 : float
        Calibrated mode: bound on ``||x_m||``, ``|z_i|`` and ``|y_i|`` (Assumption 2), enforced by projection.
    c1 : float or None
        Calibrated mode: bound on ``||grad R_m(x_m)||``; must be >= b1 since ``grad R_m(x) = x``.
        Defaults to b1.
    """

    rho: float = field(default=1.0, metadata={"gt": 0})
    lam: float = field(default=1e-3, metadata={"gt": 0})
    objective: Objective = "mean"
    max_epochs: int = field(default=100, metadata={"ge": 1})
    tol_primal: float = field(default=1e-6, metadata={"ge": 0})
    tol_dual: float = field(default=1e-6, metadata={"ge": 0})
    sigma: float = field(default=0.0, metadata={"ge": 0})
    noise_form: NoiseForm = "shares"
    epsilon: float | None = field(default=None, metadata={"gt": 0})
    delta: float | None = field(default=None, metadata={"gt": 0, "lt": 1})
    b1: float = field(default=10.0, metadata={"gt": 0})
    c1: float | None = field(default=None, metadata={"gt": 0})

    def __post_init__(self) -> None:
        if (self.epsilon is None) != (self.delta is None):
            fail("epsilon", f"and delta must be set together for calibrated noise, got "
                            f"epsilon={self.epsilon!r}, delta={self.delta!r}")
        if self.calibrated and self.sigma > 0:
            fail("sigma", f"must be 0 when epsilon and delta calibrate the noise, got {self.sigma!r}")
        if self.calibrated and self.noise_form != "shares":
            fail("noise_form", f"must be 'shares' when epsilon calibrates the noise, got {self.noise_form!r}: "
                               "Theorem 3's guarantee is for iid noise on the N shared values; eq. (16)'s noise "
                               "lies in the column space of D_m, which one changed row moves, so neighbouring "
                               "data sets give mutually singular outputs and no epsilon holds")
        if self.c1 is not None and self.c1 < self.b1:
            fail("c1", f"must be >= b1 = {self.b1!r} (||grad R_m(x_m)|| = ||x_m|| reaches b1), "
                       f"got {self.c1!r}")
        if self.calibrated:
            # the ledger's paper bound composes the epochs run (at most max_epochs) by Corollary 1: a target
            # it cannot turn into a finite epsilon (1e300: e^epsilon overflows) is refused before training
            try:
                corollary1(epsilon=self.epsilon, delta=self.delta, epochs=self.max_epochs,
                           delta_prime=self.delta)
            except ValueError as exc:
                fail("epsilon", f"cannot be composed by Corollary 1 over max_epochs = {self.max_epochs} at "
                                f"delta {self.delta!r}: {exc}; got {self.epsilon!r}")

    @property
    def calibrated(self) -> bool:
        return self.epsilon is not None

    @property
    def gradient_bound(self) -> float:
        """c1 as used by Theorem 3."""
        return self.b1 if self.c1 is None else self.c1


# -----------------------------------------------------------------------------------------------------------
# the maths: array in, array out


def z_update(c: np.ndarray, b: np.ndarray, *, rho: float, bound: float | None = None, tol: float = Z_TOL,
             max_iter: int = 100) -> np.ndarray:
    """Minimize ``log(1 + exp(-b_i z)) + rho/2 (z - c_i)^2`` for every sample at once.

    This is the central node's z-update with ``c = s + y / rho``. The stationarity condition
    ``rho (z - c) = b sigmoid(-b z)`` puts the root strictly between ``c`` and ``c + b / rho``. Newton steps
    are taken while they stay inside that bracket (which shrinks with every sign check) and contract; any
    other step bisects the bracket, so every sample converges, to ``tol`` in a handful of iterations.

    Parameters
    ----------
    c : ndarray, shape (N,)
        Centres of the proximal terms.
    b : ndarray, shape (N,)
        Labels in {-1, +1}.
    rho : float
        ADMM penalty.
    bound : float, optional
        Restrict every ``z_i`` to ``[-bound, bound]`` (Assumption 2); a one-dimensional convex problem's
        constrained minimizer is its clipped unconstrained one.
    tol : float
        Absolute accuracy of every ``z_i``.
    max_iter : int
        Iteration cap; exceeding it raises RuntimeError.
    """
    lo = np.minimum(c, c + b / rho)
    hi = np.maximum(c, c + b / rho)
    z = c + b * expit(-b * c) / rho  # one fixed-point step: inside the bracket, close for large rho
    step = step_before = hi - lo
    for _ in range(max_iter):
        p = expit(-b * z)
        g = rho * (z - c) - b * p
        lo = np.where(g < 0, z, lo)
        hi = np.where(g > 0, z, hi)
        newton_step = g / (rho + p * (1.0 - p))
        # Newton only while it stays in the bracket and at least halves the step before last; otherwise
        # bisect (Numerical Recipes' rtsafe), which stops Newton from cycling on the sigmoid's flat tails.
        contracting = np.abs(newton_step) <= np.maximum(0.5 * step_before, tol)
        use_newton = (z - newton_step >= lo) & (z - newton_step <= hi) & contracting
        z_next = np.where(use_newton, z - newton_step, 0.5 * (lo + hi))
        step_before, step = step, np.abs(z_next - z)
        z = z_next
        if np.max(step, initial=0.0) <= tol:
            return z if bound is None else np.clip(z, -bound, bound)
    raise RuntimeError(f"z-update did not reach {tol:g} in {max_iter} iterations "
                       f"(last step {np.max(step):.3g})")


def _rms(v: np.ndarray) -> float:
    """Root mean square; the residuals are reported per sample so tolerances do not depend on N."""
    return math.sqrt(float(np.mean(v * v)))


def _gram(D: Matrix) -> np.ndarray:
    """``D^T D`` as a dense array (small: d_m x d_m)."""
    G = D.T @ D
    return G.toarray() if sp.issparse(G) else np.asarray(G)


class _GramSolver:
    """x-update through the Cholesky factor of ``lam I + rho D^T D`` (d_m <= N)."""

    def __init__(self, D: Matrix, *, rho: float, lam: float) -> None:
        self._D = D
        A = rho * _gram(D)
        A[np.diag_indices_from(A)] += lam
        self._factor = scipy.linalg.cho_factor(A, lower=True)

    def solve(self, v: np.ndarray) -> np.ndarray:
        return scipy.linalg.cho_solve(self._factor, -np.asarray(self._D.T @ v))


class _KernelSolver:
    """x-update through ``(lam I + rho D^T D)^-1 D^T = D^T (lam I + rho D D^T)^-1`` (d_m > N)."""

    def __init__(self, D: Matrix, *, rho: float, lam: float) -> None:
        self._D = D
        K = D @ D.T
        K = rho * (K.toarray() if sp.issparse(K) else np.asarray(K))
        K[np.diag_indices_from(K)] += lam
        self._factor = scipy.linalg.cho_factor(K, lower=True)

    def solve(self, v: np.ndarray) -> np.ndarray:
        return -np.asarray(self._D.T @ scipy.linalg.cho_solve(self._factor, v))


class _BallSolver:
    """x-update over the ball ``||x|| <= radius`` through the eigendecomposition of ``D^T D``.

    With ``D^T D = V diag(e) V^T`` and ``g = V^T D^T v``, the minimizer is
    ``x(mu) = -V g / (lam + mu + rho e)`` with the smallest ``mu >= 0`` giving ``||x(mu)|| <= radius``
    (KKT). ``1 / ||x(mu)||`` is concave and increasing in ``mu``, so Newton's method from ``mu = 0``
    approaches the root from below without overshooting (Moré and Sorensen's secular equation).
    """

    def __init__(self, D: Matrix, *, rho: float, lam: float, radius: float) -> None:
        self._D = D
        self.eigenvalues, self._V = np.linalg.eigh(_gram(D))
        self._denominator = lam + rho * self.eigenvalues
        self._radius = radius

    def solve(self, v: np.ndarray) -> np.ndarray:
        g = self._V.T @ np.asarray(self._D.T @ v)
        mu = 0.0
        for _ in range(100):
            coef = g / (self._denominator + mu)
            norm = float(np.linalg.norm(coef))
            if norm <= self._radius * (1.0 + 1e-12):
                return -(self._V @ coef)
            slope = float(np.sum(coef**2 / (self._denominator + mu))) / norm**3  # d(1/||x||)/d mu
            mu += (1.0 / self._radius - 1.0 / norm) / slope
        raise RuntimeError(f"ball-constrained x-update did not converge (||x|| = {norm:.6g}, "
                           f"radius {self._radius})")


def x_update_solver(D: Matrix, *, rho: float, lam: float, radius: float | None = None):
    """The factored x-update of one party.

    ``solve(v)`` returns ``argmin_x lam/2 ||x||^2 + rho/2 ||D x + v/rho||^2``, the x solving
    ``(lam I + rho D^T D) x = -D^T v``, restricted to ``||x|| <= radius`` when a radius is given. The
    factorization is computed once here and reused every epoch.
    """
    if radius is not None:
        return _BallSolver(D, rho=rho, lam=lam, radius=radius)
    n, d = D.shape
    return _GramSolver(D, rho=rho, lam=lam) if d <= n else _KernelSolver(D, rho=rho, lam=lam)


class ColumnSpaceNoise:
    """Equation (16)'s share noise ``D xi``, ``xi ~ N(0, sigma^2 (D^T D)^+)``: covariance ``sigma^2 P_col(D)``.

    With ``D^T D = V E V^T`` and r eigenvalues above the rank tolerance, ``xi = sigma V_r E_r^{-1/2} u`` for
    ``u ~ N(0, I_r)`` has covariance ``sigma^2 (D^T D)^+`` and ``D V_r E_r^{-1/2}`` has orthonormal columns
    spanning D's column space. When D has more columns than rows the same space is spanned by the
    eigenvectors of ``D D^T`` with nonzero eigenvalues, used directly. Eigenvalues below
    ``max(N, d) * eps * largest`` count as zero (the Gram form squares D's condition number, so its rounding
    error is of that order).

    Attributes
    ----------
    rank : int
        Dimension r of the column space: the number of independent N(0, sigma^2) components per release.
    """

    def __init__(self, D: Matrix, *, sigma: float) -> None:
        n, d = D.shape
        self._D, self._sigma = D, sigma
        self._gram = d <= n
        if self._gram:
            e, V = np.linalg.eigh(_gram(D))
        else:
            K = D @ D.T
            e, V = np.linalg.eigh(K.toarray() if sp.issparse(K) else np.asarray(K))
        keep = e > max(n, d) * np.finfo(float).eps * max(float(e[-1]), 0.0)
        self.rank = int(np.count_nonzero(keep))
        self._basis = V[:, keep] / np.sqrt(e[keep]) if self._gram else V[:, keep]

    def draw(self, rng: np.random.Generator) -> np.ndarray:
        """One release's noise on the N shared values."""
        u = rng.normal(0.0, self._sigma, size=self.rank)
        return np.asarray(self._D @ (self._basis @ u)) if self._gram else self._basis @ u


# -----------------------------------------------------------------------------------------------------------
# roles: each sees only its own Party and its Endpoint


def _unit_rows(D: Matrix, D_test: Matrix | None) -> tuple[Matrix, Matrix | None, int]:
    """Assumption 2's row bound: rows of norm above 1 scaled onto the unit sphere, and how many were.

    Scaling a row is a map of that row alone, so privacy for the scaled rows is privacy for the party's own
    rows; the test rows get the same map so that the model sees the same features.
    """
    sq = D.multiply(D).sum(axis=1) if sp.issparse(D) else np.einsum("ij,ij->i", D, D)
    clipped = int(np.sum(np.sqrt(np.asarray(sq).ravel()) > 1.0 + 1e-12))  # not counting rounding of unit rows
    return clip_rows(D), None if D_test is None else clip_rows(D_test), clipped


def _singular_block(name: str, detail: str) -> ValueError:
    return ValueError(f"party {name!r}: calibrated noise needs D_m^T D_m positive definite (Theorem 3's "
                      f"d_m > 0), but {detail}: the sensitivity is unbounded. Use fixed sigma, or data whose "
                      "blocks have full column rank")


class _PartyRole:
    """Party m: its block (with the bias column on the central node), its x_m, its noised share."""

    def __init__(self, party: Party, endpoint: Endpoint, *, central: str, params: Params, lam_s: float,
                 n_parties: int, rng: np.random.Generator) -> None:
        self.name = party.name
        self._endpoint = endpoint
        self._central = central
        self._rho = params.rho
        self._rng = rng
        is_central = party.name == central
        D = with_bias(party.X) if is_central else party.X
        D_test = party.X_test
        if D_test is not None and is_central:
            D_test = with_bias(D_test)
        self.rows_clipped = 0
        self.smallest_eigenvalue: float | None = None
        self.sensitivity: float | None = None
        if params.calibrated:
            D, D_test, self.rows_clipped = _unit_rows(D, D_test)
            if D.shape[1] > D.shape[0]:
                raise _singular_block(party.name, f"it has {D.shape[1]} columns but only {D.shape[0]} rows")
            solver = x_update_solver(D, rho=params.rho, lam=lam_s, radius=params.b1)
            d_m, largest = float(solver.eigenvalues[0]), float(solver.eigenvalues[-1])
            if not d_m > 1e-10 * max(largest, 1.0):
                raise _singular_block(party.name,
                                      f"its smallest eigenvalue is {d_m:.3g} (largest {largest:.3g})")
            self.smallest_eigenvalue = d_m
            self.sensitivity = theorem3_sensitivity(rho=params.rho, lam=lam_s, c1=params.gradient_bound,
                                                    b1=params.b1, d_m=d_m, n_parties=n_parties)
            self.sigma = theorem3_sigma(epsilon=params.epsilon, delta=params.delta,
                                        sensitivity=self.sensitivity)
        else:
            solver = x_update_solver(D, rho=params.rho, lam=lam_s)
            self.sigma = params.sigma
        self._column_noise = (ColumnSpaceNoise(D, sigma=self.sigma)
                              if params.noise_form == "eq16" and self.sigma > 0 else None)
        # independent N(0, sigma^2) components per release: N (shares), rank(D_m) (eq16), none without noise
        self.noise_rank = (0 if self.sigma == 0 else D.shape[0] if self._column_noise is None
                           else self._column_noise.rank)
        self._D, self._D_test, self._solver = D, D_test, solver
        self.n_columns = D.shape[1]
        self.x = np.zeros(D.shape[1])
        self.clean_share = np.zeros(D.shape[0])  # D_m x_m: for evaluation by the simulator only
        self.sent_share = np.zeros(D.shape[0])
        self.releases = 0
        self._event: GaussianEvent | None = None

    def update(self, residual: np.ndarray, dual: np.ndarray) -> np.ndarray:
        """x-update from the central node's ``s - z`` and ``y``; returns the (noised) share to send."""
        self.x = self._solver.solve(dual + self._rho * (residual - self.sent_share))
        self.clean_share = np.asarray(self._D @ self.x)
        if self.sigma > 0:
            if self._column_noise is not None:  # eq. (16): D_m xi_m, fixed sigma only
                noise = self._column_noise.draw(self._rng)
            elif self.sensitivity is None:  # fixed sigma: no sensitivity bound holds, so no privacy event
                noise = self._rng.normal(0.0, self.sigma, size=self.clean_share.shape)
            else:
                noise, self._event = gaussian(self._rng, self.clean_share.shape, sigma=self.sigma,
                                              sensitivity=self.sensitivity, party=self.name)
            self.sent_share = self.clean_share + noise
            self.releases += 1
        else:
            self.sent_share = self.clean_share
        return self.sent_share

    def evaluation(self) -> dict:
        """What this party sends for evaluation: its exact scores on the training and test rows, ||x_m||^2."""
        return {"train": self.clean_share, "test": self.test_scores(), "sqnorm": float(np.dot(self.x, self.x))}

    def test_scores(self) -> np.ndarray | None:
        return None if self._D_test is None else np.asarray(self._D_test @ self.x)

    def report(self) -> dict:
        """This party's own facts for the run's record (what it would log at its site)."""
        return {"columns": self.n_columns, "sigma": self.sigma, "sensitivity": self.sensitivity,
                "smallest_eigenvalue": self.smallest_eigenvalue, "rows_clipped": self.rows_clipped,
                "x_norm": float(np.linalg.norm(self.x)), "releases": self.releases,
                "noise_rank": self.noise_rank, "event": self.event}

    @property
    def event(self) -> GaussianEvent | None:
        """All this party's calibrated releases as one event (None without calibrated noise)."""
        return None if self._event is None else dataclasses.replace(self._event, count=self.releases)


class _CentralRole:
    """The label holder as central node: labels, z, the dual y, and the sum of the shares."""

    def __init__(self, party: Party, endpoint: Endpoint, *, own: _PartyRole, others: list[str],
                 params: Params) -> None:
        self._endpoint = endpoint
        self._own = own
        self._others = others
        self._rho = params.rho
        self._bound = params.b1 if params.calibrated else None
        self._b = signed_labels(party.y)
        n = party.n_samples
        self._n = n
        self.s = np.zeros(n)
        self.z = np.zeros(n)
        self.y = np.zeros(n)

    def start_epoch(self) -> None:
        """Send ``s - z`` and ``y`` to the other parties and run the central node's own x-update."""
        residual = self.s - self.z
        self._endpoint.broadcast(self._others, TAG_BROADCAST, {"residual": residual, "dual": self.y})
        self._own.update(residual, self.y)

    def finish_epoch(self) -> tuple[float, float]:
        """Sum the shares, update z and y; returns the RMS primal and dual residuals."""
        s = self._own.sent_share.copy()
        for name in self._others:
            s += expect.vector(self._endpoint.recv(name, TAG_SHARE), sender=name, tag=TAG_SHARE, length=self._n)
        z_prev = self.z
        self.s = s
        self.z = z_update(s + self.y / self._rho, self._b, rho=self._rho, bound=self._bound)
        self.y = self.y + self._rho * (s - self.z)
        if self._bound is not None:
            np.clip(self.y, -self._bound, self._bound, out=self.y)
        return _rms(s - self.z), self._rho * _rms(self.z - z_prev)


# -----------------------------------------------------------------------------------------------------------
# the role programs

TAG_STOP = CONTROL + "stop"  # central -> parties: training is over (control traffic)
TAG_ALIGNED = CONTROL + "aligned"  # party -> central: a digest of its row ids, to check the alignment
TAG_EVAL = EVALUATION + "scores"  # party -> central: its exact scores and ||x_m||^2 (evaluation traffic)


def _ids_digest(party: Party) -> str:
    return hashlib.sha256("\n".join(map(str, party.ids)).encode()).hexdigest()


def _member_program(endpoint: Endpoint, party: Party, *, central: str, params: Params, lam_s: float,
                    n_parties: int, rng: np.random.Generator) -> dict:
    """A party other than the central node: per epoch, receive ``s - z`` and ``y``, send its (noised) share."""
    role = _PartyRole(party, endpoint, central=central, params=params, lam_s=lam_s, n_parties=n_parties,
                      rng=rng)
    endpoint.send(central, TAG_ALIGNED, _ids_digest(party))
    epoch = 0
    while True:
        tag, message = endpoint.recv_first(central, (TAG_BROADCAST, TAG_STOP))
        if tag == TAG_STOP:
            if message is not None:  # the word to stop carries nothing
                raise ProtocolError(f"{central!r} sent {TAG_STOP!r} carrying a {type(message).__name__}, "
                                    "expected nothing (None)")
            log.info("%s: stopped by %s after %d epochs", party.name, central, epoch)
            return role.report()
        residual, dual = _broadcast(message, sender=central, n=party.n_samples)
        endpoint.send(central, TAG_SHARE, role.update(residual, dual))
        endpoint.next_round()
        endpoint.send(central, TAG_EVAL, role.evaluation())
        epoch += 1
        log.info("%s: epoch %d: share sent, ||x_m|| = %.6g", party.name, epoch, float(np.linalg.norm(role.x)))


def _broadcast(message: object, *, sender: str, n: int) -> tuple[np.ndarray, np.ndarray]:
    """``s - z`` and ``y`` of the central node's broadcast, checked: N finite floats each."""
    expect.mapping(message, ("residual", "dual"), sender=sender, tag=TAG_BROADCAST)
    return tuple(expect.vector(message[key], sender=sender, tag=TAG_BROADCAST, length=n, what=key)
                 for key in ("residual", "dual"))


def _scored(message: object, *, sender: str, n: int, n_test: int | None) -> dict:
    """A party's evaluation message, checked: N training scores, its test scores (when the central node
    scores test rows) and ||x_m||^2."""
    expect.mapping(message, ("train", "test", "sqnorm"), sender=sender, tag=TAG_EVAL)
    expect.vector(message["train"], sender=sender, tag=TAG_EVAL, length=n, what="train")
    if n_test is not None:
        expect.vector(message["test"], sender=sender, tag=TAG_EVAL, length=n_test, what="test")
    expect.scalar(message["sqnorm"], sender=sender, tag=TAG_EVAL, low=0.0, what="sqnorm")
    return message


def _central_program(endpoint: Endpoint, party: Party, *, order: list[str], params: Params, lam_s: float,
                     lam_mean: float, rng: np.random.Generator) -> dict:
    """The label holder: its own share, z, the dual y, the stopping rule and the evaluation of each epoch."""
    if party.y is None:
        raise ValueError(f"party {party.name!r} is ADMM sharing's central node but holds no labels")
    others = [name for name in order if name != party.name]
    own = _PartyRole(party, endpoint, central=party.name, params=params, lam_s=lam_s, n_parties=len(order),
                     rng=rng)
    central = _CentralRole(party, endpoint, own=own, others=others, params=params)
    digest = _ids_digest(party)
    for name in others:
        if expect.text(endpoint.recv(name, TAG_ALIGNED), sender=name, tag=TAG_ALIGNED, max_length=64) != digest:
            raise ValueError(f"party {name!r}: its training rows are not aligned with {party.name!r}'s")

    history = History("admm_sharing")
    seconds = 0.0
    converged = False
    for epoch in range(1, params.max_epochs + 1):
        start = time.perf_counter()
        central.start_epoch()
        primal_res, dual_res = central.finish_epoch()
        endpoint.next_round()
        seconds += time.perf_counter() - start

        # evaluation of the current model through the parties' evaluation messages, outside the protocol
        n_test = None if party.y_test is None else len(party.y_test)
        scored = {name: _scored(endpoint.recv(name, TAG_EVAL), sender=name, n=party.n_samples, n_test=n_test)
                  for name in others}
        scored[party.name] = own.evaluation()
        train_scores = sum(scored[name]["train"] for name in order)
        sqnorm = sum(scored[name]["sqnorm"] for name in order)
        record = {"epoch": epoch, "train_objective": logistic_objective(train_scores, party.y, None, lam_mean,
                                                                        sqnorm=sqnorm)}
        if party.y_test is not None:
            test_scores = sum(scored[name]["test"] for name in order)
            record["test_logloss"] = logistic_loss(party.y_test, test_scores)
        history.log(**record, primal_residual=primal_res, dual_residual=dual_res, seconds=seconds)
        log.info("%s: epoch %d/%d: train objective %.6g, primal residual %.3g, dual residual %.3g", party.name,
                 epoch, params.max_epochs, record["train_objective"], primal_res, dual_res)
        if primal_res <= params.tol_primal and dual_res <= params.tol_dual:
            converged = True
            break
    endpoint.broadcast(others, TAG_STOP, None)

    epochs = history.epochs
    history.stop(converged=converged,
                 reason=(f"primal and dual residuals below tolerance after {epochs} epochs" if converged else
                         f"reached max_epochs = {params.max_epochs} with residuals {primal_res:.3g} "
                         f"(primal), {dual_res:.3g} (dual)"))
    history.extra.update(z_abs_max=float(np.max(np.abs(central.z))), y_abs_max=float(np.max(np.abs(central.y))))
    history.finish(train_objective=history.records[-1]["train_objective"], y_train=party.y,
                   train_scores=train_scores, y_test=party.y_test,
                   test_scores=test_scores if party.y_test is not None else None,
                   primal_residual=primal_res, dual_residual=dual_res, lam_mean=lam_mean)
    return {"history": history, "report": own.report()}


def _check_vertical(public: Public) -> str:
    holder = public.vertical_label_holder("ADMM sharing")
    for p in public.parties:
        if p.train_rows != holder.train_rows:
            raise ValueError(f"party {p.name!r}: its training rows are not aligned with {holder.name!r}'s "
                             f"({p.train_rows} rows, {holder.train_rows})")
        if holder.test_rows and p.test_rows != holder.test_rows:
            raise ValueError(f"party {p.name!r}: no test columns for the {holder.test_rows} test rows of "
                             f"{holder.name!r}")
    return holder.name


def _lams(public: Public, params: Params) -> tuple[float, float]:
    n = public.info(public.label_holders[0]).train_rows  # public: every party holds the same aligned rows
    lam_mean = mean_form_lam(params.lam, objective=params.objective, n_samples=n)
    return lam_mean, n * lam_mean  # the summed loss's weight: the x-updates' and Theorem 3's lambda


def _ledger(history: History, reports: dict[str, dict], params: Params, epochs: int, *, lam_s: float) -> None:
    ledger = history.ledger
    if params.calibrated:
        for report in reports.values():
            ledger.spend(report["event"])
        inputs = {"epsilon": params.epsilon, "delta": params.delta, "epochs": epochs,
                  "delta_prime": params.delta}
        paper = corollary1(**inputs)
        ledger.paper_bound = {"name": "admm_sharing.corollary1", "inputs": inputs}
        ledger.certified = True
        ledger.target_epsilon = paper["epsilon"]
        ledger.delta = paper["delta"]
        ledger.notes += [
            f"each epoch is ({params.epsilon:g}, {params.delta:g})-DP for every party's rows by Theorem 3; "
            f"Corollary 1 (advanced composition with delta' = delta) composes {epochs} epochs",
            "Assumption 2 enforced: rows scaled to norm <= 1, ||x_m|| <= b1 by an exact constrained "
            "x-update, z_i and y_i projected onto [-b1, b1], c1 >= b1",
            "the Gaussian calibration sigma = sqrt(2 ln(1.25/delta)) C / epsilon is proven for epsilon < 1 "
            "only" + ("" if params.epsilon < 1 else f"; here epsilon = {params.epsilon:g}, so only the tight "
                      "bound for the same sigma is a proven guarantee"),
            "d_m (smallest eigenvalue of D_m^T D_m) is computed from the party's own data, as Theorem 3 "
            "uses it",
            f"Theorem 3's lambda is the summed loss's l2 weight lam_s = {lam_s:g} (objective: "
            f"{params.objective}, lam = {params.lam:g})",
        ]
    elif params.sigma > 0 and params.noise_form == "eq16":
        ranks = ", ".join(f"{name}: {r['noise_rank']}" for name, r in reports.items())
        ledger.notes.append(f"fixed noise of eq. (16): x_m + xi_m with xi_m ~ N(0, {params.sigma:g}^2 "
                            "(D_m^T D_m)^+), so each share carries N(0, sigma^2) along the column space of D_m "
                            f"only (dimension {ranks}); no sensitivity bound holds for it: epsilon not "
                            "certified")
    elif params.sigma > 0:
        ledger.notes.append(f"fixed noise sigma = {params.sigma:g} on every shared value D_m x_m; "
                            "Assumption 2 is not enforced, so no sensitivity bound holds: "
                            "epsilon not certified")
    else:
        ledger.notes.append("no noise: the shared values D_m x_m are exact; no differential privacy")


def roles(public: Public, params: Params, *, rng: np.random.Generator, network: Network | None = None
          ) -> list[Role]:
    """One program per party: the label holder runs the central node as well as its own share."""
    holder = _check_vertical(public)
    lam_mean, lam_s = _lams(public, params)
    streams = rng.spawn(len(public.parties))
    out = []
    for p, stream in zip(public.parties, streams):
        if p.name == holder:
            out.append(Role(p.name, _central_program, p.name,
                            {"order": public.names, "params": params, "lam_s": lam_s, "lam_mean": lam_mean,
                             "rng": stream}))
        else:
            out.append(Role(p.name, _member_program, p.name,
                            {"central": holder, "params": params, "lam_s": lam_s, "n_parties": len(public.parties),
                             "rng": stream}))
    return out


def assemble(public: Public, params: Params, results: dict) -> History:
    """The run's History: the central node's records, the privacy ledger from every party's own report."""
    holder = public.label_holders[0]
    lam_mean, lam_s = _lams(public, params)
    history: History = results[holder]["history"]
    reports = {name: (results[name]["report"] if name == holder else results[name]) for name in public.names}
    _ledger(history, reports, params, history.epochs, lam_s=lam_s)
    history.extra = {
        "mode": "calibrated" if params.calibrated else "fixed" if params.sigma > 0 else "none",
        "lam_sum": lam_s,
        "parties": {name: {k: v for k, v in r.items() if k != "event"} for name, r in reports.items()},
        **history.extra,
    }
    final = list(history.final.items())
    at = [k for k, _ in final].index("primal_residual")
    history.final = dict(final[:at] + [("noise_sigma", max(r["sigma"] for r in reports.values()))] + final[at:])
    return history


def fit(parties: list[Party], network: Network, params: Params, *, rng: np.random.Generator,
        evaluation: Party | None = None) -> History:
    """Train l2-regularized logistic regression by (differentially private) ADMM sharing, in this process.

    Parameters
    ----------
    parties : list of Party
        Vertical parties; the label holder is the central node and carries the bias column.
    network : Network
        Joins the parties by name; every exchange goes through it.
    params : Params
        See :class:`Params`.
    rng : numpy.random.Generator
        Source of every party's noise (each party gets its own spawned stream).
    evaluation : None
        Must be None: vertical parties carry their own test columns.

    Returns
    -------
    History
        Per epoch: ``train_objective`` (f with ``lam_mean``, of the current model), ``test_logloss``,
        ``primal_residual``, ``dual_residual`` and cumulative protocol ``seconds`` (evaluation excluded).
        Final metrics add ``lam_mean``.
    """
    return runtime.fit(sys.modules[__name__], parties, network, params, rng=rng, evaluation=evaluation)
