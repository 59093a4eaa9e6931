"""Paillier-encrypted mini-batch SGD for vertically partitioned logistic regression (Hardy et al.; FATE).

The first-order baseline of Table 1 of Yang, Fan et al. (the FATE quasi-Newton poster): host A holds
features, guest B holds features and labels, coordinator C holds the Paillier private key. Every mini-batch
A and B exchange encrypted partial scores to form the encrypted residual [d] = [u/4 - y/2] of the Taylor loss
log 2 - y u / 2 + u^2 / 8, compute their encrypted gradients, and C decrypts. The message flow, the
fixed-point arithmetic and the threat model are in :mod:`ppml.algorithms._hetero_lr`.

``update_at`` (the spec marks it UNVERIFIED for Hardy et al.'s paper) chooses who takes the step:

- ``parties`` (default, Hardy et al.'s masking): A and B add fresh uniform masks to their encrypted gradients,
  C returns the masked plaintexts, and each party unmasks and updates its own block; C learns only the losses.
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
     "content": "Paillier public key (n, scheme, DJN base), once", "protection": "public"},
    {"tag": "batch_seed", "src": "guest", "dst": "host",
     "content": "seed of the shared partition into mini-batches, once",
     "protection": "none (row order only)"},
    {"tag": "host_forward", "src": "host", "dst": "guest",
     "content": "[u_A] = [X_A theta_A] on the batch: |S| ciphertexts", "protection": "Paillier"},
    {"tag": "host_loss", "src": "host", "dst": "guest",
     "content": "[u_A,i^2] per row (|S|) or [sum u_A,i^2] (1), and [lam/2 ||theta_A||^2] (1)",
     "protection": "Paillier"},
    {"tag": "fore_gradient", "src": "guest", "dst": "host",
     "content": "[d] = [u_A/4 + u_B/4 - y/2]: |S| ciphertexts", "protection": "Paillier, re-randomized"},
    {"tag": "batch_loss", "src": "guest", "dst": "arbiter",
     "content": "[s l_S], the batch's Taylor loss plus penalty times s: 1 ciphertext",
     "protection": "Paillier (C decrypts: C learns the loss)"},
    {"tag": "host_gradient", "src": "host", "dst": "arbiter",
     "content": "[X_A^T d + s lam theta_A (+ r_A)]: d_A ciphertexts",
     "protection": "Paillier; masked by a fresh uniform r_A when update_at = parties"},
    {"tag": "guest_gradient", "src": "guest", "dst": "arbiter",
     "content": "[X_B^T d + s lam theta_B (+ r_B)] (intercept included): d_B + 1 ciphertexts",
     "protection": "Paillier; masked by a fresh uniform r_B when update_at = parties"},
    {"tag": "host_gradient_decrypted", "src": "arbiter", "dst": "host",
     "content": "G_A + r_A as integers (update_at = parties)", "protection": "the mask r_A"},
    {"tag": "guest_gradient_decrypted", "src": "arbiter", "dst": "guest",
     "content": "G_B + r_B as integers (update_at = parties)", "protection": "the mask r_B"},
    {"tag": "host_step", "src": "arbiter", "dst": "host",
     "content": "eta_e g_A, A's step (update_at = coordinator)", "protection": "none"},
    {"tag": "guest_step", "src": "arbiter", "dst": "guest",
     "content": "eta_e g_B, B's step (update_at = coordinator)", "protection": "none"},
    {"tag": "converged", "src": "arbiter", "dst": "guest, host",
     "content": "stop flag after each epoch", "protection": "none"},
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
    """The network over the guest, the host and the coordinator ``arbiter``.

    Raises
    ------
    ppml.config.ParamError
        When the data do not fit the params (:func:`ppml.algorithms._hetero_lr.check_data`): not one guest
        with labels and one host, or a batch larger than the training rows.
    """
    return _hetero_lr.make_network(parties, params, capture=capture)


def roles(public: Public, params: Params, *, rng: np.random.Generator, network: Network | None = None
          ) -> list[Role]:
    """The guest's, the host's and the coordinator's programs (:mod:`ppml.algorithms._hetero_lr`)."""
    return _hetero_lr.roles(public, params, rng=rng, algorithm="paillier_sgd",
                            masked=params.update_at == "parties")


def assemble(public: Public, params: Params, results: dict[str, Any]) -> History:
    """The run's History from the programs' results (:func:`ppml.algorithms._hetero_lr.assemble`)."""
    return _hetero_lr.assemble(public, params, results, masked=params.update_at == "parties")


def fit(parties: list[Party], network: Network, params: Params, *, rng: np.random.Generator,
        evaluation: Party | None = None) -> History:
    """Train by encrypted mini-batch SGD on the Taylor loss, the three role programs in this process.

    Parameters
    ----------
    parties : list of Party
        The guest (labels) and the host, aligned by id.
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
        and traffic; final metrics with the traffic per iteration next to the poster's 3|S| (A<->B) and 2n
        (with C).
    """
    return runtime.fit(sys.modules[__name__], parties, network, params, rng=rng, evaluation=evaluation)
