"""The message flow shared by the Paillier vertical logistic-regression protocols (encrypted SGD and SQN).

:mod:`ppml.algorithms.paillier_sgd` and :mod:`ppml.algorithms.paillier_sqn` differ only in what the
coordinator does with the decrypted gradient and in SQN's Hessian-vector sub-protocol; the roles, the
fixed-point arithmetic, the encrypted Taylor loss, the batch schedule and the bookkeeping live here.

Roles (FATE hetero-LR names)
----------------------------
- hosts A_1, ..., A_K (K >= 1; the dataset's parties after the guest, in their order; ``host`` when K = 1):
  features ``X_k`` only; model block ``theta_k``.
- guest B (``guest``): features ``X_B``, the labels ``y`` (+-1) and the intercept (a column of ones appended
  to ``X_B``); model block ``theta_B``.
- arbiter C (``arbiter``): generates the Paillier key pair; the private key never leaves it. B and every A_k
  receive the public key (as a :class:`ppml.crypto.paillier.PublicKey` message) and stop the run with a
  :class:`~ppml.network.ProtocolError` unless it is safe (:meth:`~ppml.crypto.paillier.PublicKey.from_wire`)
  and what their own parameters ask for (:func:`check_received_key`): a C that sent a ``plaintext`` or
  short key would otherwise turn the encryption off for everyone.

Each party runs its own program (:func:`roles`: ``_guest_program``, one ``_host_program`` per host,
``_arbiter_program``), built from public facts only and given its own :class:`~ppml.parties.Party` (the
arbiter has none) and its own network endpoint; everything it learns from another party arrives through that
endpoint. The arbiter's program generates the key pair, so the private key exists only there. The hosts and B
derive the batches from the seed B sends to every host; C needs only their sizes, which are public, and the
size of every party's block (its column count, public; B's plus the intercept), against which it checks what
each sends. After each epoch every A_k sends B its scores (evaluation messages, :data:`SIDE_MESSAGES`,
counted apart), and B evaluates the joint model; :func:`assemble` adds C's batch losses and the traffic each
party counted of its own sends.

Per mini-batch S (|S| = s), with u = X theta = U + u_B, U = sum_k u_k, and the Taylor loss
l(u, y) = log 2 - y u / 2 + u^2 / 8:

1. Every A_k sends [u_k] and its loss terms ([u_k^2] per row, or [sum u_k^2]; [lam/2 ||theta_k||^2]) to B.
2. B forms [d] = sum_k [u_k]/4 + (u_B/4 - y/2) and sends it to every A_k, re-randomized separately for each
   (A_k made [u_k]: without fresh randomness it could divide its own [u_k] out). B forms the encrypted batch
   loss [s l_S] = sum_i (u_B/4 - y/2)_i [U_i] + sum_k [sum u_k^2]/8 + (1/4) sum_{k >= 2} [c_k] + s sum_k
   [lam/2 ||theta_k||^2] + plaintext terms, and sends it to C. The host-host cross terms
   (U^2 = sum_k u_k^2 + 2 sum_{j<k} u_j u_k) are what B cannot compute from ciphertexts: for every k >= 2
   B sends A_k the prefix sum [P_k] = [u_1 + ... + u_{k-1}], re-randomized, and A_k returns
   [c_k] = [sum_i u_k,i P_k,i], re-randomized (a ciphertext times A_k's own u_k as plaintext factors; packed:
   through the layout's product, the sum in slot t - 1, as B's own cross term). So the loss stays exact for
   every K (FATE 1.x drops it for more than one host, FATE 2.0 omits these terms); with K = 1 none of these
   messages exist.
3. Every party computes its encrypted gradient sum [G] = X^T [d] + s lam theta (no penalty on the intercept)
   and sends it to C: masked by a fresh random integer (Hardy et al.; ``masked``) or as is (FATE).
4. C decrypts each block and checks its length. Masked: it returns each party its own G + r, and each
   unmasks and takes its own step theta <- theta - eta_e G / s. Unmasked: C concatenates the blocks (hosts in
   order, then B), computes g = G / s, a direction p (g itself for SGD, H g for SQN) and returns each party
   its block of eta_e p.

After each epoch C compares the mean batch loss with the previous epoch's (FATE's ``diff`` rule: converged
when the change is below ``tol``) and tells every party whether to stop.

Messages per iteration, for K hosts (ciphertexts: t rows per ciphertext when packed, else t = 1; A_k holds
d_k columns, B d_B and the intercept; "each A_k" is one message to, or from, every host):

========================  ===========  ===========  ===========================================  =============
tag                       from         to           content                                      ciphertexts
========================  ===========  ===========  ===========================================  =============
public_key                C            B, each A_k  the public key (once)                        --
batch_seed                B            each A_k     seed of the batch partition (once)           --
host_forward              each A_k     B            [u_k] = [X_k theta_k]                        ceil(s/t)
host_loss                 each A_k     B            [u_k,i^2] or [sum u_k,i^2]; [lam/2 |th|^2]   s or 1; 1
fore_gradient             B            each A_k     [d], re-randomized for each host             ceil(s/t)
loss_prefix               B            A_k, k >= 2  [P_k] = [u_1 + .. + u_(k-1)], re-randomized  ceil(s/t)
host_loss_cross           A_k, k >= 2  B            [c_k] = [sum_i u_k,i P_k,i], re-randomized   1
batch_loss                B            C            [s l_S]                                      1
host_gradient             each A_k     C            [X_k^T d + s lam theta_k (+ r_k)]            d_k
guest_gradient            B            C            [X_B^T d + s lam theta_B (+ r_B)]            d_B + 1
host_gradient_decrypted   C            each A_k     G_k + r_k (masked)                           --
guest_gradient_decrypted  C            B            G_B + r_B (masked)                           --
host_step                 C            each A_k     A_k's block of eta_e p (unmasked)            --
guest_step                C            B            B's block of eta_e p (unmasked)              --
hessian_rows              B            each A_k     the rows of S_H (SQN, sampled S_H)           --
host_hessian_forward      each A_k     B            [X_k s_k] on S_H (SQN)                       ceil(|S_H|/t)
hessian_fore              B            each A_k     [h], re-randomized for each host (SQN)       ceil(|S_H|/t)
host_hessian_vector       each A_k     C            [X_k^T h + |S_H| lam s_k] (SQN)              d_k
guest_hessian_vector      B            C            [X_B^T h + |S_H| lam s_B] (SQN)              d_B + 1
converged                 C            B, each A_k  the stop flag (once per epoch)               --
eval/scores               each A_k     B            X_k theta_k, ||theta_k||^2 (once per epoch)  --
========================  ===========  ===========  ===========================================  =============

with [h] = [(sum_k X_k s_k + X_B s_B)/4]. The SQN rows run every L iterations from the second window on;
``eval/scores`` is evaluation traffic, counted apart. With K = 1 the same messages flow as before hosts could
be more than one: ``loss_prefix`` and ``host_loss_cross`` are never sent.

Provenance: the FATE flow (unmasked gradients, C computes the steps, the encrypted loss with A's squares and
penalty) is verified from FATE 1.x code; the masked Hardy et al. flow is UNVERIFIED, reconstructed in the
project's spec from summaries of the paper, hence switchable (``update_at`` of the SGD protocol). With more
than one host the flow is FATE 2.0's Coordinated LR (every host's [u_k] to the guest, [d] to every host,
every block to the arbiter), plus the cross-term messages that keep the loss exact. One deliberate difference
from FATE: the L2 penalty never touches the intercept, also in SQN's Hessian-vector products (FATE adds it
there), so that the curvature pairs are those of the objective being minimized.

Threat model
------------
Honest-but-curious, non-colluding A_1, ..., A_K, B and C. Every A_k sees ciphertexts only ([d], [P_k], and
[h] in SQN) plus its own step; it never receives labels nor another host's values. B sees ciphertexts of the
hosts' values only (never a u_k in plaintext). C sees the batch losses and either uniformly masked gradients
(``masked``: statistically hiding, see below) or the plaintext gradients and steps (FATE, and necessarily
SQN, whose C applies its curvature matrix to g and so learns the model up to its zero initialization). Every
ciphertext a party sends is either fresh or re-randomized when its receiver knows the randomness of an input
(e.g. [d] to each A_k, who made [u_k]; [c_k] to B, who made [P_k]). Outside the protocol, the evaluation
messages give B each host's exact scores X_k theta_k on every row and ||theta_k||^2 after every epoch.

Fixed-point arithmetic
----------------------
Encrypted values carry :data:`VALUE_FRAC_BITS` fractional bits (22: enough for these models, and few enough
that seven packed rows fit a 2048-bit plaintext); plaintext factors of homomorphic products (features, loss
coefficients, and a host's own u_k in its cross term) carry ``frac_bits`` (FATE's ``floating_point_precision``
= 23), which sets the exponent length and hence the cost. With more than one host the batch loss carries 2
more fractional bits (its cross terms' factor 1/4, exact as a relabelling), and a packed layout is sized for
the K + 1 values added in [d] and [h] and the K products added in the loss (:func:`packing_layout`). The
plaintext mode (``encrypted: false``) runs the same integers through the identity "cipher" of
:mod:`ppml.crypto.paillier` (scheme ``plaintext``), so its models equal the encrypted ones bit for bit.

Masks (``masked``) are uniform integers below 2^(bits - GUARD_BITS - 1) from :mod:`secrets` (cryptographic
randomness, like the obfuscators; they cancel exactly, so results stay deterministic). They hide a
gradient of magnitude 2^b statistically up to 2^(b - bits + GUARD_BITS + 1), i.e. below 2^-1800 for
2048-bit keys and any b < 100.

References
----------
.. [1] S. Hardy, W. Henecka, H. Ivey-Law, R. Nock, G. Patrini, G. Smith, B. Thorne, "Private federated
   learning on vertically partitioned data via entity resolution and additively homomorphic encryption",
   arXiv:1711.10677, 2017 (A, B, C; Taylor loss; masked gradients).
.. [2] FATE 1.x hetero logistic regression (FederatedAI/FATE, ``hetero_lr_gradient_and_loss.py``,
   ``hetero_linear_model_gradient.py``): roles, encrypted loss, learning-rate decay, ``diff`` convergence.
.. [3] K. Yang, T. Fan, T. Chen, Y. Shi, Q. Yang, "A Quasi-Newton Method Based Vertical Federated Learning
   Framework for Logistic Regression", arXiv:1912.00513, 2019 (the poster whose Table 1 is reproduced).
"""

from __future__ import annotations

import logging
import math
import secrets
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, NoReturn, Protocol, TypeVar

import numpy as np

from ppml.algorithms._hetero_names import ARBITER
from ppml.config import fail
from ppml.crypto import paillier
from ppml.crypto.background import Background, product
from ppml.crypto.packing import FACTOR_INT_BITS, Layout, layout_for, max_slots
from ppml.crypto.paillier import EncryptedVector, PublicKey, receive_vector
from ppml.crypto.costs import split_product
from ppml.history import History
from ppml.metrics import binary_metrics
from ppml.models.losses import logistic_objective
from ppml.network import EVALUATION, Endpoint, Network, ProtocolError, WireError, encode, expect, traffic_kind
from ppml.parties import Party, signed_labels
from ppml.runtime import PartyInfo, Public, Role

if TYPE_CHECKING:  # a party in its own process passes them (ppml.launch.party); the programs only call them
    from ppml.launch.checkpoint import Checkpoints

log = logging.getLogger(__name__)

#: Fractional bits of every encrypted value (u_A, d, h, masks). Not free when packing: every packed slot
#: carries them, and at 22 (not 52, a float64's) seven rows fit one 2048-bit plaintext at |S| = 3000, not
#: five. Measured in plaintext mode on the eight Table 1 settings: the same epochs, final loss within 2e-8,
#: test AUC within 2e-7 of 52 bits (docs/performance.md).
VALUE_FRAC_BITS = 22

#: Niceness of the background processes that encrypt zeros ahead of time: they fill their pools on cores
#: the parties' own work leaves idle, instead of slowing a product down.
ZERO_NICE = 10

LOG2 = math.log(2.0)


@dataclass(frozen=True)
class ProtocolParams:
    """Parameters common to the encrypted SGD and SQN protocols.

    Attributes
    ----------
    batch_size : int
        |S|, rows per mini-batch (the last batch of an epoch holds the remainder).
    encrypted : bool
        False runs the plaintext mode: same fixed-point integers and messages, identity "encryption", no
        cryptographic protection at all (its ledger and metrics say so).
    key_bits : int
        Paillier modulus length; below :data:`ppml.crypto.paillier.MIN_KEY_BITS` (1024) or above
        :data:`ppml.crypto.paillier.MAX_KEY_BITS` (8192) is refused, below 2048 warns (encrypted runs only).
        The plaintext mode uses it for the range of its residues. Guest and host refuse a received key of
        another scheme than theirs or, encrypted, shorter than their own key_bits
        (:func:`check_received_key`).
    scheme : {"djn", "textbook", "plaintext"}
        Obfuscator of fresh encryptions (see :mod:`ppml.crypto.paillier`). ``plaintext`` is the scheme of,
        and only of, the plaintext mode: with ``encrypted: false`` the scheme is recorded as ``plaintext``
        whatever was given, so that no plaintext run is labelled with a cipher.
    frac_bits : int
        Fractional bits of plaintext factors in ciphertext x plaintext products (features, loss
        coefficients); FATE uses 23.
    eta : float
        Initial learning rate eta_0 (FATE's default 0.01).
    decay, decay_sqrt : float, bool
        FATE's schedule: eta_e = eta_0 / sqrt(1 + decay e) (or / (1 + decay e) without the square root), for
        epoch index e = 0, 1, ...
    lam : float
        L2 penalty weight (FATE's alpha, default 1.0); not applied to the intercept.
    max_epochs : int
        Epoch cap (FATE's max_iter, default 100).
    tol : float
        Convergence: the mean batch loss of an epoch differs from the previous epoch's by less than tol
        (FATE's early_stop "diff", default 1e-4).
    shuffle : bool
        False (FATE 1.x): one random partition into batches, kept for every epoch; True: a fresh partition
        each epoch. Either way the hosts and B derive it from a seed B sends once.
    host_squares : {"rows", "sum"}
        How a host sends the squares for the loss: one ciphertext per row, [u_A,i^2] (Hardy et al.; what the
        poster's 3|S| per iteration counts), or one ciphertext of their sum (FATE's code). The loss is equal.
    precompute_workers : int
        Background processes per party (:mod:`ppml.crypto.background`) that encrypt zeros ahead of time, so
        that the protocol's own encryptions cost one modular product each, at a lower CPU priority; with
        any, one more computes half of each of the party's encrypted products X^T [v] while the party
        computes the other half (0, the default: everything in line). Results do not depend on it.
    packing : int or "auto"
        Rows per ciphertext of the per-row vectors [u_A], [d] (and SQN's [X_A s_A], [h]) (1, the default: one
        each). With t > 1 the products X^T [d] run on packed ciphertexts and the slots the coordinator does
        not need are hidden by statistical masks (:mod:`ppml.crypto.packing`); models, losses and gradients
        are the same integers as unpacked. Refused when 2t - 1 slots do not fit the key; ``auto`` takes the
        largest t that fits the key, ``frac_bits``, ``mask_bits`` and the batch (or Hessian sample) size.
    mask_bits : int
        Statistical security, in bits, of the masks on packed slots (used with packing > 1).
    """

    batch_size: int = field(default=1000, metadata={"gt": 0})
    encrypted: bool = True
    key_bits: int = paillier.DEFAULT_KEY_BITS
    scheme: Literal["djn", "textbook", "plaintext"] = "djn"
    frac_bits: int = field(default=23, metadata={"ge": 8, "le": 60})
    eta: float = field(default=0.01, metadata={"gt": 0})
    decay: float = field(default=1.0, metadata={"ge": 0})
    decay_sqrt: bool = True
    lam: float = field(default=1.0, metadata={"ge": 0})
    max_epochs: int = field(default=100, metadata={"gt": 0})
    tol: float = field(default=1e-4, metadata={"gt": 0})
    shuffle: bool = False
    host_squares: Literal["rows", "sum"] = "rows"
    precompute_workers: int = field(default=0, metadata={"ge": 0})
    packing: int | Literal["auto"] = field(default=1, metadata={"ge": 1})
    mask_bits: int = field(default=80, metadata={"ge": 40, "le": 256})

    def __post_init__(self) -> None:
        # Looked up at call time: the crypto module owns the minimum (tests lower it for 512-bit keys).
        if self.key_bits < paillier.MIN_KEY_BITS:
            fail("key_bits", f"must be >= {paillier.MIN_KEY_BITS}, got {self.key_bits}")
        if self.key_bits > paillier.MAX_KEY_BITS:
            fail("key_bits", f"must be <= {paillier.MAX_KEY_BITS}, got {self.key_bits}")
        if not self.encrypted:
            object.__setattr__(self, "scheme", "plaintext")  # the label metrics.json shows: no cipher
        elif self.scheme == "plaintext":
            fail("scheme", "must be djn or textbook when encrypted is true ('plaintext' is the scheme of "
                           "encrypted: false), got 'plaintext'")

    def learning_rate(self, epoch: int) -> float:
        """eta_e for epoch index `epoch` (0-based), FATE's decay."""
        factor = 1.0 + self.decay * epoch
        return self.eta / (math.sqrt(factor) if self.decay_sqrt else factor)


class Curvature(Protocol):
    """What the arbiter needs from a quasi-Newton method (``paillier_sqn.QuasiNewton``)."""

    L: int

    def direction(self, gradient: np.ndarray, k: int) -> np.ndarray: ...

    def add_pair(self, s: np.ndarray, y: np.ndarray) -> bool: ...

    # what a checkpoint keeps of it
    formed: int
    skipped: int

    @property
    def pairs(self) -> list[tuple[np.ndarray, np.ndarray]]: ...

    def restore(self, *, pairs: list, formed: int, skipped: int) -> None: ...


# ---------------------------------------------------------------------------------------------------------
# helpers each role uses on its own


class BatchSchedule:
    """Epoch after epoch (``next``), the list of row-index arrays of that epoch's mini-batches.

    Every host and B build it from the seed B sent, so they agree on every batch without exchanging ids. Its
    position is :meth:`state` (the random stream's state and the current order), which a checkpoint keeps.
    """

    def __init__(self, seed: int, n_rows: int, batch_size: int, *, shuffle: bool) -> None:
        self._rng = np.random.default_rng(seed)
        self._n, self._size, self._shuffle = n_rows, batch_size, shuffle
        self._order: np.ndarray | None = None

    def __iter__(self) -> BatchSchedule:
        return self

    def __next__(self) -> list[np.ndarray]:
        if self._order is None or self._shuffle:
            self._order = self._rng.permutation(self._n)
        return [self._order[i:i + self._size] for i in range(0, self._n, self._size)]

    def state(self) -> dict[str, Any]:
        return {"rng": self._rng.bit_generator.state, "order": self._order}

    def restore(self, state: dict[str, Any]) -> None:
        self._rng.bit_generator.state = state["rng"]
        self._order = None if state["order"] is None else np.asarray(state["order"], dtype=np.int64)


def batch_partitions(seed: int, n_rows: int, batch_size: int, *, shuffle: bool) -> BatchSchedule:
    """The mini-batches of every epoch from the seed B sends (:class:`BatchSchedule`)."""
    return BatchSchedule(seed, n_rows, batch_size, shuffle=shuffle)


class IterateAverage:
    """Algorithm 1's window of L iterates: their running sum, and the difference of successive averages."""

    def __init__(self, size: int) -> None:
        self._sum = np.zeros(size)
        self._count = 0
        self._previous: np.ndarray | None = None

    def state(self) -> dict[str, Any]:
        return {"sum": self._sum, "count": self._count, "previous": self._previous}

    def restore(self, state: dict[str, Any]) -> None:
        self._sum = np.asarray(state["sum"], dtype=np.float64)
        self._count = int(state["count"])
        self._previous = None if state["previous"] is None else np.asarray(state["previous"], dtype=np.float64)

    def add(self, theta: np.ndarray) -> None:
        self._sum += theta
        self._count += 1

    def close(self) -> np.ndarray | None:
        """End the window: s_t = mean_t - mean_{t-1}, or None for the first window; start a new one."""
        mean = self._sum / self._count
        s = None if self._previous is None else mean - self._previous
        self._previous = mean
        self._sum = np.zeros_like(self._sum)
        self._count = 0
        return s


def check_received_key(key: Any, params: ProtocolParams, *, sender: str, receiver: str) -> PublicKey:
    """The public key `receiver` got from `sender`, if it is what the receiver's own parameters ask for.

    :meth:`PublicKey.from_wire` has already refused keys that are unsafe for anyone (see
    :mod:`ppml.crypto.paillier`); this is the receiver's own expectation, which a dishonest key holder could
    otherwise lower for everyone: the scheme its ``encrypted`` and ``scheme`` say (never ``plaintext`` when
    encrypted: the guest would send its values in the clear), and for an encrypted run at least its own
    ``key_bits``. (A plaintext-mode key's length only sets the range of the residues, whose overflows are
    detected as for any key.)

    Raises
    ------
    ProtocolError
        Naming the sender, the receiver and what was wrong; the run stops.
    """
    def refuse(why: str) -> NoReturn:
        raise ProtocolError(f"{receiver} refused the public key from {sender!r}: {why}")

    if not isinstance(key, PublicKey):
        refuse(f"expected a PublicKey, got {type(key).__name__}")
    if key.scheme != params.scheme:
        expected = f"encrypted: true, scheme: {params.scheme}" if params.encrypted else "encrypted: false"
        refuse(f"its scheme is {key.scheme!r}, but this party's parameters say {expected}")
    if params.encrypted and key.bits < params.key_bits:
        refuse(f"a {key.bits}-bit modulus, shorter than this party's key_bits = {params.key_bits}")
    return key


def packing_layout(params: ProtocolParams, rows: int, *, hosts: int = 1) -> Layout | None:
    """The slot layout of ``packing`` rows per ciphertext for products over at most `rows` rows (None when
    unpacked); a :class:`~ppml.config.ParamError` naming ``packing`` when it does not fit the key.

    With K = `hosts`, the packed inputs [d] and [h] are sums of K + 1 checked values, and the batch loss adds K
    packed products (B's over [U], scaled by 4, and each [c_k], k >= 2) before B masks it: the layout's slots
    are sized for both (:func:`~ppml.crypto.packing.layout_for`; K = 1 is the one-host layout exactly).
    """
    sizes = dict(addends=hosts + 1, products=hosts)
    slots = params.packing
    if slots == "auto":
        slots = max_slots(key_bits=params.key_bits, value_frac_bits=VALUE_FRAC_BITS, frac_bits=params.frac_bits,
                          rows=rows, mask_bits=params.mask_bits, **sizes)
    if slots <= 1:
        return None
    try:
        return layout_for(slots, key_bits=params.key_bits, value_frac_bits=VALUE_FRAC_BITS,
                          frac_bits=params.frac_bits, rows=rows, mask_bits=params.mask_bits, **sizes)
    except ValueError as exc:
        hosts_note = "" if hosts == 1 else f", {hosts} hosts"
        fail("packing", f"{exc} (frac_bits = {params.frac_bits}, mask_bits = {params.mask_bits}, "
                        f"{rows} rows per product{hosts_note}), got {params.packing}")


def feature_limit(params: ProtocolParams) -> float:
    """The bound |x| must stay below for a feature to be encoded: x 2^frac_bits must lie in the safe range
    2^(key_bits - GUARD_BITS) of a key_bits key (any key a party accepts is at least as long) and be a finite
    float64."""
    return math.ldexp(1.0, min(params.key_bits - paillier.GUARD_BITS, 1024) - params.frac_bits)


def check_features(name: str, columns: tuple[str, ...], X: np.ndarray, params: ProtocolParams) -> None:
    """A :class:`~ppml.config.ParamError` naming the ``dataset`` key, the party, the column and the value when
    one of the party's training features is not below :func:`feature_limit` in magnitude (or not finite): the
    protocol could not encode it, and would stop with an encoding overflow in the middle of the run."""
    limit = feature_limit(params)
    bad = ~(np.abs(X) < limit)
    if bad.any():
        row, column = np.argwhere(bad)[0]
        fail("dataset", f"holds a value the Paillier encoding cannot carry: party {name!r}, column "
                        f"{columns[column]!r} has {X[row, column]:g}, and with key_bits = "
                        f"{params.key_bits} and frac_bits = {params.frac_bits} every feature must be below "
                        f"{limit:.3g} in magnitude; normalize the data")


def check_packable(name: str, columns: tuple[str, ...], X: np.ndarray) -> None:
    """A packed product multiplies by features below 2^FACTOR_INT_BITS: a ParamError naming the ``dataset``
    key, the party, the column and the value otherwise."""
    limit = math.ldexp(1.0, FACTOR_INT_BITS)
    bad = ~(np.abs(X) < limit)
    if bad.any():
        row, column = np.argwhere(bad)[0]
        fail("dataset", f"holds a value packed products cannot carry: party {name!r}, column "
                        f"{columns[column]!r} has {X[row, column]:g}; with packing > 1 every feature must be "
                        f"below {limit:g} in magnitude; normalize the data or set packing: 1")


def _overflow(name: str, exc: paillier.EncodingOverflowError) -> ProtocolError:
    """The one-line error that ends a run whose values left the encoding's range in party `name`'s program
    (a model that diverged, or a tampered ciphertext), naming the party and the range."""
    return ProtocolError(f"party {name!r}: a fixed-point value left the range of the Paillier encoding: "
                         f"{exc}")


class Encryptor:
    """One party's fresh encryptions and products under the public key it received.

    With ``workers > 0``, that many background processes (:class:`ppml.crypto.background.Background`) keep
    about ``ahead`` encryptions of zero ready between them, at a lower CPU priority (:data:`ZERO_NICE`): they
    take a core when the protocol's own work leaves one idle. An encryption of v is then such a zero plus the
    plaintext v (rho (1 + m n) mod n^2, exactly how a fresh encryption is formed), and a re-randomization is
    the ciphertext times one of them. Each zero is used once. One more background process, at the party's
    own priority, computes half of each product X^T [v] (:meth:`matvec`): the same ciphertexts as in line.
    """

    def __init__(self, public_key: PublicKey, *, workers: int, ahead: int, owner: str) -> None:
        self.public_key = public_key
        self._background: list[Background] = []
        self._products: Background | None = None
        if workers > 0 and public_key.encrypted:
            try:
                self._products = Background(public_key, ahead=0, owner=owner)
                for _ in range(workers):
                    self._background.append(Background(public_key, ahead=-(-ahead // workers), owner=owner,
                                                       nice=ZERO_NICE))
            except BaseException:
                self.close()
                raise

    def _zeros(self, count: int, frac_bits: int) -> EncryptedVector:
        """`count` fresh encryptions of zero, shared out over the background processes."""
        k = len(self._background)
        shares = [count // k + (i < count % k) for i in range(k)]
        for background, share in zip(self._background, shares):
            if share:
                background.ask_zeros(share)
        taken = [z for background, share in zip(self._background, shares) if share for z in background.zeros()]
        return EncryptedVector(self.public_key, taken, frac_bits)

    def encrypt(self, values: np.ndarray, *, frac_bits: int = VALUE_FRAC_BITS) -> EncryptedVector:
        """A fresh encryption of a float vector."""
        values = np.atleast_1d(np.asarray(values, dtype=np.float64))
        if not self._background:
            return self.public_key.encrypt(values, frac_bits=frac_bits)
        return self._zeros(len(values), frac_bits) + values

    def encrypt_encoded(self, ints: list[int], *, frac_bits: int) -> EncryptedVector:
        """A fresh encryption of already-encoded signed integers (packed slots)."""
        if not self._background:
            return self.public_key.encrypt_encoded(ints, frac_bits=frac_bits)
        return self._zeros(len(ints), frac_bits).add_encoded(ints)

    def matvec(self, vector: EncryptedVector, X: np.ndarray, *, layout: Layout | None, rows: int,
               frac_bits: int) -> EncryptedVector:
        """X^T [v] (packed or not), the product process computing one part while this process computes the
        other: half of the ciphertexts (the two partial products multiplied) or a share of the columns,
        whichever leaves the busier process less work (:func:`~ppml.crypto.costs.split_product`). The same
        ciphertexts as in line."""
        t, width = (1, 0) if layout is None else (layout.slots, layout.width)
        E = None if self._products is None else vector.exponents(X, frac_bits=frac_bits, slots=t)
        if E is None or (len(vector) < 2 and X.shape[1] < 2):
            return product(vector, X, layout=layout, rows=rows, frac_bits=frac_bits)
        background = self._products
        theirs = split_product(E, width)
        if theirs is None:
            cut = len(vector) // 2 * t  # the rows of the background process's ciphertexts
            background.ask_product(vector[:cut // t], X[:cut], layout=layout, rows=cut, frac_bits=frac_bits)
            mine = product(vector[cut // t:], X[cut:], layout=layout, rows=rows - cut, frac_bits=frac_bits)
            return background.product() + mine
        ours = [j for j in range(X.shape[1]) if j not in theirs]
        background.ask_product(vector, X[:, theirs], layout=layout, rows=rows, frac_bits=frac_bits)
        mine = product(vector, X[:, ours], layout=layout, rows=rows, frac_bits=frac_bits).ciphertexts.tolist()
        done = background.product()
        joined = dict(zip([*theirs, *ours], [*done.ciphertexts.tolist(), *mine]))
        return EncryptedVector(self.public_key, [joined[j] for j in range(X.shape[1])], done.frac_bits)

    def rerandomize(self, vector: EncryptedVector) -> EncryptedVector:
        """The same plaintexts under fresh randomness."""
        if not self._background:
            return vector.rerandomize()
        return vector + self._zeros(len(vector), vector.frac_bits)

    def close(self) -> None:
        """Stop the background processes (unused zeros are discarded, never reused)."""
        for background in [*self._background, *filter(None, [self._products])]:
            background.close()
        self._background, self._products = [], None


def mask(vector: EncryptedVector) -> tuple[EncryptedVector, list[int]]:
    """[v + r] for fresh uniform integers r below 2^(bits - GUARD_BITS - 1), and r (kept by the sender)."""
    pk = vector.public_key
    r = [secrets.randbits(pk.bits - paillier.GUARD_BITS - 1) for _ in range(len(vector))]
    return vector + pk.encrypt_encoded(r, frac_bits=vector.frac_bits), r


def unmask(masked: list[int], r: list[int], *, frac_bits: int, divisor: int) -> np.ndarray:
    """(m - r) / (2^frac_bits divisor), each rounded once to float64."""
    scale = divisor << frac_bits
    return np.array([(int(m) - ri) / scale for m, ri in zip(masked, r)], dtype=np.float64)


def joint_scores(X_host, X_guest, theta_host: np.ndarray, theta_guest: np.ndarray) -> np.ndarray:
    """u = X_A theta_A + X_B theta_B + intercept (the guest's last coefficient): evaluation only."""
    return np.asarray(X_host @ theta_host + X_guest @ theta_guest[:-1] + theta_guest[-1], dtype=np.float64)


def taylor_objective(scores: np.ndarray, y01: np.ndarray, penalized: np.ndarray | None, lam: float, *,
                     sqnorm: float | None = None) -> float:
    """Mean Taylor loss log 2 - y u / 2 + u^2 / 8 (y in +-1) plus lam/2 ||penalized weights||^2.

    A split model's holder may pass ``sqnorm`` (the sum of each party's squared penalized norm) instead.
    """
    y = signed_labels(y01)
    if sqnorm is None:
        sqnorm = float(penalized @ penalized)
    return float(np.mean(LOG2 - 0.5 * y * scores + 0.125 * scores * scores) + 0.5 * lam * float(sqnorm))


# ---------------------------------------------------------------------------------------------------------
# roles


class _DataRole:
    """What host and guest share: own features, own model block, own encryptor, the received public key.

    A subclass supplies its own steps of the per-batch schedule (:func:`_data_party_epoch`): ``forward``,
    ``gradient``, ``curvature_round`` and the tags of C's replies to it.
    """

    #: C's reply in masked mode (G + r) and in unmasked mode (the step)
    decrypted_tag: str
    step_tag: str

    def __init__(self, party: Party, endpoint: Endpoint, *, params: ProtocolParams, X: np.ndarray,
                 penalized: np.ndarray, demand: int, layout: Layout | None) -> None:
        self.name = party.name
        check_features(party.name, party.columns, X[:, :len(party.columns)], params)
        if layout is not None:
            check_packable(party.name, party.columns, X[:, :len(party.columns)])
        self._layout = layout
        # counts what it sends (a bare endpoint is wrapped: the per-row sends say their unpacked size)
        self._ep = endpoint if isinstance(endpoint, _CountedEndpoint) else _CountedEndpoint(endpoint)
        self._party = party
        self._params = params
        self._X = X
        self._penalized = penalized  # 1 where the L2 penalty applies (0 on the intercept)
        self._demand = demand  # fresh encryptions per iteration, to size the background precomputation
        self.theta = np.zeros(X.shape[1])
        self._public_key: PublicKey | None = None
        self._encryptor: Encryptor | None = None
        self._batches = None
        self._window = IterateAverage(X.shape[1])
        self._s: np.ndarray | None = None
        self._mask: list[int] | None = None
        self._gradient_frac_bits = 0

    def _receive_key(self) -> None:
        try:
            key = self._ep.recv(ARBITER, "public_key")
        except WireError as exc:  # PublicKey.from_wire refused it while decoding (a weak or malformed key)
            raise ProtocolError(f"{self.name} refused the public key from {ARBITER!r}: {exc}") from exc
        self._public_key = check_received_key(key, self._params, sender=ARBITER, receiver=self.name)
        self._encryptor = Encryptor(key, workers=self._params.precompute_workers, ahead=2 * self._demand,
                                    owner=self.name)

    def _start_batches(self, seed: int) -> None:
        self._batches = batch_partitions(seed, self._X.shape[0], self._params.batch_size,
                                         shuffle=self._params.shuffle)

    def state(self) -> dict[str, Any]:
        """What this role holds between epochs: its block, the averaging window, s_t, the batch schedule."""
        return {"theta": self.theta, "window": self._window.state(), "s": self._s,
                "batches": self._batches.state()}

    def restore(self, state: dict[str, Any]) -> None:
        """Continue from :meth:`state` (after :meth:`setup` with ``resumed``, which only receives the key)."""
        theta = np.asarray(state["theta"], dtype=np.float64)
        if theta.shape != self.theta.shape:
            raise ValueError(f"party {self.name!r}: a checkpoint of {theta.size} weights, this block has "
                             f"{self.theta.size}")
        self.theta = theta
        self._window.restore(state["window"])
        self._s = None if state["s"] is None else np.asarray(state["s"], dtype=np.float64)
        self._start_batches(0)
        self._batches.restore(state["batches"])

    def _vector(self, payload: Any, *, sender: str, tag: str, rows: int, packed: bool = True) -> EncryptedVector:
        """A received vector over `rows` rows (packed when the run packs and `packed`: ceil(rows / t)
        ciphertexts), bound to this party's own copy of the public key; a ProtocolError naming the sender
        and the tag otherwise."""
        try:
            vector = receive_vector(payload, self._public_key)
        except paillier.CiphertextError as exc:
            raise ProtocolError(f"{sender!r} sent {tag!r} that {self.name} cannot use: {exc}") from exc
        expected = self._ciphertexts(rows) if packed else rows
        if len(vector) != expected:
            per = "" if self._layout is None or not packed else f", {self._layout.slots} per ciphertext"
            raise ProtocolError(f"{sender!r} sent {tag!r} of {len(vector)} ciphertexts, expected {expected} "
                                f"({rows} rows{per})")
        return vector

    def _ciphertexts(self, rows: int) -> int:
        """Ciphertexts of a per-row vector over `rows` rows."""
        return rows if self._layout is None else -(-rows // self._layout.slots)

    def _encrypt_rows(self, values: np.ndarray, *, what: str) -> EncryptedVector:
        """A fresh encryption of per-row values at VALUE_FRAC_BITS, packed when the run packs (each value
        checked against its slot by :meth:`~ppml.crypto.packing.Layout.pack`, naming this party and `what`)."""
        if self._layout is None:
            return self._encryptor.encrypt(values)
        packed = self._layout.pack(values, frac_bits=VALUE_FRAC_BITS, party=self.name, what=what)
        return self._encryptor.encrypt_encoded(packed, frac_bits=VALUE_FRAC_BITS)

    def _add_rows(self, vector: EncryptedVector, values: np.ndarray, *, what: str) -> EncryptedVector:
        """[v] + values, per row, at the vector's scale (slot by slot when packed)."""
        if self._layout is None:
            return vector + values
        return vector.add_encoded(self._layout.pack(values, frac_bits=vector.frac_bits, party=self.name,
                                                    what=what))

    def batches(self) -> list[np.ndarray]:
        """This epoch's mini-batches (row indices), from the shared seed."""
        return next(self._batches)

    def _product(self, vector: EncryptedVector, rows: np.ndarray, coefficients: np.ndarray) -> EncryptedVector:
        """[X_S^T v + |S| lam c] (no penalty on the intercept): the batch gradient times s for c = theta, SQN's
        Hessian-vector product times |S_H| for c = s. Packed: the sum lies in slot t - 1."""
        penalty = len(rows) * self._params.lam * self._penalized * coefficients
        product = self._encryptor.matvec(vector, self._X[rows], layout=self._layout, rows=len(rows),
                                         frac_bits=self._params.frac_bits)
        if self._layout is None:
            return product + penalty
        encoded = self._public_key.encode(penalty, frac_bits=product.frac_bits)
        return product.add_encoded(self._layout.lift_plain(list(encoded)))

    def _seal(self, product: EncryptedVector, *, masked: bool) -> EncryptedVector:
        """What may leave for C: packed, every slot but t - 1 statistically masked; with `masked` the value
        itself too (Hardy et al.), its mask kept to unmask C's reply."""
        if self._layout is not None:
            product, kept = self._layout.mask(product, wanted=masked)
            if masked:
                self._mask = kept
        elif masked:
            product, self._mask = mask(product)
        return product

    def _send_gradient(self, gradient: EncryptedVector, *, tag: str, masked: bool) -> None:
        gradient = self._seal(gradient, masked=masked)
        self._gradient_frac_bits = gradient.frac_bits
        self._ep.send(ARBITER, tag, gradient)

    def apply_unmasked(self, *, tag: str, eta: float, batch_size: int) -> None:
        """Masked mode: unmask what C decrypted; theta <- theta - eta (G / s)."""
        gradient = unmask(self._masked_sums(self._ep.recv(ARBITER, tag), tag), self._mask,
                          frac_bits=self._gradient_frac_bits, divisor=batch_size)
        self._mask = None
        self.theta = self.theta - eta * gradient

    def apply_step(self, *, tag: str) -> None:
        """Unmasked mode: theta <- theta - step, the step computed by C."""
        step = expect.vector(self._ep.recv(ARBITER, tag), sender=ARBITER, tag=tag, length=len(self.theta))
        step = np.asarray(step, dtype=np.float64)
        self._window.add(self.theta)
        self.theta = self.theta - step

    def close_window(self) -> bool:
        """End an averaging window of L iterations; True when a curvature pair is due (not the first)."""
        self._s = self._window.close()
        return self._s is not None

    def _masked_sums(self, payload: Any, tag: str) -> list[int]:
        """What C decrypted of [G + r]: one integer per coefficient, each below the modulus in size."""
        n = getattr(self._encryptor.public_key, "n", None) if self._encryptor is not None else None
        if (not isinstance(payload, list) or len(payload) != len(self._mask)
                or not all(isinstance(m, int) and not isinstance(m, bool) for m in payload)):
            shown = f"{len(payload)} entries" if isinstance(payload, list) else f"type {type(payload).__name__}"
            raise ProtocolError(f"{ARBITER!r} sent {tag!r} of {shown}, expected a list of {len(self._mask)} "
                                "integers")
        if n is not None and any(abs(m) >= n for m in payload):
            raise ProtocolError(f"{ARBITER!r} sent {tag!r} holding an integer beyond the key's modulus")
        return payload

    def receive_verdict(self) -> bool:
        return bool(expect.flag(self._ep.recv(ARBITER, "converged"), sender=ARBITER, tag="converged"))

    def close(self) -> None:
        if self._encryptor is not None:
            self._encryptor.close()


class HostRole(_DataRole):
    """A host A_k: features only. `position` is k - 1 (0 for the first host, the only one when K = 1); a host
    after the first also returns B its loss cross term [c_k]. `sampled_hessian` (SQN): S_H is B's sample, not
    the batch."""

    decrypted_tag = "host_gradient_decrypted"
    step_tag = "host_step"

    def __init__(self, party: Party, endpoint: Endpoint, *, params: ProtocolParams, guest: str,
                 position: int = 0, hessian_per_iteration: float = 0.0, sampled_hessian: bool = False,
                 layout: Layout | None = None) -> None:
        X = np.asarray(party.X, dtype=np.float64)
        squares = params.batch_size if params.host_squares == "rows" else 1
        per_row = 1 if layout is None else 1 / layout.slots
        super().__init__(party, endpoint, params=params, X=X, penalized=np.ones(X.shape[1]),
                         demand=(math.ceil(per_row * (params.batch_size + hessian_per_iteration)) + squares + 1
                                 + (position > 0)),
                         layout=layout)
        self._guest = guest
        self._position = position
        self._sampled_hessian = sampled_hessian

    def setup(self, *, resumed: bool = False) -> None:
        """Receive the public key from C and the batch seed from B (resumed: the key only; the schedule comes
        from the checkpoint)."""
        self._receive_key()
        if resumed:
            return
        seed = expect.integer(self._ep.recv(self._guest, "batch_seed"), sender=self._guest, tag="batch_seed",
                              low=0, high=2**63 - 1)
        self._start_batches(int(seed))

    def forward(self, rows: np.ndarray) -> None:
        """Send [u_k] and the loss terms [u_k^2] (or [sum u_k^2]) and [lam/2 ||theta_k||^2] to B; a host after
        the first then returns B its loss cross term (:meth:`loss_cross`)."""
        u = self._X[rows] @ self.theta
        self._ep.send(self._guest, "host_forward", self._encrypt_rows(u, what="u_A = X_A theta_A"), rows=len(rows))
        squares = u * u if self._params.host_squares == "rows" else np.array([u @ u])
        penalty = 0.5 * self._params.lam * float(self.theta @ self.theta)
        self._ep.send(self._guest, "host_loss", {"squares": self._encryptor.encrypt(squares),
                                                 "penalty": self._encryptor.encrypt(np.array([penalty]))})
        if self._position > 0:
            self.loss_cross(rows, u)

    def loss_cross(self, rows: np.ndarray, u: np.ndarray) -> None:
        """Host k >= 2: [c_k] = [sum_i u_k,i P_k,i] from B's prefix sum [P_k] = [u_1 + ... + u_(k-1)], with this
        host's own u_k as the plaintext factors (at ``frac_bits``, as B's own loss coefficients), re-randomized
        (B made [P_k]), to B. Packed: the layout's product, the sum in slot t - 1 (u_k was checked against its
        slot when packed, so it is below 2^FACTOR_INT_BITS = 2^VALUE_INT_BITS as a factor); B masks the other
        slots before the loss leaves it."""
        p = self._params
        prefix = self._vector(self._ep.recv(self._guest, TAG_PREFIX), sender=self._guest, tag=TAG_PREFIX,
                              rows=len(rows))
        if self._layout is None:
            cross = prefix.matvec(u[:, None], frac_bits=p.frac_bits)
        else:
            cross = self._layout.matvec(prefix, u[:, None], rows=len(rows), frac_bits=p.frac_bits)
        self._ep.send(self._guest, TAG_CROSS, self._encryptor.rerandomize(cross))

    def gradient(self, rows: np.ndarray, *, masked: bool) -> None:
        """[G_k] = X_k^T [d] + s lam theta_k from B's [d], to C (masked or not)."""
        fore = self._vector(self._ep.recv(self._guest, "fore_gradient"), sender=self._guest, tag="fore_gradient",
                            rows=len(rows))
        self._send_gradient(self._product(fore, rows, self.theta), tag="host_gradient", masked=masked)

    def scores(self, *, test: bool) -> dict[str, Any]:
        """Evaluation: X_k theta_k on the training rows (and with `test` on the test rows), ||theta_k||^2."""
        party = self._party
        test_scores = None
        if test and party.X_test is not None:
            test_scores = np.asarray(party.X_test @ self.theta, dtype=np.float64)
        return {"train": np.asarray(party.X @ self.theta, dtype=np.float64),
                "sqnorm": float(self.theta @ self.theta), "test": test_scores}

    def hessian_rows(self, batch_rows: np.ndarray, *, sampled: bool) -> np.ndarray:
        """SQN: the rows of S_H, the current batch or B's sample."""
        if not sampled:
            return batch_rows
        rows = expect.vector(self._ep.recv(self._guest, "hessian_rows"), sender=self._guest, tag="hessian_rows",
                             length=None, dtype="int", low=0, high=self._X.shape[0] - 1)
        if rows.size == 0 or np.unique(rows).size != rows.size:
            raise ProtocolError(f"{self._guest!r} sent 'hessian_rows' of {rows.size} rows, not a non-empty set")
        return np.asarray(rows, dtype=np.int64)

    def hessian_forward(self, rows: np.ndarray) -> None:
        """SQN: [X_k s_k] on S_H, to B."""
        self._ep.send(self._guest, "host_hessian_forward",
                      self._encrypt_rows(self._X[rows] @ self._s, what="X_A s_A"), rows=len(rows))

    def hessian_vector(self, rows: np.ndarray) -> None:
        """SQN: [V_k] = X_k^T [h] + |S_H| lam s_k from B's [h], to C."""
        h = self._vector(self._ep.recv(self._guest, "hessian_fore"), sender=self._guest, tag="hessian_fore",
                         rows=len(rows))
        self._ep.send(ARBITER, "host_hessian_vector", self._seal(self._product(h, rows, self._s), masked=False))

    def curvature_round(self, batch_rows: np.ndarray) -> None:
        """SQN, the host's part of the Hessian-vector round on S_H."""
        rows = self.hessian_rows(batch_rows, sampled=self._sampled_hessian)
        self.hessian_forward(rows)
        self.hessian_vector(rows)


class GuestRole(_DataRole):
    """Party B: features, labels, and the intercept (a column of ones after its features).

    `hosts` are the hosts' names, in their order (one when K = 1). `hessian_sample` (SQN) is |S_H| of B's
    independent sample; None uses the batch.
    """

    decrypted_tag = "guest_gradient_decrypted"
    step_tag = "guest_step"

    def __init__(self, party: Party, endpoint: Endpoint, *, params: ProtocolParams, hosts: Sequence[str],
                 rng: np.random.Generator, hessian_per_iteration: float = 0.0,
                 hessian_sample: int | None = None, layout: Layout | None = None) -> None:
        X = np.hstack([np.asarray(party.X, dtype=np.float64), np.ones((party.n_samples, 1))])
        penalized = np.ones(X.shape[1])
        penalized[-1] = 0.0
        per_row = 1 if layout is None else 1 / layout.slots
        K = len(hosts)
        # re-randomized per host: [d] (and [h]) K times, a prefix sum to each host after the first
        demand = (K * math.ceil(per_row * (params.batch_size + hessian_per_iteration))
                  + (K - 1) * math.ceil(per_row * params.batch_size))
        super().__init__(party, endpoint, params=params, X=X, penalized=penalized, demand=demand, layout=layout)
        self._hosts = list(hosts)
        self._y = signed_labels(party.y)
        self._rng = rng
        self._hessian_sample = hessian_sample
        self._fore: EncryptedVector | None = None
        self._h: EncryptedVector | None = None

    def state(self) -> dict[str, Any]:
        """:meth:`_DataRole.state` and B's own stream (the batch seed is drawn from it, and S_H samples)."""
        return {**super().state(), "rng": self._rng.bit_generator.state}

    def restore(self, state: dict[str, Any]) -> None:
        super().restore(state)
        self._rng.bit_generator.state = state["rng"]

    def setup(self, *, resumed: bool = False) -> None:
        """Receive the public key from C; draw the batch seed and send it to every host (resumed: the key
        only; the schedule and the stream come from the checkpoint)."""
        self._receive_key()
        if resumed:
            return
        seed = int(self._rng.integers(2**63))
        for host in self._hosts:
            self._ep.send(host, "batch_seed", seed)
        self._start_batches(seed)

    def _host_forward(self, host: str, s: int) -> tuple[EncryptedVector, EncryptedVector, EncryptedVector]:
        """Host `host`'s [u_k], its squares and its penalty ciphertext, checked."""
        p = self._params
        u = self._vector(self._ep.recv(host, "host_forward"), sender=host, tag="host_forward", rows=s)
        terms = self._ep.recv(host, "host_loss")
        if not isinstance(terms, dict) or set(terms) != {"squares", "penalty"}:
            raise ProtocolError(f"{host!r} sent 'host_loss' that is not a dict of squares and penalty")
        # A host's squares (which may exceed a packed slot) and its penalty are never packed.
        squares = self._vector(terms["squares"], sender=host, tag="host_loss",
                               rows=s if p.host_squares == "rows" else 1, packed=False)
        penalty = self._vector(terms["penalty"], sender=host, tag="host_loss", rows=1, packed=False)
        return u, squares, penalty

    def forward(self, rows: np.ndarray) -> None:
        """[d] = sum_k [u_k]/4 + u_B/4 - y/2 to every host; the encrypted batch loss times s to C."""
        p = self._params
        s = len(rows)
        received = [self._host_forward(host, s) for host in self._hosts]
        u_hosts = [u for u, _, _ in received]
        U = _total(u_hosts)  # [U] = sum_k [u_k]: the hosts' share of every score
        u_B = self._X[rows] @ self.theta
        y = self._y[rows]
        own = 0.25 * u_B - 0.5 * y  # B's part of d_i, which is also the coefficient of U_i in the loss
        self._fore = self._add_rows(U.mul(0.25, frac_bits=2), own, what="u_B/4 - y/2")
        # Each host made its [u_k]: without fresh randomness it could divide [u_k] out of [d] and read the rest.
        for host in self._hosts:
            self._ep.send(host, "fore_gradient", self._encryptor.rerandomize(self._fore), rows=s)
        crosses = self._loss_crosses(u_hosts, s)

        theta = self._penalized * self.theta
        plain = (float(np.sum(LOG2 - 0.5 * y * u_B + 0.125 * u_B * u_B))
                 + s * 0.5 * p.lam * float(theta @ theta))
        terms = (_total([squares.sum() for _, squares, _ in received]).mul(0.125, frac_bits=3)
                 + _total([penalty for _, _, penalty in received]).mul(float(s), frac_bits=0))
        # (1/4) sum_k c_k: the host-host terms 2 sum_{j<k} u_j u_k / 8 of sum_i U_i^2 / 8, relabelled (2 more
        # fractional bits, the same integers); B's own cross term is scaled up to that precision when added.
        if self._layout is None:
            loss = U.matvec(own[:, None], frac_bits=p.frac_bits)
            if crosses is not None:
                loss = loss + crosses.mul(0.25, frac_bits=2)
            loss = loss + terms + plain
        else:  # the same integers: the cross product in slot t - 1, the hosts' terms and the plaintext lifted there
            cross = self._layout.matvec(U, own[:, None], rows=s, frac_bits=p.frac_bits)
            if crosses is not None:
                cross = cross + crosses.mul(0.25, frac_bits=2)
            terms = terms.mul(1.0, frac_bits=cross.frac_bits - terms.frac_bits) + plain
            loss = self._seal(cross + self._layout.lift(terms), masked=False)
        self._ep.send(ARBITER, "batch_loss", loss)

    def _loss_crosses(self, u_hosts: list[EncryptedVector], s: int) -> EncryptedVector | None:
        """sum_{k >= 2} [c_k], [c_k] = [sum_i u_k,i P_k,i] from host k given [P_k] = [u_1 + ... + u_(k-1)]
        (re-randomized: host k - 1 made [u_(k-1)]); None with one host, which sends no cross term."""
        if len(u_hosts) == 1:
            return None
        prefix = u_hosts[0]
        for host, u in zip(self._hosts[1:], u_hosts[1:]):
            self._ep.send(host, TAG_PREFIX, self._encryptor.rerandomize(prefix), rows=s)
            prefix = prefix + u
        return _total([self._vector(self._ep.recv(host, TAG_CROSS), sender=host, tag=TAG_CROSS, rows=1,
                                    packed=False)
                       for host in self._hosts[1:]])

    def gradient(self, rows: np.ndarray, *, masked: bool) -> None:
        """[G_B] = X_B^T [d] + s lam theta_B, to C (masked or not)."""
        self._send_gradient(self._product(self._fore, rows, self.theta), tag="guest_gradient", masked=masked)
        self._fore = None

    def hessian_rows(self, batch_rows: np.ndarray, *, sample_size: int | None) -> np.ndarray:
        """SQN: S_H = the current batch (``sample_size`` None: the poster's S_H = S), else a fresh uniform
        sample without replacement, drawn by B and sent to every host."""
        if sample_size is None:
            return batch_rows
        n = self._X.shape[0]
        rows = np.sort(self._rng.choice(n, size=min(sample_size, n), replace=False))
        for host in self._hosts:
            self._ep.send(host, "hessian_rows", rows)
        return rows

    def hessian_fore(self, rows: np.ndarray) -> None:
        """SQN: [h] = (sum_k [X_k s_k] + X_B s_B)/4 on S_H (the Taylor Hessian is x x^T/4), re-randomized for
        each host, to every host."""
        z = _total([self._vector(self._ep.recv(host, "host_hessian_forward"), sender=host,
                                 tag="host_hessian_forward", rows=len(rows))
                    for host in self._hosts])
        self._h = self._add_rows(z, self._X[rows] @ self._s, what="X_B s_B").mul(0.25, frac_bits=2)
        for host in self._hosts:
            self._ep.send(host, "hessian_fore", self._encryptor.rerandomize(self._h), rows=len(rows))

    def hessian_vector(self, rows: np.ndarray) -> None:
        """SQN: [V_B] = X_B^T [h] + |S_H| lam s_B (intercept unpenalized), to C."""
        self._ep.send(ARBITER, "guest_hessian_vector", self._seal(self._product(self._h, rows, self._s),
                                                                 masked=False))
        self._h = None

    def curvature_round(self, batch_rows: np.ndarray) -> None:
        """SQN, B's part of the Hessian-vector round on S_H."""
        rows = self.hessian_rows(batch_rows, sample_size=self._hessian_sample)
        self.hessian_fore(rows)
        self.hessian_vector(rows)


def _total(vectors: list[EncryptedVector]) -> EncryptedVector:
    """The homomorphic sum of `vectors` in their order (the one vector itself when there is one)."""
    total = vectors[0]
    for vector in vectors[1:]:
        total = total + vector
    return total


class ArbiterRole:
    """Coordinator C: holds the private key, decrypts, and (unmasked mode) computes every step.

    Parameters
    ----------
    endpoint : Endpoint
    params : ProtocolParams
    hosts : sequence of str
        Network names of the hosts, in their order (one when K = 1).
    guest : str
        Network name of B.
    blocks : mapping of str to int
        Every party's number of model coefficients (public: a host's columns, B's columns and the
        intercept): what each party's gradient and Hessian-vector blocks must hold.
    curvature : Curvature, optional
        SQN's quasi-Newton memory; None for SGD (the direction is the gradient).
    layout : Layout, optional
        The slot layout of a packed run: C reads slot t - 1 of what it decrypts.
    """

    def __init__(self, endpoint: Endpoint, *, params: ProtocolParams, hosts: Sequence[str], guest: str,
                 blocks: dict[str, int], curvature: Curvature | None = None, layout: Layout | None = None) -> None:
        self._ep = endpoint
        self._layout = layout
        self._params = params
        self._hosts, self._guest = list(hosts), guest
        # who sends which block, in the order of the model: the hosts in order, then B
        self._parties = [(host, "host") for host in self._hosts] + [(guest, "guest")]
        self._blocks = {name: int(blocks[name]) for name, _ in self._parties}
        # The key pair is made here, in C's program: the private key never leaves it.
        self.public_key, self._private_key = paillier.generate_keypair(
            params.key_bits, scheme=params.scheme if params.encrypted else "plaintext")
        self._curvature = curvature
        self._losses: list[float] = []
        self._previous_loss: float | None = None
        # The model as C knows it: the sum of the steps it issued (the true model minus its zero start).
        self._model = np.zeros(sum(self._blocks.values()))
        self._window = IterateAverage(len(self._model))
        self._s: np.ndarray | None = None

    def state(self) -> dict[str, Any]:
        """What C holds between epochs: the last epoch loss, its copy of the model, the window, s_t and (SQN)
        the curvature memory."""
        curvature = None
        if self._curvature is not None:
            curvature = {"pairs": [list(pair) for pair in self._curvature.pairs],
                         "formed": self._curvature.formed, "skipped": self._curvature.skipped}
        return {"previous_loss": self._previous_loss, "model": self._model, "window": self._window.state(),
                "s": self._s, "curvature": curvature}

    def restore(self, state: dict[str, Any]) -> None:
        self._previous_loss = state["previous_loss"]
        model = np.asarray(state["model"], dtype=np.float64)
        if model.shape != self._model.shape:
            raise ValueError(f"{ARBITER}: a checkpoint of {model.size} coefficients, this run has {self._model.size}")
        self._model = model
        self._window.restore(state["window"])
        self._s = None if state["s"] is None else np.asarray(state["s"], dtype=np.float64)
        if self._curvature is not None:
            self._curvature.restore(**state["curvature"])

    def publish_key(self) -> None:
        self._ep.broadcast([*self._hosts, self._guest], "public_key", self.public_key)

    def _decrypt_encoded(self, src: str, tag: str, *, length: int | None = None) -> tuple[list[int], int]:
        """The signed integers of what `src` sent under `tag` (slot t - 1 when packed) and their scale; with
        `length`, a ProtocolError naming the sender unless it holds that many ciphertexts."""
        try:
            vector = receive_vector(self._ep.recv(src, tag), self.public_key)
        except paillier.CiphertextError as exc:
            raise ProtocolError(f"{src!r} sent {tag!r} that {ARBITER} cannot use: {exc}") from exc
        if length is not None and len(vector) != length:
            raise ProtocolError(f"{src!r} sent {tag!r} of {len(vector)} ciphertexts, expected {length} (one per "
                                f"coefficient of its block)")
        ints = self._private_key.decrypt_encoded(vector)
        return (list(ints) if self._layout is None else self._layout.read(ints)), vector.frac_bits

    def _decrypt(self, src: str, tag: str, *, length: int | None = None) -> np.ndarray:
        ints, frac_bits = self._decrypt_encoded(src, tag, length=length)
        return self.public_key.decode(ints, frac_bits=frac_bits)

    def _blockwise(self, suffix: str) -> list[np.ndarray]:
        """Every party's decrypted `<role>_<suffix>` block, in the model's order, each of its own length."""
        return [self._decrypt(party, f"{role}_{suffix}", length=self._blocks[party])
                for party, role in self._parties]

    def batch_loss(self, batch_size: int) -> None:
        """Decrypt B's [s l_S]; keep l_S for the epoch's stopping test."""
        loss = self._decrypt(self._guest, "batch_loss")
        expect.vector(loss, sender=self._guest, tag="batch_loss", length=1)  # one ciphertext, a finite loss
        self._losses.append(float(loss[0]) / batch_size)

    def return_masked(self) -> None:
        """Masked mode: decrypt each party's [G + r] and send G + r back to it."""
        for party, role in self._parties:
            tag = f"{role}_gradient"
            masked, _ = self._decrypt_encoded(party, tag, length=self._blocks[party])
            self._ep.send(party, f"{tag}_decrypted", [int(m) for m in masked])

    def send_steps(self, *, eta: float, k: int, batch_size: int) -> None:
        """Unmasked mode: g = G / s (the blocks concatenated: hosts in order, then B), direction p (g, or SQN's
        H g), and each party's block of eta p."""
        gradient = np.concatenate([g / batch_size for g in self._blockwise("gradient")])
        step = eta * (gradient if self._curvature is None else self._curvature.direction(gradient, k))
        self._window.add(self._model)
        self._model = self._model - step
        start = 0
        for party, role in self._parties:
            end = start + self._blocks[party]
            self._ep.send(party, f"{role}_step", step[start:end])
            start = end

    def close_window(self) -> bool:
        """SQN: end the averaging window on C's copy of the model (s_t is the same as the parties')."""
        self._s = self._window.close()
        return self._s is not None

    def curvature_pair(self, sample_size: int) -> None:
        """SQN: y_t = V / |S_H| from every party's decrypted block (hosts in order, then B); store (s_t, y_t)."""
        self._curvature.add_pair(self._s, np.concatenate(self._blockwise("hessian_vector")) / sample_size)

    def end_epoch(self) -> tuple[float, bool]:
        """The epoch's mean batch loss and FATE's verdict |loss - previous| < tol, sent to every party."""
        loss = float(np.mean(self._losses))
        self._losses = []
        converged = self._previous_loss is not None and abs(loss - self._previous_loss) < self._params.tol
        self._previous_loss = loss
        self._ep.broadcast([*self._hosts, self._guest], "converged", converged)
        return loss, converged


# the role programs

TAG_EVAL = EVALUATION + "scores"
"""each host -> guest after each epoch: X_k theta_k on the training rows, ||theta_k||^2, and on the last epoch
the test rows' scores (evaluation traffic, outside the protocol)."""

TAG_PREFIX = "loss_prefix"
"""guest -> host k >= 2 (only with more than one host): [P_k] = [u_1 + ... + u_(k-1)], re-randomized."""

TAG_CROSS = "host_loss_cross"
"""host k >= 2 -> guest (only with more than one host): [c_k] = [sum_i u_k,i P_k,i], re-randomized."""

#: Tags that only runs with more than one host send (the rows of MESSAGES a one-host run does not use).
MULTI_HOST_TAGS = frozenset({TAG_PREFIX, TAG_CROSS})

#: MESSAGES rows of the cross terms that keep the batch loss exact with more than one host; each protocol's
#: table includes them.
CROSS_MESSAGES: tuple[dict[str, str], ...] = (
    {"tag": TAG_PREFIX, "src": "guest", "dst": "host",
     "content": "[P_k] = [u_1 + ... + u_(k-1)] on the batch, to every host k >= 2 (more than one host only): "
                "|S| ciphertexts", "protection": "Paillier, re-randomized"},
    {"tag": TAG_CROSS, "src": "host", "dst": "guest",
     "content": "[c_k] = [sum_i u_k,i P_k,i] from every host k >= 2 (more than one host only): 1 ciphertext",
     "protection": "Paillier, re-randomized"},
)

#: the evaluation and control traffic of the role programs, counted apart from MESSAGES (comm.json
#: "evaluation"). The scores are exact, so they are outside the protocol's protection: the guest learns each
#: host's share of every score and its ||theta_k||^2. The stop flag ``converged`` is FATE's own message and
#: stays in MESSAGES; the programs need no control messages.
SIDE_MESSAGES: tuple[dict[str, str], ...] = (
    {"tag": TAG_EVAL, "src": "host", "dst": "guest",
     "content": "exact scores X_k theta_k on the training rows and ||theta_k||^2 from every host after every "
                "epoch; on the last epoch also X_k^test theta_k (evaluation)"},
)


class _CountedEndpoint:
    """A party's endpoint that also counts its own training sends per epoch: guest<->host ("ab"), and with C."""

    def __init__(self, endpoint: Endpoint) -> None:
        self._ep = endpoint
        self.name = endpoint.name
        self._epoch = _no_traffic()

    def send(self, dst: str, tag: str, payload: Any, *, rows: int | None = None) -> int:
        """Send and count; `rows` is what a packed per-row vector would take unpacked (one per row)."""
        nbytes = self._ep.send(dst, tag, payload)
        if traffic_kind(tag) == "training":
            side = "arbiter" if ARBITER in (self.name, dst) else "ab"
            ciphertexts = encode(payload)[1]
            self._epoch[f"{side}_ciphertexts"] += ciphertexts
            self._epoch[f"{side}_ciphertexts_unpacked"] += ciphertexts if rows is None else rows
            self._epoch[f"{side}_bytes"] += nbytes
        return nbytes

    def broadcast(self, dsts: list[str], tag: str, payload: Any) -> int:
        return sum(self.send(d, tag, payload) for d in dsts)

    def recv(self, src: str, tag: str) -> Any:
        return self._ep.recv(src, tag)

    def next_round(self) -> None:
        self._ep.next_round()

    def take(self) -> dict[str, int]:
        """What this party sent since the last call (setup traffic is taken and dropped before epoch 1)."""
        out, self._epoch = self._epoch, _no_traffic()
        return out


def _no_traffic() -> dict[str, int]:
    return {"ab_ciphertexts": 0, "ab_ciphertexts_unpacked": 0, "ab_bytes": 0, "arbiter_ciphertexts": 0,
            "arbiter_ciphertexts_unpacked": 0, "arbiter_bytes": 0}


def batch_sizes(n_rows: int, batch_size: int) -> list[int]:
    """|S| of each mini-batch of an epoch: public (C needs only these, not the rows)."""
    return [min(batch_size, n_rows - i) for i in range(0, n_rows, batch_size)]


def combine_scores(host_scores: np.ndarray, X_guest, theta_guest: np.ndarray) -> np.ndarray:
    """The guest's half of :func:`joint_scores`, in its order: the hosts' summed scores + X_B theta_B +
    intercept."""
    return np.asarray(host_scores + X_guest @ theta_guest[:-1] + theta_guest[-1], dtype=np.float64)


def _data_party_epoch(role: HostRole | GuestRole, ep: _CountedEndpoint, *, eta: float, k: int, masked: bool,
                      curvature_every: int | None) -> tuple[int, bool, dict[str, int]]:
    """One epoch of a data party's schedule, the same for every host and B; `role` supplies its own steps.

    Per mini-batch: the forward step, the gradient to C, the update (unmask C's G + r, or take C's step),
    every `curvature_every` iterations (SQN) the party's part of the curvature round; then C's stop flag.
    `k` counts mini-batches across epochs. Returns the count after this epoch, C's verdict and the training
    traffic the party sent in the epoch.
    """
    for rows in role.batches():
        k += 1
        role.forward(rows)
        role.gradient(rows, masked=masked)
        if masked:
            role.apply_unmasked(tag=role.decrypted_tag, eta=eta, batch_size=len(rows))
        else:
            role.apply_step(tag=role.step_tag)
        if curvature_every is not None and k % curvature_every == 0 and role.close_window():
            role.curvature_round(rows)
        ep.next_round()
    converged = role.receive_verdict()
    return k, converged, ep.take()


def _bytes_sent(sent: dict[str, int]) -> int:
    return sent["ab_bytes"] + sent["arbiter_bytes"]


def _host_program(endpoint: Endpoint, party: Party, *, guest: str, position: int, params: ProtocolParams,
                  masked: bool, curvature_every: int | None, sampled_hessian: bool, hessian_per_iteration: float,
                  layout: Layout | None, checkpoints: Checkpoints | None = None) -> dict:
    """Host A_k (`position` k - 1): per mini-batch [u_k] and its loss terms to B (and from the second host on,
    its loss cross term), [G_k] to C, its own update; every L iterations (SQN) the Hessian-vector
    sub-protocol; after each epoch C's stop flag, then its scores to B (evaluation).

    Returns the host's own facts: its model block and the training traffic it sent per epoch. With
    `checkpoints` (a party in its own process, :mod:`ppml.launch.checkpoint`) it saves its state after every
    epoch and, resuming, continues from the epoch every party holds.
    """
    ep = _CountedEndpoint(endpoint)
    host = HostRole(party, ep, params=params, guest=guest, position=position,
                    hessian_per_iteration=hessian_per_iteration, sampled_hessian=sampled_hessian, layout=layout)
    resumed = None if checkpoints is None else checkpoints.agree(endpoint)
    traffic, k, first, done = [], 0, 0, False
    try:
        host.setup(resumed=resumed is not None)
        ep.take()
        if resumed is not None:
            first, state = resumed
            host.restore(state["role"])
            traffic, k, done = state["traffic"], int(state["k"]), bool(state["done"])
        for epoch in range(first, 0 if done else params.max_epochs):
            start = time.perf_counter()
            k, converged, sent = _data_party_epoch(host, ep, eta=params.learning_rate(epoch), k=k,
                                                   masked=masked, curvature_every=curvature_every)
            traffic.append(sent)
            last = converged or epoch + 1 == params.max_epochs
            evaluation = endpoint.send(guest, TAG_EVAL, host.scores(test=last))
            log.info("%s: epoch %d/%d: %.3f s, %d bytes sent (%d of them evaluation)", party.name, epoch + 1,
                     params.max_epochs, time.perf_counter() - start, _bytes_sent(sent) + evaluation, evaluation)
            if checkpoints is not None:
                checkpoints.save(epoch + 1, {"role": host.state(), "traffic": traffic, "k": k, "done": last})
            if converged:
                break
    except paillier.EncodingOverflowError as exc:
        raise _overflow(party.name, exc) from exc
    finally:
        host.close()
    return {"theta": host.theta, "traffic": traffic}


def _guest_program(endpoint: Endpoint, party: Party, *, hosts: list[str], params: ProtocolParams,
                   algorithm: str, rng: np.random.Generator, masked: bool, curvature_every: int | None,
                   hessian_sample: int | None, hessian_per_iteration: float, layout: Layout | None,
                   checkpoints: Checkpoints | None = None) -> dict:
    """Guest B (labels): the batch seed to every host; per mini-batch [d] to every host (and the prefix sums
    to the hosts after the first), [s l_S] and [G_B] to C, its own update; every L iterations (SQN) S_H and
    [h]; after each epoch C's stop flag and the evaluation of the joint model from the hosts' scores
    (evaluation messages).

    Returns the History (its records lack C's batch loss and the traffic, which :func:`assemble` adds from
    C's and each party's own report), the final training AUC, its model block and the traffic it sent.
    `checkpoints`: as the host's (:func:`_host_program`); B's also keep its records and the last evaluation.
    """
    if party.y is None:
        raise ValueError(f"party {party.name!r} is the Paillier protocols' guest but holds no labels")
    ep = _CountedEndpoint(endpoint)
    guest = GuestRole(party, ep, params=params, hosts=hosts, rng=rng,
                      hessian_per_iteration=hessian_per_iteration, hessian_sample=hessian_sample, layout=layout)
    history = History(algorithm)
    resumed = None if checkpoints is None else checkpoints.agree(endpoint)
    traffic, k, first, done = [], 0, 0, False
    y = party.y
    try:
        guest.setup(resumed=resumed is not None)
        ep.take()
        if resumed is not None:
            first, state = resumed
            guest.restore(state["role"])
            traffic, k, done, scored = state["traffic"], int(state["k"]), bool(state["done"]), state["scored"]
            history.records = state["records"]
            if state["stop"] is not None:
                history.stop(**state["stop"])
            scores = combine_scores(_summed([s["train"] for s in scored]), party.X, guest.theta)
        for epoch in range(first, 0 if done else params.max_epochs):
            start = time.perf_counter()
            eta = params.learning_rate(epoch)
            k, converged, sent = _data_party_epoch(guest, ep, eta=eta, k=k, masked=masked,
                                                   curvature_every=curvature_every)
            traffic.append(sent)
            seconds = time.perf_counter() - start
            # Evaluation, outside the protocol: each host's scores and ||theta_k||^2 arrive as evaluation
            # messages (summed in the hosts' order: with one host, its own numbers).
            scored = [_host_scores(endpoint.recv(host, TAG_EVAL), host, party) for host in hosts]
            host_scores = _summed([s["train"] for s in scored])
            host_sqnorm = _summed([s["sqnorm"] for s in scored])
            scores = combine_scores(host_scores, party.X, guest.theta)
            own = guest.theta @ guest.theta
            own_penalized = guest.theta[:-1] @ guest.theta[:-1]
            objective = logistic_objective(scores, y, None, params.lam, sqnorm=host_sqnorm + float(own))
            history.log(epoch=epoch + 1, eta=eta, iterations=k, seconds=seconds, train_objective=objective,
                        taylor_objective=taylor_objective(scores, y, None, params.lam,
                                                          sqnorm=host_sqnorm + float(own_penalized)))
            log.info("%s: epoch %d/%d: train objective %.6f, %.3f s, %d bytes sent", party.name, epoch + 1,
                     params.max_epochs, objective, time.perf_counter() - start, _bytes_sent(sent))
            stop = None
            if converged:
                stop = {"converged": True, "reason": f"the epoch loss changed by less than tol={params.tol} in "
                                                     f"epoch {epoch + 1}"}
            elif epoch + 1 == params.max_epochs:
                stop = {"converged": False, "reason": f"max_epochs={params.max_epochs} reached before the epoch "
                                                      f"loss changed by less than tol={params.tol}"}
            if stop is not None:
                history.stop(**stop)
            if checkpoints is not None:
                checkpoints.save(epoch + 1, {"role": guest.state(), "traffic": traffic, "k": k,
                                             "done": stop is not None, "scored": scored,
                                             "records": history.records, "stop": stop})
            if converged:
                break
    except paillier.EncodingOverflowError as exc:
        raise _overflow(party.name, exc) from exc
    finally:
        guest.close()
    test_scores = None
    tests = [s["test"] for s in scored]
    if party.X_test is not None and any(t is not None for t in tests):
        missing = [host for host, t in zip(hosts, tests) if t is None]
        if missing:
            raise ProtocolError(f"{missing[0]!r} sent {TAG_EVAL!r} without test scores in the last epoch, "
                                f"which the other hosts sent")
        test_scores = combine_scores(_summed(tests), party.X_test, guest.theta)
    history.finish(train_objective=history.records[-1]["train_objective"], y_train=y, train_scores=scores,
                   y_test=party.y_test, test_scores=test_scores)
    return {"history": history, "train_auc": binary_metrics(y, scores)["auc"], "theta": guest.theta,
            "traffic": traffic}


def _summed(values: list[Any]) -> Any:
    """The sum of the hosts' values in their order (the one value itself when there is one host)."""
    total = values[0]
    for value in values[1:]:
        total = total + value
    return total


def _host_scores(payload: Any, host: str, party: Party) -> dict[str, Any]:
    """A host's evaluation message, checked: its scores on every training row (and test row), finite, and
    its ||theta_k||^2, finite and not negative."""
    expect.mapping(payload, ("train", "sqnorm", "test"), sender=host, tag=TAG_EVAL)
    expect.vector(payload["train"], sender=host, tag=TAG_EVAL, what="train", length=party.X.shape[0])
    expect.scalar(payload["sqnorm"], sender=host, tag=TAG_EVAL, what="sqnorm", low=0.0)
    if payload["test"] is not None:
        if party.X_test is None:
            raise ProtocolError(f"{host!r} sent {TAG_EVAL!r} with test scores, but there are no test rows")
        expect.vector(payload["test"], sender=host, tag=TAG_EVAL, what="test", length=party.X_test.shape[0])
    return payload


def _arbiter_program(endpoint: Endpoint, party: None, *, hosts: list[str], guest: str, blocks: dict[str, int],
                     params: ProtocolParams, masked: bool, n_rows: int, curvature: Curvature | None,
                     hessian_sample: int | None, layout: Layout | None,
                     checkpoints: Checkpoints | None = None) -> dict:
    """Coordinator C: generates the key pair (the private key never leaves this program) and sends the public
    key; per mini-batch decrypts the batch loss and every party's gradient block, returns the masked gradients
    or the steps; every L iterations (SQN) forms a curvature pair; after each epoch FATE's stop flag to every
    party.

    C knows only public sizes: the rows per batch follow from the number of rows and ``batch_size``; `blocks`
    are the parties' coefficient counts. Returns its own facts: the epoch losses, its public key's length and
    scheme, the traffic it sent and (SQN) the curvature pairs formed and skipped.
    """
    ep = _CountedEndpoint(endpoint)
    resumed = None if checkpoints is None else checkpoints.agree(endpoint)
    arbiter = ArbiterRole(ep, params=params, hosts=hosts, guest=guest, blocks=blocks, curvature=curvature,
                          layout=layout)
    arbiter.publish_key()
    ep.take()
    sizes = batch_sizes(n_rows, params.batch_size)
    losses, traffic, k, first, done = [], [], 0, 0, False
    if resumed is not None:  # a fresh key pair (the old private key was never written); the rest as it was
        first, state = resumed
        arbiter.restore(state["role"])
        losses, traffic, k, done = state["losses"], state["traffic"], int(state["k"]), bool(state["done"])
    try:
        for epoch in range(first, 0 if done else params.max_epochs):
            eta = params.learning_rate(epoch)
            for size in sizes:
                k += 1
                arbiter.batch_loss(size)
                if masked:
                    arbiter.return_masked()
                else:
                    arbiter.send_steps(eta=eta, k=k, batch_size=size)
                if curvature is not None and k % curvature.L == 0 and arbiter.close_window():
                    arbiter.curvature_pair(size if hessian_sample is None else min(hessian_sample, n_rows))
                ep.next_round()
            loss, converged = arbiter.end_epoch()
            losses.append(loss)
            traffic.append(ep.take())
            log.info("%s: epoch %d/%d: batch loss %.6f%s", ARBITER, epoch + 1, params.max_epochs, loss,
                     " (converged)" if converged else "")
            if checkpoints is not None:
                checkpoints.save(epoch + 1, {"role": arbiter.state(), "losses": losses, "traffic": traffic,
                                             "k": k, "done": converged or epoch + 1 == params.max_epochs})
            if converged:
                break
    except paillier.EncodingOverflowError as exc:
        raise _overflow(ARBITER, exc) from exc
    key = arbiter.public_key
    return {"losses": losses, "traffic": traffic,
            "public_key": {"bits": key.bits, "scheme": key.scheme, "encrypted": key.encrypted},
            "curvature": None if curvature is None else {"formed": curvature.formed,
                                                           "skipped": curvature.skipped}}


def roles(public: Public, params: ProtocolParams, *, rng: np.random.Generator, algorithm: str, masked: bool,
          curvature: Curvature | None = None, hessian_sample: int | None = None) -> list[Role]:
    """The guest's, every host's and the coordinator's programs, from public facts.

    `rng` gives the guest its stream (the batch seed and sampled S_H); `curvature` (SQN) is C's fresh
    quasi-Newton memory; `hessian_sample` is |S_H| of an independent sample (None: S_H = S).
    """
    if masked and curvature is not None:
        raise ValueError("a quasi-Newton coordinator needs the plaintext gradients; masking is for SGD only")
    guest_info, host_infos = split_parties(public.parties, public.evaluator)
    guest, hosts = guest_info.name, [h.name for h in host_infos]
    rows = guest_info.train_rows
    _check_sizes(params, rows, hessian_sample)
    hessian = 0.0 if curvature is None else (hessian_sample or params.batch_size) / curvature.L
    every = None if curvature is None else curvature.L
    layout = packing_layout(params, max(params.batch_size, hessian_sample or 0), hosts=len(hosts))
    blocks = {**{h.name: h.n_features for h in host_infos}, guest: guest_info.n_features + 1}
    return [
        Role(guest, _guest_program, guest,
             {"hosts": hosts, "params": params, "algorithm": algorithm, "rng": rng.spawn(1)[0],
              "masked": masked, "curvature_every": every, "hessian_sample": hessian_sample,
              "hessian_per_iteration": hessian, "layout": layout}),
        *(Role(host, _host_program, host,
               {"guest": guest, "position": position, "params": params, "masked": masked,
                "curvature_every": every, "sampled_hessian": hessian_sample is not None,
                "hessian_per_iteration": hessian, "layout": layout})
          for position, host in enumerate(hosts)),
        Role(ARBITER, _arbiter_program, None,
             {"hosts": hosts, "guest": guest, "blocks": blocks, "params": params, "masked": masked,
              "n_rows": rows, "curvature": curvature, "hessian_sample": hessian_sample, "layout": layout}),
    ]


def assemble(public: Public, params: ProtocolParams, results: dict[str, Any], *, masked: bool,
             curvature_every: int | None = None, hessian_sample: int | None = None) -> History:
    """The run's History: the guest's records and evaluation, C's batch losses, every party's traffic.

    Per epoch ``loss`` (C's decrypted mean batch loss), ``train_objective`` (the project's l2-logistic
    objective of the current model, from the evaluation messages), ``taylor_objective``, ``eta``, cumulative
    ``iterations``, ``seconds`` and the epoch's training traffic (guest<->hosts, "ab", and with C, as every
    party counted its own sends; setup excluded). Final metrics add the traffic per iteration, next to the
    poster's formulas with one host; the weights of every party's block are in ``extra["weights"]`` (hosts
    in order, then the guest); the (empty) privacy ledger says what crosses how.
    """
    guest_info, host_infos = split_parties(public.parties, public.evaluator)
    guest, hosts = guest_info.name, [h.name for h in host_infos]
    g, c = results[guest], results[ARBITER]
    hs = [results[host] for host in hosts]
    history: History = g["history"]
    records, history.records = history.records, []
    for record, loss, *sent in zip(records, c["losses"], g["traffic"], *(h["traffic"] for h in hs),
                                   c["traffic"], strict=True):
        traffic = {key: sum(s[key] for s in sent) for key in _no_traffic()}
        history.log(epoch=record["epoch"], loss=loss, **{k: v for k, v in record.items() if k != "epoch"},
                    **traffic)
    records = history.records
    iterations = records[-1]["iterations"]
    n_params = sum(len(h["theta"]) for h in hs) + len(g["theta"])

    def per_iteration(key: str) -> float:
        return sum(r[key] for r in records) / iterations

    s = params.batch_size
    # The poster counts one host: 3|S| (+ 2|S_H|/L) between A and B and (2 [+ 1/L]) n with C. With more hosts
    # its formulas do not apply (each host adds its own 3|S|, and the cross terms |S| + 1 from the second on),
    # so they are left out; the measured counts above are the run's own either way.
    poster = {}
    if len(hosts) == 1:
        if curvature_every is None:
            poster_ab, poster_arbiter = 3 * s, 2 * n_params
        else:
            s_h = hessian_sample or s
            poster_ab, poster_arbiter = 3 * s + 2 * s_h / curvature_every, (2 + 1 / curvature_every) * n_params
        poster = dict(poster_ab_per_iteration=poster_ab, poster_arbiter_per_iteration=poster_arbiter)
    key = c["public_key"]
    # DESIGN 6: a key shorter than the default is allowed only with a warning in the run's metrics.
    warning = {}
    if key["encrypted"] and key["bits"] < paillier.DEFAULT_KEY_BITS:
        warning["key_warning"] = (f"{key['bits']}-bit Paillier key, below the default "
                                  f"{paillier.DEFAULT_KEY_BITS}")
    layout = packing_layout(params, max(params.batch_size, hessian_sample or 0), hosts=len(hosts))
    history.final.update(
        packing_slots=1 if layout is None else layout.slots,
        loss=records[-1]["loss"], taylor_objective=records[-1]["taylor_objective"], train_auc=g["train_auc"],
        iterations=iterations, n_parameters=n_params,
        seconds_per_epoch=sum(r["seconds"] for r in records) / len(records),
        ab_ciphertexts_per_iteration=per_iteration("ab_ciphertexts"),
        ab_ciphertexts_per_iteration_unpacked=per_iteration("ab_ciphertexts_unpacked"),
        ab_bytes_per_iteration=per_iteration("ab_bytes"),
        arbiter_ciphertexts_per_iteration=per_iteration("arbiter_ciphertexts"),
        arbiter_bytes_per_iteration=per_iteration("arbiter_bytes"), **poster, **warning)
    if c["curvature"] is not None:
        history.final.update(curvature_pairs=c["curvature"]["formed"],
                             curvature_skipped=c["curvature"]["skipped"])
    history.extra.update(
        weights={**{host: np.asarray(h["theta"]).tolist() for host, h in zip(hosts, hs)},
                 guest: np.asarray(g["theta"]).tolist()},
        public_key={"bits": key["bits"], "scheme": key["scheme"]},
        roles={"host": hosts[0], "guest": guest, "arbiter": ARBITER} if len(hosts) == 1
        else {"hosts": hosts, "guest": guest, "arbiter": ARBITER})
    view = "masked gradients and the batch losses" if masked else "the gradients, steps and batch losses"
    if key["encrypted"]:
        history.ledger.notes.append(
            f"no differential privacy: values cross Paillier-encrypted ({key['scheme']}, "
            f"{key['bits']}-bit modulus) between honest-but-curious, non-colluding parties; "
            f"the coordinator sees {view}")
    else:
        history.ledger.notes.append(
            "no differential privacy and no encryption: plaintext mode (encrypted: false), values cross in "
            "plaintext (no cryptographic protection); every party that receives a message reads its values")
    return history


# ---------------------------------------------------------------------------------------------------------
# checks of the data against the protocol


def _check_sizes(params: ProtocolParams, rows: int, hessian_sample: int | None) -> None:
    """A batch (or Hessian sample) larger than the training rows would run with fewer rows than the params
    say and report the poster's traffic formulas for the wrong |S|."""
    if params.batch_size > rows:
        fail("batch_size", f"must be <= {rows}, the number of training rows, got {params.batch_size}")
    if hessian_sample is not None and hessian_sample > rows:
        fail("S_H", f"must be <= {rows}, the number of training rows, got {hessian_sample}")


_P = TypeVar("_P", Party, PartyInfo)


def split_parties(parties: Sequence[_P], evaluation: _P | None = None) -> tuple[_P, list[_P]]:
    """(guest, hosts) of a vertical split: the one label holder and every other party, in their order; a
    :class:`~ppml.config.ParamError` naming the experiment's ``dataset`` key for anything else (the data the
    params chose does not fit the protocol).

    The one check of the split, for a :class:`~ppml.parties.Party` as for the public
    :class:`~ppml.runtime.PartyInfo` (what :func:`roles` and :func:`assemble` get, and on Ray
    :func:`make_network`): it reads only facts both carry, ``name``, ``is_label_holder`` and ``n_samples``.
    """
    names = [p.name for p in parties]
    if evaluation is not None:
        fail("dataset", f"must be vertically partitioned data for the Paillier protocols, got horizontal "
                        f"data (evaluation party {evaluation.name!r})")
    holders = [p for p in parties if p.is_label_holder]
    if len(holders) != 1:
        fail("dataset", f"must give labels to exactly one party (the guest), got label holders "
                        f"{[p.name for p in holders]} among parties {names}")
    guest = holders[0]
    hosts = [p for p in parties if p is not guest]
    if not hosts:
        fail("dataset", f"must have at least two parties for the Paillier protocols, one guest (labels) and one "
                        f"or more hosts, got {len(parties)} parties {names}")
    for host in hosts:
        if host.n_samples != guest.n_samples:
            fail("dataset", f"must have aligned parties, got {guest.name} with {guest.n_samples} rows and "
                            f"{host.name} with {host.n_samples}")
    if ARBITER in names:
        fail("dataset", f"must not name a party {ARBITER!r} (the coordinator's address), got parties {names}")
    return guest, hosts


def check_data(parties: Sequence[_P], params: ProtocolParams, *, evaluation: _P | None = None,
               hessian_sample: int | None = None) -> tuple[_P, list[_P]]:
    """(guest, hosts) after the checks of the params against the data, each a ParamError naming the key."""
    guest, hosts = split_parties(parties, evaluation)
    _check_sizes(params, guest.n_samples, hessian_sample)
    return guest, hosts


def make_network(parties: Sequence[Party | PartyInfo], params: ProtocolParams | None = None, *,
                 hessian_sample: int | None = None, capture: bool = False) -> Network:
    """A network over [guest, hosts..., arbiter], after :func:`check_data` when `params` are given."""
    if params is None:
        guest, hosts = split_parties(parties)
    else:
        guest, hosts = check_data(parties, params, hessian_sample=hessian_sample)
    return Network([guest.name, *(h.name for h in hosts), ARBITER], capture=capture)
