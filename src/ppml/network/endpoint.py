"""The network between named parties: who may talk, what was sent, and the in-process transport.

Every payload that crosses between two parties goes through :meth:`Network.send`, which serializes it to
bytes with the codec (:mod:`ppml.network.codec`; so no object is ever shared by reference), records who sent
what to whom, when and how large, and hands the bytes to the transport for the receiver. :meth:`Network.recv`
decodes a fresh copy.

The base class is the in-process transport, deterministic: per (src, dst, tag) a FIFO queue, and
:meth:`Network.run` runs every party's program one at a time (:mod:`ppml.network.scheduler`). Transports with
real processes (:mod:`ppml.network.peer`) override only how bytes are posted and taken. Algorithms advance
:meth:`Endpoint.next_round` once per communication round so that traffic can be counted per round.
"""

from __future__ import annotations

from collections import defaultdict, deque
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable

from ppml.network.codec import decode, encode
from ppml.network.errors import ProtocolError
from ppml.network.scheduler import Scheduler

__all__ = ["Network", "Endpoint", "Message", "EVALUATION", "CONTROL", "traffic_kind", "DEFAULT_TIMEOUT",
           "MAX_TIMEOUT", "CARRIERS", "ProtocolError"]

EVALUATION = "eval/"
"""Tags starting with this are evaluation traffic (scoring the current model), counted apart from training."""

CONTROL = "ctl/"
"""Tags starting with this are control traffic (a party saying it has nothing to send in a round), counted
apart from the protocol's own messages so that per-iteration counts stay comparable with the papers'."""

DEFAULT_TIMEOUT = 600.0
"""Seconds a party waits for one message before the run fails (``timeout`` of an experiment block)."""

CARRIERS = ("tls", "grpc")
"""What may carry the links between party processes (``links`` of an experiment block; :mod:`ppml.network.links`):
the standard library's TLS sockets, or gRPC streams (both mutual TLS). Named here, below the links, so that
checking a block does not load them."""

MAX_TIMEOUT = 7 * 24 * 3600.0
"""Longest ``timeout`` an experiment may set: 7 days. A wait must end at a time the platform's clocks can
represent (``threading.TIMEOUT_MAX``; ``timeout: 1e10`` made every Ray party die with "timestamp out of range
for platform time_t"), and no protocol step needs a week."""


@dataclass(frozen=True)
class Message:
    """The record of one message: who, to whom, what tag, in which of the sender's rounds, how large."""

    src: str
    dst: str
    tag: str
    round: int
    nbytes: int
    ciphertexts: int
    payload: Any = field(default=None, compare=False, repr=False)


def traffic_kind(tag: str) -> str:
    """``"training"``, ``"evaluation"`` or ``"control"``: how a message with this tag is counted."""
    if tag.startswith(EVALUATION):
        return "evaluation"
    if tag.startswith(CONTROL):
        return "control"
    return "training"


class Network:
    """A network between named parties: checks who may talk, encodes, records every message.

    The transport underneath only moves bytes. This class is the in-process transport: per (src, dst, tag) a
    FIFO queue. Driver code may call one party after another (a receive with nothing queued is an error), or
    :meth:`run` may run every party's program at once, deterministically: one program runs at a time and
    hands over only when it waits for a message, so a run's messages, their order and every number are the
    same on every run. A wait that no other party can ever satisfy is a deadlock, reported at once.

    Rounds are counted per party: :meth:`Endpoint.next_round` ends the sender's round; a message carries the
    round of its sender; :attr:`round` is the most rounds any party finished.

    Parameters
    ----------
    names : iterable of str
        The addresses (party and role names) allowed to talk.
    capture : bool, default False
        Keep a decoded copy of every payload in :attr:`messages` (for traffic-audit tests).
    edges : iterable of (str, str), optional
        When given, only these (undirected) pairs may exchange messages: a decentralized graph.
    timeout : float, optional
        Seconds a receive may wait (transports with real concurrency; the in-process scheduler never waits).
    """

    def __init__(self, names: Iterable[str], *, capture: bool = False,
                 edges: Iterable[tuple[str, str]] | None = None, timeout: float | None = None) -> None:
        self.names = tuple(names)
        if len(set(self.names)) != len(self.names):
            raise ValueError(f"duplicate network addresses in {self.names}")
        self.capture = capture
        self.edges = None if edges is None else {frozenset(e) for e in edges}
        self.timeout = DEFAULT_TIMEOUT if timeout is None else float(timeout)
        self.messages: list[Message] = []
        self._rounds = dict.fromkeys(self.names, 0)
        self._queues: dict[tuple[str, str, str], deque[tuple[int, bytes]]] = defaultdict(deque)
        self._posted = 0
        self._scheduler: Scheduler | None = None
        self.where: dict[str, dict[str, Any]] = {}  # per address: the host and pid its program ran in

    @property
    def round(self) -> int:
        """The most rounds any party has finished."""
        return max(self._rounds.values(), default=0)

    def endpoint(self, name: str) -> "Endpoint":
        self._check_name(name)
        return Endpoint(self, name)

    def _check_name(self, name: str) -> None:
        if name not in self.names:
            raise KeyError(f"{name!r} is not on this network (addresses: {', '.join(self.names)})")

    def send(self, src: str, dst: str, tag: str, payload: Any) -> int:
        """Serialize `payload`, record it, hand it to the transport for `dst`; returns the byte count."""
        self._check_name(src)
        self._check_name(dst)
        if src == dst:
            raise ValueError(f"{src!r} sent {tag!r} to itself")
        if self.edges is not None and frozenset((src, dst)) not in self.edges:
            raise PermissionError(f"{src!r} and {dst!r} are not neighbours; {tag!r} cannot be sent")
        data, n_ct = encode(payload)
        self.messages.append(Message(src, dst, tag, self._rounds[src], len(data), n_ct,
                                     decode(data) if self.capture else None))
        self._post(src, dst, tag, data)
        return len(data)

    def _post(self, src: str, dst: str, tag: str, data: bytes) -> None:
        """The transport: queue `data` for `dst`, numbered in the order it was sent."""
        self._posted += 1
        self._queues[(src, dst, tag)].append((self._posted, data))

    def _take(self, dst: str, sources: tuple[str, ...], tags: tuple[str, ...]) -> tuple[str, str, bytes]:
        """The transport: (src, tag, bytes) of the earliest queued message to `dst` from one of `sources`
        with one of `tags`, waiting for one inside :meth:`run`."""
        queues = [(src, tag, self._queues[(src, dst, tag)]) for src in sources for tag in tags]
        if not any(q for _, _, q in queues):
            wanted = _wanted(sources, tags)
            if self._scheduler is None:
                raise LookupError(f"{dst!r} expected {wanted}, but nothing is queued")
            self._scheduler.wait(dst, lambda: any(q for _, _, q in queues), wanted)
        src, tag, queue = min((item for item in queues if item[2]), key=lambda item: item[2][0][0])
        return src, tag, queue.popleft()[1]

    def recv(self, dst: str, src: str, tag: str) -> Any:
        """The oldest `tag` message from `src` to `dst`, decoded afresh (waiting for it inside :meth:`run`)."""
        return self.recv_first(dst, src, (tag,))[1]

    def recv_first(self, dst: str, src: str, tags: Iterable[str]) -> tuple[str, Any]:
        """(tag, payload) of the first message `src` sent to `dst` among those with one of `tags`."""
        self._check_name(src)
        _, tag, data = self._take(dst, (src,), tuple(tags))
        return tag, decode(data)

    def recv_any(self, dst: str, sources: Iterable[str], tags: Iterable[str]) -> tuple[str, str, Any]:
        """(src, tag, payload) of the first message to reach `dst` from any of `sources` with one of `tags`.

        In process "first" is the order of sending (deterministic); on a concurrent transport it is the order
        of arrival, which depends on timing: only deliberately asynchronous protocols use it.
        """
        sources = tuple(sources)
        for src in sources:
            self._check_name(src)
        src, tag, data = self._take(dst, sources, tuple(tags))
        return src, tag, decode(data)

    def pending(self, dst: str, src: str, tag: str) -> int:
        """How many `tag` messages from `src` wait for `dst`."""
        return len(self._queues.get((src, dst, tag), ()))

    def next_round(self, name: str | None = None) -> None:
        """End the current round of party `name` (of every party when None)."""
        for n in self.names if name is None else (name,):
            self._rounds[n] += 1

    def run(self, programs: dict[str, Callable[[], Any]]) -> dict[str, Any]:
        """Run each party's program (keyed by its address) to the end; returns what each returned.

        Deterministic: one program runs at a time, in the order given, and hands over only when it waits for
        a message that has not been sent; the next program able to go on runs then. A program that raises
        ends the run with that error, annotated with the party's name; a state in which every unfinished
        program waits for a message nobody can send raises :class:`ProtocolError` naming each wait.
        """
        for name in programs:
            self._check_name(name)
        if self._scheduler is not None:
            raise RuntimeError("Network.run is already running")
        self._scheduler = Scheduler(list(programs))
        try:
            return self._scheduler.run(programs)
        finally:
            self._scheduler = None

    def summary(self) -> dict:
        """Totals for comm.json.

        Training traffic: per role sent/received messages, bytes, ciphertexts; per tag; rounds. Evaluation
        and control traffic (see :data:`EVALUATION`, :data:`CONTROL`) are counted apart, under
        ``"evaluation"`` and ``"control"``, when there is any.
        """
        kinds = {kind: [m for m in self.messages if traffic_kind(m.tag) == kind]
                 for kind in ("training", "evaluation", "control")}
        out = {"rounds": self.round, **_totals(self.names, kinds["training"])}
        for kind in ("evaluation", "control"):
            if kinds[kind]:
                totals = _totals(self.names, kinds[kind])
                out[kind] = {k: totals[k] for k in ("messages", "bytes", "ciphertexts", "tags")}
        return out

    def bytes_between(self, a: str, b: str) -> int:
        """Training bytes sent in either direction between `a` and `b`."""
        return sum(m.nbytes for m in self.messages if {m.src, m.dst} == {a, b} and traffic_kind(m.tag) == "training")


def _wanted(sources: tuple[str, ...], tags: tuple[str, ...]) -> str:
    what = " or ".join(repr(t) for t in tags)
    return f"{what} from {' or '.join(repr(s) for s in sources)}"


def _totals(names: tuple[str, ...], messages: list[Message]) -> dict:
    roles: dict[str, dict[str, int]] = {
        n: {"messages_sent": 0, "bytes_sent": 0, "ciphertexts_sent": 0,
            "messages_received": 0, "bytes_received": 0, "ciphertexts_received": 0} for n in names}
    tags: dict[str, dict[str, Any]] = {}
    for m in messages:
        roles[m.src]["messages_sent"] += 1
        roles[m.src]["bytes_sent"] += m.nbytes
        roles[m.src]["ciphertexts_sent"] += m.ciphertexts
        roles[m.dst]["messages_received"] += 1
        roles[m.dst]["bytes_received"] += m.nbytes
        roles[m.dst]["ciphertexts_received"] += m.ciphertexts
        t = tags.setdefault(m.tag, {"messages": 0, "bytes": 0, "ciphertexts": 0, "routes": []})
        t["messages"] += 1
        t["bytes"] += m.nbytes
        t["ciphertexts"] += m.ciphertexts
        route = (m.src, m.dst)
        if route not in t["routes"]:
            t["routes"].append(route)
    order = {name: i for i, name in enumerate(names)}
    for t in tags.values():  # in address order, whichever order a transport delivered them in
        t["routes"] = [f"{a}->{b}" for a, b in sorted(t["routes"], key=lambda r: (order[r[0]], order[r[1]]))]
    return {
        "messages": len(messages),
        "bytes": sum(m.nbytes for m in messages),
        "ciphertexts": sum(m.ciphertexts for m in messages),
        "roles": roles,
        "tags": tags,
    }


class Endpoint:
    """One party's handle on the network: it can only send as itself and receive what is addressed to it."""

    __slots__ = ("_net", "name")

    def __init__(self, net: Network, name: str) -> None:
        self._net = net
        self.name = name

    def send(self, dst: str, tag: str, payload: Any) -> int:
        return self._net.send(self.name, dst, tag, payload)

    def broadcast(self, dsts: Iterable[str], tag: str, payload: Any) -> int:
        return sum(self._net.send(self.name, d, tag, payload) for d in dsts)

    def recv(self, src: str, tag: str) -> Any:
        return self._net.recv(self.name, src, tag)

    def recv_first(self, src: str, tags: Iterable[str]) -> tuple[str, Any]:
        """(tag, payload) of the first message `src` sent here among those with one of `tags`."""
        return self._net.recv_first(self.name, src, tags)

    def recv_any(self, sources: Iterable[str], tags: Iterable[str]) -> tuple[str, str, Any]:
        """(src, tag, payload) of the first message to arrive here from any of `sources` with one of `tags`."""
        return self._net.recv_any(self.name, sources, tags)

    def pending(self, src: str, tag: str) -> int:
        return self._net.pending(self.name, src, tag)

    def next_round(self) -> None:
        """This party's round is over: its next messages count in the next round."""
        self._net.next_round(self.name)
