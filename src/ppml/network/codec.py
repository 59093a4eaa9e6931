"""The codec: payloads to bytes and back, the only form in which anything crosses between parties.

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
"""

from __future__ import annotations

import io
import math
import struct
from typing import Any, Callable

import numpy as np

from ppml.network.errors import WireError

__all__ = ["encode", "decode", "register_wire_type", "WireError", "MAX_DEPTH"]

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
