"""The only path between parties.

Every payload that crosses between two parties goes through :meth:`Network.send`, which serializes it to
bytes (so no object is ever shared by reference), records who sent what to whom, when and how large, and
queues the bytes for the receiver. :meth:`Network.recv` decodes a fresh copy.

The wire format is a small tagged binary encoding of plain values: None, bool, int (any size), float, str,
bytes, numeric numpy arrays, numpy object arrays of Python ints (Paillier ciphertexts: written as
fixed-width big-endian integers and counted as ciphertexts), lists, tuples and str-keyed dicts. Other
types cross only if registered with :func:`register_wire_type` (for example an encrypted vector, which
carries its public key's modulus and its ciphertexts).

The default network is in-process and deterministic: per (src, dst, tag) a FIFO queue. Algorithms advance
:meth:`Network.next_round` once per communication round so that traffic can be counted per round.
"""

from __future__ import annotations

import io
import struct
from collections import defaultdict, deque
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable

import numpy as np

__all__ = ["Network", "Endpoint", "Message", "encode", "decode", "register_wire_type", "WireError"]


class WireError(TypeError):
    """A payload that cannot cross the network."""


# ---------------------------------------------------------------------------------------------------------
# codec

_WIRE_TYPES: dict[type, tuple[str, Callable[[Any], Any]]] = {}
_WIRE_DECODERS: dict[str, Callable[[Any], Any]] = {}


def register_wire_type(cls: type, name: str, to_wire: Callable[[Any], Any], from_wire: Callable[[Any], Any]) -> None:
    """Let instances of `cls` cross the network as ``to_wire(obj)`` (a plain value), rebuilt by `from_wire`."""
    _WIRE_TYPES[cls] = (name, to_wire)
    _WIRE_DECODERS[name] = from_wire


class _Counter:
    __slots__ = ("ciphertexts",)

    def __init__(self) -> None:
        self.ciphertexts = 0


def _write_len(buf: io.BytesIO, n: int) -> None:
    buf.write(struct.pack("<Q", n))


def _read_len(view: memoryview, pos: int) -> tuple[int, int]:
    return struct.unpack_from("<Q", view, pos)[0], pos + 8


def _enc(obj: Any, buf: io.BytesIO, counter: _Counter) -> None:
    if obj is None:
        buf.write(b"N")
    elif isinstance(obj, (bool, np.bool_)):
        buf.write(b"T" if obj else b"F")
    elif isinstance(obj, (int, np.integer)):
        v = int(obj)
        raw = v.to_bytes((v.bit_length() + 8) // 8 or 1, "big", signed=True)
        buf.write(b"I")
        _write_len(buf, len(raw))
        buf.write(raw)
    elif isinstance(obj, (float, np.floating)):
        buf.write(b"D")
        buf.write(struct.pack("<d", float(obj)))
    elif isinstance(obj, str):
        raw = obj.encode("utf-8")
        buf.write(b"S")
        _write_len(buf, len(raw))
        buf.write(raw)
    elif isinstance(obj, (bytes, bytearray)):
        buf.write(b"B")
        _write_len(buf, len(obj))
        buf.write(bytes(obj))
    elif isinstance(obj, np.ndarray):
        _enc_array(obj, buf, counter)
    elif isinstance(obj, (list, tuple)):
        buf.write(b"L" if isinstance(obj, list) else b"U")
        _write_len(buf, len(obj))
        for item in obj:
            _enc(item, buf, counter)
    elif isinstance(obj, dict):
        buf.write(b"M")
        _write_len(buf, len(obj))
        for key, value in obj.items():
            if not isinstance(key, str):
                raise WireError(f"dict keys on the wire must be str, got {type(key).__name__}")
            _enc(key, buf, counter)
            _enc(value, buf, counter)
    elif type(obj) in _WIRE_TYPES:
        name, to_wire = _WIRE_TYPES[type(obj)]
        buf.write(b"X")
        _enc(name, buf, counter)
        _enc(to_wire(obj), buf, counter)
    else:
        raise WireError(f"cannot send a {type(obj).__module__}.{type(obj).__name__} over the network; "
                        "send plain values or register the type with ppml.network.register_wire_type")


def _enc_array(arr: np.ndarray, buf: io.BytesIO, counter: _Counter) -> None:
    if arr.dtype == object:
        flat = arr.ravel()
        if not all(isinstance(v, int) and v >= 0 for v in flat):
            raise WireError("object arrays on the wire must hold non-negative Python ints (ciphertexts)")
        width = max((int(v).bit_length() + 7) // 8 for v in flat) if flat.size else 1
        buf.write(b"C")
        _enc(tuple(int(s) for s in arr.shape), buf, counter)
        _write_len(buf, width)
        buf.write(b"".join(int(v).to_bytes(width, "big") for v in flat))
        counter.ciphertexts += flat.size
        return
    if arr.dtype.kind not in "biufc":
        raise WireError(f"numpy arrays of dtype {arr.dtype} cannot cross the network")
    arr = np.ascontiguousarray(arr)
    buf.write(b"A")
    _enc(arr.dtype.str, buf, counter)
    _enc(tuple(int(s) for s in arr.shape), buf, counter)
    raw = arr.tobytes()
    _write_len(buf, len(raw))
    buf.write(raw)


def _dec(view: memoryview, pos: int) -> tuple[Any, int]:
    code = bytes(view[pos:pos + 1])
    pos += 1
    if code == b"N":
        return None, pos
    if code == b"T":
        return True, pos
    if code == b"F":
        return False, pos
    if code == b"I":
        n, pos = _read_len(view, pos)
        return int.from_bytes(view[pos:pos + n], "big", signed=True), pos + n
    if code == b"D":
        return struct.unpack_from("<d", view, pos)[0], pos + 8
    if code == b"S":
        n, pos = _read_len(view, pos)
        return str(view[pos:pos + n], "utf-8"), pos + n
    if code == b"B":
        n, pos = _read_len(view, pos)
        return bytes(view[pos:pos + n]), pos + n
    if code in (b"L", b"U"):
        n, pos = _read_len(view, pos)
        items = []
        for _ in range(n):
            item, pos = _dec(view, pos)
            items.append(item)
        return (items if code == b"L" else tuple(items)), pos
    if code == b"M":
        n, pos = _read_len(view, pos)
        out = {}
        for _ in range(n):
            key, pos = _dec(view, pos)
            out[key], pos = _dec(view, pos)
        return out, pos
    if code == b"A":
        dtype, pos = _dec(view, pos)
        shape, pos = _dec(view, pos)
        n, pos = _read_len(view, pos)
        arr = np.frombuffer(view[pos:pos + n], dtype=np.dtype(dtype)).reshape(shape).copy()
        return arr, pos + n
    if code == b"C":
        shape, pos = _dec(view, pos)
        width, pos = _read_len(view, pos)
        count = int(np.prod(shape)) if shape else 1
        raw = view[pos:pos + width * count]
        out = np.empty(count, dtype=object)
        for i in range(count):
            out[i] = int.from_bytes(raw[i * width:(i + 1) * width], "big")
        return out.reshape(shape), pos + width * count
    if code == b"X":
        name, pos = _dec(view, pos)
        value, pos = _dec(view, pos)
        if name not in _WIRE_DECODERS:
            raise WireError(f"unknown wire type {name!r}")
        return _WIRE_DECODERS[name](value), pos
    raise WireError(f"corrupt message: unknown type code {code!r} at byte {pos - 1}")


def encode(payload: Any) -> tuple[bytes, int]:
    """Serialize a payload; returns the bytes and the number of ciphertexts in it."""
    buf = io.BytesIO()
    counter = _Counter()
    _enc(payload, buf, counter)
    return buf.getvalue(), counter.ciphertexts


def decode(data: bytes) -> Any:
    """Rebuild a payload from :func:`encode`'s bytes."""
    view = memoryview(data)
    value, pos = _dec(view, 0)
    if pos != len(data):
        raise WireError(f"corrupt message: {len(data) - pos} trailing bytes")
    return value


# ---------------------------------------------------------------------------------------------------------
# network


@dataclass(frozen=True)
class Message:
    """The record of one message: who, to whom, what tag, in which round, how large."""

    src: str
    dst: str
    tag: str
    round: int
    nbytes: int
    ciphertexts: int
    payload: Any = field(default=None, compare=False, repr=False)


class Network:
    """In-process network between named parties, recording every message.

    Parameters
    ----------
    names : iterable of str
        The addresses (party and role names) allowed to talk.
    capture : bool, default False
        Keep a decoded copy of every payload in :attr:`messages` (for traffic-audit tests).
    edges : iterable of (str, str), optional
        When given, only these (undirected) pairs may exchange messages: a decentralized graph.
    """

    def __init__(self, names: Iterable[str], *, capture: bool = False,
                 edges: Iterable[tuple[str, str]] | None = None) -> None:
        self.names = tuple(names)
        if len(set(self.names)) != len(self.names):
            raise ValueError(f"duplicate network addresses in {self.names}")
        self.capture = capture
        self.edges = None if edges is None else {frozenset(e) for e in edges}
        self.round = 0
        self.messages: list[Message] = []
        self._queues: dict[tuple[str, str, str], deque[bytes]] = defaultdict(deque)

    def endpoint(self, name: str) -> "Endpoint":
        self._check_name(name)
        return Endpoint(self, name)

    def _check_name(self, name: str) -> None:
        if name not in self.names:
            raise KeyError(f"{name!r} is not on this network (addresses: {', '.join(self.names)})")

    def send(self, src: str, dst: str, tag: str, payload: Any) -> int:
        """Serialize `payload`, record it, queue it for `dst`; returns the byte count."""
        self._check_name(src)
        self._check_name(dst)
        if src == dst:
            raise ValueError(f"{src!r} sent {tag!r} to itself")
        if self.edges is not None and frozenset((src, dst)) not in self.edges:
            raise PermissionError(f"{src!r} and {dst!r} are not neighbours; {tag!r} cannot be sent")
        data, n_ct = encode(payload)
        self._queues[(src, dst, tag)].append(data)
        self.messages.append(Message(src, dst, tag, self.round, len(data), n_ct,
                                     decode(data) if self.capture else None))
        return len(data)

    def recv(self, dst: str, src: str, tag: str) -> Any:
        """The oldest queued `tag` message from `src` to `dst`, decoded afresh."""
        queue = self._queues.get((src, dst, tag))
        if not queue:
            raise LookupError(f"{dst!r} expected {tag!r} from {src!r}, but nothing is queued")
        return decode(queue.popleft())

    def pending(self, dst: str, src: str, tag: str) -> int:
        """How many `tag` messages from `src` wait for `dst`."""
        return len(self._queues.get((src, dst, tag), ()))

    def next_round(self) -> None:
        self.round += 1

    def summary(self) -> dict:
        """Totals for comm.json: per role sent/received messages, bytes, ciphertexts; per tag; rounds."""
        roles: dict[str, dict[str, int]] = {
            n: {"messages_sent": 0, "bytes_sent": 0, "ciphertexts_sent": 0,
                "messages_received": 0, "bytes_received": 0, "ciphertexts_received": 0} for n in self.names}
        tags: dict[str, dict[str, Any]] = {}
        for m in self.messages:
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
            route = f"{m.src}->{m.dst}"
            if route not in t["routes"]:
                t["routes"].append(route)
        return {
            "rounds": self.round,
            "messages": len(self.messages),
            "bytes": sum(m.nbytes for m in self.messages),
            "ciphertexts": sum(m.ciphertexts for m in self.messages),
            "roles": roles,
            "tags": tags,
        }

    def bytes_between(self, a: str, b: str) -> int:
        """Bytes sent in either direction between `a` and `b`."""
        return sum(m.nbytes for m in self.messages if {m.src, m.dst} == {a, b})


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

    def pending(self, src: str, tag: str) -> int:
        return self._net.pending(self.name, src, tag)
