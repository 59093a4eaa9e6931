"""The message flow shared by the Paillier vertical logistic-regression protocols (encrypted SGD and SQN).

:mod:`ppml.algorithms.paillier_sgd` and :mod:`ppml.algorithms.paillier_sqn` differ only in what the
coordinator does with the decrypted gradient and in SQN's Hessian-vector sub-protocol; the roles, the
fixed-point arithmetic, the encrypted Taylor loss, the batch schedule and the bookkeeping live here.

Roles (FATE hetero-LR names)
----------------------------
- host A (``host``): features ``X_A`` only; model block ``theta_A``.
- guest B (``guest``): features ``X_B``, the labels ``y`` (+-1) and the intercept (a column of ones appended
  to ``X_B``); model block ``theta_B``.
- arbiter C (``arbiter``): generates the Paillier key pair; the private key never leaves it. A and B receive
  the public key (as a :class:`ppml.crypto.paillier.PublicKey` message) and stop the run with a
  :class:`~ppml.network.ProtocolError` unless it is safe (:meth:`~ppml.crypto.paillier.PublicKey.from_wire`)
  and what their own parameters ask for (:func:`check_received_key`): a C that sent a ``plaintext`` or
  short key would otherwise turn the encryption off for everyone.

Each party runs its own program (:func:`roles`: ``_guest_program``, ``_host_program``, ``_arbiter_program``),
built from public facts only and given its own :class:`~ppml.parties.Party` (the arbiter has none) and its
own network endpoint; everything it learns from another party arrives through that endpoint. The arbiter's
program generates the key pair, so the private key exists only there. A and B derive the batches from the
seed B sends; C needs only their sizes, which are public. After each epoch A sends B its scores (evaluation
messages, :data:`SIDE_MESSAGES`, counted apart), and B evaluates the joint model; :func:`assemble` adds C's
batch losses and the traffic each party counted of its own sends.

Per mini-batch S (|S| = s), with u = X theta and the Taylor loss l(u, y) = log 2 - y u / 2 + u^2 / 8:

1. A sends [u_A] and its loss terms ([u_A^2] per row, or [sum u_A^2]; [lam/2 ||theta_A||^2]) to B.
2. B forms [d] = [u_A]/4 + (u_B/4 - y/2), re-randomized, and sends it to A; B also forms the encrypted batch
   loss [s l_S] = sum_i (u_B/4 - y/2)_i [u_A,i] + [sum u_A^2]/8 + plaintext terms, and sends it to C.
3. A and B each compute their encrypted gradient sum [G] = X^T [d] + s lam theta (no penalty on the
   intercept) and send it to C: masked by a fresh random integer (Hardy et al.; ``masked``) or as is (FATE).
4. C decrypts. Masked: it returns G + r, and each party unmasks and takes its own step
   theta <- theta - eta_e G / s. Unmasked: C computes g = G / s, a direction p (g itself for SGD, H g for
   SQN) and returns each party's step eta_e p.

After each epoch C compares the mean batch loss with the previous epoch's (FATE's ``diff`` rule: converged
when the change is below ``tol``) and tells A and B whether to stop.

Provenance: the FATE flow (unmasked gradients, C computes the steps, the encrypted loss with A's squares and
penalty) is verified from FATE 1.x code; the masked Hardy et al. flow is UNVERIFIED, reconstructed in the
project's spec from summaries of the paper, hence switchable (``update_at`` of the SGD protocol). One
deliberate difference from FATE: the L2 penalty never touches the intercept, also in SQN's Hessian-vector
products (FATE adds it there), so that the curvature pairs are those of the objective being minimized.

Threat model
------------
Honest-but-curious, non-colluding A, B and C. A sees ciphertexts only ([d], and [h] in SQN) plus its own
step; it never receives labels. B sees ciphertexts of A's values only (never u_A in plaintext). C sees the
batch losses and either uniformly masked gradients (``masked``: statistically hiding, see below) or the
plaintext gradients and steps (FATE, and necessarily SQN, whose C applies its curvature matrix to g and so
learns the model up to its zero initialization). Every ciphertext a party sends is either fresh or
re-randomized when its receiver knows the randomness of an input (e.g. [d] to A, who made [u_A]).

Fixed-point arithmetic
----------------------
Encrypted values carry :data:`VALUE_FRAC_BITS` fractional bits (22: enough for these models, and few enough
that seven packed rows fit a 2048-bit plaintext); plaintext factors of homomorphic products (features, loss coefficients)
carry ``frac_bits`` (FATE's ``floating_point_precision`` = 23), which sets the exponent length and hence the
cost. The plaintext mode (``encrypted: false``) runs the same integers through the identity "cipher" of
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
from typing import Any, Literal, NoReturn, Protocol, TypeVar

import numpy as np

from ppml.config import fail
from ppml.crypto import paillier
from ppml.crypto.background import Background, product
from ppml.crypto.packing import FACTOR_INT_BITS, Layout, layout_for, max_slots
from ppml.crypto.paillier import EncryptedVector, PublicKey, receive_vector
from ppml.crypto.products import split_product
from ppml.history import History
from ppml.metrics import binary_metrics
from ppml.models.losses import logistic_objective
from ppml.network import EVALUATION, Endpoint, Network, ProtocolError, WireError, encode, expect, traffic_kind
from ppml.parties import Party, signed_labels
from ppml.runtime import PartyInfo, Public, Role

log = logging.getLogger(__name__)

#: Network address of the coordinator (the parties keep their own names, normally ``guest`` and ``host``).
ARBITER = "arbiter"

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
        each epoch. Either way A and B derive it from a seed B sends once.
    host_squares : {"rows", "sum"}
        How A sends the squares for the loss: one ciphertext per row, [u_A,i^2] (Hardy et al.; what the
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


# ---------------------------------------------------------------------------------------------------------
# helpers each role uses on its own


def batch_partitions(seed: int, n_rows: int, batch_size: int, *, shuffle: bool):
    """Yield, epoch after epoch, the list of row-index arrays of that epoch's mini-batches.

    A and B both call this with the seed B sent, so they agree on every batch without exchanging ids.
    """
    rng = np.random.default_rng(seed)
    order = rng.permutation(n_rows)
    while True:
        yield [order[i:i + batch_size] for i in range(0, n_rows, batch_size)]
        if shuffle:
            order = rng.permutation(n_rows)


class IterateAverage:
    """Algorithm 1's window of L iterates: their running sum, and the difference of successive averages."""

    def __init__(self, size: int) -> None:
        self._sum = np.zeros(size)
        self._count = 0
        self._previous: np.ndarray | None = None

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


def packing_layout(params: ProtocolParams, rows: int) -> Layout | None:
    """The slot layout of ``packing`` rows per ciphertext for products over at most `rows` rows (None when
    unpacked); a :class:`~ppml.config.ParamError` naming ``packing`` when it does not fit the key."""
    slots = params.packing
    if slots == "auto":
        slots = max_slots(key_bits=params.key_bits, value_frac_bits=VALUE_FRAC_BITS, frac_bits=params.frac_bits,
                          rows=rows, mask_bits=params.mask_bits)
    if slots <= 1:
        return None
    try:
        return layout_for(slots, key_bits=params.key_bits, value_frac_bits=VALUE_FRAC_BITS,
                          frac_bits=params.frac_bits, rows=rows, mask_bits=params.mask_bits)
    except ValueError as exc:
        fail("packing", f"{exc} (frac_bits = {params.frac_bits}, mask_bits = {params.mask_bits}, "
                        f"{rows} rows per product), got {params.packing}")


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
        whichever leaves the busier process less work (:func:`~ppml.crypto.products.split_product`). The same
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
    """Party A: features only. `sampled_hessian` (SQN): S_H is B's sample, not the batch."""

    decrypted_tag = "host_gradient_decrypted"
    step_tag = "host_step"

    def __init__(self, party: Party, endpoint: Endpoint, *, params: ProtocolParams, guest: str,
                 hessian_per_iteration: float = 0.0, sampled_hessian: bool = False,
                 layout: Layout | None = None) -> None:
        X = np.asarray(party.X, dtype=np.float64)
        squares = params.batch_size if params.host_squares == "rows" else 1
        per_row = 1 if layout is None else 1 / layout.slots
        super().__init__(party, endpoint, params=params, X=X, penalized=np.ones(X.shape[1]),
                         demand=math.ceil(per_row * (params.batch_size + hessian_per_iteration)) + squares + 1,
                         layout=layout)
        self._guest = guest
        self._sampled_hessian = sampled_hessian

    def setup(self) -> None:
        """Receive the public key from C and the batch seed from B."""
        self._receive_key()
        seed = expect.integer(self._ep.recv(self._guest, "batch_seed"), sender=self._guest, tag="batch_seed",
                              low=0, high=2**63 - 1)
        self._start_batches(int(seed))

    def forward(self, rows: np.ndarray) -> None:
        """Send [u_A] and the loss terms [u_A^2] (or [sum u_A^2]) and [lam/2 ||theta_A||^2] to B."""
        u = self._X[rows] @ self.theta
        self._ep.send(self._guest, "host_forward", self._encrypt_rows(u, what="u_A = X_A theta_A"), rows=len(rows))
        squares = u * u if self._params.host_squares == "rows" else np.array([u @ u])
        penalty = 0.5 * self._params.lam * float(self.theta @ self.theta)
        self._ep.send(self._guest, "host_loss", {"squares": self._encryptor.encrypt(squares),
                                                 "penalty": self._encryptor.encrypt(np.array([penalty]))})

    def gradient(self, rows: np.ndarray, *, masked: bool) -> None:
        """[G_A] = X_A^T [d] + s lam theta_A from B's [d], to C (masked or not)."""
        fore = self._vector(self._ep.recv(self._guest, "fore_gradient"), sender=self._guest, tag="fore_gradient",
                            rows=len(rows))
        self._send_gradient(self._product(fore, rows, self.theta), tag="host_gradient", masked=masked)

    def scores(self, *, test: bool) -> dict[str, Any]:
        """Evaluation: X_A theta_A on the training rows (and with `test` on the test rows), ||theta_A||^2."""
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
        """SQN: [X_A s_A] on S_H, to B."""
        self._ep.send(self._guest, "host_hessian_forward",
                      self._encrypt_rows(self._X[rows] @ self._s, what="X_A s_A"), rows=len(rows))

    def hessian_vector(self, rows: np.ndarray) -> None:
        """SQN: [V_A] = X_A^T [h] + |S_H| lam s_A from B's [h], to C."""
        h = self._vector(self._ep.recv(self._guest, "hessian_fore"), sender=self._guest, tag="hessian_fore",
                         rows=len(rows))
        self._ep.send(ARBITER, "host_hessian_vector", self._seal(self._product(h, rows, self._s), masked=False))

    def curvature_round(self, batch_rows: np.ndarray) -> None:
        """SQN, A's part of the Hessian-vector round on S_H."""
        rows = self.hessian_rows(batch_rows, sampled=self._sampled_hessian)
        self.hessian_forward(rows)
        self.hessian_vector(rows)


class GuestRole(_DataRole):
    """Party B: features, labels, and the intercept (a column of ones after its features).

    `hessian_sample` (SQN) is |S_H| of B's independent sample; None uses the batch.
    """

    decrypted_tag = "guest_gradient_decrypted"
    step_tag = "guest_step"

    def __init__(self, party: Party, endpoint: Endpoint, *, params: ProtocolParams, host: str,
                 rng: np.random.Generator, hessian_per_iteration: float = 0.0,
                 hessian_sample: int | None = None, layout: Layout | None = None) -> None:
        X = np.hstack([np.asarray(party.X, dtype=np.float64), np.ones((party.n_samples, 1))])
        penalized = np.ones(X.shape[1])
        penalized[-1] = 0.0
        per_row = 1 if layout is None else 1 / layout.slots
        super().__init__(party, endpoint, params=params, X=X, penalized=penalized,
                         demand=math.ceil(per_row * (params.batch_size + hessian_per_iteration)), layout=layout)
        self._host = host
        self._y = signed_labels(party.y)
        self._rng = rng
        self._hessian_sample = hessian_sample
        self._fore: EncryptedVector | None = None
        self._h: EncryptedVector | None = None

    def setup(self) -> None:
        """Receive the public key from C; draw the batch seed and send it to A."""
        self._receive_key()
        seed = int(self._rng.integers(2**63))
        self._ep.send(self._host, "batch_seed", seed)
        self._start_batches(seed)

    def forward(self, rows: np.ndarray) -> None:
        """[d] = [u_A]/4 + u_B/4 - y/2 to A; the encrypted batch loss times s to C."""
        p = self._params
        s = len(rows)
        u_A = self._vector(self._ep.recv(self._host, "host_forward"), sender=self._host, tag="host_forward",
                           rows=s)
        terms = self._ep.recv(self._host, "host_loss")
        if not isinstance(terms, dict) or set(terms) != {"squares", "penalty"}:
            raise ProtocolError(f"{self._host!r} sent 'host_loss' that is not a dict of squares and penalty")
        # A's squares (which may exceed a packed slot) and its penalty are never packed.
        squares = self._vector(terms["squares"], sender=self._host, tag="host_loss",
                               rows=s if p.host_squares == "rows" else 1, packed=False)
        host_penalty = self._vector(terms["penalty"], sender=self._host, tag="host_loss", rows=1, packed=False)
        u_B = self._X[rows] @ self.theta
        y = self._y[rows]
        own = 0.25 * u_B - 0.5 * y  # B's part of d_i, which is also the coefficient of u_A,i in the loss
        self._fore = self._add_rows(u_A.mul(0.25, frac_bits=2), own, what="u_B/4 - y/2")
        # A made [u_A]: without fresh randomness it could divide [u_A] out of [d] and read u_B/4 - y/2.
        self._ep.send(self._host, "fore_gradient", self._encryptor.rerandomize(self._fore), rows=s)

        theta = self._penalized * self.theta
        plain = (float(np.sum(LOG2 - 0.5 * y * u_B + 0.125 * u_B * u_B))
                 + s * 0.5 * p.lam * float(theta @ theta))
        terms = squares.sum().mul(0.125, frac_bits=3) + host_penalty.mul(float(s), frac_bits=0)
        if self._layout is None:
            loss = u_A.matvec(own[:, None], frac_bits=p.frac_bits) + terms + plain
        else:  # the same integers: the cross product in slot t - 1, A's terms and the plaintext lifted there
            cross = self._layout.matvec(u_A, own[:, None], rows=s, frac_bits=p.frac_bits)
            terms = terms.mul(1.0, frac_bits=cross.frac_bits - terms.frac_bits) + plain
            loss = self._seal(cross + self._layout.lift(terms), masked=False)
        self._ep.send(ARBITER, "batch_loss", loss)

    def gradient(self, rows: np.ndarray, *, masked: bool) -> None:
        """[G_B] = X_B^T [d] + s lam theta_B, to C (masked or not)."""
        self._send_gradient(self._product(self._fore, rows, self.theta), tag="guest_gradient", masked=masked)
        self._fore = None

    def hessian_rows(self, batch_rows: np.ndarray, *, sample_size: int | None) -> np.ndarray:
        """SQN: S_H = the current batch (``sample_size`` None: the poster's S_H = S), else a fresh uniform
        sample without replacement, drawn by B and sent to A."""
        if sample_size is None:
            return batch_rows
        n = self._X.shape[0]
        rows = np.sort(self._rng.choice(n, size=min(sample_size, n), replace=False))
        self._ep.send(self._host, "hessian_rows", rows)
        return rows

    def hessian_fore(self, rows: np.ndarray) -> None:
        """SQN: [h] = ([X_A s_A] + X_B s_B)/4 on S_H (the Taylor Hessian is x x^T/4), re-randomized, to A."""
        z_A = self._vector(self._ep.recv(self._host, "host_hessian_forward"), sender=self._host,
                           tag="host_hessian_forward", rows=len(rows))
        self._h = self._add_rows(z_A, self._X[rows] @ self._s, what="X_B s_B").mul(0.25, frac_bits=2)
        self._ep.send(self._host, "hessian_fore", self._encryptor.rerandomize(self._h), rows=len(rows))

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


class ArbiterRole:
    """Coordinator C: holds the private key, decrypts, and (unmasked mode) computes every step.

    Parameters
    ----------
    endpoint : Endpoint
    params : ProtocolParams
    host, guest : str
        Network names of A and B.
    curvature : Curvature, optional
        SQN's quasi-Newton memory; None for SGD (the direction is the gradient).
    layout : Layout, optional
        The slot layout of a packed run: C reads slot t - 1 of what it decrypts.
    """

    def __init__(self, endpoint: Endpoint, *, params: ProtocolParams, host: str, guest: str,
                 curvature: Curvature | None = None, layout: Layout | None = None) -> None:
        self._ep = endpoint
        self._layout = layout
        self._params = params
        self._host, self._guest = host, guest
        # The key pair is made here, in C's program: the private key never leaves it.
        self.public_key, self._private_key = paillier.generate_keypair(
            params.key_bits, scheme=params.scheme if params.encrypted else "plaintext")
        self._curvature = curvature
        self._losses: list[float] = []
        self._previous_loss: float | None = None
        # The model as C knows it: the sum of the steps it issued (the true model minus its zero start).
        self._model: np.ndarray | None = None
        self._window: IterateAverage | None = None
        self._s: np.ndarray | None = None
        self._n_host = 0

    def publish_key(self) -> None:
        self._ep.broadcast([self._host, self._guest], "public_key", self.public_key)

    def _decrypt_encoded(self, src: str, tag: str) -> tuple[list[int], int]:
        """The signed integers of what `src` sent under `tag` (slot t - 1 when packed) and their scale."""
        try:
            vector = receive_vector(self._ep.recv(src, tag), self.public_key)
        except paillier.CiphertextError as exc:
            raise ProtocolError(f"{src!r} sent {tag!r} that {ARBITER} cannot use: {exc}") from exc
        ints = self._private_key.decrypt_encoded(vector)
        return (list(ints) if self._layout is None else self._layout.read(ints)), vector.frac_bits

    def _decrypt(self, src: str, tag: str) -> np.ndarray:
        ints, frac_bits = self._decrypt_encoded(src, tag)
        return self.public_key.decode(ints, frac_bits=frac_bits)

    def batch_loss(self, batch_size: int) -> None:
        """Decrypt B's [s l_S]; keep l_S for the epoch's stopping test."""
        loss = self._decrypt(self._guest, "batch_loss")
        expect.vector(loss, sender=self._guest, tag="batch_loss", length=1)  # one ciphertext, a finite loss
        self._losses.append(float(loss[0]) / batch_size)

    def return_masked(self) -> None:
        """Masked mode: decrypt each party's [G + r] and send G + r back to it."""
        for party, tag in ((self._host, "host_gradient"), (self._guest, "guest_gradient")):
            masked, _ = self._decrypt_encoded(party, tag)
            self._ep.send(party, f"{tag}_decrypted", [int(m) for m in masked])

    def send_steps(self, *, eta: float, k: int, batch_size: int) -> None:
        """Unmasked mode: g = G / s, direction p (g, or SQN's H g), and each party's block of eta p."""
        g_host = self._decrypt(self._host, "host_gradient") / batch_size
        g_guest = self._decrypt(self._guest, "guest_gradient") / batch_size
        gradient = np.concatenate([g_host, g_guest])
        if self._model is None:
            self._n_host = len(g_host)
            self._model = np.zeros(len(gradient))
            self._window = IterateAverage(len(gradient))
        step = eta * (gradient if self._curvature is None else self._curvature.direction(gradient, k))
        self._window.add(self._model)
        self._model = self._model - step
        self._ep.send(self._host, "host_step", step[:self._n_host])
        self._ep.send(self._guest, "guest_step", step[self._n_host:])

    def close_window(self) -> bool:
        """SQN: end the averaging window on C's copy of the model (s_t is the same as the parties')."""
        self._s = self._window.close()
        return self._s is not None

    def curvature_pair(self, sample_size: int) -> None:
        """SQN: y_t = V / |S_H| from A's and B's decrypted blocks; store the pair (s_t, y_t)."""
        v_host = self._decrypt(self._host, "host_hessian_vector")
        v_guest = self._decrypt(self._guest, "guest_hessian_vector")
        self._curvature.add_pair(self._s, np.concatenate([v_host, v_guest]) / sample_size)

    def end_epoch(self) -> tuple[float, bool]:
        """The epoch's mean batch loss and FATE's verdict |loss - previous| < tol, sent to A and B."""
        loss = float(np.mean(self._losses))
        self._losses = []
        converged = self._previous_loss is not None and abs(loss - self._previous_loss) < self._params.tol
        self._previous_loss = loss
        self._ep.broadcast([self._host, self._guest], "converged", converged)
        return loss, converged


# the role programs

TAG_EVAL = EVALUATION + "scores"
"""host -> guest after each epoch: X_A theta_A on the training rows, ||theta_A||^2, and on the last epoch the
test rows' scores (evaluation traffic, outside the protocol)."""

#: the evaluation and control traffic of the role programs, counted apart from MESSAGES (comm.json
#: "evaluation"). The scores are exact, so they are outside the protocol's protection: the guest learns A's
#: share of every score and ||theta_A||^2. The stop flag ``converged`` is FATE's own message and stays in
#: MESSAGES; the programs need no control messages.
SIDE_MESSAGES: tuple[dict[str, str], ...] = (
    {"tag": TAG_EVAL, "src": "host", "dst": "guest",
     "content": "exact scores X_A theta_A on the training rows and ||theta_A||^2 after every epoch; on the "
                "last epoch also X_A^test theta_A (evaluation)"},
)


class _CountedEndpoint:
    """A party's endpoint that also counts its own training sends per epoch: A<->B, and with C."""

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
    """The guest's half of :func:`joint_scores`, in its order: A's scores + X_B theta_B + intercept."""
    return np.asarray(host_scores + X_guest @ theta_guest[:-1] + theta_guest[-1], dtype=np.float64)


def _data_party_epoch(role: HostRole | GuestRole, ep: _CountedEndpoint, *, eta: float, k: int, masked: bool,
                      curvature_every: int | None) -> tuple[int, bool, dict[str, int]]:
    """One epoch of data party A's or B's schedule, the same for both; `role` supplies its own steps.

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


def _host_program(endpoint: Endpoint, party: Party, *, guest: str, params: ProtocolParams, masked: bool,
                  curvature_every: int | None, sampled_hessian: bool, hessian_per_iteration: float,
                  layout: Layout | None) -> dict:
    """Host A: per mini-batch [u_A] and its loss terms to B, [G_A] to C, its own update; every L iterations
    (SQN) the Hessian-vector sub-protocol; after each epoch C's stop flag, then its scores to B (evaluation).

    Returns A's own facts: its model block and the training traffic it sent per epoch.
    """
    ep = _CountedEndpoint(endpoint)
    host = HostRole(party, ep, params=params, guest=guest, hessian_per_iteration=hessian_per_iteration,
                    sampled_hessian=sampled_hessian, layout=layout)
    traffic = []
    try:
        host.setup()
        ep.take()
        k = 0
        for epoch in range(params.max_epochs):
            k, converged, sent = _data_party_epoch(host, ep, eta=params.learning_rate(epoch), k=k,
                                                   masked=masked, curvature_every=curvature_every)
            traffic.append(sent)
            last = converged or epoch + 1 == params.max_epochs
            endpoint.send(guest, TAG_EVAL, host.scores(test=last))
            if converged:
                break
    except paillier.EncodingOverflowError as exc:
        raise _overflow(party.name, exc) from exc
    finally:
        host.close()
    return {"theta": host.theta, "traffic": traffic}


def _guest_program(endpoint: Endpoint, party: Party, *, host: str, params: ProtocolParams, algorithm: str,
                   rng: np.random.Generator, masked: bool, curvature_every: int | None,
                   hessian_sample: int | None, hessian_per_iteration: float, layout: Layout | None) -> dict:
    """Guest B (labels): the batch seed to A; per mini-batch [d] to A, [s l_S] and [G_B] to C, its own update;
    every L iterations (SQN) S_H and [h]; after each epoch C's stop flag and the evaluation of the joint model
    from A's scores (evaluation messages).

    Returns the History (its records lack C's batch loss and the traffic, which :func:`assemble` adds from
    C's and each party's own report), the final training AUC, its model block and the traffic it sent.
    """
    if party.y is None:
        raise ValueError(f"party {party.name!r} is the Paillier protocols' guest but holds no labels")
    ep = _CountedEndpoint(endpoint)
    guest = GuestRole(party, ep, params=params, host=host, rng=rng,
                      hessian_per_iteration=hessian_per_iteration, hessian_sample=hessian_sample, layout=layout)
    history = History(algorithm)
    traffic = []
    y = party.y
    try:
        guest.setup()
        ep.take()
        k = 0
        for epoch in range(params.max_epochs):
            start = time.perf_counter()
            eta = params.learning_rate(epoch)
            k, converged, sent = _data_party_epoch(guest, ep, eta=eta, k=k, masked=masked,
                                                   curvature_every=curvature_every)
            traffic.append(sent)
            seconds = time.perf_counter() - start
            # Evaluation, outside the protocol: A's scores and ||theta_A||^2 arrive as evaluation messages.
            scored = _host_scores(endpoint.recv(host, TAG_EVAL), host, party)
            scores = combine_scores(scored["train"], party.X, guest.theta)
            own = guest.theta @ guest.theta
            own_penalized = guest.theta[:-1] @ guest.theta[:-1]
            history.log(epoch=epoch + 1, eta=eta, iterations=k, seconds=seconds,
                        train_objective=logistic_objective(scores, y, None, params.lam,
                                                           sqnorm=scored["sqnorm"] + float(own)),
                        taylor_objective=taylor_objective(scores, y, None, params.lam,
                                                          sqnorm=scored["sqnorm"] + float(own_penalized)))
            if converged:
                history.stop(converged=True, reason=f"the epoch loss changed by less than tol={params.tol} "
                                                    f"in epoch {epoch + 1}")
                break
        else:
            history.stop(converged=False, reason=f"max_epochs={params.max_epochs} reached before the epoch "
                                                 f"loss changed by less than tol={params.tol}")
    except paillier.EncodingOverflowError as exc:
        raise _overflow(party.name, exc) from exc
    finally:
        guest.close()
    test_scores = None
    if scored["test"] is not None and party.X_test is not None:
        test_scores = combine_scores(scored["test"], party.X_test, guest.theta)
    history.finish(train_objective=history.records[-1]["train_objective"], y_train=y, train_scores=scores,
                   y_test=party.y_test, test_scores=test_scores)
    return {"history": history, "train_auc": binary_metrics(y, scores)["auc"], "theta": guest.theta,
            "traffic": traffic}


def _host_scores(payload: Any, host: str, party: Party) -> dict[str, Any]:
    """The host's evaluation message, checked: its scores on every training row (and test row), finite, and
    its ||theta_A||^2, finite and not negative."""
    expect.mapping(payload, ("train", "sqnorm", "test"), sender=host, tag=TAG_EVAL)
    expect.vector(payload["train"], sender=host, tag=TAG_EVAL, what="train", length=party.X.shape[0])
    expect.scalar(payload["sqnorm"], sender=host, tag=TAG_EVAL, what="sqnorm", low=0.0)
    if payload["test"] is not None:
        if party.X_test is None:
            raise ProtocolError(f"{host!r} sent {TAG_EVAL!r} with test scores, but there are no test rows")
        expect.vector(payload["test"], sender=host, tag=TAG_EVAL, what="test", length=party.X_test.shape[0])
    return payload


def _arbiter_program(endpoint: Endpoint, party: None, *, host: str, guest: str, params: ProtocolParams,
                     masked: bool, n_rows: int, curvature: Curvature | None,
                     hessian_sample: int | None, layout: Layout | None) -> dict:
    """Coordinator C: generates the key pair (the private key never leaves this program) and sends the public
    key; per mini-batch decrypts the batch loss and the gradients, returns the masked gradients or the steps;
    every L iterations (SQN) forms a curvature pair; after each epoch FATE's stop flag to A and B.

    C knows only public sizes: the rows per batch follow from the number of rows and ``batch_size``.
    Returns its own facts: the epoch losses, its public key's length and scheme, the traffic it sent and
    (SQN) the curvature pairs formed and skipped.
    """
    ep = _CountedEndpoint(endpoint)
    arbiter = ArbiterRole(ep, params=params, host=host, guest=guest, curvature=curvature, layout=layout)
    arbiter.publish_key()
    ep.take()
    sizes = batch_sizes(n_rows, params.batch_size)
    losses, traffic = [], []
    k = 0
    try:
        for epoch in range(params.max_epochs):
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
            log.info("epoch %d/%d: batch loss %.6f%s", epoch + 1, params.max_epochs, loss,
                     " (converged)" if converged else "")
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
    """The guest's, the host's and the coordinator's programs, from public facts.

    `rng` gives the guest its stream (the batch seed and sampled S_H); `curvature` (SQN) is C's fresh
    quasi-Newton memory; `hessian_sample` is |S_H| of an independent sample (None: S_H = S).
    """
    if masked and curvature is not None:
        raise ValueError("a quasi-Newton coordinator needs the plaintext gradients; masking is for SGD only")
    guest, host = (p.name for p in split_parties(public.parties, public.evaluator))
    rows = public.info(guest).train_rows
    _check_sizes(params, rows, hessian_sample)
    hessian = 0.0 if curvature is None else (hessian_sample or params.batch_size) / curvature.L
    every = None if curvature is None else curvature.L
    layout = packing_layout(params, max(params.batch_size, hessian_sample or 0))
    return [
        Role(guest, _guest_program, guest,
             {"host": host, "params": params, "algorithm": algorithm, "rng": rng.spawn(1)[0],
              "masked": masked, "curvature_every": every, "hessian_sample": hessian_sample,
              "hessian_per_iteration": hessian, "layout": layout}),
        Role(host, _host_program, host,
             {"guest": guest, "params": params, "masked": masked, "curvature_every": every,
              "sampled_hessian": hessian_sample is not None, "hessian_per_iteration": hessian,
              "layout": layout}),
        Role(ARBITER, _arbiter_program, None,
             {"host": host, "guest": guest, "params": params, "masked": masked, "n_rows": rows,
              "curvature": curvature, "hessian_sample": hessian_sample, "layout": layout}),
    ]


def assemble(public: Public, params: ProtocolParams, results: dict[str, Any], *, masked: bool,
             curvature_every: int | None = None, hessian_sample: int | None = None) -> History:
    """The run's History: the guest's records and evaluation, C's batch losses, every party's traffic.

    Per epoch ``loss`` (C's decrypted mean batch loss), ``train_objective`` (the project's l2-logistic
    objective of the current model, from the evaluation messages), ``taylor_objective``, ``eta``, cumulative
    ``iterations``, ``seconds`` and the epoch's training traffic (A<->B and with C, as every party counted
    its own sends; setup excluded). Final metrics add the traffic per iteration next to the poster's
    formulas; the (empty) privacy ledger says what crosses how.
    """
    guest, host = (p.name for p in split_parties(public.parties, public.evaluator))
    g, h, c = results[guest], results[host], results[ARBITER]
    history: History = g["history"]
    records, history.records = history.records, []
    for record, loss, *sent in zip(records, c["losses"], g["traffic"], h["traffic"], c["traffic"],
                                   strict=True):
        traffic = {key: sum(s[key] for s in sent) for key in _no_traffic()}
        history.log(epoch=record["epoch"], loss=loss, **{k: v for k, v in record.items() if k != "epoch"},
                    **traffic)
    records = history.records
    iterations = records[-1]["iterations"]
    n_params = len(h["theta"]) + len(g["theta"])

    def per_iteration(key: str) -> float:
        return sum(r[key] for r in records) / iterations

    s = params.batch_size
    if curvature_every is None:
        poster_ab, poster_arbiter = 3 * s, 2 * n_params
    else:
        s_h = hessian_sample or s
        poster_ab, poster_arbiter = 3 * s + 2 * s_h / curvature_every, (2 + 1 / curvature_every) * n_params
    key = c["public_key"]
    # DESIGN 6: a key shorter than the default is allowed only with a warning in the run's metrics.
    warning = {}
    if key["encrypted"] and key["bits"] < paillier.DEFAULT_KEY_BITS:
        warning["key_warning"] = (f"{key['bits']}-bit Paillier key, below the default "
                                  f"{paillier.DEFAULT_KEY_BITS}")
    layout = packing_layout(params, max(params.batch_size, hessian_sample or 0))
    history.final.update(
        packing_slots=1 if layout is None else layout.slots,
        loss=records[-1]["loss"], taylor_objective=records[-1]["taylor_objective"], train_auc=g["train_auc"],
        iterations=iterations, n_parameters=n_params,
        seconds_per_epoch=sum(r["seconds"] for r in records) / len(records),
        ab_ciphertexts_per_iteration=per_iteration("ab_ciphertexts"),
        ab_ciphertexts_per_iteration_unpacked=per_iteration("ab_ciphertexts_unpacked"),
        ab_bytes_per_iteration=per_iteration("ab_bytes"),
        arbiter_ciphertexts_per_iteration=per_iteration("arbiter_ciphertexts"),
        arbiter_bytes_per_iteration=per_iteration("arbiter_bytes"),
        poster_ab_per_iteration=poster_ab, poster_arbiter_per_iteration=poster_arbiter, **warning)
    if c["curvature"] is not None:
        history.final.update(curvature_pairs=c["curvature"]["formed"],
                             curvature_skipped=c["curvature"]["skipped"])
    history.extra.update(
        weights={host: np.asarray(h["theta"]).tolist(), guest: np.asarray(g["theta"]).tolist()},
        public_key={"bits": key["bits"], "scheme": key["scheme"]},
        roles={"host": host, "guest": guest, "arbiter": ARBITER})
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


def split_parties(parties: Sequence[_P], evaluation: _P | None = None) -> tuple[_P, _P]:
    """(guest, host) of a two-party vertical split; a :class:`~ppml.config.ParamError` naming the
    experiment's ``dataset`` key for anything else (the data the params chose does not fit the protocol).

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
    if len(hosts) != 1:
        fail("dataset", f"must have two parties for the Paillier protocols, one guest (labels) and one host, "
                        f"got {len(parties)} parties {names}")
    host = hosts[0]
    if host.n_samples != guest.n_samples:
        fail("dataset", f"must have aligned parties, got {guest.name} with {guest.n_samples} rows and "
                        f"{host.name} with {host.n_samples}")
    if ARBITER in (guest.name, host.name):
        fail("dataset", f"must not name a party {ARBITER!r} (the coordinator's address), got parties {names}")
    return guest, host


def check_data(parties: Sequence[_P], params: ProtocolParams, *, evaluation: _P | None = None,
               hessian_sample: int | None = None) -> tuple[_P, _P]:
    """(guest, host) after the checks of the params against the data, each a ParamError naming the key."""
    guest, host = split_parties(parties, evaluation)
    _check_sizes(params, guest.n_samples, hessian_sample)
    return guest, host


def make_network(parties: Sequence[Party | PartyInfo], params: ProtocolParams | None = None, *,
                 hessian_sample: int | None = None, capture: bool = False) -> Network:
    """A network over [guest, host, arbiter], after :func:`check_data` when `params` are given."""
    if params is None:
        guest, host = split_parties(parties)
    else:
        guest, host = check_data(parties, params, hessian_sample=hessian_sample)
    return Network([guest.name, host.name, ARBITER], capture=capture)
