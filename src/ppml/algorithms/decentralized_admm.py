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

Threat model: agents are honest-but-curious; a neighbour sees every theta_j sent to it. This non-private
baseline protects nothing; it is the lower bound of the papers' error-versus-epsilon figures.

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

import math
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Literal

import numpy as np
import scipy.linalg
import scipy.sparse as sp
from scipy.special import expit

from ppml.algorithms._majority import majority_error
from ppml.algorithms.centralized import test_rows
from ppml.config import ParamError
from ppml.history import History
from ppml.network import Endpoint, Network
from ppml.parties import Party, signed_labels

__all__ = ["MESSAGES", "Params", "network_for", "fit", "random_connected_graph", "graph_neighbours",
           "LocalProblem", "LocalSolution", "HessianCache", "local_gradient", "solve_local", "Agent",
           "make_agents", "Evaluator", "consensus_rounds", "stop_exact", "exact_gtol", "EXACT_RTOL"]

MESSAGES = (
    {"tag": "theta", "src": "agent i", "dst": "each neighbour j of agent i",
     "content": "theta_i after the local update (d floats)", "protection": "none (non-private baseline)"},
)

#: Relative gradient-norm tolerance of an "exact" local solve: ``||∇h|| <= EXACT_RTOL * max(1, ||linear||)``
#: (the local problems are >= 2 eta-strongly convex, so this bounds the distance to the exact minimizer;
#: relative, because the noise of the private variants can make the linear term large).
EXACT_RTOL = 1e-10

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
    """The agents on a seeded random connected graph; only neighbours may exchange messages."""
    if len(parties) != params.agents:
        raise ParamError(f"agents is {params.agents}, but the prepared data has {len(parties)} parties "
                         f"({', '.join(p.name for p in parties)})")
    names = [p.name for p in parties]
    return Network(names, capture=capture, edges=random_connected_graph(names, p=params.graph_p, rng=rng))


def graph_neighbours(network: Network, names: list[str]) -> dict[str, tuple[str, ...]]:
    """Each agent's neighbours (in `names` order), read from the network's edges."""
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
        self.y = signed_labels(party.y)
        self.scale = float(scale)
        self.row_weight = float(row_weight)
        self.neighbours = neighbours
        self.rng = rng
        self._endpoint = endpoint
        d = self.X.shape[1]
        self.theta = np.zeros(d)
        self.dual = np.zeros(d)
        self.neighbour_theta = {j: np.zeros(d) for j in neighbours}
        self.hessian_cache = HessianCache()

    @property
    def degree(self) -> int:
        return len(self.neighbours)

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
        self._endpoint.broadcast(self.neighbours, "theta", self.theta)

    def collect(self, *, stale_ok: bool = False) -> None:
        """Receive each neighbour's new model (with `stale_ok`, a silent neighbour's last one stays)."""
        for j in self.neighbours:
            pending = self._endpoint.pending(j, "theta")
            if pending == 0 and stale_ok:
                continue
            if pending > 1:
                raise RuntimeError(f"{self.name!r} has {pending} unread models from {j!r}; rounds are out of "
                                   "step")
            self.neighbour_theta[j] = self._endpoint.recv(j, "theta")

    def dual_step(self, step: float) -> None:
        """``lambda_i += (step/2) sum_{j in B_i} (theta_i - theta_j)``."""
        self.dual = self.dual + 0.5 * step * (self.degree * self.theta - sum(self.neighbour_theta.values()))


def make_agents(parties: list[Party], network: Network, *, loss_scale: str,
                rng: np.random.Generator) -> list[Agent]:
    """One :class:`Agent` per party, each with its own child generator spawned from `rng`.

    The objective scale s is n/N for ``loss_scale="sum"`` and 1 for ``"mean"`` (row counts are public).
    """
    names = [p.name for p in parties]
    nbrs = graph_neighbours(network, names)
    n_total = sum(p.n_samples for p in parties)
    scales = {"sum": n_total / len(parties), "mean": 1.0}
    if loss_scale not in scales:
        raise ValueError(f"loss_scale must be one of {sorted(scales)}, got {loss_scale!r}")
    scale = scales[loss_scale]
    row_weight = scale * len(parties) / n_total
    return [Agent(p, network.endpoint(p.name), nbrs[p.name], scale=scale, row_weight=row_weight, rng=child)
            for p, child in zip(parties, rng.spawn(len(parties)))]


# ---------------------------------------------------------------------------------------------------------
# evaluation (the simulator's view, outside the protocol)


class Evaluator:
    """Scores every agent's model on all training rows and on the test rows.

    This is the experimenter's view (it joins all rows), used only for the records and the final metrics,
    never inside the protocol.
    """

    def __init__(self, parties: list[Party], evaluation: Party | None, *, lam: float) -> None:
        blocks = [p.X.toarray() if sp.issparse(p.X) else np.asarray(p.X, dtype=float) for p in parties]
        self.X = np.vstack(blocks)
        self.y01 = np.concatenate([p.y for p in parties])
        self.y = signed_labels(self.y01)
        self.lam = lam
        self.X_test = self.y_test = None
        if evaluation is not None:
            X_test, self.y_test = test_rows(evaluation)
            self.X_test = X_test.toarray() if sp.issparse(X_test) else np.asarray(X_test, dtype=float)

    def _objectives(self, thetas: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        scores = self.X @ thetas.T
        losses = np.mean(np.logaddexp(0.0, -self.y[:, None] * scores), axis=0)
        return losses, losses + 0.5 * self.lam * np.einsum("ij,ij->i", thetas, thetas)

    def record(self, thetas: list[np.ndarray]) -> dict[str, float]:
        """Per-round values: mean over agents of f(theta_i), of the training log loss, of the test error."""
        th = np.vstack(thetas)
        losses, objectives = self._objectives(th)
        out = {"train_objective": float(objectives.mean()), "train_loss": float(losses.mean()),
               "consensus": float(np.max(np.linalg.norm(th - th.mean(axis=0), axis=1)))}
        if self.X_test is not None:
            scores = self.X_test @ th.T
            out["test_error"] = float(np.mean((scores > 0) != (self.y_test[:, None] == 1)))
            margins = signed_labels(self.y_test)[:, None] * scores
            out["test_logloss"] = float(np.mean(np.logaddexp(0.0, -margins)))
        return out

    def finish(self, history: History, thetas: list[np.ndarray], **extra: Any) -> None:
        """Final metrics over every agent's model (see the module docstring), plus the average model's and
        the majority-class test error (the trivial baseline every error is shown beside)."""
        th = np.vstack(thetas)
        _, objectives = self._objectives(th)
        n_agents = len(thetas)
        train_scores = (self.X @ th.T).T.ravel()
        test_scores = y_test = None
        if self.X_test is not None:
            scores = self.X_test @ th.T
            errors = np.mean((scores > 0) != (self.y_test[:, None] == 1), axis=0)
            average_scores = self.X_test @ th.mean(axis=0)
            extra.update(test_error_worst_agent=float(errors.max()),
                         test_error_average_model=float(np.mean((average_scores > 0) != (self.y_test == 1))),
                         majority_error=majority_error(self.y01, self.y_test))
            test_scores, y_test = scores.T.ravel(), np.tile(self.y_test, n_agents)
        history.finish(train_objective=float(objectives.mean()), y_train=np.tile(self.y01, n_agents),
                       train_scores=train_scores, y_test=y_test, test_scores=test_scores,
                       agents=n_agents, n_features=int(th.shape[1]), **extra)


# ---------------------------------------------------------------------------------------------------------
# the rounds


def consensus_rounds(agents: list[Agent], network: Network, *, T: int,
                     local_step: Callable[[Agent, int], np.ndarray | None], dual_step: Callable[[int], float],
                     evaluator: Evaluator, history: History, stale_ok: bool = False,
                     extra_record: Callable[[int], dict[str, Any]] | None = None) -> None:
    """Run T synchronous rounds: local updates, exchange with neighbours, dual updates, one record each.

    Parameters
    ----------
    local_step : callable (agent, t) -> ndarray or None
        Agent's update in round t = 1..T: the model it publishes, or None to publish nothing this round.
    dual_step : callable t -> float
        The dual step size of round t.
    stale_ok : bool
        Whether an agent may receive nothing from a neighbour in a round (then it keeps the stale model).
    extra_record : callable t -> dict, optional
        Variant-specific values added to round t's record.
    """
    for t in range(1, T + 1):
        updates = [local_step(agent, t) for agent in agents]
        for agent, theta in zip(agents, updates):
            if theta is not None:
                agent.publish(theta)
        network.next_round()
        for agent in agents:
            agent.collect(stale_ok=stale_ok)
        step = dual_step(t)
        for agent in agents:
            agent.dual_step(step)
        record = evaluator.record([a.theta for a in agents])
        if extra_record is not None:
            record.update(extra_record(t))
        history.log(epoch=t, **record)


def fit(parties: list[Party], network: Network, params: Params, *, rng: np.random.Generator,
        evaluation: Party | None = None) -> History:
    """Non-private consensus ADMM with exact (Newton) local solves; see the module docstring."""
    history = History("decentralized_admm")
    agents = make_agents(parties, network, loss_scale=params.loss_scale, rng=rng)
    evaluator = Evaluator(parties, evaluation, lam=params.lam)
    misses: list[tuple[str, int, float]] = []

    def local_step(agent: Agent, t: int) -> np.ndarray:
        sol = agent.solve(agent.problem(reg=agent.regularization(params.lam), penalty=params.eta))
        if not sol.converged:
            misses.append((agent.name, t, sol.grad_norm))
        return sol.theta

    consensus_rounds(agents, network, T=params.T, local_step=local_step, dual_step=lambda t: params.eta,
                     evaluator=evaluator, history=history)
    stop_exact(history, misses, T=params.T)
    evaluator.finish(history, [a.theta for a in agents])
    return history


def stop_exact(history: History, misses: list[tuple[str, int, float]], *, T: int) -> None:
    """Record the end of a run of exact local solves (converged: every solve met its tolerance)."""
    if misses:
        name, t, g = misses[0]
        history.stop(converged=False, reason=f"{len(misses)} local solves missed the gradient tolerance "
                                             f"(first: {name} in round {t}, |grad| = {g:.3g})")
    else:
        history.stop(converged=True, reason=f"ran the T = {T} rounds; every local solve met its tolerance")
