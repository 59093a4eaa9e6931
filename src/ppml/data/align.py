"""Entity alignment by id: which rows of the parties' own tables describe the same entities.

Vertically partitioned data only helps when every party's row ``i`` describes the same entity. Each party
holds its own table with its own id column and row order, and some ids that the others lack, so the rows
must be matched by id before training. This module does that as a protocol between the parties' roles,
with every message going through :class:`ppml.network.Network` so its traffic is counted:

1. The label holder intersects its ids with every other party's ids:

   - ``psi`` (default): an ECDH private set intersection (OpenMined's ``openmined-psi``). The label holder
     is the PSI client and learns which of its ids the other party holds; the other party, the PSI
     server, learns only how many ids the label holder has. The server's set is sent in the library's
     ``RAW`` form (one encrypted element per id): unlike its Golomb-compressed or Bloom-filter forms it
     has no false positives, so an id the other party lacks can never enter the aligned data, and the
     message sizes are the same on every run.
   - ``plain``: each other party sends its ids in the clear and the label holder joins them with its own
     (no privacy; for comparison and debugging).

2. The label holder takes the intersection over all parties, sorts it (the canonical order, which depends
   on the ids alone and not on any party's row order) and sends it to every party. Each party then finds
   the rows of these ids in its own table.

So with more than two parties the label holder learns each pairwise intersection, and every other party
learns only the final intersection (the ids of the rows it will train on).

Threat model: honest-but-curious parties that follow the protocol. Every message is checked where it
arrives (type, size, that it parses, that the library accepts it, ids unique and in canonical order): a
malformed one ends the alignment with a :class:`~ppml.network.ProtocolError` naming its sender. What a
dishonest party can still do within well-formed messages, and what bounds it, is in
docs/three-organizations.md ("What the private set intersection reveals"): a PSI server (the other party) can
bound the client's request (``max_request``: with one shared id column, the size of its own file), but it
cannot tell which ids the request holds; the client cannot tell whether the server's set holds ids it does
not have, and the label holder decides the announced intersection.

References
----------
.. [1] C. Meadows, "A More Efficient Cryptographic Matchmaking Protocol for Use in the Absence of a
   Continuously Available Third Party", IEEE S&P 1986 (Diffie-Hellman set intersection).
.. [2] OpenMined, "PSI: private set intersection based on ECDH", https://github.com/OpenMined/PSI
   (the ``openmined-psi`` 2.x API: ``client.CreateRequest``, ``server.CreateSetupMessage``,
   ``server.ProcessRequest``, ``client.GetIntersection``).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import reduce
from typing import Callable, Mapping

import numpy as np
import pandas as pd
import private_set_intersection.python as psi

from ppml.network import Endpoint, Network, ProtocolError

__all__ = ["Alignment", "AlignmentError", "align", "align_as_holder", "align_as_member", "METHODS", "check_unique"]

# The setup message's false-positive rate only matters for the compressed forms; RAW ignores it, but the
# API requires one.
_PSI_FPR = 1e-9


class AlignmentError(ValueError):
    """Ids that cannot be aligned: duplicates in a party's table, or an aligned id a party lacks."""


@dataclass(frozen=True)
class Alignment:
    """The outcome of an alignment.

    Attributes
    ----------
    ids : ndarray of str
        The ids every party holds, in the canonical (sorted) order.
    rows : dict of str to ndarray of int64
        For each party, the indices of its own rows holding ``ids``, in that order: row ``rows[p][i]`` of
        party ``p``'s table is entity ``ids[i]``.
    method : str
        ``"psi"`` or ``"plain"``.
    """

    ids: np.ndarray
    rows: dict[str, np.ndarray]
    method: str


def check_unique(name: str, ids: np.ndarray) -> None:
    """Raise :class:`AlignmentError` naming party `name` and the first id that occurs more than once."""
    values, counts = np.unique(ids, return_counts=True)
    repeated = counts > 1
    if repeated.any():
        first = values[repeated][0]
        raise AlignmentError(f"party {name!r} holds id {str(first)!r} {counts[repeated][0]} times "
                             f"({int(repeated.sum())} duplicated ids in all); ids must be unique per party")


# ---------------------------------------------------------------------------------------------------------
# roles: each gets only its own ids and its own endpoint


def _psi_request(endpoint: Endpoint, server: str, ids: np.ndarray) -> psi.client:
    """Label holder, step 1: send its ids, encrypted under a fresh client key, to `server`."""
    client = psi.client.CreateWithNewKey(True)
    endpoint.send(server, "psi_request", client.CreateRequest(ids.tolist()).SerializeToString())
    return client


def _parsed(message, payload, *, sender: str, tag: str):
    """`message` (a protobuf of the PSI library) parsed from `payload`, or a ProtocolError naming `sender`."""
    if not isinstance(payload, bytes):
        raise ProtocolError(f"{sender!r} sent {tag!r} of type {type(payload).__name__}, expected bytes")
    try:
        message.ParseFromString(payload)
    except Exception as exc:  # noqa: BLE001 - protobuf's DecodeError, or another parse failure: the sender's
        raise ProtocolError(f"{sender!r} sent {tag!r} that does not parse ({type(exc).__name__})") from None
    return message


def _psi_answer(endpoint: Endpoint, client: str, ids: np.ndarray, *, max_request: int | None = None) -> None:
    """Other party, step 2: send its own ids encrypted under its key, and re-encrypt the client's ids (at
    most `max_request` of them, when given)."""
    server = psi.server.CreateWithNewKey(True)
    request = _parsed(psi.Request(), endpoint.recv(client, "psi_request"), sender=client, tag="psi_request")
    size = len(request.encrypted_elements)
    if max_request is not None and size > max_request:
        raise ProtocolError(f"{client!r} sent 'psi_request' of {size} ids, more than the {max_request} this party "
                            "answers (its bound on what the requester may ask)")
    try:
        setup = server.CreateSetupMessage(_PSI_FPR, size, ids.tolist(), psi.DataStructure.RAW)
        response = server.ProcessRequest(request)
    except Exception as exc:  # noqa: BLE001 - the library refuses a point that is not on the curve
        raise ProtocolError(f"{client!r} sent 'psi_request' that the PSI library refuses "
                            f"({type(exc).__name__}: {_first_line(exc)})") from None
    endpoint.send(client, "psi_setup", setup.SerializeToString())
    endpoint.send(client, "psi_response", response.SerializeToString())


def _psi_result(endpoint: Endpoint, server: str, client: psi.client, ids: np.ndarray) -> np.ndarray:
    """Label holder, step 3: which of its own ids `server` also holds."""
    setup = _parsed(psi.ServerSetup(), endpoint.recv(server, "psi_setup"), sender=server, tag="psi_setup")
    response = _parsed(psi.Response(), endpoint.recv(server, "psi_response"), sender=server, tag="psi_response")
    if len(response.encrypted_elements) != len(ids):
        raise ProtocolError(f"{server!r} sent 'psi_response' of {len(response.encrypted_elements)} ids for a "
                            f"request of {len(ids)}")
    try:
        found = np.asarray(client.GetIntersection(setup, response), dtype=np.int64)
    except Exception as exc:  # noqa: BLE001 - the library refuses a point that is not on the curve
        raise ProtocolError(f"{server!r} sent 'psi_setup' or 'psi_response' that the PSI library refuses "
                            f"({type(exc).__name__}: {_first_line(exc)})") from None
    if found.size and (found.min() < 0 or found.max() >= len(ids) or np.unique(found).size != found.size):
        raise ProtocolError(f"{server!r} sent a PSI answer whose intersection is not a set of this party's rows")
    return ids[found]


def _first_line(exc: BaseException) -> str:
    """The first line of what the PSI library said, at most 80 characters."""
    text = str(exc).strip()
    return (text.splitlines()[0] if text else "no message")[:80]


def _id_list(payload, *, sender: str, tag: str, most: int) -> np.ndarray:
    """A list of at most `most` distinct str ids, as an array; a ProtocolError naming `sender` otherwise."""
    if not isinstance(payload, list) or len(payload) > most:
        shown = f"{len(payload)} entries" if isinstance(payload, list) else f"type {type(payload).__name__}"
        raise ProtocolError(f"{sender!r} sent {tag!r} of {shown}, expected a list of at most {most} ids")
    if not all(isinstance(i, str) for i in payload):
        raise ProtocolError(f"{sender!r} sent {tag!r} holding an id that is not a str")
    ids = np.asarray(payload, dtype=str)
    if np.unique(ids).size != ids.size:
        raise ProtocolError(f"{sender!r} sent {tag!r} holding an id more than once")
    return ids


def _plain_send(endpoint: Endpoint, holder: str, ids: np.ndarray) -> None:
    """Other party: send its ids in the clear."""
    endpoint.send(holder, "plain_ids", ids.tolist())


def _plain_join(endpoint: Endpoint, other: str, ids: np.ndarray) -> np.ndarray:
    """Label holder: its own ids that `other` sent too."""
    received = _id_list(endpoint.recv(other, "plain_ids"), sender=other, tag="plain_ids", most=2**31)
    return ids[np.isin(ids, received)]


def _aligned_from(endpoint: Endpoint, holder: str, own: np.ndarray) -> np.ndarray:
    """A party: the aligned ids the label holder announced, checked: distinct, sorted (the canonical order),
    at most as many as this party holds."""
    aligned = _id_list(endpoint.recv(holder, "aligned_ids"), sender=holder, tag="aligned_ids", most=len(own))
    if aligned.size > 1 and not (aligned[:-1] < aligned[1:]).all():
        raise ProtocolError(f"{holder!r} sent 'aligned_ids' that are not in the canonical (sorted) order")
    return aligned


def _psi_intersection(holder: Endpoint, holder_ids: np.ndarray, other: Endpoint,
                      other_ids: np.ndarray) -> np.ndarray:
    client = _psi_request(holder, other.name, holder_ids)
    _psi_answer(other, holder.name, other_ids)
    return _psi_result(holder, other.name, client, holder_ids)


def _plain_send(endpoint: Endpoint, holder: str, ids: np.ndarray) -> None:
    """Other party: send its ids in the clear."""
    endpoint.send(holder, "plain_ids", ids.tolist())


def _plain_join(endpoint: Endpoint, other: str, ids: np.ndarray) -> np.ndarray:
    """Label holder: its own ids that `other` sent too."""
    received = np.asarray(endpoint.recv(other, "plain_ids"), dtype=str)
    return ids[np.isin(ids, received)]


def _plain_intersection(holder: Endpoint, holder_ids: np.ndarray, other: Endpoint,
                        other_ids: np.ndarray) -> np.ndarray:
    _plain_send(other, holder.name, other_ids)
    return _plain_join(holder, other.name, holder_ids)


def _announce(endpoint: Endpoint, others: list[str], shared: list[np.ndarray]) -> np.ndarray:
    """Label holder: intersect the pairwise results, sort, and send the aligned ids to every party."""
    common = np.sort(reduce(np.intersect1d, shared))
    endpoint.broadcast(others, "aligned_ids", common.tolist())
    return common


def _own_rows(name: str, ids: np.ndarray, aligned: np.ndarray) -> np.ndarray:
    """A party: the indices of its rows holding `aligned`, in that order."""
    rows = pd.Index(ids).get_indexer(aligned)  # a hash lookup; ids are unique (checked before)
    if (rows < 0).any():
        missing = aligned[rows < 0]
        raise AlignmentError(f"party {name!r} was sent {len(missing)} aligned ids it does not hold "
                             f"(first: {str(missing[0])!r})")
    return rows.astype(np.int64)


#: Pairwise intersection methods: (holder endpoint, holder ids, other endpoint, other ids) -> shared ids.
METHODS: dict[str, Callable[[Endpoint, np.ndarray, Endpoint, np.ndarray], np.ndarray]] = {
    "psi": _psi_intersection,
    "plain": _plain_intersection,
}


def align(ids: Mapping[str, np.ndarray], *, label_holder: str, method: str = "psi",
          network: Network | None = None) -> Alignment:
    """Align the parties' tables by id.

    Parameters
    ----------
    ids : mapping of str to array of str
        Each party's ids in its own row order. Ids must be unique within a party.
    label_holder : str
        The party that intersects with every other party and announces the result.
    method : {"psi", "plain"}
        Private set intersection, or ids in the clear (see the module docstring).
    network : Network, optional
        Carries and counts the messages; it must have every party's name as an address. A fresh network
        over the parties is used when omitted.

    Returns
    -------
    Alignment
        The shared ids in canonical (sorted) order and, for each party, its row indices of those ids.

    Raises
    ------
    AlignmentError
        A party's ids contain duplicates (the message names the party and the id).
    ValueError
        Unknown method or label holder, or fewer than two parties.
    """
    if method not in METHODS:
        raise ValueError(f"alignment method must be one of {sorted(METHODS)}, got {method!r}")
    if label_holder not in ids:
        raise ValueError(f"label holder {label_holder!r} is not among the parties {sorted(ids)}")
    if len(ids) < 2:
        raise ValueError(f"alignment needs at least two parties, got {sorted(ids)}")
    own = {name: np.asarray(values, dtype=str) for name, values in ids.items()}
    for name, values in own.items():
        check_unique(name, values)
    network = Network(list(own)) if network is None else network
    holder = network.endpoint(label_holder)
    others = [name for name in own if name != label_holder]
    intersect = METHODS[method]
    shared = [intersect(holder, own[label_holder], network.endpoint(name), own[name]) for name in others]
    network.next_round()
    aligned = _announce(holder, others, shared)
    rows = {label_holder: _own_rows(label_holder, own[label_holder], aligned)}
    for name in others:
        rows[name] = _own_rows(name, own[name], _aligned_from(network.endpoint(name), label_holder, own[name]))
    return Alignment(ids=aligned, rows={name: rows[name] for name in own}, method=method)


# ---------------------------------------------------------------------------------------------------------
# one party's side, when every party runs in its own process (ppml.launch.prepare)


def align_as_holder(endpoint: Endpoint, ids: np.ndarray, others: list[str], *, method: str = "psi"
                    ) -> tuple[np.ndarray, np.ndarray]:
    """The label holder's side of :func:`align`, over its own endpoint only.

    Parameters
    ----------
    endpoint : Endpoint
        The label holder's endpoint; `others` must be reachable from it.
    ids : array of str
        Its own ids, in its own row order (unique).
    others : list of str
        The other parties, in the order :func:`align` intersects with them.
    method : {"psi", "plain"}

    Returns
    -------
    aligned : ndarray of str
        The shared ids in canonical (sorted) order, as sent to every other party.
    rows : ndarray of int64
        The label holder's rows of `aligned`.
    """
    if method not in METHODS:
        raise ValueError(f"alignment method must be one of {sorted(METHODS)}, got {method!r}")
    own = np.asarray(ids, dtype=str)
    check_unique(endpoint.name, own)
    shared = []
    for other in others:
        if method == "psi":
            client = _psi_request(endpoint, other, own)
            shared.append(_psi_result(endpoint, other, client, own))
        else:
            shared.append(_plain_join(endpoint, other, own))
    endpoint.next_round()
    aligned = _announce(endpoint, others, shared)
    return aligned, _own_rows(endpoint.name, own, aligned)


def align_as_member(endpoint: Endpoint, ids: np.ndarray, holder: str, *, method: str = "psi",
                    max_request: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Another party's side of :func:`align`: answer the label holder, then take the aligned ids it sends.

    `max_request` (PSI): the most ids the label holder's request may hold (refused beyond, naming it).

    Returns
    -------
    aligned : ndarray of str
        The shared ids in canonical order, as the label holder announced them.
    rows : ndarray of int64
        This party's rows of `aligned`.
    """
    if method not in METHODS:
        raise ValueError(f"alignment method must be one of {sorted(METHODS)}, got {method!r}")
    own = np.asarray(ids, dtype=str)
    check_unique(endpoint.name, own)
    if method == "psi":
        _psi_answer(endpoint, holder, own, max_request=max_request)
    else:
        _plain_send(endpoint, holder, own)
    endpoint.next_round()
    aligned = _aligned_from(endpoint, holder, own)
    rows = pd.Index(own).get_indexer(aligned)
    if (rows < 0).any():
        raise ProtocolError(f"{holder!r} sent 'aligned_ids' holding {int((rows < 0).sum())} ids that "
                            f"{endpoint.name!r} does not hold (first: {str(aligned[rows < 0][0])[:40]!r})")
    return aligned, rows.astype(np.int64)
