"""FDML: synchronous and stale-synchronous asynchronous SGD over vertically partitioned features.

Reproduces Hu, Niu, Yang, *Stochastic Distributed Optimization for Machine Learning from Decentralized
Features* (FDML), Table I (LR / NN local models x local / centralized / FDML: train objective, test log loss,
test AUC, time) on public data, and its staleness behaviour; with ``tau = 0`` it is the synchronous
mini-batch SGD baseline of Hu, Niu, Yang, Zhou, *Learning Privately over Distributed Features: an ADMM
Sharing Approach* (AAAI 2020), Fig. 1a/2a. Specs: ``docs/specs/fdml_paper.md`` (Algorithm 1, Table I;
overrules) and ``docs/specs/fdml_ssp.md`` (the ``staleness_bounded`` variant).

Model. Party ``j`` holds the feature block ``xi_j`` of every (aligned) sample and the parameters ``x_j`` of
its local model ``alpha_j`` (linear or a two-layer network, :mod:`ppml.models.local`); the label holder's
model carries the intercept. The composite prediction is ``sigmoid(sum_j alpha_j(x_j, xi_ij))`` and the
objective

    f(x) = (1/n) sum_i [log(1 + exp(a_i)) - y_i a_i] + (lam/2) sum_j ||x_j||^2,
    a_i = sum_j alpha_j(x_j, xi_ij),

which for linear local models is exactly :func:`ppml.models.losses.logistic_objective` on the joined features.
With ``objective: sum`` the given ``lam`` weighs the summed loss instead (the ADMM-sharing paper's scale), so
the steps and f use ``lam / n`` (:func:`ppml.models.losses.mean_form_lam`, reported as ``lam_mean``).

Protocols (parameter server run by the label holder; a sample coordinator's seeded schedule fixes the
mini-batches I(0), I(1), ... for every worker). ``variant`` chooses one:

``paper`` (default): Algorithm 1 (``docs/specs/fdml_paper.md``). The server sends the labels to
every worker before training. It keeps the prediction matrix A (n x m). Pull(j, t): unless t is more than
``tau`` iterations ahead of the slowest worker (then the pull is rejected and the worker retries; rejections
are counted), the server sends the sum of A's entries for I(t); the worker computes H' = sigmoid(s) - y with
its own copy of the labels, steps by eq. (9), x^j <- x^j - eta_t (J_j(x^j_t)^T H' / |I(t)| + lam x^j),
eta_t = eta / sqrt(t) (t counted from 1), and pushes its post-update predictions
alpha^j(x^j_(t+1), xi^j_I(t)), which the server stores in A. So the other parties' entries for a row are
what they pushed when they last processed it: after the first epoch, about an epoch old.
``own`` sets the worker's own term in s. ``own: stored`` is Algorithm 1's literal s = sum_k A[I(t), k]: the
worker's own entry is its prediction from its previous visit of the rows, a delayed self-feedback that
oscillates or diverges at the step sizes centralized SGD takes (a9a LR: eta >= 4), so it forces a small eta.
``own: fresh`` (default) is model (8), whose lag from a party to itself is 0 (the convergence proof assumes
every lag <= tau): s = alpha^j(x^j_t, xi^j_I(t)) + sum_(k != j) A[I(t), k], the worker's own current
prediction plus the other workers' entries (the server sends only those); it trains at the centralized step
size and matches centralized SGD on a9a (the FDML Table I report runs both).
A is filled by a synchronous first epoch (``warmup: sync``, default, the
paper's suggestion): in epoch 1 the pull carries the worker's current predictions and the server answers with
their fresh sum once all have arrived, so epoch 1 is exactly synchronous mini-batch SGD; ``warmup: x0``
instead initializes A with alpha(x_0) for all rows and applies the clock-gap rule from iteration 0. What
``tau = 0`` equals: lock-step iterations in which row i's prediction is the composite model at the joint
iterate right after the row's previous visit (an epoch-old iterate; ``own: fresh``: except the worker's own
term, at its current iterate), i.e. synchronous SGD with epoch-delayed predictions; it is synchronous
mini-batch SGD exactly in epoch 1 (``warmup: sync``) and throughout when one batch is the whole training set;
with one worker and ``own: fresh`` it is mini-batch SGD at any tau. The tests check these against numpy
references (<= 1e-12).

``label_private``: the same protocol, but the labels never leave the label holder: the server answers a pull
with the residual sigmoid(s) - y instead of the sum (same iterates as ``paper``); with ``own: fresh`` the pull
carries the worker's own current predictions on I(t) for that.

``staleness_bounded``: model (8) with bounded delays (today's reconstruction, ``fdml_ssp.md``). At its
iteration ``t`` party ``j`` pushes ``alpha_j(x_j^t, xi_j[S_t])``; the server answers with the residual
``r = sigmoid(sum_k alpha_k) - y`` on ``S_t``; party ``j`` steps, then pushes its predictions for ``S_{t+1}``.
The server answers party ``j``'s pull for iteration ``t`` only once every party has reached iteration
``t - tau``; for each other party ``k`` it uses the predictions it holds for ``S_t`` if they were computed
with parameters ``x_k^s``, ``s >= t - tau``, and otherwise asks ``k`` to recompute them on ``S_t`` (refresh).
So party ``j``'s step is SGD on its block at ``(x_1^{t - d_1}, ..., x_m^{t - d_m})`` with recorded delays
``0 <= d_k <= tau``; ``tau = 0`` is lock-step synchronous mini-batch SGD on the joined model. The server keeps
predictions per iteration rather than per row: near an epoch boundary a party that is ahead has already
pushed predictions for the next epoch's copy of the same rows, which must not replace the version of ``t``.

A single worker (``features: all`` or ``local``, Table I's centralized and local rows) always runs standard
mini-batch SGD (the one-worker case of ``staleness_bounded``); its metrics say ``protocol: sgd``.

Cost model. ``cost_seconds`` prices an iteration as the slowest worker's compute (4 flops per nonzero
feature per row for LR, 6 (d + 1) hidden for NN, at ``flop_rate``) plus its messages amortized over the run
(``latency`` each, bytes at ``bandwidth``); a single worker sends nothing. The constants are parameters.

Execution. The server and every worker run their own program (:func:`_server_program`,
:func:`_worker_program`) in every variant and mode. ``mode: simulated`` (default) is a conservative
discrete-event simulation inside those programs: each party's iteration takes a random time (Gamma with mean
``1 / speeds[j]`` and coefficient of variation ``jitter``) drawn from its own seeded stream; a worker tells the
server when its iteration completes (control message), and the server processes the earliest completion only
once it knows the completion time of every worker still computing, so a seed fixes the interleaving and the
run, on any transport. ``mode: threads`` is the real-asynchrony mode: no simulated clock; a party's iteration
lasts at least ``tick`` seconds per drawn time unit (emulating uneven parties), each worker says when it
completes (control message) and the server takes the completions in the order they arrive
(:meth:`~ppml.network.Endpoint.recv_any`), recording the staleness each push really had
(``observed_staleness``). On the in-process transport one program runs at a time, so that order is the
scheduler's (deterministic, and close to lock-step); with ``transport: ray`` every party is its own process
and the order is real, as in the paper's system: neither it nor, unless the order cannot matter, the results
are reproducible. A refresh costs no compute time (a party serves refreshes alongside its step; on
the simulated clock a request older than the party's last completion gets the parameters before that step).
Evaluation goes through evaluation messages: after each epoch every worker sends its predictions on all
training and test rows and ||x_j||^2; the server (label holder) sums them in worker order.

Threat model: parties and server are honest-but-curious. The server is operated by the label holder. In
``paper`` the label vector is sent to every worker (the paper's design); in ``label_private`` and
``staleness_bounded`` it never crosses, but the residuals reveal each batch row's label through their sign
(``r < 0`` iff ``y = 1``). What else crosses: each party's local predictions (to the server), prediction sums
(with ``own: fresh`` the other workers' entries only, which under ``own: stored`` a worker derives as well,
from the full sum minus its own last push) or residuals (to the party), iteration numbers (pull, reject,
refresh). No feature and no local parameter leaves its owner. No noise is added (the spec's optional DP on local
predictions is not implemented).

References
----------
Y. Hu, D. Niu, J. Yang, S. Zhou, "FDML: A Collaborative Machine Learning Framework for Distributed
Features", KDD 2019; preprint "Stochastic Distributed Optimization for Machine Learning from Decentralized
Features" (Algorithm 1, Table I).
Y. Hu, P. Liu, L. Kong, D. Niu, "Learning Privately over Distributed Features: An ADMM Sharing Approach",
AAAI 2020 (FDML-SGD baseline).
Q. Ho et al., "More Effective Distributed ML via a Stale Synchronous Parallel Parameter Server", NIPS 2013.
"""

from __future__ import annotations

import dataclasses
import logging
import sys
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Callable, Literal, Protocol, Sequence, cast

import numpy as np
import scipy.sparse as sp
from scipy.special import expit

from ppml import runtime
from ppml.config import fail
from ppml.history import History
from ppml.metrics import binary_metrics
from ppml.models.local import LocalModel, l2_penalty, make_local_model
from ppml.models.losses import Objective, logistic_objective, mean_form_lam
from ppml.network import CONTROL, EVALUATION, Endpoint, Network, expect
from ppml.parties import Matrix, Party, label_holder
from ppml.runtime import Public, Role

__all__ = ["MESSAGES", "MESSAGES_PAPER", "MESSAGES_STALENESS_BOUNDED", "MESSAGES_BY_VARIANT", "Params",
           "Schedule", "Trace", "Worker", "Server", "PaperWorker", "PaperServer", "SERVER", "POOLED",
           "SIDE_MESSAGES", "network_for", "roles", "assemble", "simulate", "fit"]

log = logging.getLogger(__name__)

SERVER = "server"
POOLED = "pooled"  # the single worker of ``features: all`` (every party's columns in one place)

#: today's model-(8) variant (``variant: staleness_bounded``): fresh pushes, refreshes, residuals
MESSAGES_STALENESS_BOUNDED: tuple[dict[str, str], ...] = (
    {"tag": "alpha", "src": "party", "dst": SERVER,
     "content": "{clock t, alpha}: the party's local predictions on batch S_t with its parameters x^t "
                "(|S_t| floats); also its pull request for iteration t",
     "protection": "none: plaintext local predictions (no features, no parameters)"},
    {"tag": "refresh", "src": SERVER, "dst": "party",
     "content": "{clock t}: recompute your local predictions on batch S_t (you are too far behind)",
     "protection": "none: an iteration number"},
    {"tag": "alpha_refresh", "src": "party", "dst": SERVER,
     "content": "{clock t, version s, alpha}: local predictions on S_t with the party's current "
                "parameters x^s",
     "protection": "none: plaintext local predictions (no features, no parameters)"},
    {"tag": "residual", "src": SERVER, "dst": "party",
     "content": "{clock t, residual}: sigmoid(sum_k alpha_k) - y on batch S_t (|S_t| floats)",
     "protection": "none: reveals the batch's labels through its sign (inherent in FDML)"},
)

#: Algorithm 1 as written (``variant: paper``) and its label-private form (``variant: label_private``)
MESSAGES_PAPER: tuple[dict[str, str], ...] = (
    {"tag": "labels", "src": SERVER, "dst": "party",
     "content": "{labels}: the training labels y (n values), sent once before training (paper only; the "
                "server is run by the label holder)",
     "protection": "none: the paper gives every worker the labels"},
    {"tag": "init", "src": "party", "dst": SERVER,
     "content": "{alpha}: alpha^j(x_0^j, xi_i^j) for every training row (n floats), initializing column j "
                "of A (``warmup: x0`` only)",
     "protection": "none: plaintext local predictions (no features, no parameters)"},
    {"tag": "pull_sync", "src": "party", "dst": SERVER,
     "content": "{clock t, alpha}: pull of a synchronous first-epoch iteration, carrying alpha^j(x^j_t) on "
                "I(t) (|I(t)| floats; ``warmup: sync`` only)",
     "protection": "none: plaintext local predictions (no features, no parameters)"},
    {"tag": "pull", "src": "party", "dst": SERVER,
     "content": "{clock t}: Pull(j, t), also each retry after a rejection",
     "protection": "none: an iteration number"},
    {"tag": "pull_fresh", "src": "party", "dst": SERVER,
     "content": "{clock t, alpha}: Pull(j, t) carrying the worker's own term alpha^j(x^j_t) on I(t) (|I(t)| "
                "floats; label_private with ``own: fresh``, where the server computes the residual; a retry "
                "after a rejection is a plain pull)",
     "protection": "none: plaintext local predictions (no features, no parameters)"},
    {"tag": "reject", "src": SERVER, "dst": "party",
     "content": "{clock t}: the pull is refused, t is more than tau ahead of the slowest worker; retry",
     "protection": "none: an iteration number"},
    {"tag": "sum", "src": SERVER, "dst": "party",
     "content": "{clock t, sum}: sum_k A[I(t), k] (``own: stored``) or the other workers' entries "
                "sum_(k != j) A[I(t), k] (``own: fresh``; the worker adds its own current prediction); in the "
                "synchronous first epoch the sum of every worker's fresh prediction (|I(t)| floats; paper)",
     "protection": "none: plaintext aggregate predictions"},
    {"tag": "residual", "src": SERVER, "dst": "party",
     "content": "{clock t, residual}: sigmoid(s) - y on I(t), s the sum the paper variant would send plus, "
                "with ``own: fresh``, the own term the pull carried (label_private only)",
     "protection": "none: reveals the batch's labels through its sign"},
    {"tag": "push", "src": "party", "dst": SERVER,
     "content": "{clock t, alpha}: Push(j, t, alpha^j(x^j_(t+1), xi^j_I(t))): post-update predictions on "
                "I(t) (|I(t)| floats); the server sets A[I(t), j]",
     "protection": "none: plaintext local predictions (no features, no parameters)"},
)

#: every message any variant sends, by variant
MESSAGES_BY_VARIANT: dict[str, tuple[dict[str, str], ...]] = {
    "paper": tuple(m for m in MESSAGES_PAPER if m["tag"] not in ("residual", "pull_fresh")),
    "label_private": tuple(m for m in MESSAGES_PAPER if m["tag"] not in ("labels", "sum")),
    "staleness_bounded": MESSAGES_STALENESS_BOUNDED,
}
MESSAGES: tuple[dict[str, str], ...] = MESSAGES_PAPER + MESSAGES_STALENESS_BOUNDED[:3]


@dataclass(frozen=True)
class Params:
    """Parameters of an FDML run (``experiments.<name>`` in params.yaml).

    Attributes
    ----------
    variant : {"paper", "label_private", "staleness_bounded"}
        ``paper`` (default): Algorithm 1: the labels are sent to every worker, the server keeps
        the prediction matrix A of post-update pushes and rejects a pull that is more than `tau` iterations
        ahead of the slowest worker. ``label_private``: the same A-matrix protocol, but the server (run by the
        label holder) returns residuals and the labels never leave it. ``staleness_bounded``: model (8)
        with every used prediction at most `tau` iterations old (refresh messages); ``tau = 0`` is exactly
        synchronous mini-batch SGD.
    own : {"fresh", "stored"}
        paper / label_private: the worker's own term in H's argument. ``fresh`` (default; model (8), whose
        lag from a party to itself is 0): its own current prediction alpha^j(x^j_t, xi^j_I(t)) plus the other
        workers' entries of A. ``stored``: Algorithm 1's literal sum_k A[I(t), k], the own entry included
        (its post-update prediction from its previous visit of the rows, about an epoch old): a delayed
        self-feedback that forces a smaller `eta` (a9a LR: 1 instead of centralized SGD's 8).
        ``staleness_bounded`` uses fresh own predictions by construction (``stored`` is an error there).
    warmup : {"sync", "x0"}
        paper / label_private: how A is filled before it is read. ``sync`` (default; the paper's suggestion
        of a synchronous first epoch): during the first epoch each pull carries the worker's current
        predictions and the server answers with their fresh sum once all have arrived, so the first epoch is
        synchronous mini-batch SGD and its post-update pushes fill A. ``x0``: every worker sends
        alpha(x_0) for all rows first and the clock-gap rule applies from iteration 0.
    local_model : {"lr", "nn"}
        Each party's local model: linear, or a two-layer tanh network of width `hidden`.
    features : {"split", "all", "local"}
        ``split``: FDML over the parties; ``all``: one model on every party's columns joined (the centralized
        row of Table I, same model class and optimizer); ``local``: the label holder's columns only.
    tau : int
        Staleness bound of the stale-synchronous rule; 0 is synchronous SGD.
    batch_size : int
        Mini-batch size |S_t| (the paper: 100).
    eta : float
        Base step size; iteration t (from 0) uses eta / sqrt(t + 1).
    lam : float
        l2 regularization weight on every local parameter, on the scale `objective` names.
    objective : {"mean", "sum"}
        ``mean``: lam weighs f (the mean loss); ``sum``: lam weighs the summed loss, i.e. f with lam / n.
    hidden : int
        Hidden width of the ``nn`` local model (ignored by ``lr``).
    epochs : int
        Passes over the training rows (each party performs epochs * ceil(n / batch_size) iterations).
    speeds : list of float
        Per-party compute speed (iterations per simulated time unit), in party order; empty means all 1.
    jitter : float
        Coefficient of variation of a party's iteration time (Gamma law; 0 = deterministic, 1 = exponential).
    mode : {"simulated", "threads"}
        Simulated clock (deterministic) or one thread per role under real scheduling.
    tick : float
        Threads mode: seconds per simulated time unit that a party's iteration lasts at least (0: no
        emulated compute time).
    tol : float
        The run is reported converged when its last epoch changed the training objective by at most
        ``tol`` relative. SGD runs its full epoch budget either way, as in the paper.
    flop_rate, latency, bandwidth : float
        The cost model of ``cost_seconds``: a worker computes `flop_rate` floating-point operations per
        second, a message costs `latency` seconds plus its bytes / `bandwidth` (bytes per second).
    """

    variant: Literal["paper", "label_private", "staleness_bounded"] = "paper"
    own: Literal["fresh", "stored"] = "fresh"
    warmup: Literal["sync", "x0"] = "sync"
    local_model: Literal["lr", "nn"] = "lr"
    features: Literal["split", "all", "local"] = "split"
    tau: int = field(default=0, metadata={"ge": 0})
    batch_size: int = field(default=100, metadata={"gt": 0})
    eta: float = field(default=0.1, metadata={"gt": 0})
    lam: float = field(default=1e-4, metadata={"ge": 0})
    objective: Objective = "mean"
    hidden: int = field(default=32, metadata={"gt": 0})
    epochs: int = field(default=20, metadata={"gt": 0})
    speeds: tuple[float, ...] = field(default=(), metadata={"gt": 0})
    jitter: float = field(default=1.0, metadata={"ge": 0})
    mode: Literal["simulated", "threads"] = "simulated"
    tick: float = field(default=0.0, metadata={"ge": 0})
    tol: float = field(default=1e-3, metadata={"gt": 0})
    flop_rate: float = field(default=1e9, metadata={"gt": 0})
    latency: float = field(default=1e-3, metadata={"ge": 0})
    bandwidth: float = field(default=1.25e8, metadata={"gt": 0})

    def __post_init__(self) -> None:
        if self.variant == "staleness_bounded" and self.own != "fresh":
            fail("own", f"must be 'fresh' with variant 'staleness_bounded' (model (8): every party uses its own "
                        f"current prediction), got {self.own!r}")


class Schedule:
    """The shared sample schedule: batch ``t`` is slice ``t mod n_batches`` of epoch ``t // n_batches``'s
    permutation, drawn from ``(seed, epoch)``.

    Every role builds its own copy from the shared seed; random access lets a party produce the rows of any
    batch it is asked about. The last batch of an epoch is smaller when `batch_size` does not divide `n`.
    """

    _KEEP = 3  # permutations cached: roles work in the current epoch and, near its ends, its neighbours

    def __init__(self, n: int, batch_size: int, *, seed: int) -> None:
        if not 0 < batch_size <= n:
            raise ValueError(f"batch_size must be in [1, {n}] for {n} training rows, got {batch_size}")
        self.n = n
        self.batch_size = batch_size
        self.seed = seed
        self.n_batches = -(-n // batch_size)
        self._perms: dict[int, np.ndarray] = {}
        self._xperm: dict[tuple[int, int], Matrix] = {}

    def rows(self, t: int) -> np.ndarray:
        """Row indices of batch ``t``."""
        epoch, k = divmod(t, self.n_batches)
        perm = self._perms.get(epoch)
        if perm is None:
            perm = np.random.default_rng([self.seed, epoch]).permutation(self.n)
            self._perms[epoch] = perm
            if len(self._perms) > self._KEEP:
                del self._perms[min(self._perms)]
        return perm[k * self.batch_size:(k + 1) * self.batch_size]

    def size(self, t: int) -> int:
        """Rows in batch ``t`` (without drawing its permutation)."""
        k = t % self.n_batches
        return min(self.batch_size, self.n - k * self.batch_size)

    def batch(self, X: Matrix, t: int) -> Matrix:
        """``X[rows(t)]``, sliced from the epoch's permuted copy of `X` (one fancy index per epoch instead of
        one per batch; a role calls this with its own matrix only)."""
        epoch, k = divmod(t, self.n_batches)
        key = (id(X), epoch)
        Xp = self._xperm.get(key)
        if Xp is None:
            Xp = X[np.random.default_rng([self.seed, epoch]).permutation(self.n)]  # as rows() draws it
            self._xperm[key] = Xp
            if len(self._xperm) > 2:
                del self._xperm[min(self._xperm, key=lambda kv: kv[1])]
        return Xp[k * self.batch_size:(k + 1) * self.batch_size]

    def copy(self) -> "Schedule":
        """The same schedule with its own cache (each role keeps one; no state is shared between threads)."""
        return Schedule(self.n, self.batch_size, seed=self.seed)


# ---------------------------------------------------------------------------------------------------------
# roles


class _Worker:
    """What every worker shares: party ``j``'s features, local model and parameters, its copy of the shared
    schedule, and the local step of eq. (9) from the residuals of its batch.

    Parameters
    ----------
    name : str
        The party's network address.
    X : ndarray or CSR matrix, shape (n, d_j)
        The party's training features (never sent).
    model : LocalModel
        Its local model.
    theta : ndarray
        Initial local parameters (copied; never sent).
    link : _Sender
        Its sending side of the network (its endpoint, or a wrapper that counts what it sends).
    schedule : Schedule
        Its own copy of the shared batch schedule.
    eta, lam : float
        Base step size and l2 weight.
    iterations : int
        Iterations to perform.
    """

    ANSWERS: tuple[str, ...] = ()  # the tags of the server's messages the worker waits for

    def __init__(self, *, name: str, X: Matrix, model: LocalModel, theta: np.ndarray, link: _Sender,
                 schedule: Schedule, eta: float, lam: float, iterations: int) -> None:
        self.name = name
        self._X = X
        self.model = model
        self.theta = np.array(theta, dtype=float)
        self._link = link
        self._schedule = schedule
        self._eta = eta
        self._lam = lam
        self.iterations = iterations
        self.clock = 0  # completed iterations = version of the current parameters
        self.retry_pending = False  # a rejected pull waits to be retried (Algorithm 1's clock-gap rule)

    @property
    def done(self) -> bool:
        return self.clock >= self.iterations

    def _step(self, Xb: Matrix, cache: Any, r: np.ndarray) -> None:
        """x^j <- x^j - eta / sqrt(t + 1) (J_j(x^j)^T r / |I(t)| + lam x^j) at t = clock; the clock advances."""
        _, reg = l2_penalty(self.theta, self._lam)
        grad = self.model.backward(self.theta, Xb, cache, r / len(r)) + reg
        self.theta -= (self._eta / np.sqrt(self.clock + 1)) * grad
        self.clock += 1


class Worker(_Worker):
    """Party ``j``'s role in ``staleness_bounded``: it pushes its predictions for the batch of its next
    iteration (its pull), steps on the residual the server answers, and recomputes predictions on request.

    Parameters
    ----------
    keep_previous : bool
        Keep the parameters from before the last step (on the simulated clock a refresh request can be older
        than that step's completion). The other parameters are :class:`_Worker`'s.
    """

    ANSWERS = ("residual", "refresh")

    def __init__(self, *, keep_previous: bool = False, **common: Any) -> None:
        super().__init__(**common)
        self._keep_previous = keep_previous
        self._batch: tuple[Matrix, Any] | None = None  # rows and forward cache of the pushed batch
        self._residual: np.ndarray | None = None
        self._previous: tuple[np.ndarray, int] | None = None  # parameters and version before the last step

    @property
    def computing(self) -> bool:
        """The server has answered the current pull; the local step is under way."""
        return self._residual is not None

    def start(self) -> None:
        """Push the predictions of the first batch (the pull of iteration 0)."""
        self._push()

    def _push(self) -> None:
        Xb = self._schedule.batch(self._X, self.clock)
        alpha, cache = self.model.forward(self.theta, Xb)
        self._batch = (Xb, cache)
        self._link.send(SERVER, "alpha", {"clock": self.clock, "alpha": alpha})

    def handle(self, src: str, tag: str, payload: dict[str, Any]) -> None:
        """React to a message from the server: a residual, or a request to refresh predictions."""
        if tag == "residual":
            if payload["clock"] != self.clock or self._residual is not None:
                raise RuntimeError(f"{self.name}: residual for iteration {payload['clock']} "
                                   f"while at iteration {self.clock}")
            self._residual = payload["residual"]
        elif tag == "refresh":
            self.refresh(payload["clock"], previous=False)
        else:
            raise ValueError(f"{self.name}: unexpected message {tag!r} from {src!r}")

    def refresh(self, t: int, *, previous: bool) -> None:
        """Answer a refresh request for batch ``t`` with the current parameters, or (`previous`) with those
        before the last step: on the simulated clock the request can be older than that step's completion."""
        theta, version = self._previous if previous and self._previous is not None else (self.theta, self.clock)
        alpha, _ = self.model.forward(theta, self._schedule.batch(self._X, t))
        self._link.send(SERVER, "alpha_refresh", {"clock": t, "version": version, "alpha": alpha})

    def complete(self) -> None:
        """Finish the current iteration: local gradient from the residual, step, and the next push."""
        if self._residual is None or self._batch is None:
            raise RuntimeError(f"{self.name}: no residual to complete iteration {self.clock} with")
        if self._keep_previous:
            self._previous = (self.theta.copy(), self.clock)
        Xb, cache = self._batch
        r = self._residual
        self._residual = None
        self._batch = None
        self._step(Xb, cache, r)
        if not self.done:
            self._push()


class PaperWorker(_Worker):
    """Worker ``j`` of Algorithm 1: its features, its copy of the labels (paper) and its local model.

    Iteration t: Pull(j, t) -> the server's answer; x^j_(t+1) = x^j_t - eta_t (H' d alpha^j(x^j_t,
    xi^j_I(t)) / d x^j + lam x^j_t), eta_t = eta / sqrt(t + 1) (t from 0, i.e. eta / sqrt(t) counted from 1);
    then Push(j, t, alpha^j(x^j_(t+1), xi^j_I(t))). A rejected pull is retried (:meth:`retry`). H' is
    sigmoid(s) - y with s = sum_k A[I(t), k] (``own: stored``, Algorithm 1's literal sum) or
    s = alpha^j(x^j_t, xi^j_I(t)) + sum_(k != j) A[I(t), k] (``own: fresh``, model (8)): the worker adds its own
    current prediction to the other workers' entries the server sent; under ``label_private`` the server does
    that with the prediction the pull carried (``pull_fresh``) and answers with the residual.
    The first `warmup` iterations are synchronous: the pull carries alpha^j(x^j_t) on I(t) and every entry of
    the answer is fresh.

    Parameters
    ----------
    warmup : int
        Synchronous iterations at the start.
    send_init : bool
        Send alpha^j(x^j_0) for every training row first (``warmup: x0``).
    own : {"fresh", "stored"}
        The worker's own term (:class:`Params`).
    private : bool
        ``label_private``: the server holds the labels and answers with residuals.
    The other parameters are :class:`_Worker`'s.
    """

    ANSWERS = ("labels", "sum", "residual", "reject")

    def __init__(self, *, warmup: int, send_init: bool, own: str, private: bool, **common: Any) -> None:
        super().__init__(**common)
        self._warmup = warmup
        self._send_init = send_init
        self._own_fresh = own == "fresh"
        self._private = private
        self._y: np.ndarray | None = None  # the labels, once the server sent them (paper only)
        self._answer: tuple[str, np.ndarray] | None = None
        self._pass: tuple[np.ndarray, Any] | None = None  # forward pass at x^j_t on I(t), when the pull needed it

    @property
    def computing(self) -> bool:
        return self._answer is not None

    def start(self) -> None:
        if self._send_init:
            self._link.send(SERVER, "init", {"alpha": self.model.forward(self.theta, self._X)[0]})
        self._pull()

    def _pull(self) -> None:
        t = self.clock
        if t < self._warmup or (self._own_fresh and self._private):
            self._pass = self.model.forward(self.theta, self._schedule.batch(self._X, t))
            tag = "pull_sync" if t < self._warmup else "pull_fresh"
            self._link.send(SERVER, tag, {"clock": t, "alpha": self._pass[0]})
        else:
            self._pass = None
            self._link.send(SERVER, "pull", {"clock": t})

    def retry(self) -> None:
        """Pull again after a rejection (the server keeps what the first pull carried)."""
        self.retry_pending = False
        self._link.send(SERVER, "pull", {"clock": self.clock})

    def handle(self, src: str, tag: str, payload: dict[str, Any]) -> None:
        if tag == "labels":
            self._y = np.asarray(payload["labels"], dtype=float)
        elif tag in ("sum", "residual"):
            if payload["clock"] != self.clock or self._answer is not None:
                raise RuntimeError(f"{self.name}: {tag} for iteration {payload['clock']} at {self.clock}")
            self._answer = (tag, payload[tag])
        elif tag == "reject":
            self.retry_pending = True
        else:
            raise ValueError(f"{self.name}: unexpected message {tag!r} from {src!r}")

    def complete(self) -> None:
        """Local step from the answer of the current pull, then the post-update push and the next pull."""
        if self._answer is None:
            raise RuntimeError(f"{self.name}: no answer to complete iteration {self.clock} with")
        t = self.clock
        Xb = self._schedule.batch(self._X, t)
        alpha, cache = self._pass if self._pass is not None else self.model.forward(self.theta, Xb)
        kind, value = self._answer
        if kind == "sum":
            if self._y is None:
                raise RuntimeError(f"{self.name}: got a prediction sum but has no labels")
            # after the synchronous warm-up, a fresh own term is added to the other workers' entries
            total = value + alpha if self._own_fresh and t >= self._warmup else value
            r = expit(total) - self._y[self._schedule.rows(t)]
        else:
            r = value
        self._answer = None
        self._pass = None
        self._step(Xb, cache, r)
        self._link.send(SERVER, "push", {"clock": t, "alpha": self.model.forward(self.theta, Xb)[0]})
        if not self.done:
            self._pull()


class _Server:
    """What both servers share (run by the label holder): the workers, the labels, the staleness bound, the
    record of every answered pull, and the residual.

    Parameters
    ----------
    workers : sequence of str
        The workers' addresses, in the order the aggregate is summed.
    labels : ndarray of {0, 1}
        The training labels (the label holder's own).
    link : _Sender
        The server's sending side (see :class:`_ServerLink`).
    schedule : Schedule
        Its own copy of the shared batch schedule.
    tau : int
        Staleness bound.
    iterations : int
        Iterations every worker performs.
    """

    def __init__(self, *, workers: Sequence[str], labels: np.ndarray, link: _Sender, schedule: Schedule,
                 tau: int, iterations: int) -> None:
        self._workers = tuple(workers)
        self._index = {w: i for i, w in enumerate(self._workers)}
        self._y = np.asarray(labels, dtype=float)
        self._link = link
        self._schedule = schedule
        self._tau = tau
        self._iterations = iterations
        self._clocks: dict[str, int] = {}
        self.delays: list[tuple[int, int, int]] = []  # (t, worker index, largest age of a used prediction)
        self.mean_ages: list[float] = []  # per answer: mean age (staleness_bounded: the largest)
        self.gaps: list[int] = []  # t - slowest clock at every answered pull (Algorithm 1)
        self.refreshes = 0  # refresh requests sent (staleness_bounded)
        self.rejections = 0  # pulls rejected under the clock-gap rule (Algorithm 1)

    @property
    def min_clock(self) -> int:
        return min(self._clocks.values())

    def _residual(self, total: np.ndarray, t: int) -> np.ndarray:
        return expit(total) - self._y[self._schedule.rows(t)]

    def _record(self, t: int, j: int, max_age: int, mean_age: float) -> None:
        self.delays.append((t, j, max_age))
        self.mean_ages.append(mean_age)


class Server(_Server):
    """The parameter server of ``staleness_bounded``.

    It keeps the parties' local predictions for the live batches with the parameter version that produced
    them, answers pulls under the stale-synchronous rule, and records the delay actually used in every
    answer. Parameters: :class:`_Server`'s.
    """

    def __init__(self, **common: Any) -> None:
        super().__init__(**common)
        self._clocks = dict.fromkeys(self._workers, -1)  # latest iteration each party pushed (-1: none yet)
        self._table: dict[int, dict[str, tuple[int, np.ndarray]]] = {}  # t -> party -> (version, alpha)
        self._pulls: list[tuple[int, int]] = []  # waiting (t, party index)
        self._asked: set[tuple[str, int]] = set()
        self._served: dict[int, int] = {}

    def start(self) -> None:
        """Nothing to send before the workers' first pushes."""

    def opening(self) -> tuple[tuple[str, ...], ...]:
        """What the server receives from each worker before the first completion: its first push."""
        return (("alpha",),)

    def after(self, *, last: bool) -> tuple[tuple[str, ...], ...]:
        """What the server receives from a worker that completed an iteration: its next push, if any."""
        return () if last else (("alpha",),)

    @property
    def finished(self) -> bool:
        return len(self.delays) == len(self._workers) * self._iterations

    def handle(self, src: str, tag: str, payload: dict[str, Any]) -> None:
        """Store a push or a refresh answer, then answer every pull the rule now allows."""
        t = payload["clock"]
        if tag == "alpha":
            self._clocks[src] = t
            self._table.setdefault(t, {})[src] = (t, payload["alpha"])
            self._pulls.append((t, self._index[src]))
        elif tag == "alpha_refresh":
            self._asked.discard((src, t))
            version, entries = payload["version"], self._table.get(t)
            # Keep the freshest version not newer than t; a late answer for a finished batch is dropped.
            if entries is not None and version <= t and (src not in entries or entries[src][0] < version):
                entries[src] = (version, payload["alpha"])
        else:
            raise ValueError(f"server: unexpected message {tag!r} from {src!r}")
        self._serve()

    def _serve(self) -> None:
        floor = self.min_clock
        waiting = []
        for t, j in sorted(self._pulls):
            if t - floor > self._tau:  # SSP: the puller is too far ahead of the slowest party
                waiting.append((t, j))
                continue
            entries = self._table[t]
            stale = [k for k in self._workers if k not in entries or entries[k][0] < t - self._tau]
            if stale:
                for k in stale:
                    if (k, t) not in self._asked:
                        self._asked.add((k, t))
                        self.refreshes += 1
                        self._link.send(k, "refresh", {"clock": t})
                waiting.append((t, j))
                continue
            self._answer(t, j, entries)
        self._pulls = waiting

    def _answer(self, t: int, j: int, entries: dict[str, tuple[int, np.ndarray]]) -> None:
        aggregate = entries[self._workers[0]][1].copy()
        for k in self._workers[1:]:
            aggregate += entries[k][1]
        self._link.send(self._workers[j], "residual", {"clock": t, "residual": self._residual(aggregate, t)})
        delay = max(t - version for version, _ in entries.values())
        if not 0 <= delay <= self._tau:
            raise RuntimeError(f"server: delay {delay} outside [0, {self._tau}] at iteration {t}")
        self._record(t, j, delay, float(delay))
        self._served[t] = self._served.get(t, 0) + 1
        if self._served[t] == len(self._workers):  # nobody pulls t again
            del self._table[t], self._served[t]


class PaperServer(_Server):
    """The server of Algorithm 1 (run by the label holder): the prediction matrix A and the clock-gap rule.

    A[i, j] is worker j's last pushed prediction for row i; ``versions[i, j]`` the parameter version that
    produced it (x^j_s has version s). A pull of worker j for iteration t is answered unless
    t - min_k c_k > tau (c_k = iterations worker k completed), when it is rejected. The answer is
    sum_k A[I(t), k] (``own: stored``) or the other workers' entries sum_(k != j) A[I(t), k] (``own: fresh``;
    under ``label_private`` plus the worker's own current prediction, which its pull carried), as a sum for
    the worker (paper) or as the residual (label_private). The age of an entry read from A at iteration t is
    t - version (in model (8)'s sense; it can be negative when a worker ahead has already pushed a later
    epoch's prediction for the row); the largest and mean age of the entries read in every answer are recorded
    (a fresh own term has age 0 and is not read from A), which the server can do because it sees the pushes'
    clocks (nothing extra crosses).

    Parameters
    ----------
    send_labels : bool
        Send the labels to every worker and answer with sums (paper), or keep them (label_private).
    needs_init : bool
        Wait for every worker's alpha(x_0) on all rows before answering (``warmup: x0``).
    own : {"fresh", "stored"}
        The worker's own term (:class:`Params`).
    The other parameters are :class:`_Server`'s.
    """

    PULLS = ("pull", "pull_sync", "pull_fresh")

    def __init__(self, *, send_labels: bool, needs_init: bool, own: str, **common: Any) -> None:
        super().__init__(**common)
        self._send_labels = send_labels
        self._needs_init = needs_init
        self._own_fresh = own == "fresh"
        n, m = len(self._y), len(self._workers)
        self.A = np.zeros((n, m))
        self.versions = np.zeros((n, m), dtype=np.int64)
        # the columns each worker's answer reads from A: all (own: stored) or the other workers' (own: fresh)
        self._read = [[k for k in range(m) if k != j or not self._own_fresh] for j in range(m)]
        self._inits: set[str] = set() if needs_init else set(self._workers)
        self._held: list[tuple[str, int]] = []  # pulls waiting for A's initialization
        self._fresh: dict[int, dict[str, np.ndarray]] = {}  # synchronous first epoch: t -> worker -> alpha
        self._own: dict[str, np.ndarray] = {}  # label_private, own fresh: the own term the pull carried
        self._clocks = dict.fromkeys(self._workers, 0)  # completed iterations

    def opening(self) -> tuple[tuple[str, ...], ...]:
        """What the server receives from each worker before the first completion: its alpha(x_0) on every row
        (``warmup: x0``), then its first pull."""
        return ((("init",),) if self._needs_init else ()) + (self.PULLS,)

    def after(self, *, last: bool) -> tuple[tuple[str, ...], ...]:
        """What the server receives from a worker that completed an iteration: its push, then its next pull."""
        return (("push",),) + (() if last else (self.PULLS,))

    @property
    def finished(self) -> bool:
        return self.min_clock >= self._iterations

    def start(self) -> None:
        """Algorithm 1's first step: the labels go to every worker (paper variant only)."""
        if self._send_labels:
            for w in self._workers:
                self._link.send(w, "labels", {"labels": self._y.copy()})

    def handle(self, src: str, tag: str, payload: dict[str, Any]) -> None:
        j = self._index[src]
        if tag == "init":
            self.A[:, j] = payload["alpha"]
            self._inits.add(src)
            if len(self._inits) == len(self._workers):
                held, self._held = self._held, []
                for w, t in held:
                    self._pull(w, t)
        elif tag in ("pull", "pull_fresh"):
            if tag == "pull_fresh":
                self._own[src] = payload["alpha"]
            if len(self._inits) < len(self._workers):
                self._held.append((src, payload["clock"]))
            else:
                self._pull(src, payload["clock"])
        elif tag == "pull_sync":
            t = payload["clock"]
            fresh = self._fresh.setdefault(t, {})
            fresh[src] = payload["alpha"]
            if len(fresh) == len(self._workers):
                total = fresh[self._workers[0]].copy()
                for k in self._workers[1:]:
                    total += fresh[k]
                del self._fresh[t]
                for k in self._workers:
                    self._send(self._index[k], t, total)
                    self._record(t, self._index[k], 0, 0.0)
                    self.gaps.append(t - self.min_clock)
        elif tag == "push":
            t = payload["clock"]
            rows = self._schedule.rows(t)
            self.A[rows, j] = payload["alpha"]
            self.versions[rows, j] = t + 1
            self._clocks[src] = t + 1
        else:
            raise ValueError(f"server: unexpected message {tag!r} from {src!r}")

    def _pull(self, src: str, t: int) -> None:
        gap = t - self.min_clock
        if gap > self._tau:
            self.rejections += 1
            self._link.send(src, "reject", {"clock": t})
            return
        j = self._index[src]
        rows = self._schedule.rows(t)
        if self._own_fresh:
            read = self._read[j]
            total = self.A[np.ix_(rows, read)].sum(axis=1)
            ages = t - self.versions[np.ix_(rows, read)]
            if src in self._own:  # label_private: the worker's own current term, carried by its pull
                total = total + self._own.pop(src)
        else:
            total = self.A[rows].sum(axis=1)
            ages = t - self.versions[rows]
        self._record(t, j, int(ages.max()) if ages.size else 0, float(ages.mean()) if ages.size else 0.0)
        self.gaps.append(gap)
        self._send(j, t, total)

    def _send(self, j: int, t: int, total: np.ndarray) -> None:
        if self._send_labels:
            self._link.send(self._workers[j], "sum", {"clock": t, "sum": total})
        else:
            self._link.send(self._workers[j], "residual", {"clock": t, "residual": self._residual(total, t)})


# ---------------------------------------------------------------------------------------------------------
# the role programs

TAG_DONE = CONTROL + "done"
TAG_AT = CONTROL + "at"
TAG_EVAL = EVALUATION + "scores"

#: evaluation and control traffic (counted apart from the protocol's messages)
SIDE_MESSAGES: tuple[dict[str, str], ...] = (
    {"tag": TAG_DONE, "src": "party", "dst": SERVER,
     "content": "{time}: simulated time at which the party's current iteration completes, sent when it gets "
                "its answer (``mode: simulated``; the server processes completions in this order); NaN, sent "
                "when the iteration completes (``mode: threads``: the server takes them as they arrive)"},
    {"tag": TAG_AT, "src": SERVER, "dst": "party",
     "content": "{time, index}: the simulated event (time, completing party's index; -1 at the start) at "
                "which the preceding answer or refresh request was sent (``mode: simulated`` only)"},
    {"tag": TAG_EVAL, "src": "party", "dst": SERVER,
     "content": "{train, test, sqnorm, sim_time, seconds}: the party's local predictions on every training "
                "and test row and ||x_j||^2 at the end of each epoch (evaluation)"},
)


class _Sender(Protocol):
    """What a role sends through: an :class:`~ppml.network.Endpoint` or one of the counting links below."""

    def send(self, dst: str, tag: str, payload: Any) -> int: ...


class _WorkerLink:
    """A worker's sending side: its endpoint, counting the training messages and bytes it sends (cost model)."""

    def __init__(self, endpoint: Endpoint) -> None:
        self._endpoint = endpoint
        self.messages = 0
        self.bytes = 0

    def send(self, dst: str, tag: str, payload: Any) -> int:
        nbytes = self._endpoint.send(dst, tag, payload)
        self.messages += 1
        self.bytes += nbytes
        return nbytes


class _ServerLink:
    """The server's sending side: notes whom it answered, rejected or asked to refresh, and what it sent.

    On the simulated clock each answer and refresh request is followed by a :data:`TAG_AT` message with the
    simulated event it belongs to (:attr:`now`). Per worker it counts the training messages and bytes sent to
    it, a reject counting minus one (the cost model prices one pull per iteration; the reject stands in for
    the retried pull, which the worker counts).
    """

    def __init__(self, endpoint: Endpoint, workers: Sequence[str], *, simulated: bool) -> None:
        self._endpoint = endpoint
        self._simulated = simulated
        self.now: tuple[float, int] = (0.0, -1)
        self.answered: list[str] = []
        self.rejected: set[str] = set()
        self.refreshing: deque[str] = deque()
        self.messages = dict.fromkeys(workers, 0)
        self.bytes = dict.fromkeys(workers, 0)

    def send(self, dst: str, tag: str, payload: Any) -> int:
        nbytes = self._endpoint.send(dst, tag, payload)
        sign = -1 if tag == "reject" else 1
        self.messages[dst] += sign
        self.bytes[dst] += sign * nbytes
        if tag in ("sum", "residual"):
            self.answered.append(dst)
        elif tag == "reject":
            self.rejected.add(dst)
        elif tag == "refresh":
            self.refreshing.append(dst)
        if self._simulated and tag in ("sum", "residual", "refresh"):
            self._endpoint.send(dst, TAG_AT, {"time": self.now[0], "index": self.now[1]})
        return nbytes


def _duration_stream(rng: np.random.Generator, *, speed: float, jitter: float) -> Callable[[], float]:
    """Iteration times of one party: Gamma with mean 1/speed and coefficient of variation `jitter`."""
    if jitter == 0:
        return lambda: 1.0 / speed
    shape = 1.0 / jitter**2
    return lambda: float(rng.gamma(shape, jitter**2 / speed))


def _warmup_iterations(params: Params, schedule: Schedule) -> int:
    """Synchronous iterations at the start of Algorithm 1: the first epoch (``warmup: sync``) or none."""
    return schedule.n_batches if params.warmup == "sync" else 0


def _staleness_bounded_worker(params: Params, *, simulated: bool, **common: Any) -> Worker:
    return Worker(keep_previous=simulated, **common)


def _paper_worker(params: Params, *, simulated: bool, **common: Any) -> PaperWorker:
    return PaperWorker(warmup=_warmup_iterations(params, common["schedule"]), send_init=params.warmup == "x0",
                       own=params.own, private=params.variant == "label_private", **common)


def _staleness_bounded_server(params: Params, **common: Any) -> Server:
    return Server(**common)


def _paper_server(params: Params, **common: Any) -> PaperServer:
    return PaperServer(send_labels=params.variant == "paper", needs_init=params.warmup == "x0", own=params.own,
                       **common)


#: each variant's worker and server, built from the run's parameters and the role's common arguments
_WORKERS: dict[str, Callable[..., Worker | PaperWorker]] = {
    "paper": _paper_worker, "label_private": _paper_worker, "staleness_bounded": _staleness_bounded_worker}
_SERVERS: dict[str, Callable[..., Server | PaperServer]] = {
    "paper": _paper_server, "label_private": _paper_server, "staleness_bounded": _staleness_bounded_server}


def _worker_program(endpoint: Endpoint, party: Party, *, index: int, params: Params, schedule_seed: int,
                    iterations: int, lam: float, bias: bool, has_test: bool, timing_rng: np.random.Generator,
                    init_rng: np.random.Generator | None = None, model: LocalModel | None = None,
                    theta: np.ndarray | None = None, keep_snapshots: bool = False) -> dict[str, Any]:
    """Worker ``index``: its own features and local model; it talks only to the server.

    Per iteration it waits for the server's answer to its pull (``sum`` or ``residual``; ``reject``: pull
    again; ``refresh``: send its predictions on the asked batch), steps, and pushes (:class:`PaperWorker`,
    :class:`Worker`). Simulated clock: the answer comes with the simulated time at which it was given
    (:data:`TAG_AT`); the worker draws its iteration time from its own timing stream and tells the server
    when the iteration completes (:data:`TAG_DONE`) before pushing. Threads mode: it spends ``tick`` seconds
    per drawn time unit instead and then says it completes (:data:`TAG_DONE`, time NaN). After every epoch it sends its predictions on every training and test row
    (:data:`TAG_EVAL`). Returns its traffic counts and the flops of one row (cost model).
    """
    simulated = params.mode == "simulated"
    schedule = Schedule(party.n_samples, params.batch_size, seed=schedule_seed)
    if model is None:
        if init_rng is None:
            raise ValueError(f"worker {party.name!r}: needs its initialization stream or a model and theta")
        model = make_local_model(params.local_model, n_features=party.n_features, hidden=params.hidden, bias=bias)
        theta = model.init(init_rng)
    link = _WorkerLink(endpoint)
    duration = _duration_stream(timing_rng, speed=params.speeds[index], jitter=params.jitter)
    worker = _WORKERS[params.variant](params, name=endpoint.name, X=party.X, model=model, theta=theta, link=link,
                                      schedule=schedule, eta=params.eta, lam=lam, iterations=iterations,
                                      simulated=simulated)
    start = time.perf_counter()
    snapshots: list[np.ndarray] = []
    outstanding: tuple[float, int] | None = None  # the simulated event of the last completion
    worker.start()
    while not worker.done:
        tag, payload = endpoint.recv_first(SERVER, worker.ANSWERS)
        _check_answer(tag, payload, schedule=schedule, iterations=iterations, clock=worker.clock)
        if tag == "labels":
            worker.handle(SERVER, tag, payload)
            continue
        if tag == "reject":
            worker.handle(SERVER, tag, payload)
            if not simulated:
                time.sleep(max(params.tick, 1e-4))  # back off; simulated, the server reads it at its next event
            worker.retry()
            continue
        at = _check_at(endpoint.recv(SERVER, TAG_AT), workers=len(params.speeds)) if simulated else None
        if tag == "refresh":
            # On the simulated clock the request may belong to an event before the last completion, which
            # the server has not processed yet: then it gets the parameters before that step.
            previous = at is not None and outstanding is not None and (at["time"], at["index"]) < outstanding
            cast(Worker, worker).refresh(payload["clock"], previous=previous)
            continue
        worker.handle(SERVER, tag, payload)
        if at is not None:
            now = at["time"] + duration()
            endpoint.send(SERVER, TAG_DONE, {"time": now})
            outstanding = (now, index)
        else:
            now = float("nan")
            if params.tick > 0:
                time.sleep(params.tick * duration())  # the emulated compute time of an uneven party
            endpoint.send(SERVER, TAG_DONE, {"time": now})  # the server takes completions as they arrive
        worker.complete()
        endpoint.next_round()
        if worker.clock % schedule.n_batches == 0:
            # the clock stops for the evaluation: `seconds` is training time, as ADMM sharing's is
            stamp = time.perf_counter()
            scores = {"train": worker.model.forward(worker.theta, party.X)[0],
                      "sqnorm": float(np.dot(worker.theta, worker.theta)), "sim_time": now,
                      "seconds": stamp - start}
            if has_test:
                scores["test"] = worker.model.forward(worker.theta, party.X_test)[0]
            endpoint.send(SERVER, TAG_EVAL, scores)
            start += time.perf_counter() - stamp
            epoch = worker.clock // schedule.n_batches
            log.log(_progress_level(epoch, params.epochs), "%s: epoch %d/%d done (iteration %d), ||x_j||^2 = %.6g",
                    endpoint.name, epoch, params.epochs, worker.clock, scores["sqnorm"])
            if keep_snapshots:
                snapshots.append(worker.theta.copy())
    out: dict[str, Any] = {"messages": link.messages, "bytes": link.bytes,
                           "flops_per_row": _flops_per_row(params.local_model, party.X, params.hidden)}
    if keep_snapshots:
        out["snapshots"] = snapshots
    return out


def _check_answer(tag: str, payload: Any, *, schedule: Schedule, iterations: int, clock: int) -> None:
    """A server message to a worker at iteration `clock`, checked before use (:mod:`ppml.network.expect`):
    the labels (n values in [0, 1]); the answer to the current pull (its clock, and |I(clock)| finite sums,
    or residuals in [-1, 1]); a reject or refresh request (an iteration of the run)."""
    if tag == "labels":
        expect.mapping(payload, ("labels",), sender=SERVER, tag=tag)
        expect.vector(payload["labels"], sender=SERVER, tag=tag, length=schedule.n, dtype="number", low=0, high=1,
                      what="labels")
        return
    if tag in ("sum", "residual"):
        expect.mapping(payload, ("clock", tag), sender=SERVER, tag=tag)
        expect.integer(payload["clock"], sender=SERVER, tag=tag, low=clock, high=clock, what="clock")
        bound = 1.0 if tag == "residual" else None  # sigmoid(s) - y with y in {0, 1}
        expect.vector(payload[tag], sender=SERVER, tag=tag, length=schedule.size(clock), what=tag,
                      low=None if bound is None else -bound, high=bound)
        return
    expect.mapping(payload, ("clock",), sender=SERVER, tag=tag)
    expect.integer(payload["clock"], sender=SERVER, tag=tag, low=0, high=iterations - 1, what="clock")


def _check_at(payload: Any, *, workers: int) -> dict[str, Any]:
    """The simulated event of the server's preceding message, checked: a finite time >= 0, a worker index
    (or -1, the start)."""
    expect.mapping(payload, ("time", "index"), sender=SERVER, tag=TAG_AT)
    expect.scalar(payload["time"], sender=SERVER, tag=TAG_AT, low=0.0, what="time")
    expect.integer(payload["index"], sender=SERVER, tag=TAG_AT, low=-1, high=workers - 1, what="index")
    return payload


#: the fields of each worker message to the server, besides its payload's ``alpha`` (where it has one)
_WORKER_FIELDS: dict[str, tuple[str, ...]] = {
    "alpha": ("clock", "alpha"), "alpha_refresh": ("clock", "version", "alpha"), "init": ("alpha",),
    "pull": ("clock",), "pull_sync": ("clock", "alpha"), "pull_fresh": ("clock", "alpha"), "push": ("clock", "alpha")}


def _check_request(src: str, tag: str, payload: Any, *, schedule: Schedule, iterations: int) -> Any:
    """A worker's protocol message to the server, checked before use (:mod:`ppml.network.expect`): an
    iteration of the run (a refresh answer's version at most `iterations`), and its finite local predictions
    on that iteration's batch (``init``: on every training row)."""
    fields = _WORKER_FIELDS.get(tag)
    if fields is None:
        return payload  # not a worker message: the server's handler refuses it
    expect.mapping(payload, fields, sender=src, tag=tag)
    if "clock" in fields:
        expect.integer(payload["clock"], sender=src, tag=tag, low=0, high=iterations - 1, what="clock")
    if "version" in fields:
        expect.integer(payload["version"], sender=src, tag=tag, low=0, high=iterations, what="version")
    if "alpha" in fields:
        rows = schedule.n if tag == "init" else schedule.size(payload["clock"])
        expect.vector(payload["alpha"], sender=src, tag=tag, length=rows, what="alpha")
    return payload


def _check_done(src: str, payload: Any, *, simulated: bool) -> dict[str, Any]:
    """A worker's completion: a finite time >= 0 on the simulated clock, NaN in threads mode."""
    expect.mapping(payload, ("time",), sender=src, tag=TAG_DONE)
    expect.scalar(payload["time"], sender=src, tag=TAG_DONE, finite=simulated, low=0.0, what="time")
    return payload


def _check_scores(src: str, payload: Any, *, n: int, n_test: int | None, has_test: bool) -> dict[str, Any]:
    """A worker's evaluation message: its predictions on the n training (and the test) rows, ||x_j||^2 and
    its clocks (the simulated time is NaN in threads mode)."""
    expect.mapping(payload, ("train", "sqnorm", "sim_time", "seconds") + (("test",) if has_test else ()),
                   sender=src, tag=TAG_EVAL)
    expect.vector(payload["train"], sender=src, tag=TAG_EVAL, length=n, what="train")
    if has_test:
        expect.vector(payload["test"], sender=src, tag=TAG_EVAL, length=n_test, what="test")
    expect.scalar(payload["sqnorm"], sender=src, tag=TAG_EVAL, low=0.0, what="sqnorm")
    expect.scalar(payload["sim_time"], sender=src, tag=TAG_EVAL, finite=False, low=0.0, what="sim_time")
    expect.scalar(payload["seconds"], sender=src, tag=TAG_EVAL, low=0.0, what="seconds")
    return payload


def _progress_level(epoch: int, epochs: int) -> int:
    """Info for about ten epochs of a run (the first, every tenth of the way, the last), else debug: each party
    logs its progress without a line per epoch."""
    return logging.INFO if epoch in (1, epochs) or epoch % max(1, epochs // 10) == 0 else logging.DEBUG


def _log_epoch(party: Party, workers: list[str], parts: dict[str, dict[str, Any]], *, epoch: int, epochs: int,
               lam: float) -> None:
    """The server's progress line for an epoch every worker has scored: the composite model's objective."""
    level = _progress_level(epoch, epochs)
    if not log.isEnabledFor(level):
        return
    train = sum(parts[w]["train"] for w in workers)
    sqnorm = sum(parts[w]["sqnorm"] for w in workers)
    log.log(level, "%s: epoch %d/%d: train objective %.6g", SERVER, epoch, epochs,
            logistic_objective(train, party.y, None, lam, sqnorm=sqnorm))


def _server_program(endpoint: Endpoint, party: Party, *, workers: list[str], params: Params,
                    schedule_seed: int, iterations: int, lam: float, has_test: bool) -> dict[str, Any]:
    """The parameter server, run by the label holder: :class:`PaperServer` or :class:`Server` on its own data.

    Simulated clock, a conservative discrete-event simulation: every worker the server has answered is
    computing, and tells when its iteration completes (:data:`TAG_DONE`); the server processes the earliest
    completion (ties: the lower worker index) only once it holds the completion time of every computing
    worker, so the order of events, and every number, is fixed by the seeds. Processing worker j's
    completion: its push (and next pull), then the refresh answers in the order they were asked for, then one
    retry pull of every worker rejected before (in worker order). Threads mode: the same steps, the workers'
    completions taken in the order their :data:`TAG_DONE` arrive (real timing on a concurrent transport); the
    staleness each push had (the server's clock, the most iterations any worker completed, minus the worker's)
    is recorded. Evaluation: each epoch's scores of every worker, summed in worker order.
    """
    if party.y is None:
        raise ValueError(f"party {party.name!r} runs the FDML server but holds no labels")
    simulated = params.mode == "simulated"
    schedule = Schedule(party.n_samples, params.batch_size, seed=schedule_seed)
    link = _ServerLink(endpoint, workers, simulated=simulated)
    server = _SERVERS[params.variant](params, workers=workers, labels=party.y, link=link, schedule=schedule,
                                      tau=params.tau, iterations=iterations)

    def receive(src: str, tags: tuple[str, ...]) -> None:
        tag, payload = endpoint.recv_first(src, tags)
        server.handle(src, tag, _check_request(src, tag, payload, schedule=schedule, iterations=iterations))

    def settle() -> None:  # refresh answers, in the order they were asked for
        while link.refreshing:
            k = link.refreshing.popleft()
            server.handle(k, "alpha_refresh", _check_request(k, "alpha_refresh", endpoint.recv(k, "alpha_refresh"),
                                                             schedule=schedule, iterations=iterations))

    n_test = None if party.y_test is None else len(party.y_test)
    start = time.perf_counter()
    server.start()
    for w in workers:
        for tags in server.opening():
            receive(w, tags)
    settle()

    completed = dict.fromkeys(workers, 0)
    busy: set[str] = set()
    stamps: dict[str, float] = {}
    scores: list[dict[str, dict[str, Any]]] = [{} for _ in range(params.epochs)]
    observed: list[int] = []
    floor = server.min_clock
    while any(c < iterations for c in completed.values()):
        busy.update(link.answered)
        link.answered.clear()
        computing = [i for i, w in enumerate(workers) if w in busy]
        if not computing:
            raise RuntimeError("fdml: the simulation stopped with unanswered pulls")
        if simulated:
            for i in computing:
                if workers[i] not in stamps:
                    stamps[workers[i]] = _check_done(workers[i], endpoint.recv(workers[i], TAG_DONE),
                                                     simulated=True)["time"]
            link.now = min((stamps[workers[i]], i) for i in computing)
            j = link.now[1]
            del stamps[workers[j]]
        else:  # the first completion to arrive: real asynchrony on a concurrent transport
            done, _, payload = endpoint.recv_any([workers[i] for i in computing], (TAG_DONE,))
            _check_done(done, payload, simulated=False)
            j = workers.index(done)
        w = workers[j]
        busy.discard(w)
        completed[w] += 1
        c = completed[w]
        for tags in server.after(last=c == iterations):
            receive(w, tags)
        if not simulated:
            observed.append(max(completed.values()) - c)
        settle()
        if c % schedule.n_batches == 0:
            epoch = c // schedule.n_batches
            scores[epoch - 1][w] = _check_scores(w, endpoint.recv(w, TAG_EVAL), n=schedule.n, n_test=n_test,
                                                 has_test=has_test)
            if len(scores[epoch - 1]) == len(workers):
                _log_epoch(party, workers, scores[epoch - 1], epoch=epoch, epochs=params.epochs, lam=lam)
        retrying = [k for k in workers if k in link.rejected]  # a rejected worker pulls again once per event
        link.rejected.clear()
        for k in retrying:
            receive(k, ("pull",))
        if server.min_clock > floor:  # one communication round per global iteration
            floor = server.min_clock
            endpoint.next_round()
    if not server.finished:
        raise RuntimeError("fdml: the simulation stopped with unanswered pulls")
    seconds = time.perf_counter() - start

    trace = {"delays": np.array(server.delays, dtype=np.int64).reshape(-1, 3),
             "mean_ages": np.array(server.mean_ages, dtype=float), "refreshes": server.refreshes,
             "rejections": server.rejections, "gaps": np.array(server.gaps, dtype=np.int64),
             "sim_time": [[scores[e][w]["sim_time"] for e in range(params.epochs)] for w in workers],
             "seconds": [[scores[e][w]["seconds"] for e in range(params.epochs)] for w in workers],
             "sent": {w: (link.messages[w], link.bytes[w]) for w in workers}}
    history = _history(party, workers, params, trace, scores, observed, schedule=schedule, lam=lam,
                       has_test=has_test and party.y_test is not None, seconds=seconds)
    return {"history": history, "trace": trace}


def _history(party: Party, workers: list[str], params: Params, trace: dict[str, Any],
             scores: list[dict[str, dict[str, Any]]], observed: list[int], *, schedule: Schedule, lam: float,
             has_test: bool, seconds: float) -> History:
    """The server's record of the run: per epoch the composite model's metrics from the workers' scores.

    ``cost_seconds`` is left None here: it needs every worker's own traffic counts (:func:`assemble`).
    """
    history = History("fdml")
    delays, mean_ages = trace["delays"], trace["mean_ages"]
    epoch_of = delays[:, 0] // schedule.n_batches
    train_scores = test_scores = None
    for e in range(params.epochs):
        parts = [scores[e][w] for w in workers]
        train_scores = parts[0]["train"]
        sqnorm = parts[0]["sqnorm"]
        for p in parts[1:]:
            train_scores = train_scores + p["train"]
            sqnorm += p["sqnorm"]
        record = {"epoch": e + 1,
                  "train_objective": logistic_objective(train_scores, party.y, None, lam, sqnorm=sqnorm)}
        if has_test:
            test_scores = parts[0]["test"]
            for p in parts[1:]:
                test_scores = test_scores + p["test"]
            test = binary_metrics(party.y_test, test_scores)
            record.update(test_logloss=test["logloss"], test_auc=test["auc"])
        in_epoch = epoch_of == e
        record.update(sim_time=max(p["sim_time"] for p in parts), seconds=max(p["seconds"] for p in parts),
                      cost_seconds=None, max_delay=int(delays[in_epoch, 2].max()),
                      mean_delay=float(mean_ages[in_epoch].mean()))
        history.log(**record)

    objectives = [r["train_objective"] for r in history.records]
    change = (abs(objectives[-1] - objectives[-2]) / max(abs(objectives[-1]), 1e-12) if params.epochs > 1
              else float("inf"))
    history.stop(converged=change <= params.tol,
                 reason=f"ran {params.epochs} epochs; last-epoch relative change of the objective "
                        f"{change:.3g} (tol {params.tol:g})")
    sim_time = max(ts[-1] for ts in trace["sim_time"])  # NaN in threads mode, written as null
    protocol_seconds = max(s[-1] for s in trace["seconds"])
    variant_name = params.variant if len(workers) > 1 else "sgd"  # a single worker: plain mini-batch SGD
    extra: dict[str, Any] = dict(workers=list(workers), server_at=party.name, n_batches=schedule.n_batches,
                                 protocol=variant_name)
    if params.variant == "staleness_bounded":
        extra["delay_histogram"] = np.bincount(delays[:, 2], minlength=params.tau + 1).tolist()
    else:
        extra["warmup"] = params.warmup
        extra["own"] = params.own
        extra["age_quantiles"] = {q: float(np.quantile(delays[:, 2], q / 100)) for q in (0, 50, 90, 100)}
    if observed:  # threads mode: the staleness the pushes really had
        extra["observed_staleness"] = {"histogram": np.bincount(observed).tolist(), "max": int(max(observed)),
                                       "mean": float(np.mean(observed))}
    history.extra.update(extra)
    own = {"stored": " (the worker's own term from A, as Algorithm 1's sum is written)",
           "fresh": " (the worker's own term fresh, as in model (8))"}[params.own]
    history.ledger.notes.append(
        f"protocol {variant_name}: " + {
            "paper": f"Algorithm 1{own}; the labels were sent to every worker; no noise, nothing certified",
            "label_private": f"Algorithm 1{own} with residuals at the label holder; labels never sent; no noise",
            "staleness_bounded": "model (8) with bounded staleness; labels never sent; no noise",
            "sgd": "one worker (centralized or local baseline), nothing crosses; no noise"}[variant_name])
    history.finish(
        train_objective=objectives[-1], y_train=party.y, train_scores=train_scores,
        y_test=party.y_test if has_test else None, test_scores=test_scores,
        protocol=variant_name, sim_time=sim_time, sim_time_per_epoch=sim_time / params.epochs,
        protocol_seconds=protocol_seconds, seconds_per_epoch=protocol_seconds / params.epochs,
        cost_seconds=None, cost_seconds_per_epoch=None,
        max_delay=int(delays[:, 2].max()), mean_delay=float(mean_ages.mean()),
        refreshes=trace["refreshes"], rejections=trace["rejections"],
        max_gap=int(trace["gaps"].max()) if trace["gaps"].size else None, workers=len(workers), lam_mean=lam)
    return history


def _roles(names: Sequence[str], *, server_shard: str, params: Params, n: int, schedule_seed: int,
           timing: Sequence[np.random.Generator], biases: Sequence[bool], has_test: bool,
           inits: Sequence[dict[str, Any]], keep_snapshots: bool = False) -> list[Role]:
    """The workers' programs, then the server's (which loads `server_shard`, the label holder's)."""
    iterations = params.epochs * -(-n // params.batch_size)
    lam = mean_form_lam(params.lam, objective=params.objective, n_samples=n)
    common = {"params": params, "schedule_seed": schedule_seed, "iterations": iterations, "lam": lam,
              "has_test": has_test}
    out = [Role(name, _worker_program, name, {**common, "index": j, "bias": bias, "timing_rng": g,
                                              "keep_snapshots": keep_snapshots, **init})
           for j, (name, bias, g, init) in enumerate(zip(names, biases, timing, inits))]
    out.append(Role(SERVER, _server_program, server_shard, {**common, "workers": list(names)}))
    return out


# ---------------------------------------------------------------------------------------------------------
# simulate: the programs on given arrays


@dataclass
class Trace:
    """What a protocol run leaves besides the History (for :func:`simulate`'s callers).

    Attributes
    ----------
    snapshots : list (per party) of list (per epoch) of ndarray
        Each party's parameters when it completed each epoch (returned by each worker's own program).
    sim_time : list (per party) of list (per epoch) of float
        Simulated time at which each party completed each epoch (NaN in threads mode).
    seconds : list (per party) of list (per epoch) of float
        Wall seconds since the party's start at the same moments, its evaluations excluded (training time).
    delays : ndarray of int, shape (n_answers, 3)
        For every answered pull: iteration, party index, largest delay (age of a used prediction) used
        (Algorithm 1: of the entries read from A; 0 when none is, a fresh own term being current).
    refreshes : int
        Refresh requests the server sent (``staleness_bounded``).
    mean_ages : ndarray of float, shape (n_answers,)
        Mean age of the predictions used in every answer (``staleness_bounded``: the largest; Algorithm 1: of
        the entries read from A).
    rejections : int
        Pulls the server rejected under the clock-gap rule (paper, label_private).
    gaps : ndarray of int
        Clock gap t - (slowest worker's clock) at every answered pull (paper, label_private; else empty).
    """

    snapshots: list[list[np.ndarray]]
    sim_time: list[list[float]]
    seconds: list[list[float]]
    delays: np.ndarray
    refreshes: int
    mean_ages: np.ndarray = field(default_factory=lambda: np.zeros(0))
    rejections: int = 0
    gaps: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))


def simulate(names: Sequence[str], Xs: Sequence[Matrix], y01: np.ndarray, *, models: Sequence[LocalModel],
             thetas: Sequence[np.ndarray], schedule: Schedule, params: Params, network: Network,
             rng: np.random.Generator) -> Trace:
    """Run the FDML role programs on given arrays: one worker per feature block plus the server.

    Parameters
    ----------
    names : sequence of str
        The workers' network addresses (the network also has :data:`SERVER`).
    Xs : sequence of matrices
        Each worker's training features (same rows, aligned); each becomes that worker's shard.
    y01 : ndarray
        Training labels: the server's shard.
    models, thetas : sequences
        Each worker's local model and initial parameters.
    schedule : Schedule
        The shared batch schedule (its seed is what the roles share).
    params : Params
        variant, own, warmup, tau, eta, lam and objective (n is the schedule's), epochs, speeds (already one
        per worker), jitter, mode and tick are used.
    network : Network
        Carries every message.
    rng : numpy.random.Generator
        Source of the simulated iteration times (one stream per worker).

    Returns
    -------
    Trace
        Per-epoch parameter snapshots, times and the delays the server used.
    """
    m = len(names)
    if not len(Xs) == len(models) == len(thetas) == len(params.speeds) == m:
        raise ValueError(f"need one X, model, theta and speed per worker ({m} workers)")
    ids = np.arange(schedule.n).astype(str)
    shards = {name: Party(name=name, columns=tuple(f"x{i}" for i in range(X.shape[1])), ids=ids, X=X)
              for name, X in zip(names, Xs)}
    shards[SERVER] = Party(name=SERVER, columns=(), ids=ids, X=np.zeros((schedule.n, 0)), y=y01)
    roles = _roles(names, server_shard=SERVER, params=params, n=schedule.n, schedule_seed=schedule.seed,
                   timing=rng.spawn(m), biases=[False] * m, has_test=False,
                   inits=[{"model": model, "theta": theta} for model, theta in zip(models, thetas)],
                   keep_snapshots=True)
    results = runtime.run_inprocess(roles, network, shards)
    trace = results[SERVER]["trace"]
    return Trace(snapshots=[results[name]["snapshots"] for name in names], sim_time=trace["sim_time"],
                 seconds=trace["seconds"], delays=trace["delays"], refreshes=trace["refreshes"],
                 mean_ages=trace["mean_ages"], rejections=trace["rejections"], gaps=trace["gaps"])


# ---------------------------------------------------------------------------------------------------------
# entry points


def _hstack(mats: Sequence[Matrix]) -> Matrix:
    if any(sp.issparse(M) for M in mats):
        return sp.csr_array(sp.hstack([sp.csr_array(M) for M in mats], format="csr"))
    return np.hstack([np.asarray(M, dtype=float) for M in mats])


def _worker_names(parties: Sequence[Party], features: str) -> list[str]:
    if features == "split":
        return [p.name for p in parties]
    if features == "local":
        return [label_holder(list(parties)).name]
    return [POOLED]


def _run_parties(parties: Sequence[Party], features: str) -> list[Party]:
    """The workers' shards: the parties (split), the label holder alone (local), or, for the centralized
    baseline (all), every party's columns pooled in one place before the run, as that baseline assumes."""
    holder = label_holder(list(parties))
    if features == "split":
        return list(parties)
    if features == "local":
        return [holder]
    tests = [p.X_test for p in parties]
    return [Party(name=POOLED, columns=tuple(c for p in parties for c in p.columns), ids=holder.ids,
                  X=_hstack([p.X for p in parties]), y=holder.y, test_ids=holder.test_ids,
                  X_test=None if any(T is None for T in tests) else _hstack(tests), y_test=holder.y_test)]


def network_for(parties: Sequence[Party], params: Params, *, rng: np.random.Generator,
                capture: bool = False) -> Network:
    """The workers of the run plus the parameter server."""
    return Network([*_worker_names(parties, params.features), SERVER], capture=capture)


def _flops_per_row(model_kind: str, X: Matrix, hidden: int) -> float:
    """Floating-point operations of one row's forward and backward pass (the cost model's compute)."""
    d = X.nnz / X.shape[0] if sp.issparse(X) else X.shape[1]
    return 4.0 * d if model_kind == "lr" else 6.0 * (d + 1) * hidden


def _cost_per_iteration(reports: Sequence[dict[str, Any]], sent: Sequence[tuple[int, int]], params: Params, *,
                        iterations: int) -> float:
    """Seconds per iteration under the cost model: the slowest worker's compute plus its traffic.

    Worker j's iteration costs ``flops_j / flop_rate`` plus, amortized over the run, ``latency`` per message
    it sent or received and its bytes / ``bandwidth`` (one-off messages such as the labels included; rejected
    pulls and their retries excluded, the reject standing in for the retried pull's size). Each worker counts
    what it sent, the server what it sent to each worker (a reject as minus one). The parties iterate in lock
    step in this model, so the per-iteration time is the maximum over workers; a single worker (centralized,
    local) has no messages. The constants are parameters, not measurements.
    """
    single = len(reports) == 1  # all data in one place: nothing needs to cross
    costs = []
    for report, (to_count, to_bytes) in zip(reports, sent):
        flops = params.batch_size * report["flops_per_row"]
        count, nbytes = report["messages"] + to_count, report["bytes"] + to_bytes
        comm = 0.0 if single else (count * params.latency + nbytes / params.bandwidth) / iterations
        costs.append(flops / params.flop_rate + comm)
    return max(costs)


def _public_workers(public: Public, features: str) -> list[str]:
    if features == "split":
        return public.names
    if features == "local":
        return [public.label_holders[0]]
    if public.names != [POOLED]:
        raise ValueError(f"features: all runs on the pooled columns of every party (shard {POOLED!r}, built "
                         f"by fdml.fit before the run); got parties {public.names}")
    return [POOLED]


def roles(public: Public, params: Params, *, rng: np.random.Generator, network: Network | None = None
          ) -> list[Role]:
    """One program per worker (its own shard) and the server's (the label holder's shard).

    From `rng`, as the sample coordinator: the schedule's seed, then one timing stream per worker and each
    worker's initialization stream.
    """
    holder = public.vertical_label_holder("fdml")
    names = _public_workers(public, params.features)
    if network is not None and list(network.names) != [*names, SERVER]:
        raise ValueError(f"network addresses {network.names} do not match the run's roles {[*names, SERVER]}")
    if params.speeds and len(params.speeds) != len(names):
        fail("speeds", f"has {len(params.speeds)} entries but the run has {len(names)} workers {names}")
    # One worker (centralized, local) is standard mini-batch SGD, as Table I's baselines: fresh predictions
    # (the single-worker case of model (8)); A's epoch-old entries belong to the distributed protocol only.
    single = len(names) == 1
    run_params = dataclasses.replace(params, speeds=params.speeds or (1.0,) * len(names),
                                     variant="staleness_bounded" if single else params.variant,
                                     own="fresh" if single else params.own)
    schedule_rng, timing_rng, *init_rngs = rng.spawn(2 + len(names))
    schedule_seed = int(schedule_rng.integers(2**63))
    infos = [public.info(name) for name in names]
    for info in infos:
        if info.train_rows != holder.train_rows:
            raise ValueError(f"party {info.name!r}: its training rows are not aligned with {holder.name!r}'s "
                             f"({info.train_rows} rows, {holder.train_rows})")
    has_test = holder.test_rows > 0 and all(info.test_rows == holder.test_rows for info in infos)
    biases = [info.label_holder if params.features == "split" else True for info in infos]
    return _roles(names, server_shard=holder.name, params=run_params, n=holder.train_rows,
                  schedule_seed=schedule_seed, timing=timing_rng.spawn(len(names)), biases=biases,
                  has_test=has_test, inits=[{"init_rng": g} for g in init_rngs])


def assemble(public: Public, params: Params, results: dict[str, Any]) -> History:
    """The server's History, with the cost model's seconds from every worker's own traffic counts."""
    server = results[SERVER]
    history: History = server["history"]
    names = history.extra["workers"]
    n_batches = history.extra["n_batches"]
    sent = server["trace"]["sent"]
    per_iteration = _cost_per_iteration([results[name] for name in names], [sent[name] for name in names],
                                        params, iterations=params.epochs * n_batches)
    for e, record in enumerate(history.records):
        record["cost_seconds"] = (e + 1) * n_batches * per_iteration
    history.final["cost_seconds"] = params.epochs * n_batches * per_iteration
    history.final["cost_seconds_per_epoch"] = n_batches * per_iteration
    return history


def fit(parties: list[Party], network: Network, params: Params, *, rng: np.random.Generator,
        evaluation: Party | None = None) -> History:
    """Train the composite model by FDML and evaluate it after every epoch, in this process.

    Parameters
    ----------
    parties : list of Party
        Vertical parties in the prepared order; exactly one holds the labels (and runs the server).
    network : Network
        From :func:`network_for`.
    params : Params
        The run's parameters.
    rng : numpy.random.Generator
        Source of the shared schedule seed, the parties' initial parameters and the simulated times.
    evaluation : None
        FDML trains on vertical data, whose test rows each party carries; a horizontal evaluation party is
        an error.

    Returns
    -------
    History
        Per epoch: ``epoch``, ``train_objective``, ``test_logloss``, ``test_auc``, ``sim_time`` (simulated
        time units when the last party finished the epoch), ``seconds`` (wall time of the protocol: the
        slowest party's own clock, its evaluations excluded), ``max_delay`` and ``mean_delay`` (staleness the
        server used). Final metrics add ``sim_time``,
        ``protocol_seconds``, per-epoch averages, ``max_delay``, ``mean_delay``, ``refreshes`` and
        ``lam_mean`` (the weight of f, given `objective`).
    """
    if evaluation is not None:
        fail("dataset", "must be vertically partitioned for fdml; it has a horizontal evaluation party "
                        "(horizontal data)")
    return runtime.fit(sys.modules[__name__], _run_parties(parties, params.features), network, params, rng=rng)
