"""Paillier-encrypted mini-batch SGD for vertically partitioned logistic regression (Hardy et al.; FATE).

The first-order baseline of Table 1 of Yang, Fan et al. (the FATE quasi-Newton poster): hosts A_1, ..., A_K
hold features (K = 1 in the poster), guest B holds features and labels, coordinator C holds the Paillier
private key. Every mini-batch the hosts send B their encrypted partial scores, B forms the encrypted residual
[d] = [u/4 - y/2] of the Taylor loss log 2 - y u / 2 + u^2 / 8 and sends it to every host, every party
computes its encrypted gradient block, and C decrypts. The message flow, the
fixed-point arithmetic and the threat model are in :mod:`ppml.algorithms._hetero_lr`.

``update_at`` (the spec marks it UNVERIFIED for Hardy et al.'s paper) chooses who takes the step:

- ``parties`` (default, Hardy et al.'s masking): every party adds fresh uniform masks to its encrypted
  gradient, C returns the masked plaintexts, and each party unmasks and updates its own block; C learns only
  the losses.
- ``coordinator`` (FATE 1.x): gradients reach C unmasked; C returns each party's step eta_e g.

Both give the same model (the masks cancel exactly in the integers). The learning rate follows FATE,
eta_e = eta / sqrt(1 + decay e) per epoch e; training stops when the mean batch loss of an epoch changes by
less than ``tol`` (FATE's ``diff`` rule) or after ``max_epochs``.

References
----------
.. [1] S. Hardy, W. Henecka, H. Ivey-Law, R. Nock, G. Patrini, G. Smith, B. Thorne, "Private federated
   learning on vertically partitioned data via entity resolution and additively homomorphic encryption",
   arXiv:1711.10677, 2017.
.. [2] K. Yang, T. Fan, T. Chen, Y. Shi, Q. Yang, "A Quasi-Newton Method Based Vertical Federated Learning
   Framework for Logistic Regression", arXiv:1912.00513, 2019, Table 1 (the SGD rows).
.. [3] FATE 1.x ``HeteroLRGuest`` / ``HeteroLRHost`` / ``HeteroLRArbiter`` (FederatedAI/FATE).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from ppml import runtime
from ppml.algorithms import _hetero_lr
from ppml.history import History
from ppml.network import Network
from ppml.parties import Party
from ppml.runtime import Public, Role

__all__ = ["MESSAGES", "SIDE_MESSAGES", "Params", "network_for", "roles", "assemble", "fit"]

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
     "content": "[X_k^T d + s lam theta_k (+ r_k)] from every host k: d_k ciphertexts",
     "protection": "Paillier; masked by a fresh uniform r_k when update_at = parties"},
    {"tag": "guest_gradient", "src": "guest", "dst": "arbiter",
     "content": "[X_B^T d + s lam theta_B (+ r_B)] (intercept included): d_B + 1 ciphertexts",
     "protection": "Paillier; masked by a fresh uniform r_B when update_at = parties"},
    {"tag": "host_gradient_decrypted", "src": "arbiter", "dst": "host",
     "content": "G_k + r_k as integers, to every host k (update_at = parties)",
     "protection": "the mask r_k"},
    {"tag": "guest_gradient_decrypted", "src": "arbiter", "dst": "guest",
     "content": "G_B + r_B as integers (update_at = parties)", "protection": "the mask r_B"},
    {"tag": "host_step", "src": "arbiter", "dst": "host",
     "content": "eta_e g_k, host k's step, to every host (update_at = coordinator)", "protection": "none"},
    {"tag": "guest_step", "src": "arbiter", "dst": "guest",
     "content": "eta_e g_B, B's step (update_at = coordinator)", "protection": "none"},
    {"tag": "converged", "src": "arbiter", "dst": "guest, host",
     "content": "stop flag after each epoch, to the guest and every host", "protection": "none"},
)

#: evaluation traffic, counted apart (see :data:`ppml.algorithms._hetero_lr.SIDE_MESSAGES`)
SIDE_MESSAGES = _hetero_lr.SIDE_MESSAGES


@dataclass(frozen=True)
class Params(_hetero_lr.ProtocolParams):
    """The common protocol parameters (:class:`~ppml.algorithms._hetero_lr.ProtocolParams`) and:

    Attributes
    ----------
    update_at : {"parties", "coordinator"}
        Who takes the step: the parties after unmasking (Hardy et al.), or C (FATE). Same model either way.
    """

    update_at: Literal["parties", "coordinator"] = "parties"


def network_for(parties: list[Party], params: Params, *, rng: np.random.Generator,
                capture: bool = False) -> Network:
    """The network over the guest, the hosts and the coordinator ``arbiter``.

    Raises
    ------
    ppml.config.ParamError
        When the data do not fit the params (:func:`ppml.algorithms._hetero_lr.check_data`): not one guest
        with labels and at least one host, or a batch larger than the training rows.
    """
    return _hetero_lr.make_network(parties, params, capture=capture)


def roles(public: Public, params: Params, *, rng: np.random.Generator, network: Network | None = None
          ) -> list[Role]:
    """The guest's, every host's and the coordinator's programs (:mod:`ppml.algorithms._hetero_lr`)."""
    return _hetero_lr.roles(public, params, rng=rng, algorithm="paillier_sgd",
                            masked=params.update_at == "parties")


def assemble(public: Public, params: Params, results: dict[str, Any]) -> History:
    """The run's History from the programs' results (:func:`ppml.algorithms._hetero_lr.assemble`)."""
    return _hetero_lr.assemble(public, params, results, masked=params.update_at == "parties")


def fit(parties: list[Party], network: Network, params: Params, *, rng: np.random.Generator,
        evaluation: Party | None = None) -> History:
    """Train by encrypted mini-batch SGD on the Taylor loss, every role program in this process.

    Parameters
    ----------
    parties : list of Party
        The guest (labels) and one or more hosts, aligned by id.
    network : Network
        From :func:`network_for`.
    params : Params
    rng : numpy.random.Generator
        The guest's source of the batch seed. Paillier randomness and masks come from the OS instead; the
        coordinator's program generates the key pair.
    evaluation : None
        Vertical data: each party carries its own test columns.

    Returns
    -------
    History
        Per epoch ``loss``, ``train_objective``, ``taylor_objective``, ``eta``, ``iterations``, ``seconds``
        and traffic; final metrics with the traffic per iteration, next to the poster's 3|S| (A<->B) and 2n
        (with C).
    """
    return runtime.fit(sys.modules[__name__], parties, network, params, rng=rng, evaluation=evaluation)
