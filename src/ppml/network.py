"""The only path between parties.

Every payload that crosses between two parties goes through :meth:`Network.send`, which serializes it to
bytes (so no object is ever shared by reference), records who sent what to whom, when and how large, and
queues the bytes for the receiver. :meth:`Network.recv` decodes a fresh copy.

The wire format is a small tagged binary encoding of plain values: None, bool, int (any size), float, str,
bytes, numeric numpy arrays, numpy object arrays of Python ints (Paillier ciphertexts: written as
fixed-width big-endian integers and counted as ciphertexts), lists, tuples and str-keyed dicts. Other
types cross only if registered with :func:`register_wire_type` (for example an encrypted vector, which
carries its public key's modulus and its ciphertexts).

Decoding is a network boundary: the bytes come from another party. :func:`decode` allocates no more than a
small multiple of the message's length, whatever its frames claim (every length and count is checked against
the bytes left first; all-zero ciphertext arrays, whose elements take no bytes, share one allowance per
message), accepts at most :data:`MAX_DEPTH` levels of nesting and only what :func:`encode` writes, and fails
only with :class:`WireError`, naming what was wrong and at which byte.

The default network is in-process and deterministic: per (src, dst, tag) a FIFO queue. Algorithms advance
:meth:`Network.next_round` once per communication round so that traffic can be counted per round.
"""

from __future__ import annotations

import io
import math
import struct
import threading
from collections import defaultdict, deque
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable

import numpy as np

__all__ = ["Network", "Endpoint", "Message", "encode", "decode", "register_wire_type", "WireError", "ProtocolError",
           "EVALUATION", "CONTROL", "traffic_kind",
           "MAX_DEPTH", "DEFAULT_TIMEOUT", "MAX_TIMEOUT"]


class WireError(TypeError, ValueError):
    """A payload that cannot be sent, or received bytes that are not a message :func:`encode` wrote."""


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


# Decoding: the bytes come from another party, so nothing in them is trusted. Every length or count read
# from the wire is checked against the bytes left before anything is allocated or looped over, nesting is
# bounded, only the forms the encoder writes are accepted (so one payload has exactly one encoding), and
# every failure is a WireError naming what was wrong and the byte offset where it was found.

MAX_DEPTH = 100
"""Deepest nesting of lists, tuples, dicts and registered types that :func:`decode` accepts."""

_MAX_NDIM = 64  # numpy's own limit on the number of array dimensions
_MAX_NBYTES = 2**63 - 1  # numpy's limit on size * itemsize; an axis of length 0 would let the others grow
# What a message decodes to is bounded by its length. Every value but one holds at most ~20 bytes of Python
# objects per byte it occupies (measured; the most is a 2-byte ciphertext: a 32-byte int and an 8-byte
# pointer). The exception: the encoder writes an all-zero object array (plaintext-scheme residues) with width
# 0, so its bytes do not grow with its length while its decoded array holds 8 bytes of pointers per element.
# Those elements are counted against the whole message, however many frames claim them: at most
# _ZERO_WIDTH_ALLOWANCE (20 times the longest vector an experiment sends, a batch of 3000) plus one per byte
# of the message. A message of L bytes thus decodes to at most ~30 L bytes plus 512 KiB.
_ZERO_WIDTH_ALLOWANCE = 2**16

# Every dtype the encoder writes (kinds b, i, u, f, c in either byte order), keyed by its dtype.str.
_DTYPES: dict[str, np.dtype] = {
    dt.str: dt
    for code in "?" + np.typecodes["AllInteger"] + np.typecodes["AllFloat"]
    for dt in (np.dtype(code).newbyteorder("<"), np.dtype(code).newbyteorder(">"))
    if dt.kind in "biufc"
}
_LEN = struct.Struct("<Q")
_F64 = struct.Struct("<d")
_TAG_S, _TAG_I, _TAG_U, _TAG_L = b"S"[0], b"I"[0], b"U"[0], b"L"[0]


class _Budget:
    """What is left of one message's allowance of zero-width ciphertexts (see _ZERO_WIDTH_ALLOWANCE)."""

    __slots__ = ("zero_width",)

    def __init__(self, message_length: int) -> None:
        self.zero_width = _ZERO_WIDTH_ALLOWANCE + message_length

    def spend_zero_width(self, count: int, at: int) -> None:
        if count > self.zero_width:
            raise _corrupt(f"{count} zero-width ciphertexts, more than the {self.zero_width} this message "
                           "has left", at)
        self.zero_width -= count


def _corrupt(what: str, at: int) -> WireError:
    return WireError(f"corrupt message: {what} at byte {at}")


def _take(view: memoryview, pos: int, n: int, what: str) -> int:
    """The end of the `n` bytes of `what` starting at `pos`, if the message still holds them."""
    if n > len(view) - pos:
        raise _corrupt(f"truncated {what}: {n} bytes needed, {len(view) - pos} left", pos)
    return pos + n


def _read_len(view: memoryview, pos: int, what: str) -> tuple[int, int]:
    end = _take(view, pos, 8, f"length of {what}")
    return _LEN.unpack_from(view, pos)[0], end


def _expect(view: memoryview, pos: int, tag: int, what: str) -> int:
    """The position after `tag`, which must open the value at `pos` (a part whose type is fixed)."""
    if pos >= len(view) or view[pos] != tag:
        raise _corrupt(f"{what} is not a {chr(tag)!r} value", pos)
    return pos + 1


def _check_depth(depth: int, at: int) -> None:
    if depth >= MAX_DEPTH:
        raise _corrupt(f"nesting deeper than {MAX_DEPTH} levels", at)


def _dec(view: memoryview, pos: int, depth: int, budget: _Budget) -> tuple[Any, int]:
    if pos >= len(view):
        raise _corrupt("truncated: a value expected", pos)
    reader = _READERS.get(view[pos])
    if reader is None:
        raise _corrupt(f"unknown type code {bytes(view[pos:pos + 1])!r}", pos)
    return reader(view, pos + 1, depth, budget)


def _dec_none(view: memoryview, pos: int, depth: int, budget: _Budget) -> tuple[Any, int]:
    return None, pos


def _dec_true(view: memoryview, pos: int, depth: int, budget: _Budget) -> tuple[Any, int]:
    return True, pos


def _dec_false(view: memoryview, pos: int, depth: int, budget: _Budget) -> tuple[Any, int]:
    return False, pos


def _dec_int(view: memoryview, pos: int, depth: int, budget: _Budget) -> tuple[int, int]:
    start = pos + 8
    if start > len(view):
        raise _corrupt(f"truncated length of int: 8 bytes needed, {len(view) - pos} left", pos)
    n = _LEN.unpack_from(view, pos)[0]
    end = _take(view, start, n, "int")
    v = int.from_bytes(view[start:end], "big", signed=True)
    if n != (v.bit_length() + 8) // 8:  # the encoder's width: the shortest two's complement, plus a sign bit
        raise _corrupt(f"non-canonical {n}-byte int", pos - 1)
    return v, end


def _dec_float(view: memoryview, pos: int, depth: int, budget: _Budget) -> tuple[float, int]:
    if pos + 8 > len(view):
        raise _corrupt(f"truncated float: 8 bytes needed, {len(view) - pos} left", pos)
    return _F64.unpack_from(view, pos)[0], pos + 8


def _dec_str(view: memoryview, pos: int, depth: int, budget: _Budget) -> tuple[str, int]:
    start = pos + 8
    if start > len(view):
        raise _corrupt(f"truncated length of str: 8 bytes needed, {len(view) - pos} left", pos)
    end = _take(view, start, _LEN.unpack_from(view, pos)[0], "str")
    try:
        return str(view[start:end], "utf-8"), end
    except UnicodeDecodeError as exc:
        raise _corrupt(f"invalid UTF-8 in str ({exc.reason})", start + exc.start) from None


def _dec_bytes(view: memoryview, pos: int, depth: int, budget: _Budget) -> tuple[bytes, int]:
    n, start = _read_len(view, pos, "bytes")
    end = _take(view, start, n, "bytes")
    return bytes(view[start:end]), end


def _dec_seq(view: memoryview, pos: int, depth: int, budget: _Budget) -> tuple[list | tuple, int]:
    at = pos - 1
    _check_depth(depth, at)
    n, pos = _read_len(view, pos, "list")
    if n > len(view) - pos:  # every item takes at least one byte
        raise _corrupt(f"{n} items claimed, {len(view) - pos} bytes left", at)
    items = []
    for _ in range(n):
        item, pos = _dec(view, pos, depth + 1, budget)
        items.append(item)
    return (items if view[at] == _TAG_L else tuple(items)), pos


def _dec_dict(view: memoryview, pos: int, depth: int, budget: _Budget) -> tuple[dict, int]:
    at = pos - 1
    _check_depth(depth, at)
    n, pos = _read_len(view, pos, "dict")
    if n > (len(view) - pos) // 10:  # every entry takes at least 10 bytes: an empty str key and a value
        raise _corrupt(f"{n} dict entries claimed, {len(view) - pos} bytes left", at)
    out = {}
    for _ in range(n):
        key_at = pos
        key, pos = _dec_str(view, _expect(view, pos, _TAG_S, "dict key"), depth, budget)
        if key in out:
            raise _corrupt(f"duplicate dict key {key!r:.60}", key_at)
        out[key], pos = _dec(view, pos, depth + 1, budget)
    return out, pos


def _dec_shape(view: memoryview, pos: int, itemsize: int, at: int,
               budget: _Budget) -> tuple[tuple[int, ...], int, int]:
    """An array's shape, its element count and the position after it; its size is what numpy allows."""
    ndim, pos = _read_len(view, _expect(view, pos, _TAG_U, "array shape"), "array shape")
    if ndim > _MAX_NDIM:
        raise _corrupt(f"array of {ndim} dimensions (at most {_MAX_NDIM})", at)
    shape = []
    bound = itemsize
    for _ in range(ndim):
        d, pos = _dec_int(view, _expect(view, pos, _TAG_I, "array dimension"), 0, budget)
        if d < 0:
            raise _corrupt(f"negative array dimension {d}", at)
        bound *= max(d, 1)
        if bound > _MAX_NBYTES:
            raise _corrupt("array larger than numpy allows", at)
        shape.append(d)
    return tuple(shape), math.prod(shape), pos


def _dec_array(view: memoryview, pos: int, depth: int, budget: _Budget) -> tuple[np.ndarray, int]:
    at = pos - 1
    name, pos = _dec_str(view, _expect(view, pos, _TAG_S, "array dtype"), depth, budget)
    dtype = _DTYPES.get(name)
    if dtype is None:
        raise _corrupt(f"array dtype {name!r:.40} is not a numeric dtype", at)
    shape, count, pos = _dec_shape(view, pos, dtype.itemsize, at, budget)
    n, pos = _read_len(view, pos, "array data")
    if n != count * dtype.itemsize:
        raise _corrupt(f"{n} bytes of data for {count} elements of {name}", at)
    end = _take(view, pos, n, "array data")
    arr = np.frombuffer(view[pos:end], dtype=dtype)
    if dtype.kind == "b" and n and arr.view(np.uint8).max() > 1:
        raise _corrupt("bool array holding a byte other than 0 or 1", at)
    return arr.reshape(shape).copy(), end


def _dec_ciphertexts(view: memoryview, pos: int, depth: int, budget: _Budget) -> tuple[np.ndarray, int]:
    at = pos - 1
    shape, count, pos = _dec_shape(view, pos, np.dtype(object).itemsize, at, budget)
    width, pos = _read_len(view, pos, "ciphertext width")
    if count == 0 and width != 1:
        raise _corrupt(f"ciphertext width {width} for 0 ciphertexts", at)
    if width == 0:  # the encoder's all-zero residues: no bytes bound the count, the message's allowance does
        budget.spend_zero_width(count, at)
        return np.zeros(count, dtype=object).reshape(shape), pos
    if count > (len(view) - pos) // width:
        raise _corrupt(f"{count} ciphertexts of {width} bytes claimed, {len(view) - pos} bytes left", at)
    end = pos + count * width
    raw = view[pos:end]
    if count and not np.frombuffer(raw, dtype=np.uint8)[::width].any():
        raise _corrupt(f"ciphertext width {width} is wider than the widest ciphertext", at)
    out = np.fromiter((int.from_bytes(raw[i:i + width], "big") for i in range(0, count * width, width)),
                      dtype=object, count=count)
    return out.reshape(shape), end


def _dec_registered(view: memoryview, pos: int, depth: int, budget: _Budget) -> tuple[Any, int]:
    at = pos - 1
    _check_depth(depth, at)
    name, pos = _dec_str(view, _expect(view, pos, _TAG_S, "wire type name"), depth, budget)
    from_wire = _WIRE_DECODERS.get(name)
    if from_wire is None:
        raise _corrupt(f"unknown wire type {name!r:.60}", at)
    value, pos = _dec(view, pos, depth + 1, budget)
    try:
        return from_wire(value), pos
    except WireError:
        raise
    except Exception as exc:  # the type's own validation: surfaces as the codec's one error
        raise _corrupt(f"wire type {name!r} rejected its value ({type(exc).__name__}: {exc})", at) from exc


_READERS: dict[int, Callable[[memoryview, int, int, _Budget], tuple[Any, int]]] = {
    b"N"[0]: _dec_none, b"T"[0]: _dec_true, b"F"[0]: _dec_false, b"I"[0]: _dec_int, b"D"[0]: _dec_float,
    b"S"[0]: _dec_str, b"B"[0]: _dec_bytes, b"L"[0]: _dec_seq, b"U"[0]: _dec_seq, b"M"[0]: _dec_dict,
    b"A"[0]: _dec_array, b"C"[0]: _dec_ciphertexts, b"X"[0]: _dec_registered,
}


def encode(payload: Any) -> tuple[bytes, int]:
    """Serialize a payload; returns the bytes and the number of ciphertexts in it."""
    buf = io.BytesIO()
    counter = _Counter()
    _enc(payload, buf, counter)
    return buf.getvalue(), counter.ciphertexts


def decode(data: bytes) -> Any:
    """Rebuild a payload from :func:`encode`'s bytes.

    The bytes are untrusted: decoding allocates at most about 30 times their length plus 512 KiB (see
    ``_ZERO_WIDTH_ALLOWANCE``), accepts at most :data:`MAX_DEPTH` levels of nesting and only what
    :func:`encode` writes, and fails only with :class:`WireError` (naming the byte offset), including when a
    registered type's ``from_wire`` rejects its value or `data` is not bytes.
    """
    if not isinstance(data, (bytes, bytearray)):
        raise WireError(f"a message is bytes, got a {type(data).__module__}.{type(data).__qualname__}")
    view = memoryview(data)
    value, pos = _dec(view, 0, 0, _Budget(len(view)))
    if pos != len(view):
        raise _corrupt(f"{len(view) - pos} trailing bytes after the value", pos)
    return value


# ---------------------------------------------------------------------------------------------------------
# network

EVALUATION = "eval/"
"""Tags starting with this are evaluation traffic (scoring the current model), counted apart from training."""

CONTROL = "ctl/"
"""Tags starting with this are control traffic (a party saying it has nothing to send in a round), counted
apart from the protocol's own messages so that per-iteration counts stay comparable with the papers'."""

DEFAULT_TIMEOUT = 600.0
"""Seconds a party waits for one message before the run fails (``timeout`` of an experiment block)."""

MAX_TIMEOUT = 7 * 24 * 3600.0
"""Longest ``timeout`` an experiment may set: 7 days. A wait must end at a time the platform's clocks can
represent (``threading.TIMEOUT_MAX``; ``timeout: 1e10`` made every Ray party die with "timestamp out of range
for platform time_t"), and no protocol step needs a week."""


class ProtocolError(RuntimeError):
    """A run that cannot go on: a party failed, died, or waited too long for a message. Names the party."""


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
        self._scheduler: _Scheduler | None = None
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
        self._scheduler = _Scheduler(list(programs))
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


class _Aborted(BaseException):
    """Raised inside a waiting program when another program failed: unwinds it without masking that error."""


class _Scheduler:
    """One program at a time, handed over only at a wait: the in-process transport's deterministic order."""

    def __init__(self, order: list[str]) -> None:
        self._order = order
        self._cv = threading.Condition()
        self._current: str | None = None
        self._waits: dict[str, tuple[Callable[[], bool], str]] = {}
        self._done: set[str] = set()
        self._error: BaseException | None = None

    def _runnable(self, name: str) -> bool:
        if name in self._done:
            return False
        wait = self._waits.get(name)
        return wait is None or wait[0]()

    def _hand_over(self, after: str) -> None:
        """Give the turn to the first program after `after` (cyclically) that can go on. Holds the lock."""
        i = self._order.index(after)
        for name in self._order[i + 1:] + self._order[:i + 1]:
            if self._runnable(name):
                self._current = name
                break
        else:
            self._current = None
            if len(self._done) < len(self._order) and self._error is None:
                waits = "; ".join(f"{n} waits for {w[1]}" for n, w in self._waits.items())
                self._error = ProtocolError(f"protocol deadlock: every unfinished party waits for a message "
                                            f"nobody will send ({waits})")
        self._cv.notify_all()

    def _await_turn(self, name: str) -> None:
        self._cv.wait_for(lambda: self._current == name or self._error is not None)
        if self._error is not None:
            raise _Aborted

    def wait(self, name: str, ready: Callable[[], bool], what: str) -> None:
        """Called by program `name` when what it needs (`what`) is not there: hand over until `ready()`."""
        with self._cv:
            self._waits[name] = (ready, what)
            self._hand_over(name)
            self._await_turn(name)
            del self._waits[name]

    def run(self, programs: dict[str, Callable[[], Any]]) -> dict[str, Any]:
        results: dict[str, Any] = {}

        def body(name: str, program: Callable[[], Any]) -> None:
            try:
                with self._cv:
                    self._await_turn(name)
                results[name] = program()
            except _Aborted:
                pass
            except BaseException as exc:  # noqa: BLE001 - re-raised by run() in the caller's thread
                with self._cv:
                    if self._error is None:
                        if hasattr(exc, "add_note"):  # Python >= 3.11
                            exc.add_note(f"(in the program of party {name!r})")
                        self._error = exc
            with self._cv:
                self._done.add(name)
                self._waits.pop(name, None)
                if self._current == name or self._error is not None:
                    self._hand_over(name)

        threads = [threading.Thread(target=body, args=item, name=f"party-{item[0]}", daemon=True)
                   for item in programs.items()]
        with self._cv:
            self._current = self._order[0]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        if self._error is not None:
            raise self._error
        return results


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
