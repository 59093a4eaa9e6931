"""Paillier-encrypted stochastic quasi-Newton (SQN) for vertically partitioned logistic regression.

The method of Yang, Fan et al. (the FATE quasi-Newton poster; reproduces its Table 1): the encrypted
mini-batch protocol of :mod:`ppml.algorithms.paillier_sgd`, in which the coordinator C scales each
gradient by an L-BFGS-type matrix H built from curvature pairs, following Algorithm 1 of Byrd, Hansen,
Nocedal and Singer:

- iterations k = 1, 2, ... count mini-batches across epochs; for k <= 2L the step is eta_e g, afterwards
  eta_e H_t g;
- every party (and C, on the sum of the steps it issued) sums its iterates over windows of L iterations;
  at k mod L = 0 the window average w_t closes and, from the second window on, s_t = w_t - w_{t-1};
- the Hessian-vector product y_t = (1/|S_H|) sum_{i in S_H} x_i x_i^T s_t / 4 + lam s_t (the Taylor loss's
  Hessian is x x^T / 4, independent of the model) is computed encrypted: every host A_k sends [X_k s_k] on
  S_H to B, B returns [h] = [(sum_k X_k s_k + X_B s_B)/4] to every host, re-randomized for each, and every
  party sends X^T [h] + |S_H| lam s to C, which concatenates the blocks (hosts in order, then B);
- C keeps the last M pairs and applies H_t to g by the two-loop recursion (Algorithm 2's H_t, initial
  scaling s_t^T y_t / y_t^T y_t from the newest pair; FATE keeps the dense matrix instead, which is the same
  operator). A pair with s^T y <= 1e-10 ||s|| ||y|| would be skipped and counted (it cannot happen for the
  Taylor loss with lam >= 0 and s != 0).

S_H = S (``S_H: null``, the poster's Table 1 setting) uses the batch of iteration k; an integer draws an
independent uniform sample of that size at B (Byrd et al.; FATE's sample_size), whose row indices B sends
to every host. With one host, per iteration A and B then exchange 3|S| + 2|S_H|/L ciphertexts (the poster's
count, with ``host_squares: rows``; plus A's one penalty ciphertext) and C receives (1 + 1/L) n + 1 and
returns n values, the poster's (2 + 1/L) n with n the number of model coefficients. With K hosts each host
exchanges as much with B, plus |S| + 1 for the loss's cross terms from the second host on.

Threat model: as in :mod:`ppml.algorithms._hetero_lr`; C must see the plaintext gradient to apply H, so no
masks (as in FATE): C learns the gradients, the steps and hence the model up to its zero start.

References
----------
.. [1] K. Yang, T. Fan, T. Chen, Y. Shi, Q. Yang, "A Quasi-Newton Method Based Vertical Federated Learning
   Framework for Logistic Regression", arXiv:1912.00513, 2019, Algorithm 1 and Table 1.
.. [2] R. H. Byrd, S. L. Hansen, J. Nocedal, Y. Singer, "A Stochastic Quasi-Newton Method for Large-Scale
   Optimization", SIAM J. Optim. 26(2):1008-1031, 2016, Algorithms 1 and 2.
.. [3] J. Nocedal, S. J. Wright, "Numerical Optimization", 2nd ed., Springer 2006, Algorithm 7.4 (two-loop
   recursion).
.. [4] FATE 1.x ``hetero_sqn_gradient.py``, ``sqn_sync.py`` (FederatedAI/FATE).
"""

from __future__ import annotations

import sys
from collections import deque
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ppml import runtime
from ppml.algorithms import _hetero_lr
from ppml.history import History
from ppml.network import Network
from ppml.parties import Party
from ppml.runtime import Public, Role

__all__ = ["MESSAGES", "SIDE_MESSAGES", "Params", "network_for", "roles", "assemble", "fit", "two_loop",
           "QuasiNewton", "CURVATURE_TOL"]

MESSAGES: tuple[dict[str, str], ...] = (
    {"tag": "public_key", "src": "arbiter", "dst": "guest, host",
     "content": "Paillier public key (n, scheme, DJN base), once, to the guest and every host",
     "protection": "public"},
    {"tag": "batch_seed", "src": "guest", "dst": "host",
     "content": "seed of the shared partition into mini-batches, once, to every host",
     "protection": "none (row order only)"},
    {"tag": "host_forward", "src": "host", "dst": "guest",
     "content": "[u_k] = [X_k theta_k] on the batch, from every host k: |S| ciphertexts",
     "protection": "Paillier"},
    {"tag": "host_loss", "src": "host", "dst": "guest",
     "content": "[u_k,i^2] per row (|S|) or [sum u_k,i^2] (1), and [lam/2 ||theta_k||^2] (1), from every host",
     "protection": "Paillier"},
    {"tag": "fore_gradient", "src": "guest", "dst": "host",
     "content": "[d] = [sum_k u_k/4 + u_B/4 - y/2] to every host: |S| ciphertexts",
     "protection": "Paillier, re-randomized for each host"},
    {"tag": "batch_loss", "src": "guest", "dst": "arbiter",
     "content": "[s l_S], the batch's Taylor loss plus penalty times s: 1 ciphertext",
     "protection": "Paillier (C decrypts: C learns the loss)"},
    *_hetero_lr.CROSS_MESSAGES,
    {"tag": "host_gradient", "src": "host", "dst": "arbiter",
     "content": "[X_k^T d + s lam theta_k] from every host k: d_k ciphertexts",
     "protection": "Paillier (C decrypts: C learns g_k)"},
    {"tag": "guest_gradient", "src": "guest", "dst": "arbiter",
     "content": "[X_B^T d + s lam theta_B] (intercept included): d_B + 1 ciphertexts",
     "protection": "Paillier (C decrypts: C learns g_B)"},
    {"tag": "host_step", "src": "arbiter", "dst": "host",
     "content": "host k's block of eta_e g (k <= 2L) or eta_e H g, to every host",
     "protection": "none"},
    {"tag": "guest_step", "src": "arbiter", "dst": "guest",
     "content": "B's block of eta_e g (k <= 2L) or eta_e H g", "protection": "none"},
    {"tag": "hessian_rows", "src": "guest", "dst": "host",
     "content": "row indices of S_H, every L iterations (only when S_H is sampled), to every host",
     "protection": "none (row order only)"},
    {"tag": "host_hessian_forward", "src": "host", "dst": "guest",
     "content": "[X_k s_k] on S_H from every host k, every L iterations: |S_H| ciphertexts",
     "protection": "Paillier"},
    {"tag": "hessian_fore", "src": "guest", "dst": "host",
     "content": "[h] = [(sum_k X_k s_k + X_B s_B)/4] on S_H, to every host: |S_H| ciphertexts",
     "protection": "Paillier, re-randomized for each host"},
    {"tag": "host_hessian_vector", "src": "host", "dst": "arbiter",
     "content": "[X_k^T h + |S_H| lam s_k] from every host k: d_k ciphertexts",
     "protection": "Paillier (C decrypts: C learns y_k)"},
    {"tag": "guest_hessian_vector", "src": "guest", "dst": "arbiter",
     "content": "[X_B^T h + |S_H| lam s_B]: d_B + 1 ciphertexts",
     "protection": "Paillier (C decrypts: C learns y_B)"},
    {"tag": "converged", "src": "arbiter", "dst": "guest, host",
     "content": "stop flag after each epoch, to the guest and every host", "protection": "none"},
)

#: evaluation traffic, counted apart (see :data:`ppml.algorithms._hetero_lr.SIDE_MESSAGES`)
SIDE_MESSAGES = _hetero_lr.SIDE_MESSAGES

#: A pair is used only if s^T y > CURVATURE_TOL ||s|| ||y|| (Byrd et al.'s safeguard).
CURVATURE_TOL = 1e-10


@dataclass(frozen=True)
class Params(_hetero_lr.ProtocolParams):
    """The common protocol parameters (:class:`~ppml.algorithms._hetero_lr.ProtocolParams`) and:

    Attributes
    ----------
    L : int
        Curvature pairs are formed every L iterations (the poster's Table 1: 4; FATE's default 3).
    M : int
        Memory: the number of most recent pairs H is built from (FATE's default 5; the poster does not say).
    S_H : int or None
        |S_H| of an independent Hessian sample drawn by the guest; None (default) uses the current
        mini-batch, the poster's S_H = S.
    """

    L: int = field(default=4, metadata={"gt": 0})
    M: int = field(default=5, metadata={"gt": 0})
    S_H: int | None = field(default=None, metadata={"gt": 0})


def two_loop(gradient: np.ndarray, pairs: list[tuple[np.ndarray, np.ndarray]]) -> np.ndarray:
    """H g by the L-BFGS two-loop recursion over `pairs` (oldest first).

    H is Algorithm 2's matrix: H_0 = (s^T y / y^T y) I from the newest pair, then for each pair, oldest to
    newest, H <- (I - rho s y^T) H (I - rho y s^T) + rho s s^T with rho = 1 / (y^T s). Costs O(len(pairs) d).
    """
    q = np.array(gradient, dtype=np.float64)
    rhos = [1.0 / float(y @ s) for s, y in pairs]
    alphas = []
    for (s, y), rho in zip(reversed(pairs), reversed(rhos)):
        alpha = rho * float(s @ q)
        q -= alpha * y
        alphas.append(alpha)
    s_new, y_new = pairs[-1]
    r = (float(s_new @ y_new) / float(y_new @ y_new)) * q
    for (s, y), rho, alpha in zip(pairs, rhos, reversed(alphas)):
        beta = rho * float(y @ r)
        r += (alpha - beta) * s
    return r


class QuasiNewton:
    """The coordinator's curvature memory: the last M pairs, and the direction rule of Algorithm 1.

    Parameters
    ----------
    L : int
        Pair interval; the gradient is used as is for k <= 2L.
    M : int
        Memory size.
    """

    def __init__(self, *, L: int, M: int) -> None:
        self.L = L
        self._pairs: deque[tuple[np.ndarray, np.ndarray]] = deque(maxlen=M)
        self.formed = 0
        self.skipped = 0

    def __len__(self) -> int:
        return len(self._pairs)

    @property
    def pairs(self) -> list[tuple[np.ndarray, np.ndarray]]:
        """The stored (s, y) pairs, oldest first."""
        return list(self._pairs)

    def add_pair(self, s: np.ndarray, y: np.ndarray) -> bool:
        """Store (s, y), dropping the oldest beyond M; skip it (False) when s^T y is not safely positive."""
        if float(s @ y) <= CURVATURE_TOL * float(np.linalg.norm(s) * np.linalg.norm(y)):
            self.skipped += 1
            return False
        self._pairs.append((np.array(s, dtype=np.float64), np.array(y, dtype=np.float64)))
        self.formed += 1
        return True

    def restore(self, *, pairs: list, formed: int, skipped: int) -> None:
        """The memory as a checkpoint holds it: the stored pairs (oldest first) and the counts."""
        self._pairs.clear()
        for s, y in pairs:
            self._pairs.append((np.asarray(s, dtype=np.float64), np.asarray(y, dtype=np.float64)))
        self.formed, self.skipped = int(formed), int(skipped)

    def direction(self, gradient: np.ndarray, k: int) -> np.ndarray:
        """g for k <= 2L (or while no pair is stored), else H_t g."""
        if k <= 2 * self.L or not self._pairs:
            return gradient
        return two_loop(gradient, self.pairs)


def network_for(parties: list[Party], params: Params, *, rng: np.random.Generator,
                capture: bool = False) -> Network:
    """The network over the guest, the hosts and the coordinator ``arbiter``.

    Raises
    ------
    ppml.config.ParamError
        When the data do not fit the params (:func:`ppml.algorithms._hetero_lr.check_data`): not one guest
        with labels and at least one host, or a batch or S_H larger than the training rows.
    """
    return _hetero_lr.make_network(parties, params, hessian_sample=params.S_H, capture=capture)


def roles(public: Public, params: Params, *, rng: np.random.Generator, network: Network | None = None
          ) -> list[Role]:
    """The guest's, every host's and the coordinator's programs; C starts with an empty curvature memory."""
    return _hetero_lr.roles(public, params, rng=rng, algorithm="paillier_sqn", masked=False,
                            curvature=QuasiNewton(L=params.L, M=params.M), hessian_sample=params.S_H)


def assemble(public: Public, params: Params, results: dict[str, Any]) -> History:
    """The run's History, with C's ``curvature_pairs`` and ``curvature_skipped`` in the final metrics."""
    return _hetero_lr.assemble(public, params, results, masked=False, curvature_every=params.L,
                               hessian_sample=params.S_H)


def fit(parties: list[Party], network: Network, params: Params, *, rng: np.random.Generator,
        evaluation: Party | None = None) -> History:
    """Train by encrypted stochastic quasi-Newton on the Taylor loss, every role program in this process.

    Parameters
    ----------
    parties : list of Party
        The guest (labels) and one or more hosts, aligned by id.
    network : Network
        From :func:`network_for`.
    params : Params
    rng : numpy.random.Generator
        The guest's source of the batch seed and of sampled S_H. Paillier randomness comes from the OS; the
        coordinator's program generates the key pair.
    evaluation : None
        Vertical data: each party carries its own test columns.

    Returns
    -------
    History
        As :func:`ppml.algorithms.paillier_sgd.fit`, plus ``curvature_pairs`` and ``curvature_skipped`` in
        the final metrics; traffic per iteration next to the poster's 3|S| + 2|S_H|/L and (2 + 1/L) n.
    """
    return runtime.fit(sys.modules[__name__], parties, network, params, rng=rng, evaluation=evaluation)
