"""FDML: synchronous and stale-synchronous asynchronous SGD over vertically partitioned features.

Reproduces Hu, Niu, Yang, *Stochastic Distributed Optimization for Machine Learning from Decentralized
Features* (FDML), Table I (LR / NN local models x local / centralized / FDML: train objective, test log loss,
test AUC, time) on public data, and its staleness behaviour; with ``tau = 0`` it is the synchronous
mini-batch SGD baseline of Hu, Niu, Yang, Zhou, *Learning Privately over Distributed Features: an ADMM
Sharing Approach* (AAAI 2020), Fig. 1a/2a. Specs: ``shared/specs/fdml_paper.md`` (Algorithm 1, Table I;
overrules) and ``shared/specs/fdml_ssp.md`` (the ``staleness_bounded`` variant).

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

``paper`` (default): Algorithm 1 as written (``shared/specs/fdml_paper.md``). The server sends the labels to
every worker before training. It keeps the prediction matrix A (n x m). Pull(j, t): unless t is more than
``tau`` iterations ahead of the slowest worker (then the pull is rejected and the worker retries; rejections
are counted), the server sends sum_k A[I(t), k]; the worker computes H' = sigmoid(sum) - y with its own copy
of the labels, steps by eq. (9), x^j <- x^j - eta_t (J_j(x^j_t)^T H' / |I(t)| + lam x^j),
eta_t = eta / sqrt(t) (t counted from 1), and pushes its post-update predictions
alpha^j(x^j_(t+1), xi^j_I(t)), which the server stores in A. So the other parties' entries for a row are
what they pushed when they last processed it: after the first epoch, about an epoch old.
A is filled by a synchronous first epoch (``warmup: sync``, default, the
paper's suggestion): in epoch 1 the pull carries the worker's current predictions and the server answers with
their fresh sum once all have arrived, so epoch 1 is exactly synchronous mini-batch SGD; ``warmup: x0``
instead initializes A with alpha(x_0) for all rows and applies the clock-gap rule from iteration 0. What
``tau = 0`` equals: lock-step iterations in which row i's prediction is the composite model at the joint
iterate right after the row's previous visit (an epoch-old iterate), i.e. synchronous SGD with epoch-delayed
predictions; it is synchronous mini-batch SGD exactly in epoch 1 (``warmup: sync``) and throughout when one
batch is the whole training set. The tests check both against numpy references (<= 1e-12).

``label_private``: the same protocol, but the labels never leave the label holder: the server answers a pull
with the residual sigmoid(sum_k A[I(t), k]) - y instead of the sum (same iterates as ``paper``).

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

Execution. ``mode: simulated`` (default) runs the roles as event handlers on a simulated clock: each
party's iteration takes a random time (Gamma with mean ``1 / speeds[j]`` and coefficient of variation
``jitter``, from a per-party seeded stream), so a seed fixes the interleaving and the run. ``mode: threads``
runs the same role objects in one thread per role under real scheduling; a party's iteration then lasts at
least ``tick`` seconds per simulated time unit (emulating uneven parties), during which it still answers
refresh requests. Its interleaving is not reproducible, so neither are its results unless ``tau = 0``. In
both modes a refresh costs no compute time (a party is assumed to serve refreshes alongside its step).

Threat model: parties and server are honest-but-curious. The server is operated by the label holder. In
``paper`` the label vector is sent to every worker (the paper's design); in ``label_private`` and
``staleness_bounded`` it never crosses, but the residuals reveal each batch row's label through their sign
(``r < 0`` iff ``y = 1``). What else crosses: each party's local predictions (to the server), prediction sums
or residuals (to the party), iteration numbers (pull, reject, refresh). No feature and no local parameter
leaves its owner. No noise is added (the spec's optional DP on local
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
import heapq
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Callable, Literal, Sequence

import numpy as np
import scipy.sparse as sp
from scipy.special import expit

from ppml.config import fail
from ppml.history import History
from ppml.metrics import binary_metrics
from ppml.models.local import LocalModel, l2_penalty, make_local_model
from ppml.models.losses import Objective, logistic_objective, mean_form_lam
from ppml.network import Network
from ppml.parties import Matrix, Party, label_holder

__all__ = ["MESSAGES", "MESSAGES_PAPER", "MESSAGES_STALENESS_BOUNDED", "MESSAGES_BY_VARIANT", "Params",
           "Schedule", "Trace", "Worker", "Server", "PaperWorker", "PaperServer", "SERVER", "POOLED",
           "network_for", "simulate", "fit"]

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
    {"tag": "reject", "src": SERVER, "dst": "party",
     "content": "{clock t}: the pull is refused, t is more than tau ahead of the slowest worker; retry",
     "protection": "none: an iteration number"},
    {"tag": "sum", "src": SERVER, "dst": "party",
     "content": "{clock t, sum}: sum_k A[I(t), k] (|I(t)| floats; paper)",
     "protection": "none: plaintext aggregate predictions"},
    {"tag": "residual", "src": SERVER, "dst": "party",
     "content": "{clock t, residual}: sigmoid(sum_k A[I(t), k]) - y on I(t) (label_private only)",
     "protection": "none: reveals the batch's labels through its sign"},
    {"tag": "push", "src": "party", "dst": SERVER,
     "content": "{clock t, alpha}: Push(j, t, alpha^j(x^j_(t+1), xi^j_I(t))): post-update predictions on "
                "I(t) (|I(t)| floats); the server sets A[I(t), j]",
     "protection": "none: plaintext local predictions (no features, no parameters)"},
)

#: every message any variant sends, by variant
MESSAGES_BY_VARIANT: dict[str, tuple[dict[str, str], ...]] = {
    "paper": tuple(m for m in MESSAGES_PAPER if m["tag"] != "residual"),
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
        ``paper`` (default): Algorithm 1 as written: the labels are sent to every worker, the server keeps
        the prediction matrix A of post-update pushes and rejects a pull that is more than `tau` iterations
        ahead of the slowest worker. ``label_private``: the same A-matrix protocol, but the server (run by the
        label holder) returns residuals and the labels never leave it. ``staleness_bounded``: model (8)
        with every used prediction at most `tau` iterations old (refresh messages); ``tau = 0`` is exactly
        synchronous mini-batch SGD.
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
# transport: the network's messages delivered in the order they were sent


class _Mailbox:
    """Delivers the network's messages to roles in send order (a FIFO link per destination).

    The network keeps one queue per (src, dst, tag); this adds the order across tags and senders, which the
    roles rely on (a party's push for iteration t reaches the server before its later refresh answers).
    All network access is under one lock so that the threads mode can share it.
    """

    def __init__(self, network: Network, *, threaded: bool) -> None:
        self._network = network
        self._threaded = threaded
        self._inbox: dict[str, deque[tuple[str, str]]] = {name: deque() for name in network.names}
        self._order: deque[str] = deque()  # destinations in send order (simulated delivery)
        self._cond = threading.Condition()

    def send(self, src: str, dst: str, tag: str, payload: Any) -> None:
        with self._cond:
            self._network.send(src, dst, tag, payload)
            self._inbox[dst].append((src, tag))
            if not self._threaded:
                self._order.append(dst)
            self._cond.notify_all()

    def next_message(self) -> tuple[str, str, str, Any] | None:
        """Simulated delivery: the oldest undelivered message as (dst, src, tag, payload), or None."""
        if not self._order:
            return None
        dst = self._order.popleft()
        src, tag = self._inbox[dst].popleft()
        return dst, src, tag, self._network.recv(dst, src, tag)

    def wait(self, dst: str, stop: threading.Event, *,
             timeout: float | None = None) -> tuple[str, str, Any] | None:
        """Threads delivery: block until a message for `dst` arrives; None once `stop` is set or after
        `timeout` seconds."""
        deadline = None if timeout is None else time.perf_counter() + timeout
        with self._cond:
            while not self._inbox[dst]:
                left = 0.05 if deadline is None else min(0.05, deadline - time.perf_counter())
                if stop.is_set() or left <= 0:
                    return None
                self._cond.wait(timeout=left)
            src, tag = self._inbox[dst].popleft()
            return src, tag, self._network.recv(dst, src, tag)

    def next_round(self) -> None:
        with self._cond:
            self._network.next_round()


class _Link:
    """A role's sending side: it can only send as itself."""

    __slots__ = ("_mailbox", "name")

    def __init__(self, mailbox: _Mailbox, name: str) -> None:
        self._mailbox = mailbox
        self.name = name

    def send(self, dst: str, tag: str, payload: Any) -> None:
        self._mailbox.send(self.name, dst, tag, payload)


# ---------------------------------------------------------------------------------------------------------
# roles


class Worker:
    """Party ``j``'s role: its own features and local model; it talks only to the server.

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
    link : _Link
        Its sending side of the network.
    schedule : Schedule
        Its own copy of the shared batch schedule.
    eta, lam : float
        Base step size and l2 weight.
    iterations : int
        Iterations to perform.
    """

    def __init__(self, *, name: str, X: Matrix, model: LocalModel, theta: np.ndarray, link: _Link,
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
        self._batch: tuple[Matrix, Any] | None = None  # rows and forward cache of the pushed batch
        self._residual: np.ndarray | None = None
        self.retry_pending = False  # this variant never rejects a pull

    @property
    def computing(self) -> bool:
        """The server has answered the current pull; the local step is under way."""
        return self._residual is not None

    @property
    def done(self) -> bool:
        return self.clock >= self.iterations

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
            t = payload["clock"]
            alpha, _ = self.model.forward(self.theta, self._schedule.batch(self._X, t))
            self._link.send(SERVER, "alpha_refresh", {"clock": t, "version": self.clock, "alpha": alpha})
        else:
            raise ValueError(f"{self.name}: unexpected message {tag!r} from {src!r}")

    def complete(self) -> None:
        """Finish the current iteration: local gradient from the residual, step, and the next push."""
        if self._residual is None or self._batch is None:
            raise RuntimeError(f"{self.name}: no residual to complete iteration {self.clock} with")
        Xb, cache = self._batch
        r = self._residual
        _, reg = l2_penalty(self.theta, self._lam)
        grad = self.model.backward(self.theta, Xb, cache, r / len(r)) + reg
        self.theta -= (self._eta / np.sqrt(self.clock + 1)) * grad
        self.clock += 1
        self._residual = None
        self._batch = None
        if not self.done:
            self._push()


class Server:
    """The parameter server, operated by the label holder.

    It keeps the parties' local predictions for the live batches with the parameter version that produced
    them, answers pulls under the stale-synchronous rule, and records the delay actually used in every
    answer.

    Parameters
    ----------
    workers : sequence of str
        The parties' addresses, in the order the aggregate is summed.
    labels : ndarray of {0, 1}
        The training labels (the label holder's own; never sent).
    link : _Link
        The server's sending side.
    schedule : Schedule
        Its own copy of the shared batch schedule.
    tau : int
        Staleness bound.
    iterations : int
        Iterations every party performs.
    """

    def __init__(self, *, workers: Sequence[str], labels: np.ndarray, link: _Link, schedule: Schedule,
                 tau: int, iterations: int) -> None:
        self._workers = tuple(workers)
        self._index = {w: i for i, w in enumerate(self._workers)}
        self._y = np.asarray(labels, dtype=float)
        self._link = link
        self._schedule = schedule
        self._tau = tau
        self._iterations = iterations
        self._clocks = dict.fromkeys(self._workers, -1)  # latest iteration each party pushed (-1: none yet)
        self._table: dict[int, dict[str, tuple[int, np.ndarray]]] = {}  # t -> party -> (version, alpha)
        self._pulls: list[tuple[int, int]] = []  # waiting (t, party index)
        self._asked: set[tuple[str, int]] = set()
        self._served: dict[int, int] = {}
        self.delays: list[tuple[int, int, int]] = []  # (t, party index, largest delay used)
        self.refreshes = 0
        self.rejections = 0  # this variant holds pulls instead of rejecting them

    def start(self) -> None:
        """Nothing to send before the workers' first pushes."""

    @property
    def mean_ages(self) -> list[float]:
        return [float(d) for _, _, d in self.delays]

    @property
    def gaps(self) -> list[int]:
        return []

    @property
    def min_clock(self) -> int:
        return min(self._clocks.values())

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
        residual = expit(aggregate) - self._y[self._schedule.rows(t)]
        self._link.send(self._workers[j], "residual", {"clock": t, "residual": residual})
        delay = max(t - version for version, _ in entries.values())
        if not 0 <= delay <= self._tau:
            raise RuntimeError(f"server: delay {delay} outside [0, {self._tau}] at iteration {t}")
        self.delays.append((t, j, delay))
        self._served[t] = self._served.get(t, 0) + 1
        if self._served[t] == len(self._workers):  # nobody pulls t again
            del self._table[t], self._served[t]


class PaperWorker:
    """Worker ``j`` of Algorithm 1: its features, its copy of the labels (paper) and its local model.

    Iteration t: Pull(j, t) -> the server's sum_k A[I(t), k] (or, ``label_private``, the residual computed
    at the label holder); x^j_(t+1) = x^j_t - eta_t (H'(sum) d alpha^j(x^j_t, xi^j_I(t)) / d x^j + lam x^j_t),
    eta_t = eta / sqrt(t + 1) (t from 0, i.e. eta / sqrt(t) counted from 1); then Push(j, t,
    alpha^j(x^j_(t+1), xi^j_I(t))). A rejected pull is retried (:meth:`retry`, called by the runner).
    The first `warmup` iterations are synchronous: the pull carries alpha^j(x^j_t) on I(t).
    """

    def __init__(self, *, name: str, X: Matrix, model: LocalModel, theta: np.ndarray, link: _Link,
                 schedule: Schedule, eta: float, lam: float, iterations: int, warmup: int,
                 send_init: bool) -> None:
        self.name = name
        self._X = X
        self.model = model
        self.theta = np.array(theta, dtype=float)
        self._link = link
        self._schedule = schedule
        self._eta = eta
        self._lam = lam
        self.iterations = iterations
        self._warmup = warmup
        self._send_init = send_init
        self.clock = 0
        self.retry_pending = False
        self._y: np.ndarray | None = None  # the labels, once the server sent them (paper only)
        self._answer: tuple[str, np.ndarray] | None = None
        self._cache: Any = None

    @property
    def computing(self) -> bool:
        return self._answer is not None

    @property
    def done(self) -> bool:
        return self.clock >= self.iterations

    def start(self) -> None:
        if self._send_init:
            self._link.send(SERVER, "init", {"alpha": self.model.forward(self.theta, self._X)[0]})
        self._pull()

    def _pull(self) -> None:
        t = self.clock
        if t < self._warmup:
            alpha, self._cache = self.model.forward(self.theta, self._schedule.batch(self._X, t))
            self._link.send(SERVER, "pull_sync", {"clock": t, "alpha": alpha})
        else:
            self._cache = None
            self._link.send(SERVER, "pull", {"clock": t})

    def retry(self) -> None:
        """Pull again after a rejection."""
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
        rows = self._schedule.rows(t)
        Xb = self._schedule.batch(self._X, t)
        cache = self._cache if self._cache is not None else self.model.forward(self.theta, Xb)[1]
        kind, value = self._answer
        if kind == "sum":
            if self._y is None:
                raise RuntimeError(f"{self.name}: got a prediction sum but has no labels")
            r = expit(value) - self._y[rows]
        else:
            r = value
        _, reg = l2_penalty(self.theta, self._lam)
        grad = self.model.backward(self.theta, Xb, cache, r / len(r)) + reg
        self.theta -= (self._eta / np.sqrt(t + 1)) * grad
        self._answer = None
        self._cache = None
        self._link.send(SERVER, "push", {"clock": t, "alpha": self.model.forward(self.theta, Xb)[0]})
        self.clock += 1
        if not self.done:
            self._pull()


class PaperServer:
    """The server of Algorithm 1 (run by the label holder): the prediction matrix A and the clock-gap rule.

    A[i, j] is worker j's last pushed prediction for row i; ``versions[i, j]`` the parameter version that
    produced it (x^j_s has version s). A pull for iteration t is answered with sum_k A[I(t), k] unless
    t - min_k c_k > tau (c_k = iterations worker k completed), when it is rejected. The age of an entry
    used at iteration t is t - version (in model (8)'s sense; it can be negative when a worker ahead has
    already pushed a later epoch's prediction for the row); the largest and mean age of every answer is
    recorded, which the server can do because it sees the pushes' clocks (nothing extra crosses).
    """

    def __init__(self, *, workers: Sequence[str], labels: np.ndarray, link: _Link, schedule: Schedule,
                 tau: int, iterations: int, warmup: int, send_labels: bool, needs_init: bool) -> None:
        self._workers = tuple(workers)
        self._index = {w: i for i, w in enumerate(self._workers)}
        self._y = np.asarray(labels, dtype=float)
        self._link = link
        self._schedule = schedule
        self._tau = tau
        self._iterations = iterations
        self._warmup = warmup
        self._send_labels = send_labels
        n, m = len(self._y), len(self._workers)
        self.A = np.zeros((n, m))
        self.versions = np.zeros((n, m), dtype=np.int64)
        self._inits: set[str] = set() if needs_init else set(self._workers)
        self._held: list[tuple[str, int]] = []  # pulls waiting for A's initialization
        self._fresh: dict[int, dict[str, np.ndarray]] = {}  # synchronous first epoch: t -> worker -> alpha
        self._clocks = dict.fromkeys(self._workers, 0)  # completed iterations
        self.delays: list[tuple[int, int, int]] = []  # (t, worker index, largest age used)
        self.mean_ages: list[float] = []
        self.gaps: list[int] = []  # t - slowest clock at every answered pull
        self.rejections = 0
        self.refreshes = 0

    @property
    def min_clock(self) -> int:
        return min(self._clocks.values())

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
        elif tag == "pull":
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
                    self.delays.append((t, self._index[k], 0))
                    self.mean_ages.append(0.0)
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
        rows = self._schedule.rows(t)
        ages = t - self.versions[rows]
        self.delays.append((t, self._index[src], int(ages.max())))
        self.mean_ages.append(float(ages.mean()))
        self.gaps.append(gap)
        self._send(self._index[src], t, self.A[rows].sum(axis=1))

    def _send(self, j: int, t: int, total: np.ndarray) -> None:
        if self._send_labels:
            self._link.send(self._workers[j], "sum", {"clock": t, "sum": total})
        else:
            residual = expit(total) - self._y[self._schedule.rows(t)]
            self._link.send(self._workers[j], "residual", {"clock": t, "residual": residual})


# ---------------------------------------------------------------------------------------------------------
# drivers


@dataclass
class Trace:
    """What a protocol run leaves for evaluation outside the protocol.

    Attributes
    ----------
    snapshots : list (per party) of list (per epoch) of ndarray
        Each party's parameters when it completed each epoch.
    sim_time : list (per party) of list (per epoch) of float
        Simulated time at which each party completed each epoch (NaN in threads mode).
    seconds : list (per party) of list (per epoch) of float
        Wall seconds since the start at the same moments.
    delays : ndarray of int, shape (n_answers, 3)
        For every answered pull: iteration, party index, largest delay (age of a used prediction) used.
    refreshes : int
        Refresh requests the server sent (``staleness_bounded``).
    mean_ages : ndarray of float, shape (n_answers,)
        Mean age of the predictions used in every answer (``staleness_bounded``: the largest).
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


def _duration_stream(rng: np.random.Generator, *, speed: float, jitter: float) -> Callable[[], float]:
    """Iteration times of one party: Gamma with mean 1/speed and coefficient of variation `jitter`."""
    if jitter == 0:
        return lambda: 1.0 / speed
    shape = 1.0 / jitter**2
    return lambda: float(rng.gamma(shape, jitter**2 / speed))


def _run_simulated(server: Server, workers: list[Worker], mailbox: _Mailbox,
                   durations: list[Callable[[], float]], record: Callable[[int, float], None]) -> None:
    """Event loop on a simulated clock: deliver messages instantly, complete iterations at drawn times."""
    roles: dict[str, Server | Worker] = {SERVER: server, **{w.name: w for w in workers}}
    events: list[tuple[float, int]] = []
    scheduled = [False] * len(workers)
    now, floor = 0.0, server.min_clock

    def pump() -> None:
        while (msg := mailbox.next_message()) is not None:
            dst, src, tag, payload = msg
            roles[dst].handle(src, tag, payload)
        for j, w in enumerate(workers):
            if w.computing and not scheduled[j]:
                scheduled[j] = True
                heapq.heappush(events, (now + durations[j](), j))

    server.start()
    for w in workers:
        w.start()
    pump()
    while events:
        now, j = heapq.heappop(events)
        scheduled[j] = False
        workers[j].complete()
        record(j, now)
        pump()
        # A rejected worker retries once per event (the slowest worker is never rejected, so there is
        # always a next event while a worker waits).
        for w in workers:
            if w.retry_pending:
                w.retry()
        pump()
        if server.min_clock > floor:  # one communication round per global iteration
            floor = server.min_clock
            mailbox.next_round()
    if not server.finished:
        raise RuntimeError("fdml: the simulation stopped with unanswered pulls")


def _run_threads(server: Server, workers: list[Worker], mailbox: _Mailbox,
                 durations: list[Callable[[], float]], record: Callable[[int, float], None], *,
                 tick: float) -> None:
    """One thread per role; a failing role stops the others and its error is re-raised here."""
    stop = threading.Event()
    errors: list[BaseException] = []

    def guarded(body: Callable[[], None]) -> Callable[[], None]:
        def run() -> None:
            try:
                body()
            except BaseException as exc:  # re-raised in the caller's thread below
                errors.append(exc)
                stop.set()
        return run

    def serve() -> None:
        floor = server.min_clock
        while not server.finished:
            msg = mailbox.wait(SERVER, stop)
            if msg is None:
                return
            server.handle(*msg)
            if server.min_clock > floor:
                floor = server.min_clock
                mailbox.next_round()

    def work(j: int) -> None:
        w = workers[j]
        w.start()
        while not w.done:
            msg = mailbox.wait(w.name, stop)
            if msg is None:
                return
            w.handle(*msg)
            if w.retry_pending:
                time.sleep(max(tick, 1e-4))  # back off, then retry the rejected pull
                w.retry()
            if w.computing:
                # The emulated compute time; refresh requests are answered meanwhile (with the parameters
                # before this step), as the simulated clock assumes.
                deadline = time.perf_counter() + tick * durations[j]() if tick > 0 else 0.0
                while (left := deadline - time.perf_counter()) > 0:
                    msg = mailbox.wait(w.name, stop, timeout=left)
                    if msg is not None:
                        w.handle(*msg)
                if stop.is_set():
                    return
                w.complete()
                record(j, float("nan"))

    server.start()
    threads = [threading.Thread(target=guarded(serve), name=SERVER)]
    threads += [threading.Thread(target=guarded(lambda j=j: work(j)), name=w.name)
                for j, w in enumerate(workers)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    if errors:
        raise errors[0]


def simulate(names: Sequence[str], Xs: Sequence[Matrix], y01: np.ndarray, *, models: Sequence[LocalModel],
             thetas: Sequence[np.ndarray], schedule: Schedule, params: Params, network: Network,
             rng: np.random.Generator) -> Trace:
    """Run the FDML protocol: one worker per feature block plus the server, over `network`.

    Parameters
    ----------
    names : sequence of str
        The workers' network addresses (the network also has :data:`SERVER`).
    Xs : sequence of matrices
        Each worker's training features (same rows, aligned).
    y01 : ndarray
        Training labels, held by the server (run by the label holder).
    models, thetas : sequences
        Each worker's local model and initial parameters.
    schedule : Schedule
        The shared batch schedule.
    params : Params
        tau, eta, lam and objective (n is the schedule's), epochs, speeds (already one per worker), jitter,
        mode and tick are used.
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
    iterations = params.epochs * schedule.n_batches
    lam = mean_form_lam(params.lam, objective=params.objective, n_samples=schedule.n)
    mailbox = _Mailbox(network, threaded=params.mode == "threads")
    server: Server | PaperServer
    workers: list[Worker] | list[PaperWorker]
    if params.variant == "staleness_bounded":
        server = Server(workers=names, labels=y01, link=_Link(mailbox, SERVER), schedule=schedule.copy(),
                        tau=params.tau, iterations=iterations)
        workers = [Worker(name=name, X=X, model=model, theta=theta, link=_Link(mailbox, name),
                          schedule=schedule.copy(), eta=params.eta, lam=lam, iterations=iterations)
                   for name, X, model, theta in zip(names, Xs, models, thetas)]
    else:
        warmup = schedule.n_batches if params.warmup == "sync" else 0
        server = PaperServer(workers=names, labels=y01, link=_Link(mailbox, SERVER), schedule=schedule.copy(),
                             tau=params.tau, iterations=iterations, warmup=warmup,
                             send_labels=params.variant == "paper", needs_init=params.warmup == "x0")
        workers = [PaperWorker(name=name, X=X, model=model, theta=theta, link=_Link(mailbox, name),
                               schedule=schedule.copy(), eta=params.eta, lam=lam, iterations=iterations,
                               warmup=warmup, send_init=params.warmup == "x0")
                   for name, X, model, theta in zip(names, Xs, models, thetas)]
    durations = [_duration_stream(g, speed=s, jitter=params.jitter)
                 for g, s in zip(rng.spawn(m), params.speeds)]
    snapshots: list[list[np.ndarray]] = [[] for _ in range(m)]
    sim_time: list[list[float]] = [[] for _ in range(m)]
    seconds: list[list[float]] = [[] for _ in range(m)]
    start = time.perf_counter()

    def record(j: int, now: float) -> None:
        # Evaluation is outside the protocol: the simulator notes each party's parameters at its epoch ends.
        if workers[j].clock % schedule.n_batches == 0:
            snapshots[j].append(workers[j].theta.copy())
            sim_time[j].append(now)
            seconds[j].append(time.perf_counter() - start)

    if params.mode == "threads":
        _run_threads(server, workers, mailbox, durations, record, tick=params.tick)
    else:
        _run_simulated(server, workers, mailbox, durations, record)
    return Trace(snapshots=snapshots, sim_time=sim_time, seconds=seconds,
                 delays=np.array(server.delays, dtype=np.int64).reshape(-1, 3), refreshes=server.refreshes,
                 mean_ages=np.array(server.mean_ages, dtype=float), rejections=server.rejections,
                 gaps=np.array(server.gaps, dtype=np.int64))


# ---------------------------------------------------------------------------------------------------------
# entry points


@dataclass(frozen=True)
class _Block:
    """One worker's data: address, training and test features, and whether its model has the intercept."""

    name: str
    X: Matrix
    X_test: Matrix | None
    bias: bool


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


def _blocks(parties: Sequence[Party], features: str) -> list[_Block]:
    """The workers: the parties (split), the label holder alone (local), or one pooled block (all)."""
    holder = label_holder(list(parties))
    if features == "split":
        return [_Block(p.name, p.X, p.X_test, p.is_label_holder) for p in parties]
    if features == "local":
        return [_Block(holder.name, holder.X, holder.X_test, True)]
    tests = [p.X_test for p in parties]
    return [_Block(POOLED, _hstack([p.X for p in parties]),
                   None if any(T is None for T in tests) else _hstack(tests), True)]


def network_for(parties: Sequence[Party], params: Params, *, rng: np.random.Generator,
                capture: bool = False) -> Network:
    """The workers of the run plus the parameter server."""
    return Network([*_worker_names(parties, params.features), SERVER], capture=capture)


def _scores(models: Sequence[LocalModel], thetas: Sequence[np.ndarray], Xs: Sequence[Matrix]) -> np.ndarray:
    """Decision scores of the composite model: the sum of the local predictions."""
    total = models[0].forward(thetas[0], Xs[0])[0]
    for model, theta, X in zip(models[1:], thetas[1:], Xs[1:]):
        total = total + model.forward(theta, X)[0]
    return total


def _flops_per_row(model_kind: str, X: Matrix, hidden: int) -> float:
    """Floating-point operations of one row's forward and backward pass (the cost model's compute)."""
    d = X.nnz / X.shape[0] if sp.issparse(X) else X.shape[1]
    return 4.0 * d if model_kind == "lr" else 6.0 * (d + 1) * hidden


def _cost_per_iteration(blocks: Sequence[_Block], names: Sequence[str], network: Network, params: Params, *,
                        iterations: int) -> float:
    """Seconds per iteration under the cost model: the slowest worker's compute plus its traffic.

    Worker j's iteration costs ``flops_j / flop_rate`` plus, amortized over the run, ``latency`` per message
    it sent or received and its bytes / ``bandwidth`` (one-off messages such as the labels included; rejected
    pulls and their retries excluded, the reject standing in for the retried pull's size). The
    parties iterate in lock step in this model, so the per-iteration time is the maximum over workers; a
    single worker (centralized, local) has no messages. The constants are parameters, not measurements.
    """
    single = len(blocks) == 1  # all data in one place: nothing needs to cross
    count = dict.fromkeys(names, 0)
    nbytes = dict.fromkeys(names, 0)
    for msg in network.messages:
        # A rejected pull and its retry are waiting, which the clock-gap rule imposes and a lock-step model
        # already contains: one pull per iteration is priced.
        if msg.tag == "reject":
            count[msg.dst] -= 1
            nbytes[msg.dst] -= msg.nbytes
            continue
        for role in (msg.src, msg.dst):
            if role in count:
                count[role] += 1
                nbytes[role] += msg.nbytes
    costs = []
    for b, name in zip(blocks, names):
        flops = params.batch_size * _flops_per_row(params.local_model, b.X, params.hidden)
        comm = 0.0 if single else (count[name] * params.latency + nbytes[name] / params.bandwidth) / iterations
        costs.append(flops / params.flop_rate + comm)
    return max(costs)


def fit(parties: list[Party], network: Network, params: Params, *, rng: np.random.Generator,
        evaluation: Party | None = None) -> History:
    """Train the composite model by FDML and evaluate it after every epoch.

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
        time units when the last party finished the epoch), ``seconds`` (wall time of the protocol),
        ``max_delay`` and ``mean_delay`` (staleness the server used). Final metrics add ``sim_time``,
        ``protocol_seconds``, per-epoch averages, ``max_delay``, ``mean_delay``, ``refreshes`` and
        ``lam_mean`` (the weight of f, given `objective`).
    """
    if evaluation is not None:
        fail("dataset", "must be vertically partitioned for fdml; it has a horizontal evaluation party "
                        "(horizontal data)")
    holder = label_holder(parties)
    blocks = _blocks(parties, params.features)
    names = [b.name for b in blocks]
    if list(network.names) != [*names, SERVER]:
        raise ValueError(f"network addresses {network.names} do not match the run's roles {[*names, SERVER]}")
    if params.speeds and len(params.speeds) != len(blocks):
        fail("speeds", f"has {len(params.speeds)} entries but the run has {len(blocks)} workers {names}")
    speeds = params.speeds or (1.0,) * len(blocks)
    # One worker (centralized, local) is standard mini-batch SGD, as Table I's baselines: fresh predictions
    # (the single-worker case of model (8)); A's epoch-old entries belong to the distributed protocol only.
    variant = params.variant if len(blocks) > 1 else "staleness_bounded"
    run_params = dataclasses.replace(params, speeds=speeds, variant=variant)
    params = run_params

    schedule_rng, timing_rng, *init_rngs = rng.spawn(2 + len(blocks))
    models = [make_local_model(params.local_model, n_features=b.X.shape[1], hidden=params.hidden, bias=b.bias)
              for b in blocks]
    thetas = [model.init(g) for model, g in zip(models, init_rngs)]
    schedule = Schedule(holder.n_samples, params.batch_size, seed=int(schedule_rng.integers(2**63)))
    trace = simulate(names, [b.X for b in blocks], holder.y, models=models, thetas=thetas, schedule=schedule,
                     params=run_params, network=network, rng=timing_rng)

    has_test = holder.y_test is not None and all(b.X_test is not None for b in blocks)
    lam = mean_form_lam(params.lam, objective=params.objective, n_samples=schedule.n)  # as the workers used
    cost_per_iteration = _cost_per_iteration(blocks, names, network, params, iterations=params.epochs *
                                             schedule.n_batches)
    history = History("fdml")
    epoch_of = trace.delays[:, 0] // schedule.n_batches
    for e in range(params.epochs):
        thetas_e = [snaps[e] for snaps in trace.snapshots]
        train_scores = _scores(models, thetas_e, [b.X for b in blocks])
        record = {"epoch": e + 1,
                  "train_objective": logistic_objective(train_scores, holder.y, np.concatenate(thetas_e),
                                                        lam)}
        test_scores = _scores(models, thetas_e, [b.X_test for b in blocks]) if has_test else None
        if has_test:
            test = binary_metrics(holder.y_test, test_scores)
            record.update(test_logloss=test["logloss"], test_auc=test["auc"])
        in_epoch = epoch_of == e
        record.update(sim_time=max(ts[e] for ts in trace.sim_time), seconds=max(s[e] for s in trace.seconds),
                      cost_seconds=(e + 1) * schedule.n_batches * cost_per_iteration,
                      max_delay=int(trace.delays[in_epoch, 2].max()),
                      mean_delay=float(trace.mean_ages[in_epoch].mean()))
        history.log(**record)

    objectives = [r["train_objective"] for r in history.records]
    change = (abs(objectives[-1] - objectives[-2]) / max(abs(objectives[-1]), 1e-12) if params.epochs > 1
              else float("inf"))
    history.stop(converged=change <= params.tol,
                 reason=f"ran {params.epochs} epochs; last-epoch relative change of the objective "
                        f"{change:.3g} (tol {params.tol:g})")
    sim_time = max(ts[-1] for ts in trace.sim_time)  # NaN in threads mode, written as null
    seconds = max(s[-1] for s in trace.seconds)
    variant_name = params.variant if len(blocks) > 1 else "sgd"  # a single worker: plain mini-batch SGD
    extra: dict[str, Any] = dict(workers=names, server_at=holder.name, n_batches=schedule.n_batches,
                                 protocol=variant_name)
    if params.variant == "staleness_bounded":
        extra["delay_histogram"] = np.bincount(trace.delays[:, 2], minlength=params.tau + 1).tolist()
    else:
        extra["warmup"] = params.warmup
        extra["age_quantiles"] = {q: float(np.quantile(trace.delays[:, 2], q / 100))
                                  for q in (0, 50, 90, 100)}
    history.extra.update(extra)
    history.ledger.notes.append(
        f"protocol {variant_name}: " + {
            "paper": "Algorithm 1 as written; the labels were sent to every worker; no noise, nothing certified",
            "label_private": "Algorithm 1 with residuals at the label holder; labels never sent; no noise",
            "staleness_bounded": "model (8) with bounded staleness; labels never sent; no noise",
            "sgd": "one worker (centralized or local baseline), nothing crosses; no noise"}[variant_name])
    history.finish(
        train_objective=objectives[-1], y_train=holder.y, train_scores=train_scores,
        y_test=holder.y_test if has_test else None, test_scores=test_scores,
        protocol=variant_name, sim_time=sim_time, sim_time_per_epoch=sim_time / params.epochs,
        protocol_seconds=seconds, seconds_per_epoch=seconds / params.epochs,
        cost_seconds=params.epochs * schedule.n_batches * cost_per_iteration,
        cost_seconds_per_epoch=schedule.n_batches * cost_per_iteration,
        max_delay=int(trace.delays[:, 2].max()), mean_delay=float(trace.mean_ages.mean()),
        refreshes=trace.refreshes, rejections=trace.rejections,
        max_gap=int(trace.gaps.max()) if trace.gaps.size else None, workers=len(blocks), lam_mean=lam)
    return history
