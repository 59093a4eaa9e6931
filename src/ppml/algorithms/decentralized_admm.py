"""Non-private decentralized consensus ADMM: the common base of PP-ADMM, IPP-ADMM, DVP, M-ADMM and R-ADMM.

N agents sit on a connected undirected graph; agent i holds its own rows D_i and talks only to its
neighbours B_i. Each round, agent i solves its local problem on its own data, sends its new model theta_i to
its neighbours, and updates its dual vector lambda_i from what it received (Forero et al. [1]_, in the form
Zhang & Zhu [2]_ and Ding et al. [3]_ use):

    theta_i <- argmin_theta f_i(theta) + 2 lambda_i^T theta
                           + eta sum_{j in B_i} ||theta - (theta_i + theta_j)/2||^2
    lambda_i <- lambda_i + (eta/2) sum_{j in B_i} (theta_i - theta_j)

with lambda_i = 0 at the start (required for the single-dual form) and theta_i = 0.

Objective scaling. Agent i's local objective is
``f_i(theta) = s [(N/n) sum_{x,y in D_i} log(1 + exp(-y theta^T x)) + (lam/2) ||theta||^2]`` with n the total
number of training rows; w = s N / n is the weight of one row's loss. Then ``(1/(s N)) sum_i f_i`` is exactly
the project's centralized objective ``f(w) = mean loss + lam/2 ||w||^2`` over all rows
(:mod:`ppml.models.losses`), whatever the split, so every variant's optimum (noise off) is the centralized
one. The common factor s does not move that optimum but sets how much the ADMM penalty eta weighs against
the data: ``loss_scale: mean`` (s = 1) is the papers' written form ``(1/B_i) sum loss`` (with the equal
split, w = 1/B_i); ``loss_scale: sum`` (s = n/N, the default) gives each row's loss weight w = 1, the scale
of Chaudhuri et al.'s and AMP's analyses. With rows of norm <= 1 (Adult: the mean-loss curvature is about
1/(4d)) and eta = 0.5, the mean form moves the models so little per round that 30 rounds stay near zero,
whereas the sum form reaches the optimum within the paper's T = 30 (its Fig. 6); we therefore take the sum
form as the paper's (UNVERIFIED: the paper's text was not available). The privacy noise of every variant
is calibrated on the scale actually solved, so the choice changes accuracy, not privacy.

Reported model. The papers report the test error of the agents' own (local) models; ``test_error`` and the
other final test metrics are taken over every agent's model on every test row, i.e. the mean over agents
(AUC pooled over agents' scores). The error of the average model and of the worst agent are reported beside.

Role programs (DESIGN.md §4). Every agent runs :func:`consensus_rounds` in its own program: local step,
``theta`` to its neighbours (or ``ctl/silent`` when it releases nothing that round: IPP-ADMM), collect one
message from each neighbour, dual step, end of round. The evaluator (the address ``evaluator``, holding the
held-out rows, :data:`ppml.runtime.EVALUATOR`) scores each round through evaluation messages: every agent
sends it its round's model, it sends the round's models back to every agent, and each agent returns the
scores of its own rows under every model; the evaluator stacks them in agent order, which is exactly the
matrix ``X @ thetas.T`` of all training rows, so every record is the experimenter's view without any party
reading another's rows. The graph is public and drawn in :func:`network_for`, before the programs start.

Threat model: agents are honest-but-curious; a neighbour sees every theta_j sent to it. This non-private
baseline protects nothing; it is the lower bound of the papers' error-versus-epsilon figures. The evaluator
is the experimenter: it sees every model and every training row's score and label (evaluation traffic,
outside the protocol and counted apart).

References
----------
.. [1] P. A. Forero, A. Cano, G. B. Giannakis, "Consensus-Based Distributed Support Vector Machines", JMLR 11,
   2010.
.. [2] T. Zhang, Q. Zhu, "Dynamic Differential Privacy for ADMM-Based Distributed Classification Learning",
   IEEE TIFS 12(1), 2017.
.. [3] J. Ding, J. Wang, G. Liang, J. Bi, M. Pan, "Towards Plausible Differentially Private ADMM Based
   Distributed Machine Learning", CIKM 2020 (arXiv 2008.04500), Section 2.2 and Fig. 5-7 ("non-private").
"""

from __future__ import annotations

import logging
import math
import sys
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Literal

import numpy as np
import scipy.linalg
import scipy.sparse as sp
from scipy.special import expit

from ppml import runtime
from ppml.algorithms._majority import majority_error
from ppml.algorithms.centralized import test_rows
from ppml.config import ParamError
from ppml.history import History
from ppml.network import CONTROL, EVALUATION, Endpoint, Network, ProtocolError, expect
from ppml.parties import Party, signed_labels
from ppml.runtime import EVALUATOR, Public, Role

__all__ = ["MESSAGES", "SIDE_MESSAGES", "Params", "network_for", "fit", "roles", "assemble",
           "random_connected_graph", "graph_neighbours", "LocalProblem", "LocalSolution", "HessianCache",
           "local_gradient", "solve_local", "Agent", "make_agents", "objective_scale", "Evaluator",
           "consensus_rounds", "evaluator_program", "agent_roles", "merge_misses", "finish", "stop_exact",
           "exact_gtol", "EXACT_RTOL", "progress_due", "PROGRESS_LINES", "FACT_KINDS"]

MESSAGES = (
    {"tag": "theta", "src": "agent i", "dst": "each neighbour j of agent i",
     "content": "theta_i after the local update (d floats)", "protection": "none (non-private baseline)"},
)

TAG_THETA = "theta"
TAG_SILENT = CONTROL + "silent"  # agent -> neighbour: no model this round (IPP-ADMM's silent rounds)
TAG_LABELS = EVALUATION + "labels"  # agent -> evaluator: its rows' 0/1 labels, once
TAG_MODEL = EVALUATION + "model"  # agent -> evaluator: its model after the round (and its round's facts)
TAG_MODELS = EVALUATION + "models"  # evaluator -> agent: every agent's model of the round
TAG_SCORES = EVALUATION + "scores"  # agent -> evaluator: its rows' scores under every model of the round

SIDE_MESSAGES: tuple[dict[str, str], ...] = (
    {"tag": TAG_LABELS, "src": "every agent", "dst": "evaluator",
     "content": "the agent's training labels (0/1), once (evaluation: training loss, AUC, majority class)"},
    {"tag": TAG_MODEL, "src": "every agent", "dst": "evaluator",
     "content": "theta_i as last published, and the round's own counters of a variant (Newton steps, "
                "broadcasts), every round (evaluation)"},
    {"tag": TAG_MODELS, "src": "evaluator", "dst": "every agent",
     "content": "the N models of the round (N x d), every round (evaluation)"},
    {"tag": TAG_SCORES, "src": "every agent", "dst": "evaluator",
     "content": "the scores X_i theta_j of the agent's rows under every model j (|D_i| x N), every round "
                "(evaluation)"},
)
"""Evaluation and control messages (every variant); a variant with silent rounds adds ``ctl/silent``."""

SILENT_MESSAGE = {"tag": TAG_SILENT, "src": "agent i", "dst": "each neighbour j of agent i",
                  "content": "nothing: agent i releases no model this round (j keeps the one it last received)"}
#: Relative gradient-norm tolerance of an "exact" local solve: ``||∇h|| <= EXACT_RTOL * max(1, ||linear||)``
#: (the local problems are >= 2 eta-strongly convex, so this bounds the distance to the exact minimizer;
#: relative, because the noise of the private variants can make the linear term large).
EXACT_RTOL = 1e-10

log = logging.getLogger(__name__)

PROGRESS_LINES = 10
"""Progress lines a party logs per run (INFO): round 1, every ``T // PROGRESS_LINES``-th round and the last."""

_NEWTON_MAX_ITER = 50
_ARMIJO = 1e-4


@dataclass(frozen=True)
class Params:
    """Parameters of consensus ADMM (DESIGN.md §8: N = 5, eta = 0.5, T = 30).

    Attributes
    ----------
    agents : int
        Number of agents N; the prepared data must have exactly this many parties.
    lam : float
        l2 weight of the centralized objective f(w) = mean loss + lam/2 ||w||^2 (see the module docstring).
    eta : float
        ADMM penalty (and dual step).
    T : int
        Number of ADMM rounds.
    graph_p : float
        Edge probability of the random graph (Erdős–Rényi, redrawn until connected).
    loss_scale : {"sum", "mean"}
        Scale of each local objective (see the module docstring): unit weight per row, or the mean loss.
    """

    agents: int = field(default=5, metadata={"ge": 2})
    lam: float = field(default=1e-3, metadata={"gt": 0})
    eta: float = field(default=0.5, metadata={"gt": 0})
    T: int = field(default=30, metadata={"ge": 1})
    graph_p: float = field(default=0.5, metadata={"gt": 0, "le": 1})
    loss_scale: Literal["sum", "mean"] = "sum"


# ---------------------------------------------------------------------------------------------------------
# the graph


def random_connected_graph(names: Iterable[str], *, p: float, rng: np.random.Generator,
                           max_draws: int = 10_000) -> tuple[tuple[str, str], ...]:
    """Edges of an Erdős–Rényi G(N, p) graph over `names`, redrawn until it is connected.

    Raises
    ------
    RuntimeError
        When `max_draws` draws gave no connected graph (p far too small for N).
    """
    names = list(names)
    n = len(names)
    if n < 2:
        raise ValueError(f"a decentralized graph needs at least 2 agents, got {n}")
    if not 0 < p <= 1:
        raise ValueError(f"graph_p must lie in (0, 1], got {p!r}")
    iu, ju = np.triu_indices(n, k=1)
    for _ in range(max_draws):
        keep = rng.random(len(iu)) < p
        adjacency = np.zeros((n, n), dtype=bool)
        adjacency[iu[keep], ju[keep]] = True
        adjacency |= adjacency.T
        if _connected(adjacency):
            return tuple((names[i], names[j]) for i, j in zip(iu[keep], ju[keep]))
    raise RuntimeError(f"no connected graph on {n} agents in {max_draws} draws with graph_p = {p}")


def _connected(adjacency: np.ndarray) -> bool:
    seen = np.zeros(len(adjacency), dtype=bool)
    seen[0] = True
    frontier = seen.copy()
    while frontier.any():
        frontier = adjacency[frontier].any(axis=0) & ~seen
        seen |= frontier
    return bool(seen.all())


def network_for(parties: list[Party], params: Params, *, rng: np.random.Generator,
                capture: bool = False) -> Network:
    """The agents on a seeded random connected graph (only neighbours may exchange messages), and the
    evaluator, which may exchange evaluation messages with every agent."""
    if len(parties) != params.agents:
        raise ParamError(f"agents is {params.agents}, but the prepared data has {len(parties)} parties "
                         f"({', '.join(p.name for p in parties)})")
    names = [p.name for p in parties]
    if EVALUATOR in names:
        raise ValueError(f"an agent may not be called {EVALUATOR!r}: that is the evaluator's address")
    graph = random_connected_graph(names, p=params.graph_p, rng=rng)
    return Network([*names, EVALUATOR], capture=capture,
                   edges=graph + tuple((EVALUATOR, name) for name in names))


def graph_neighbours(network: Network, names: list[str]) -> dict[str, tuple[str, ...]]:
    """Each agent's neighbours (in `names` order), read from the network's edges (the evaluator is no agent)."""
    if network.edges is None:
        raise ValueError("decentralized ADMM needs a network with graph edges; build it with network_for()")
    out = {a: tuple(b for b in names if b != a and frozenset((a, b)) in network.edges) for a in names}
    isolated = [a for a, nbrs in out.items() if not nbrs]
    if isolated:
        raise ValueError(f"agents without neighbours: {isolated}")
    return out


# ---------------------------------------------------------------------------------------------------------
# the local problem: array in, array out


@dataclass(frozen=True, eq=False)
class LocalProblem:
    """``h(theta) = row_weight * sum_k log(1 + exp(-y_k theta^T x_k)) + (a/2) ||theta||^2 + linear^T theta``.

    Every variant's local update has this form: `a` gathers the regularization and the ADMM penalty
    (``s lam + 2 eta V_i``, plus any extra quadratic term), `linear` the dual, the penalty centres and any
    linear noise term. h is `a`-strongly convex.
    """

    X: np.ndarray
    y: np.ndarray
    row_weight: float
    a: float
    linear: np.ndarray

    def value(self, theta: np.ndarray, scores: np.ndarray) -> float:
        """h(theta), given the scores ``X theta``."""
        loss = float(np.sum(np.logaddexp(0.0, -self.y * scores)))
        return self.row_weight * loss + 0.5 * self.a * float(theta @ theta) + float(self.linear @ theta)

    def gradient(self, theta: np.ndarray, scores: np.ndarray) -> np.ndarray:
        """∇h(theta), given the scores ``X theta``."""
        coef = -self.y * expit(-self.y * scores)
        return self.row_weight * (self.X.T @ coef) + self.a * theta + self.linear


def exact_gtol(problem: LocalProblem) -> float:
    """The gradient tolerance of an exact solve of `problem` (see :data:`EXACT_RTOL`)."""
    return EXACT_RTOL * max(1.0, float(np.linalg.norm(problem.linear)))


def local_gradient(problem: LocalProblem, theta: np.ndarray) -> np.ndarray:
    """∇h(theta), evaluated afresh (used to verify a solve's stopping criterion independently)."""
    return problem.gradient(theta, problem.X @ theta)


@dataclass(frozen=True)
class LocalSolution:
    """A local solve's last iterate, its gradient norm, its Newton steps, and whether it met its tolerance."""

    theta: np.ndarray
    grad_norm: float
    iterations: int
    converged: bool


class HessianCache:
    """The last Cholesky factor of an agent's local Hessian, reused by its next solve while it still serves.

    Consecutive ADMM rounds change an agent's local problem only slightly (the linear term, and the models
    at which the loss is curved), so the previous round's factor is usually a good Newton matrix.
    """

    __slots__ = ("a", "factor")

    def __init__(self) -> None:
        self.a: float | None = None
        self.factor = None


def solve_local(problem: LocalProblem, theta0: np.ndarray, *, gtol: float, max_iter: int = _NEWTON_MAX_ITER,
                cache: HessianCache | None = None) -> LocalSolution:
    """Minimize h by Newton's method with Armijo backtracking until ``||∇h|| <= gtol``.

    Warm-started at `theta0`. The Hessian (the n d^2 part of the cost) is refreshed only when a step
    shrank the gradient by less than a factor 4; otherwise its Cholesky factor is reused (a lagged Newton
    method), also across calls through `cache` when the quadratic weight ``a`` is unchanged. Returns the
    last iterate and whether the gradient criterion was met within `max_iter` steps (callers decide whether
    a miss is a warning or an error).
    """
    if gtol <= 0:
        raise ValueError(f"gtol must be > 0, got {gtol!r}")
    X = problem.X
    d = X.shape[1]
    theta = np.array(theta0, dtype=float)
    scores = X @ theta
    factor = cache.factor if cache is not None and cache.a == problem.a else None
    previous = math.inf
    for it in range(max_iter + 1):
        grad = problem.gradient(theta, scores)
        grad_norm = float(np.linalg.norm(grad))
        if grad_norm <= gtol:
            return LocalSolution(theta, grad_norm, it, True)
        if it == max_iter:
            break
        if factor is None or grad_norm > 0.25 * previous:
            p = expit(scores)
            hessian = X.T @ (X * (problem.row_weight * p * (1.0 - p))[:, None])
            hessian.flat[:: d + 1] += problem.a
            factor = scipy.linalg.cho_factor(hessian)
            if cache is not None:
                cache.a, cache.factor = problem.a, factor
        previous = grad_norm
        step = scipy.linalg.cho_solve(factor, grad)
        decrement = float(grad @ step)
        x_step = X @ step
        t = 1.0
        h0 = problem.value(theta, scores)
        # backtrack only where h can resolve the decrease; closer in, rounding of h defeats Armijo and the
        # full Newton step is the right one
        if decrement > 1e-10 * max(1.0, abs(h0)):
            while (problem.value(theta - t * step, scores - t * x_step) > h0 - _ARMIJO * t * decrement
                   and t > 1e-10):
                t *= 0.5
        theta = theta - t * step
        scores = scores - t * x_step
    return LocalSolution(theta, grad_norm, max_iter, False)


# ---------------------------------------------------------------------------------------------------------
# the agent role


class Agent:
    """One agent's role: its own rows, its model theta (as last published), its dual, its neighbours' models.

    Holds nothing of any other party: neighbours' models arrive only through the agent's network endpoint.

    Parameters
    ----------
    party : Party
        This agent's rows and labels (horizontal data).
    endpoint : Endpoint
        This agent's handle on the network.
    neighbours : tuple of str
        Its neighbours' names.
    scale : float
        The factor s of its local objective (see the module docstring).
    row_weight : float
        Weight s N/n of each of its rows' losses.
    rng : numpy.random.Generator
        This agent's own randomness (noise of the private variants).
    """

    def __init__(self, party: Party, endpoint: Endpoint, neighbours: tuple[str, ...], *, scale: float,
                 row_weight: float, rng: np.random.Generator) -> None:
        if party.y is None:
            raise ValueError(f"agent {party.name!r} holds no labels; decentralized ADMM needs horizontal "
                             "data")
        # horizontal data are narrow: dense products are faster than sparse ones
        X = party.X.toarray() if sp.issparse(party.X) else party.X
        self.name = party.name
        self.X = np.ascontiguousarray(X, dtype=float)
        self.y01 = np.asarray(party.y)
        self.y = signed_labels(party.y)
        self.scale = float(scale)
        self.row_weight = float(row_weight)
        self.neighbours = tuple(neighbours)
        self.rng = rng
        self._endpoint = endpoint
        d = self.X.shape[1]
        self.theta = np.zeros(d)
        self.dual = np.zeros(d)
        self.neighbour_theta = {j: np.zeros(d) for j in self.neighbours}
        self.hessian_cache = HessianCache()

    @property
    def degree(self) -> int:
        return len(self.neighbours)

    @property
    def rows(self) -> int:
        """The agent's training row count (public: every party knows it before a run)."""
        return int(self.X.shape[0])

    def regularization(self, lam: float) -> float:
        """The l2 weight of the local objective for the centralized weight `lam` (``s * lam``)."""
        return self.scale * lam

    @property
    def rows_in_unit_ball(self) -> bool:
        """Whether every row has L2 norm <= 1 (behind every sensitivity of the private variants)."""
        return bool(np.all(np.einsum("ij,ij->i", self.X, self.X) <= 1.0 + 1e-9))

    def centre_sum(self) -> np.ndarray:
        """``sum_{j in B_i} (theta_i + theta_j) / 2`` from the models as last published and received."""
        return 0.5 * (self.degree * self.theta + sum(self.neighbour_theta.values()))

    def problem(self, *, reg: float, penalty: float, linear: np.ndarray | None = None) -> LocalProblem:
        """The local update's objective with regularization `reg`, penalty `penalty` and an extra linear term.

        ``a = reg + 2 penalty V_i`` and ``linear = 2 lambda_i - 2 penalty sum_j c_ij (+ linear)``.
        """
        lin = 2.0 * self.dual - 2.0 * penalty * self.centre_sum()
        if linear is not None:
            lin = lin + linear
        return LocalProblem(X=self.X, y=self.y, row_weight=self.row_weight,
                            a=reg + 2.0 * penalty * self.degree, linear=lin)

    def solve(self, problem: LocalProblem, *, gtol: float | None = None) -> LocalSolution:
        """:func:`solve_local` warm-started at this agent's model, reusing its last Hessian factor.

        Without `gtol` the solve is exact (:func:`exact_gtol`).
        """
        return solve_local(problem, self.theta, gtol=exact_gtol(problem) if gtol is None else gtol,
                           cache=self.hessian_cache)

    def publish(self, theta: np.ndarray) -> None:
        """Adopt `theta` as this agent's model and send it to every neighbour."""
        self.theta = np.asarray(theta, dtype=float)
        self._endpoint.broadcast(self.neighbours, TAG_THETA, self.theta)

    def stay_silent(self) -> None:
        """Release no model this round: tell every neighbour so (a control message), keep theta."""
        self._endpoint.broadcast(self.neighbours, TAG_SILENT, None)

    def end_round(self) -> None:
        self._endpoint.next_round()

    def collect(self) -> None:
        """One message from each neighbour: its new model, or word that it stays silent (its last one stays).

        A model must be d finite floats (:mod:`ppml.network.expect`: anything else is a ProtocolError naming
        the neighbour).
        """
        d = self.theta.shape[0]
        for j in self.neighbours:
            tag, payload = self._endpoint.recv_first(j, (TAG_THETA, TAG_SILENT))
            if tag == TAG_THETA:
                self.neighbour_theta[j] = expect.vector(payload, sender=j, tag=TAG_THETA, length=d)
            elif payload is not None:  # word of a silent round carries nothing
                raise ProtocolError(f"{j!r} sent {TAG_SILENT!r} carrying a {type(payload).__name__}, expected "
                                    "nothing (None)")

    def dual_step(self, step: float) -> None:
        """``lambda_i += (step/2) sum_{j in B_i} (theta_i - theta_j)``."""
        self.dual = self.dual + 0.5 * step * (self.degree * self.theta - sum(self.neighbour_theta.values()))

    # evaluation messages (outside the protocol)

    def send_labels(self, evaluator: str) -> None:
        """Once, before the rounds: this agent's training labels to the evaluator."""
        self._endpoint.send(evaluator, TAG_LABELS, self.y01)

    def score(self, evaluator: str, facts: dict[str, Any], *, agents: int | None = None) -> None:
        """After a round: send the model (and the round's `facts`), score the round's models on own rows.

        The evaluator's models must be an `agents` x d float array (any number of rows when `agents` is None).
        """
        self._endpoint.send(evaluator, TAG_MODEL, {"theta": self.theta, **facts})
        thetas = expect.array(self._endpoint.recv(evaluator, TAG_MODELS), sender=evaluator, tag=TAG_MODELS,
                              shape=(agents, self.theta.shape[0]))
        self._endpoint.send(evaluator, TAG_SCORES, self.X @ thetas.T)

    def local_loss(self) -> float:
        """Mean logistic loss of this agent's model on its own rows (for its progress log)."""
        return float(np.mean(np.logaddexp(0.0, -self.y * (self.X @ self.theta))))


def objective_scale(rows: list[int], *, loss_scale: str) -> tuple[float, float]:
    """(s, w): the objective scale and each row's loss weight, from every agent's row count (public).

    s is n/N for ``loss_scale="sum"`` and 1 for ``"mean"``; w = s N / n.
    """
    n_total = sum(rows)
    scales = {"sum": n_total / len(rows), "mean": 1.0}
    if loss_scale not in scales:
        raise ValueError(f"loss_scale must be one of {sorted(scales)}, got {loss_scale!r}")
    scale = scales[loss_scale]
    return scale, scale * len(rows) / n_total


def make_agents(parties: list[Party], network: Network, *, loss_scale: str,
                rng: np.random.Generator) -> list[Agent]:
    """Every agent's :class:`Agent` in this process, each with its own child generator spawned from `rng`.

    For unit tests of one agent's update (a run builds each agent inside its own program, :func:`roles`);
    the same scale, neighbours and random streams as a run's.
    """
    names = [p.name for p in parties]
    nbrs = graph_neighbours(network, names)
    scale, row_weight = objective_scale([p.n_samples for p in parties], loss_scale=loss_scale)
    return [Agent(p, network.endpoint(p.name), nbrs[p.name], scale=scale, row_weight=row_weight, rng=child)
            for p, child in zip(parties, rng.spawn(len(parties)))]


# ---------------------------------------------------------------------------------------------------------
# evaluation (the experimenter's view, through evaluation messages)


class Evaluator:
    """The evaluator's arithmetic: every agent's model on all training rows and on the test rows.

    Works on what the evaluation messages carry: the training labels of every agent in agent order, and per
    round the N x d models and the n x N scores of all training rows (every agent's block stacked in agent
    order: the matrix ``X @ thetas.T`` of all rows). The test rows are the evaluator's own.
    """

    def __init__(self, y_train: np.ndarray, evaluation: Party | None, *, lam: float) -> None:
        self.y01 = y_train
        self.y = signed_labels(self.y01)
        self.lam = lam
        self.X_test = self.y_test = None
        if evaluation is not None:
            X_test, self.y_test = test_rows(evaluation)
            self.X_test = X_test.toarray() if sp.issparse(X_test) else np.asarray(X_test, dtype=float)

    def _objectives(self, thetas: np.ndarray, scores: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        losses = np.mean(np.logaddexp(0.0, -self.y[:, None] * scores), axis=0)
        return losses, losses + 0.5 * self.lam * np.einsum("ij,ij->i", thetas, thetas)

    def record(self, th: np.ndarray, scores: np.ndarray) -> dict[str, float]:
        """Per-round values: mean over agents of f(theta_i), of the training log loss, of the test error."""
        losses, objectives = self._objectives(th, scores)
        out = {"train_objective": float(objectives.mean()), "train_loss": float(losses.mean()),
               "consensus": float(np.max(np.linalg.norm(th - th.mean(axis=0), axis=1)))}
        if self.X_test is not None:
            test_scores = self.X_test @ th.T
            out["test_error"] = float(np.mean((test_scores > 0) != (self.y_test[:, None] == 1)))
            margins = signed_labels(self.y_test)[:, None] * test_scores
            out["test_logloss"] = float(np.mean(np.logaddexp(0.0, -margins)))
        return out

    def finish(self, th: np.ndarray, scores: np.ndarray) -> tuple[dict[str, Any], dict[str, Any]]:
        """Final metrics over every agent's model (see the module docstring), plus the average model's and
        the majority-class test error (the trivial baseline every error is shown beside).

        Returns the arguments of :meth:`History.finish` and the extra metrics that follow a variant's own.
        """
        _, objectives = self._objectives(th, scores)
        n_agents = th.shape[0]
        extra: dict[str, Any] = {}
        test_scores = y_test = None
        if self.X_test is not None:
            scored = self.X_test @ th.T
            errors = np.mean((scored > 0) != (self.y_test[:, None] == 1), axis=0)
            average_scores = self.X_test @ th.mean(axis=0)
            extra.update(test_error_worst_agent=float(errors.max()),
                         test_error_average_model=float(np.mean((average_scores > 0) != (self.y_test == 1))),
                         majority_error=majority_error(self.y01, self.y_test))
            test_scores, y_test = scored.T.ravel(), np.tile(self.y_test, n_agents)
        final = dict(train_objective=float(objectives.mean()), y_train=np.tile(self.y01, n_agents),
                     train_scores=scores.T.ravel(), y_test=y_test, test_scores=test_scores,
                     agents=n_agents, n_features=int(th.shape[1]))
        return final, extra


RoundRecord = Callable[[Any, int, list[dict[str, Any]]], dict[str, Any]]
"""``(params, t, facts) -> dict``: a variant's values for round t's record, from every agent's facts."""

FACT_KINDS = ("int", "bool")
"""What a variant's round facts may be (``facts`` of :func:`evaluator_program`): non-negative integers
(counters) or booleans."""


def progress_due(t: int, T: int) -> bool:
    """Whether round t of T is one a party logs its progress at (:data:`PROGRESS_LINES` per run)."""
    return t in (1, T) or t % max(1, T // PROGRESS_LINES) == 0


def _model_message(payload: Any, *, sender: str, d: int | None, facts: dict[str, str]) -> dict[str, Any]:
    """An agent's ``eval/model``, checked: its d finite floats and exactly the variant's facts."""
    expect.mapping(payload, ("theta", *facts), sender=sender, tag=TAG_MODEL)
    expect.vector(payload["theta"], sender=sender, tag=TAG_MODEL, length=d, what="theta")
    for key, kind in facts.items():
        if kind == "bool":
            expect.flag(payload[key], sender=sender, tag=TAG_MODEL, what=key)
        else:
            expect.integer(payload[key], sender=sender, tag=TAG_MODEL, low=0, what=key)
    return payload


def evaluator_program(endpoint: Endpoint, party: Party | None, *, agents: list[str], params: Any,
                      algorithm: str, round_record: RoundRecord | None = None, rows: list[int] | None = None,
                      features: int | None = None, facts: dict[str, str] | None = None) -> dict[str, Any]:
    """The evaluator: per round, collect the models, send them to every agent, score from their answers.

    Receives ``eval/labels`` once and per round ``eval/model`` and ``eval/scores`` from every agent; sends
    ``eval/models``. `party` is the held-out rows' shard (None: no test metrics). Returns the History with
    the per-round records and the arguments of its final metrics (``final``, ``extra``), which
    :func:`assemble` completes with the agents' own facts.

    Every message is checked before use (:mod:`ppml.network.expect`; a bad one is a ProtocolError naming its
    agent): the labels are `rows` [a] values in [0, 1], a model `features` finite floats with exactly the keys
    of `facts` (key -> ``"int"`` or ``"bool"``, :data:`FACT_KINDS`) beside it, the scores a `rows` [a] x N
    finite array. Without `rows` or `features` (public facts :func:`agent_roles` passes) those lengths are
    taken from the agent's own labels and from the first model.
    """
    facts_spec = dict(facts or {})
    for key, kind in facts_spec.items():
        if kind not in FACT_KINDS:
            raise ValueError(f"fact {key!r}: kind must be one of {FACT_KINDS}, got {kind!r}")
    labels = [expect.vector(endpoint.recv(a, TAG_LABELS), sender=a, tag=TAG_LABELS,
                            length=None if rows is None else rows[i], dtype="number", low=0, high=1)
              for i, a in enumerate(agents)]
    counts = [len(y) for y in labels]
    evaluator = Evaluator(np.concatenate(labels), party, lam=params.lam)
    history = History(algorithm)
    th = scores = None
    for t in range(1, params.T + 1):
        facts_t = []
        for a in agents:
            facts_t.append(_model_message(endpoint.recv(a, TAG_MODEL), sender=a, d=features, facts=facts_spec))
            if features is None:
                features = len(facts_t[0]["theta"])
        th = np.vstack([f.pop("theta") for f in facts_t])
        endpoint.broadcast(agents, TAG_MODELS, th)
        scores = np.vstack([expect.array(endpoint.recv(a, TAG_SCORES), sender=a, tag=TAG_SCORES,
                                         shape=(counts[i], len(agents)))
                            for i, a in enumerate(agents)])
        record = evaluator.record(th, scores)
        if round_record is not None:
            record.update(round_record(params, t, facts_t))
        history.log(epoch=t, **record)
        if progress_due(t, params.T):
            log.info("%s: %s round %d/%d: mean train objective %.6g, consensus %.3g", endpoint.name, algorithm, t,
                     params.T, record["train_objective"], record["consensus"])
        endpoint.next_round()
    final, extra = evaluator.finish(th, scores)
    return {"history": history, "final": final, "extra": extra}


# ---------------------------------------------------------------------------------------------------------
# the rounds

Update = tuple["np.ndarray | None", dict[str, Any]]
"""What a local step gives: the model to publish (None: none this round) and the round's facts to report."""


def consensus_rounds(agent: Agent, *, T: int, local_step: Callable[[int], Update],
                     dual_step: Callable[[int], float], evaluator: str = EVALUATOR,
                     agents: int | None = None) -> None:
    """Agent's T synchronous rounds: local update, exchange with neighbours, dual update, evaluation.

    Runs inside the agent's own program. Each round the agent publishes its model (``theta``) or says it has
    none (``ctl/silent``), receives one of the two from every neighbour, updates its dual and then answers
    the evaluator (:meth:`Agent.score`).

    Parameters
    ----------
    local_step : callable t -> (ndarray or None, dict)
        The agent's update in round t = 1..T: the model it publishes, or None to publish nothing this round,
        and facts of the round for the evaluator's record (e.g. its Newton steps).
    dual_step : callable t -> float
        The dual step size of round t.
    agents : int, optional
        How many agents there are (public): the rows the evaluator's models must have.

    Every model received is checked (:meth:`Agent.collect`, :meth:`Agent.score`); the agent logs its round
    and its own rows' loss at INFO every few rounds (:func:`progress_due`).
    """
    agent.send_labels(evaluator)
    for t in range(1, T + 1):
        theta, facts = local_step(t)
        if theta is None:
            agent.stay_silent()
        else:
            agent.publish(theta)
        agent.end_round()
        agent.collect()
        agent.dual_step(dual_step(t))
        agent.score(evaluator, facts, agents=agents)
        if progress_due(t, T) and log.isEnabledFor(logging.INFO):
            log.info("%s: round %d/%d: local loss %.6g", agent.name, t, T, agent.local_loss())


def agent_roles(public: Public, params: Any, *, rng: np.random.Generator, network: Network,
                program: Callable[..., Any], algorithm: str, loss_scale: str,
                row_weights: dict[str, float] | None = None, round_record: RoundRecord | None = None,
                facts: dict[str, str] | None = None, **kwargs: Any) -> list[Role]:
    """One `program` per agent and the evaluator's, from public facts (row counts, the graph).

    Each agent's program gets ``neighbours``, ``scale``, ``row_weight`` (from `row_weights` where given),
    its own child generator of `rng` (spawned in agent order, as :func:`make_agents` does), ``params`` and
    `kwargs`. The evaluator gets every agent's row count and the feature count (to check what it receives)
    and `facts`, the kinds of the round facts the variant's agents report (:func:`evaluator_program`).
    """
    names = public.names
    nbrs = graph_neighbours(network, names)
    if EVALUATOR not in network.names:
        raise ValueError(f"the network has no {EVALUATOR!r} address; build it with network_for()")
    if len(names) != params.agents:
        raise ParamError(f"agents is {params.agents}, but the prepared data has {len(names)} parties "
                         f"({', '.join(names)})")
    scale, row_weight = objective_scale([p.train_rows for p in public.parties], loss_scale=loss_scale)
    out = [Role(name, program, name,
                {"neighbours": nbrs[name], "scale": scale,
                 "row_weight": row_weight if row_weights is None else row_weights[name], "rng": child,
                 "params": params, **kwargs})
           for name, child in zip(names, rng.spawn(len(names)))]
    out.append(Role(EVALUATOR, evaluator_program, None if public.evaluator is None else EVALUATOR,
                    {"agents": names, "params": params, "algorithm": algorithm, "round_record": round_record,
                     "rows": [p.train_rows for p in public.parties], "features": public.parties[0].columns,
                     "facts": facts}))
    return out


def merge_misses(names: list[str], results: dict[str, Any]) -> list[tuple[str, int, float]]:
    """Every agent's missed solves in the order they happened: by round, then agent."""
    order = {name: i for i, name in enumerate(names)}
    misses = [tuple(m) for name in names for m in results[name]["misses"]]
    return sorted(misses, key=lambda m: (m[1], order[m[0]]))


def finish(history: History, evaluated: dict[str, Any], **extra: Any) -> History:
    """The final metrics: the evaluator's, with a variant's `extra` before the evaluator's own extras."""
    history.finish(**evaluated["final"], **extra, **evaluated["extra"])
    return history


def _agent_program(endpoint: Endpoint, party: Party, *, neighbours: tuple[str, ...], scale: float,
                   row_weight: float, rng: np.random.Generator, params: Params) -> dict[str, Any]:
    """Non-private consensus ADMM at one agent: exact local solves; returns its missed solves."""
    agent = Agent(party, endpoint, neighbours, scale=scale, row_weight=row_weight, rng=rng)
    misses: list[tuple[str, int, float]] = []

    def local_step(t: int) -> Update:
        sol = agent.solve(agent.problem(reg=agent.regularization(params.lam), penalty=params.eta))
        if not sol.converged:
            misses.append((agent.name, t, sol.grad_norm))
        return sol.theta, {}

    consensus_rounds(agent, T=params.T, local_step=local_step, dual_step=lambda t: params.eta,
                     agents=params.agents)
    return {"misses": misses}


def roles(public: Public, params: Params, *, rng: np.random.Generator, network: Network) -> list[Role]:
    """An agent program per party and the evaluator's."""
    return agent_roles(public, params, rng=rng, network=network, program=_agent_program,
                       algorithm="decentralized_admm", loss_scale=params.loss_scale)


def assemble(public: Public, params: Params, results: dict[str, Any]) -> History:
    """The evaluator's records and final metrics; converged when no agent missed a solve's tolerance."""
    evaluated = results[EVALUATOR]
    history = evaluated["history"]
    stop_exact(history, merge_misses(public.names, results), T=params.T)
    return finish(history, evaluated)


def fit(parties: list[Party], network: Network, params: Params, *, rng: np.random.Generator,
        evaluation: Party | None = None) -> History:
    """Non-private consensus ADMM with exact (Newton) local solves; see the module docstring."""
    return runtime.fit(sys.modules[__name__], parties, network, params, rng=rng, evaluation=evaluation)


def stop_exact(history: History, misses: list[tuple[str, int, float]], *, T: int) -> None:
    """Record the end of a run of exact local solves (converged: every solve met its tolerance)."""
    if misses:
        name, t, g = misses[0]
        history.stop(converged=False, reason=f"{len(misses)} local solves missed the gradient tolerance "
                                             f"(first: {name} in round {t}, |grad| = {g:.3g})")
    else:
        history.stop(converged=True, reason=f"ran the T = {T} rounds; every local solve met its tolerance")
