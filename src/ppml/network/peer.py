"""One party's side of a network whose peers run in other processes (``transport: ray`` and ``grpc``).

The role programs are the in-process ones; only how bytes move differs. A party posts each message to its
transport with a per-receiver sequence number and receives what its transport delivers. The receiver releases a
sender's messages in the order they were sent, holds at most :data:`HELD_MESSAGES` messages and
:data:`HELD_BYTES` bytes from one sender at once, decodes with the bounded codec, and waits at most the run's
``timeout`` for any message; a wait that ends without one, or a peer whose link failed, is a
:class:`~ppml.network.ProtocolError` naming the party, the message and the round.
"""

from __future__ import annotations

import threading
import time
from collections import defaultdict, deque
from typing import Any, Callable

import numpy as np

from ppml.network.endpoint import Message, Network, _wanted
from ppml.network.errors import ProtocolError, WireError

__all__ = ["PeerNetwork", "adopt", "pump_until", "HELD_MESSAGES", "HELD_BYTES"]

HELD_MESSAGES = 1024
"""Most messages a party holds from one sender at once: arrived out of order, or queued and not yet received.
The role programs leave at most 4 unreceived per sender (measured in-process, where a sender runs ahead until
it blocks); far more means that the sender floods its peer or that one of its messages was lost."""

HELD_BYTES = 128 * 2**20
"""Most bytes a party holds from one sender at once (as :data:`HELD_MESSAGES`): 4 messages of 32 MiB, more
than any vector an experiment sends (a float vector over n = 10^6 rows is 8 MB)."""


class PeerNetwork(Network):
    """One party's side of a network whose peers run in other processes.

    Sends go to `post(dst, tag, seq, data)`, the transport's (a link to the peer); what arrives is handed to
    :meth:`deliver` by the transport, with the sender it authenticated; receives wait here, at most
    :attr:`timeout` seconds. `flush()`, when given, is called before every receive: a transport that batches
    what a party sends to one peer sends the batch then, when the program may block.
    """

    def __init__(self, name: str, names: tuple[str, ...], edges: Any, timeout: float, *,
                 post: Callable[[str, str, int, bytes], None] | None = None,
                 flush: Callable[[], None] | None = None) -> None:
        super().__init__(names, edges=edges, timeout=timeout)
        self._me = name
        self._send = post
        self._flush = flush
        self._pump: Callable[[float], None] | None = None
        self._wake: Callable[[], None] | None = None
        self._cv = threading.Condition()
        self._inbox: dict[tuple[str, str], deque[tuple[int, bytes]]] = defaultdict(deque)
        self._held: dict[str, dict[int, tuple[str, bytes]]] = defaultdict(dict)
        self._expected: dict[str, int] = defaultdict(int)
        self._holding: dict[str, list[int]] = defaultdict(lambda: [0, 0])  # per sender: messages, bytes
        self._arrived = 0
        self._out: dict[str, int] = defaultdict(int)
        self._aborted: str | None = None
        self._finished: set[str] = set()  # the peers that said they finished: nothing more comes from them
        #: (src, tag, bytes, ciphertexts) of every message received, in order
        self.received: list[tuple[str, str, int, int]] = []
        self.step = "starting"

    def attach(self, post: Callable[[str, str, int, bytes], None], flush: Callable[[], None] | None = None,
               pump: Callable[[float], None] | None = None, wake: Callable[[], None] | None = None) -> None:
        """The transport's send (and flush), once its links exist.

        A transport whose links are read by the waiting program itself also gives `pump(seconds)`, which reads
        what arrives within `seconds` (returning once something was delivered), and `wake()`, which ends a
        pump early (an abort from another thread); receives then pump instead of waiting on a condition.
        """
        self._send = post
        self._flush = flush
        self._pump = pump
        self._wake = wake

    def _post(self, src: str, dst: str, tag: str, data: bytes) -> None:
        seq = self._out[dst]
        self._out[dst] = seq + 1
        self.step = f"round {self._rounds[src]}: sent {tag!r} to {dst!r}"
        self._send(dst, tag, seq, data)

    def deliver(self, src: str, tag: str, seq: int, data: bytes) -> None:
        """A peer's message: held until every earlier one of that peer has arrived, then queued.

        What this party holds from one sender (out of order, or queued and not yet received) is bounded by
        :data:`HELD_MESSAGES` and :data:`HELD_BYTES`. A message that does not fit, or whose parts are not of
        the types a peer sends, ends this party's run: the error names the sender, and this party's waits
        raise it too (the sender's own call is not waited for).

        Raises
        ------
        WireError
            When `tag` is not a str, `seq` not an int >= 0 or `data` not bytes.
        ProtocolError
            When holding the message would exceed what one sender may have held here.
        """
        # `src` is the sender the link authenticated (the name in its certificate), never a field it wrote
        if not isinstance(src, str) or src not in self.names or src == self._me:
            return  # not a party of this run: dropped
        if not (isinstance(tag, str) and isinstance(seq, int) and not isinstance(seq, bool) and seq >= 0
                and isinstance(data, bytes)):
            error = WireError(f"{src!r} delivered a malformed message to {self._me!r}: tag "
                              f"{type(tag).__name__}, sequence number {seq!r:.40}, payload "
                              f"{type(data).__name__} (a str, an int >= 0 and bytes expected)")
            self.abort(str(error))
            raise error
        with self._cv:
            if self._aborted is not None:
                return  # the run is over for this party: nothing more is held
            held = self._held[src]
            if seq < self._expected[src] or seq in held:
                return  # a duplicate
            holding = self._holding[src]
            if (holding[0] + 1 > HELD_MESSAGES or holding[1] + len(data) > HELD_BYTES
                    or seq - self._expected[src] >= HELD_MESSAGES):
                why = (f"{self._me!r} would hold more than {HELD_MESSAGES} messages or {HELD_BYTES} bytes "
                       f"from {src!r} (holding {holding[0]} messages, {holding[1]} bytes, out of order or "
                       f"not yet received; message {seq} of {len(data)} bytes arrived, the next in order is "
                       f"{self._expected[src]})")
                self._held.pop(src)  # freed now, not when the run ends
                self._aborted = why
                self._cv.notify_all()
                raise ProtocolError(why)
            holding[0] += 1
            holding[1] += len(data)
            held[seq] = (tag, data)
            while self._expected[src] in held:
                t, d = held.pop(self._expected[src])
                self._arrived += 1  # arrival order across senders (in order within each sender)
                self._inbox[(src, t)].append((self._arrived, d))
                self._expected[src] += 1
            self._cv.notify_all()

    def pending(self, dst: str, src: str, tag: str) -> int:
        """How many `tag` messages from `src` have arrived (in order) and wait to be received."""
        if self._pump is not None:
            self._pump(0.0)
        with self._cv:
            return len(self._inbox.get((src, tag), ()))

    @property
    def aborted(self) -> str | None:
        """Why this party's run ended early, or None."""
        return self._aborted

    def finished(self, src: str) -> None:
        """`src` finished its run (its link's bye arrived after every message it sent): a wait for a message
        from it alone now ends at once, naming it, rather than at the timeout."""
        with self._cv:
            self._finished.add(src)
            self._cv.notify_all()
        if self._wake is not None:
            self._wake()

    def abort(self, why: str) -> None:
        with self._cv:
            self._aborted = why
            self._cv.notify_all()
        if self._wake is not None:
            self._wake()

    def _wait(self, ready: Callable[[], bool], timeout: float) -> bool:
        """Wait until `ready()` (checked under the lock) or `timeout` seconds passed; whether it is."""
        if self._pump is None:
            with self._cv:
                return self._cv.wait_for(ready, timeout=timeout)

        def locked() -> bool:
            with self._cv:
                return ready()

        return pump_until(locked, timeout, self._pump)

    def recv_first(self, dst: str, src: str, tags: Any) -> tuple[str, Any]:
        tag, payload = super().recv_first(dst, src, tags)
        self._counted(payload)
        return tag, payload

    def recv_any(self, dst: str, sources: Any, tags: Any) -> tuple[str, str, Any]:
        src, tag, payload = super().recv_any(dst, sources, tags)
        self._counted(payload)
        return src, tag, payload

    def _counted(self, payload: Any) -> None:
        """Add the ciphertexts of the message just received to its record (one program receives per party)."""
        src, tag, nbytes, _ = self.received[-1]
        self.received[-1] = (src, tag, nbytes, ciphertexts(payload))

    def _take(self, dst: str, sources: tuple[str, ...], tags: tuple[str, ...]) -> tuple[str, str, bytes]:
        if self._flush is not None:
            self._flush()
        wanted = _wanted(sources, tags)
        queues = [(src, tag, self._inbox[(src, tag)]) for src in sources for tag in tags]
        self.step = f"round {self._rounds[dst]}: waiting for {wanted}"
        ready = self._wait(lambda: self._aborted is not None or any(q for _, _, q in queues)
                           or self._finished.issuperset(sources), self.timeout)
        with self._cv:
            if self._aborted is not None:
                raise ProtocolError(f"{dst!r} stopped while waiting for {wanted}: {self._aborted}")
            if not any(q for _, _, q in queues) and self._finished.issuperset(sources):
                raise ProtocolError(f"{' and '.join(map(repr, sources))} finished its run while {dst!r} waited "
                                    f"for {wanted} in its round {self._rounds[dst]}")
            if not ready:
                raise ProtocolError(f"{dst!r} waited {self.timeout:g} s for {wanted} in its round "
                                    f"{self._rounds[dst]}; nothing arrived (did {' or '.join(sources)} fail or stop?)")
            src, tag, queue = min((item for item in queues if item[2]), key=lambda item: item[2][0][0])
            data = queue.popleft()[1]
            holding = self._holding[src]
            holding[0] -= 1
            holding[1] -= len(data)
            self.received.append((src, tag, len(data), 0))  # its ciphertexts are counted once it is decoded
        self.step = f"round {self._rounds[dst]}: received {tag!r} from {src!r}"
        return src, tag, data


def ciphertexts(payload: Any) -> int:
    """The ciphertexts in a decoded payload: what the codec counted when it was sent (the elements of object
    arrays, which on the wire hold only ciphertexts)."""
    if isinstance(payload, np.ndarray):
        return payload.size if payload.dtype == object else 0
    if isinstance(payload, dict):
        return sum(ciphertexts(v) for v in payload.values())
    if isinstance(payload, (list, tuple)):
        return sum(ciphertexts(v) for v in payload)
    return 0


def pump_until(ready: Callable[[], bool], seconds: float, pump: Callable[[float], None]) -> bool:
    """Call `pump(seconds left)` until `ready()` or `seconds` have passed; whether it is ready (for a transport
    whose waiting program reads its links itself)."""
    deadline = time.monotonic() + seconds
    while not ready():
        left = deadline - time.monotonic()
        if left <= 0:
            return False
        pump(left)
    return True


def adopt(network: Network, outputs: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """What each party's program returned; `network` takes the parties' own records.

    `outputs` holds, per address, what its process reported: ``result``, ``rounds``, ``where`` and
    ``messages`` (the (dst, tag, round, bytes, ciphertexts) of every message it sent). The records are merged
    in round order, then address order, then the order each party sent them, so that they read as the
    in-process network's.
    """
    records = []
    for name in network.names:
        if name not in outputs:
            continue
        out = outputs[name]
        network._rounds[name] = out["rounds"]
        network.where[name] = out["where"]
        records += [(m[2], network.names.index(name), i, Message(name, *m)) for i, m in enumerate(out["messages"])]
    network.messages = [r[-1] for r in sorted(records, key=lambda r: r[:3])]
    return {name: out["result"] for name, out in outputs.items()}
