"""The wire codec as a network boundary: untrusted bytes decode only to what the encoder writes.

Every malformed message below must raise :class:`WireError` (naming the byte offset) and nothing else,
without allocating more than the message's own length warrants or recursing without bound.
"""

import struct
import tracemalloc

import numpy as np
import pytest

from ppml.crypto.paillier import EncryptedVector, PublicKey
from ppml.network.codec import _ZERO_WIDTH_ALLOWANCE, MAX_DEPTH, WireError, decode, encode, register_wire_type


class _Point:
    """A registered wire type whose from_wire validates like a real one (raising ValueError)."""

    def __init__(self, x: int, y: int) -> None:
        self.x, self.y = x, y

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Point) and (self.x, self.y) == (other.x, other.y)

    @staticmethod
    def from_wire(d: object) -> "_Point":
        if not isinstance(d, dict) or set(d) != {"x", "y"} or not all(type(v) is int for v in d.values()):
            raise ValueError(f"a point on the wire is a dict of ints x, y; got {d!r:.80}")
        return _Point(d["x"], d["y"])


register_wire_type(_Point, "tests.fuzz.Point", lambda p: {"x": p.x, "y": p.y}, _Point.from_wire)


def _q(n: int) -> bytes:
    return struct.pack("<Q", n)


def _int(v: int) -> bytes:
    return encode(v)[0]


def _ciphertexts(count: int, width: int) -> np.ndarray:
    rng = np.random.default_rng(count)
    return np.array([int.from_bytes(rng.bytes(width), "big") | (1 << (8 * width - 1)) for _ in range(count)],
                    dtype=object)


def _same(a: object, b: object) -> bool:
    """Equality that also compares types, dtypes, shapes and NaN bit patterns."""
    if type(a) is not type(b):
        return False
    if isinstance(a, np.ndarray):
        return a.dtype == b.dtype and a.shape == b.shape and (
            list(a.ravel()) == list(b.ravel()) if a.dtype == object else a.tobytes() == b.tobytes())
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if isinstance(a, dict):
        return list(a) == list(b) and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, float):
        return struct.pack("<d", a) == struct.pack("<d", b)
    return a == b


NUMERIC_DTYPES = [np.dtype(c).newbyteorder(o) for c in "?bBhHiIlLqQefdFD" for o in "<>"]

ROUNDTRIP_VALUES = [
    None, True, False, 0, 1, -1, 127, 128, -128, -129, 255, 256, 2**63, -(2**63), 2**300 + 1, -(2**300) + 7,
    0.0, -0.0, 1.5, -1.5e-300, float("inf"), float("-inf"), float("nan"),
    "", "x", "δ=1e-5 ✓ 𝔼", b"", b"\x00\xff" * 3,
    [], (), {}, [1, (2.0, "x"), {"k": [None]}], {"": 0, "a": {"b": ()}},
    np.zeros(0), np.zeros((0, 3)), np.zeros((2, 0, 4), dtype=np.int8),
    np.arange(12, dtype=np.float64).reshape(3, 4), np.arange(6, dtype=">i4").reshape(2, 3),
    np.array([True, False, True]), np.array([1 + 2j, -3j], dtype=np.complex64),
    np.empty(0, dtype=object), np.array(7, dtype=object), np.array([0, 0], dtype=object),
    np.array([0, 1, 2**2048 - 1], dtype=object), np.zeros((2, 3), dtype=int).astype(object),
    _ciphertexts(6, 32).reshape(2, 3),
    _Point(3, -4), [_Point(0, 0), {"p": _Point(2**80, 1)}],
]


@pytest.mark.parametrize("value", ROUNDTRIP_VALUES, ids=lambda v: type(v).__name__)
def test_every_supported_type_roundtrips_and_reencodes_to_the_same_bytes(value):
    data, _ = encode(value)
    out = decode(data)
    assert _same(out, value)
    assert encode(out)[0] == data


@pytest.mark.parametrize("dtype", NUMERIC_DTYPES, ids=str)
def test_every_numeric_dtype_roundtrips(dtype):
    arr = np.arange(5).astype(dtype)
    out = decode(encode(arr)[0])
    assert out.dtype == dtype and out.tobytes() == arr.tobytes()


def test_zero_dimensional_numeric_arrays_cross_with_shape_1():
    # The encoder writes np.ascontiguousarray(arr), at least 1-d; kept so byte counts stay as recorded.
    out = decode(encode(np.array(3.5))[0])
    assert out.shape == (1,) and out[0] == 3.5


def test_numpy_scalars_cross_as_plain_values():
    out = decode(encode([np.int64(-5), np.float32(0.5), np.bool_(True)])[0])
    assert out == [-5, 0.5, True] and [type(v) for v in out] == [int, float, bool]


REPRESENTATIVE = {
    "plain": {"none": None, "flag": False, "int": -(2**70), "f": 0.25, "s": "héllo", "b": b"\x01\x02",
              "nested": [1, (2, [3.0])]},
    "array": {"theta": np.linspace(-1, 1, 6).reshape(2, 3), "mask": np.array([True, False]),
              "idx": np.arange(3, dtype=np.int32)},
    "ciphertexts": {"n": 2**255 + 95, "scheme": "djn", "frac_bits": 20, "c": _ciphertexts(4, 64)},
    "registered": [_Point(1, 2), {"q": _Point(-3, 2**40)}],
}


@pytest.mark.parametrize("name", REPRESENTATIVE)
def test_every_truncation_raises_wire_error(name):
    data, _ = encode(REPRESENTATIVE[name])
    for cut in range(len(data)):
        with pytest.raises(WireError, match="at byte"):
            decode(data[:cut])


@pytest.mark.parametrize("name", REPRESENTATIVE)
def test_random_byte_flips_raise_wire_error_or_decode_canonically(name):
    """A mutated message is either rejected with WireError or accepted only if it is the encoding of what
    it decodes to (the codec has one encoding per value, so nothing non-canonical slips through)."""
    data, _ = encode(REPRESENTATIVE[name])
    rng = np.random.default_rng(sum(name.encode()))
    rejected = 0
    for _ in range(1000):
        buf = bytearray(data)
        for pos in rng.integers(0, len(buf), size=rng.integers(1, 4)):
            buf[pos] = int(rng.integers(0, 256))
        try:
            out = decode(bytes(buf))
        except WireError as exc:
            assert "at byte" in str(exc)
            rejected += 1
        else:
            assert encode(out)[0] == bytes(buf)
    assert rejected > 0


def test_random_byte_flips_in_paillier_messages_raise_only_wire_error():
    pk = PublicKey(3 * 2**1022 + 1, scheme="plaintext")
    payload = {"pk": pk, "grad": EncryptedVector(pk, [1, 2, 2**1000], 8),
               "zero": EncryptedVector(pk, [0, 0], 8)}
    data, n_ct = encode(payload)
    assert n_ct == 5 and decode(data)["pk"].n == pk.n
    rng = np.random.default_rng(7)
    for _ in range(1000):
        buf = bytearray(data)
        for pos in rng.integers(0, len(buf), size=rng.integers(1, 4)):
            buf[pos] = int(rng.integers(0, 256))
        try:
            decode(bytes(buf))
        except WireError:
            pass


def _peak_while_rejecting(data: bytes) -> int:
    tracemalloc.start()
    try:
        with pytest.raises(WireError, match="at byte"):
            decode(data)
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


HUGE_CLAIMS = {
    # 35 bytes: 'C', shape (2^31,), width 8, then 3 bytes of "ciphertexts"
    "2^31 ciphertexts": b"C" + b"U" + _q(1) + _int(2**31) + _q(8) + b"abc",
    "2^63 ciphertexts": b"C" + b"U" + _q(1) + _int(2**63) + _q(8) + b"abc",
    "2^31 x 2^31 ciphertexts": b"C" + b"U" + _q(2) + _int(2**31) * 2 + _q(1) + b"abc",
    "10^7 zero-width ciphertexts": b"C" + b"U" + _q(1) + _int(10**7) + _q(0),
    "2^64-1 wide ciphertexts": b"C" + b"U" + _q(1) + _int(1) + _q(2**64 - 1) + b"a",
    "2^31 floats": b"A" + encode("<f8")[0] + b"U" + _q(1) + _int(2**31) + _q(2**34) + b"abc",
    "2^31 floats, short length": b"A" + encode("<f8")[0] + b"U" + _q(1) + _int(2**31) + _q(8) + b"abcdefgh",
    "2^63 list items": b"L" + _q(2**63) + b"NN",
    "2^64-1 tuple items": b"U" + _q(2**64 - 1) + b"N",
    "2^40 dict entries": b"M" + _q(2**40) + encode("k")[0] + b"N",
    "2^63-byte str": b"S" + _q(2**63) + b"abc",
    "2^63-byte bytes": b"B" + _q(2**63) + b"abc",
    "2^63-byte int": b"I" + _q(2**63) + b"\x01",
    "2^63 dimensions": b"A" + encode("<f8")[0] + b"U" + _q(2**63) + _int(1),
    "65 dimensions": b"A" + encode("|u1")[0] + b"U" + _q(65) + _int(1) * 65 + _q(1) + b"a",
    "too big for numpy behind a zero axis": b"C" + b"U" + _q(3) + _int(0) + _int(2**40) * 2 + _q(1),
    "2^1000 array dimension": b"A" + encode("<f8")[0] + b"U" + _q(1) + _int(2**1000) + _q(0),
}


@pytest.mark.parametrize("name", HUGE_CLAIMS)
def test_oversized_claims_are_rejected_without_allocating(name):
    assert _peak_while_rejecting(HUGE_CLAIMS[name]) < 64 * 1024


def test_the_35_byte_message_of_the_issue():
    assert len(HUGE_CLAIMS["2^31 ciphertexts"]) == 35
    with pytest.raises(WireError, match="2147483648 ciphertexts of 8 bytes claimed, 3 bytes left"):
        decode(HUGE_CLAIMS["2^31 ciphertexts"])


def _nested(opener: bytes, depth: int, leaf: bytes = b"N") -> bytes:
    return opener * depth + leaf


@pytest.mark.parametrize("opener", [b"L" + _q(1), b"U" + _q(1), b"M" + _q(1) + encode("k")[0],
                                    b"X" + encode("tests.fuzz.Point")[0]],
                         ids=["list", "tuple", "dict", "registered"])
def test_deep_nesting_is_rejected_not_a_recursion_error(opener):
    with pytest.raises(WireError, match=f"nesting deeper than {MAX_DEPTH} levels at byte"):
        decode(_nested(opener, 100_000))


def test_nesting_up_to_the_limit_is_accepted():
    value: object = None
    for _ in range(MAX_DEPTH):
        value = [value]
    assert decode(encode(value)[0]) == value
    with pytest.raises(WireError, match="nesting deeper"):
        decode(encode([value])[0])


def _array(dtype: str, shape_items: bytes, ndim: int, data: bytes) -> bytes:
    return b"A" + encode(dtype)[0] + b"U" + _q(ndim) + shape_items + _q(len(data)) + data


MALFORMED = {
    "empty message": (b"", "truncated"),
    "unknown tag": (b"Z", "unknown type code b'Z' at byte 0"),
    "unknown tag inside a list": (b"L" + _q(2) + b"N?", "unknown type code b'\\?' at byte 10"),
    "trailing bytes": (b"NN", "1 trailing bytes after the value at byte 1"),
    "trailing bytes after a dict": (encode({"a": 1})[0] + b"\x00", "trailing bytes"),
    "bad UTF-8": (b"S" + _q(3) + b"a\xffb", "invalid UTF-8 in str .* at byte 10"),
    "overlong UTF-8": (b"S" + _q(2) + b"\xc0\xaf", "invalid UTF-8"),
    "UTF-8 surrogate": (b"S" + _q(3) + b"\xed\xa0\x80", "invalid UTF-8"),
    "bad UTF-8 in a dict key": (b"M" + _q(1) + b"S" + _q(1) + b"\x80N", "invalid UTF-8"),
    "truncated float": (b"D\x00\x00", "truncated float"),
    "non-canonical int (leading zero)": (b"I" + _q(2) + b"\x00\x05", "non-canonical 2-byte int at byte 0"),
    "non-canonical int (sign extension)": (b"I" + _q(2) + b"\xff\xff", "non-canonical"),
    "zero-length int": (b"I" + _q(0), "non-canonical 0-byte int"),
    "dict key not a str": (b"M" + _q(1) + _int(1) + b"N", "dict key is not a 'S' value at byte 9"),
    "dict key bytes": (b"M" + _q(1) + encode(b"k")[0] + b"N", "dict key is not a 'S'"),
    "duplicate dict key": (b"M" + _q(2) + (encode("k")[0] + b"N") * 2, "duplicate dict key 'k' at byte 20"),
    "dtype not numeric": (_array("|O", _int(1), 1, b"\x00" * 8), "dtype '|O' is not a numeric dtype"),
    "dtype bytes": (_array("|S3", _int(1), 1, b"abc"), "not a numeric dtype"),
    "dtype datetime": (_array("<M8[s]", _int(1), 1, b"\x00" * 8), "not a numeric dtype"),
    "dtype garbage": (_array("<f8\x00", _int(1), 1, b"\x00" * 8), "not a numeric dtype"),
    "dtype not a str": (b"A" + _int(8) + b"U" + _q(0) + _q(8) + b"\x00" * 8,
                        "array dtype is not a 'S' value"),
    "negative shape": (_array("<f8", _int(-1), 1, b""), "negative array dimension -1"),
    "shape not a tuple": (b"A" + encode("<f8")[0] + b"L" + _q(1) + _int(1) + _q(8) + b"\x00" * 8,
                          "array shape is not a 'U' value"),
    "shape entry a float": (b"A" + encode("<f8")[0] + b"U" + _q(1) + encode(1.0)[0] + _q(8) + b"\x00" * 8,
                            "array dimension is not a 'I' value"),
    "data length not shape x itemsize": (_array("<f8", _int(2), 1, b"\x00" * 12),
                                         "12 bytes of data for 2 elements"),
    "bool array holding 2": (_array("|b1", _int(2), 1, b"\x01\x02"),
                             "bool array holding a byte other than 0 or 1"),
    # a 30-byte message may decode to 2^16 + 30 zero-width ciphertexts
    "zero-width ciphertexts past the allowance": (b"C" + b"U" + _q(1) + _int(2**16 + 31) + _q(0),
                                                  "65567 zero-width ciphertexts, more than the 65566 this "
                                                  "message has left at byte 0"),
    "zero-width ciphertexts followed by data": (b"C" + b"U" + _q(1) + _int(2) + _q(0) + b"\x01\x02",
                                                "trailing"),
    "empty ciphertexts of width 2": (b"C" + b"U" + _q(1) + _int(0) + _q(2), "ciphertext width 2 for 0"),
    "ciphertexts wider than needed": (b"C" + b"U" + _q(1) + _int(2) + _q(2) + b"\x00\x01\x00\x02",
                                      "wider than the widest ciphertext"),
    "ciphertext shape negative": (b"C" + b"U" + _q(1) + _int(-2) + _q(1) + b"\x01\x01",
                                  "negative array dimension"),
    "unknown wire type": (b"X" + encode("os.system")[0] + encode("rm")[0],
                          "unknown wire type 'os.system' at byte 0"),
    "wire type name not a str": (b"X" + encode(b"tests.fuzz.Point")[0] + b"N", "wire type name is not a 'S'"),
    "from_wire rejects its value": (b"X" + encode("tests.fuzz.Point")[0] + encode({"x": 1})[0],
                                    "'tests.fuzz.Point' rejected its value \\(ValueError: a point on the"),
    "from_wire gets a non-dict": (b"X" + encode("tests.fuzz.Point")[0] + b"N", "rejected its value"),
    "public key from_wire rejects an even modulus": (
        b"X" + encode("ppml.paillier.PublicKey")[0]
        + encode({"n": 2**1024, "scheme": "plaintext", "h_s": None})[0],
        "rejected its value \\(.*the modulus n must be an odd integer"),
    "encrypted vector with missing keys": (
        b"X" + encode("ppml.paillier.EncryptedVector")[0] + encode({"c": 1})[0],
        "rejected its value \\(CiphertextError"),
}


@pytest.mark.parametrize("name", MALFORMED)
def test_malformed_messages_raise_wire_error_naming_the_offset(name):
    data, match = MALFORMED[name]
    with pytest.raises(WireError, match=match) as info:
        decode(data)
    assert "at byte" in str(info.value)


def test_wire_error_is_still_a_type_error_and_a_value_error():
    assert issubclass(WireError, TypeError) and issubclass(WireError, ValueError)


# --- allocation bounded by the message's length, whatever its frames claim ----------------------------------

K = 32  # bytes of decoded objects per byte of message: measured at most ~20 (2-byte ciphertexts)
SLACK = 8 * _ZERO_WIDTH_ALLOWANCE + 128 * 1024  # the zero-width allowance's pointers, and tracemalloc's own


def _peak(data: bytes) -> int:
    """Peak bytes allocated while decoding `data`, whether it decodes or is rejected (only with WireError)."""
    tracemalloc.start()
    try:
        try:
            decode(data)
        except WireError as exc:
            assert "at byte" in str(exc)
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def _zero_width(count: int, ndim: int = 1) -> bytes:
    """A ciphertext-array frame of width 0 claiming `count` elements (as `ndim` axes)."""
    return b"C" + b"U" + _q(ndim) + _int(count) + _int(1) * (ndim - 1) + _q(0)


def _list(items: list[bytes], tag: bytes = b"L") -> bytes:
    return tag + _q(len(items)) + b"".join(items)


def _dict(values: list[bytes]) -> bytes:
    return b"M" + _q(len(values)) + b"".join(encode(f"k{i}")[0] + v for i, v in enumerate(values))


def _vector(c: bytes) -> bytes:
    """An EncryptedVector frame (plaintext scheme) whose ciphertexts are the frame `c`."""
    return (b"X" + encode("ppml.paillier.EncryptedVector")[0] + b"M" + _q(4)
            + encode("n")[0] + _int(2**1023 + 1) + encode("scheme")[0] + encode("plaintext")[0]
            + encode("frac_bits")[0] + _int(20) + encode("c")[0] + c)


def _nest(frame: bytes, depth: int) -> bytes:
    return (b"L" + _q(1)) * depth + frame


ALLOCATION_CASES = {
    # the issue's message: 60 frames of 26 bytes, each claiming 2^20 elements (512 MB decoded before)
    "60 zero-width frames of 2^20 in 1.6 KB": _list([_zero_width(2**20)] * 60),
    "8 zero-width frames of 2^20": _list([_zero_width(2**20)] * 8),
    "zero-width frames in a tuple": _list([_zero_width(2**14)] * 20, b"U"),
    "zero-width frames in a dict": _dict([_zero_width(2**14)] * 20),
    "zero-width frames nested 90 deep": _list([_nest(_zero_width(2**14), 90)] * 20),
    "zero-width frames as 3-d arrays": _list([_zero_width(2**14, ndim=3)] * 20),
    "zero-width frames in encrypted vectors": _list([_vector(_zero_width(2**14))] * 20),
    "zero-width frames behind a valid one": _list([_zero_width(2**15)] + [_zero_width(2**17)] * 20),
    "many small zero-width frames": _list([_zero_width(1000)] * 2000),
    "2-byte ciphertexts": b"C" + b"U" + _q(1) + _int(20_000) + _q(2) + b"\x01\x01" * 20_000,
    "2-byte ciphertexts, one frame each": _list([b"C" + b"U" + _q(0) + _q(2) + b"\x01\x01"] * 5_000),
    "Nones in a tuple": _list([b"N"] * 50_000, b"U"),
    "empty lists": _list([b"L" + _q(0)] * 20_000),
    "empty dicts": _list([b"M" + _q(0)] * 20_000),
    "dict of short keys": encode({f"{i:x}": None for i in range(20_000)})[0],
    "zero-size arrays": _list([_array("|i1", _int(0), 1, b"")] * 5_000),
    "zero-size arrays of 20 axes": _list([_array("<f8", _int(0) + _int(8) * 19, 20, b"")] * 500),
    "arrays of 64 axes": _list([_array("<f8", _int(1) * 64, 64, b"\x00" * 8)] * 200),
    "0-d arrays": _list([_array("|i1", b"", 0, b"\x01")] * 5_000),
    "nested lists at the depth limit": _list([_nest(b"N", MAX_DEPTH - 2)] * 200),
    "floats": encode([0.5] * 20_000)[0],
    "2-byte ints": encode([300] * 20_000)[0],
    "2-char strs": encode(["ab"] * 20_000)[0],
    "4-byte UTF-8": encode("𝔼" * 20_000)[0],
    "registered values": encode([_Point(1000, 1000)] * 5_000)[0],
}


@pytest.mark.parametrize("name", ALLOCATION_CASES)
def test_decoding_allocates_at_most_a_multiple_of_the_message_length(name):
    data = ALLOCATION_CASES[name]
    assert _peak(data) <= K * len(data) + SLACK


def test_the_zero_width_allowance_is_per_message_not_per_frame():
    one = _list([_zero_width(_ZERO_WIDTH_ALLOWANCE)])
    assert decode(one)[0].shape == (_ZERO_WIDTH_ALLOWANCE,)  # one long all-zero vector still decodes
    with pytest.raises(WireError, match="zero-width ciphertexts, more than the .* this message has left"):
        decode(_list([_zero_width(_ZERO_WIDTH_ALLOWANCE // 2 + 100)] * 3))
    # what the encoder writes for all-zero vectors of every experiment's length decodes as before
    zeros = [np.zeros(3000, dtype=int).astype(object)] * 10
    data, n_ct = encode(zeros)
    assert n_ct == 30_000 and all(_same(a, b) for a, b in zip(decode(data), zeros))


def test_random_nestings_of_repeated_frames_stay_within_the_bound():
    rng = np.random.default_rng(18)
    leaves = [_zero_width(2**12), _zero_width(2**16), b"C" + b"U" + _q(1) + _int(0) + _q(1), b"N", _int(300),
              encode(0.5)[0], _array("|i1", _int(0), 1, b""),
              b"C" + b"U" + _q(1) + _int(4) + _q(2) + b"\x01\x01" * 4]

    def frame(depth: int) -> bytes:
        kind = rng.integers(0, 4) if depth < 6 else 0
        if kind == 0:
            return leaves[rng.integers(len(leaves))]
        items = [frame(depth + 1) for _ in range(rng.integers(1, 12))]
        if kind == 3:
            return _dict(items)
        return _list(items, b"L" if kind == 1 else b"U")

    for _ in range(30):
        data = frame(0)
        assert _peak(data) <= K * len(data) + SLACK


def test_a_message_that_is_not_bytes_is_a_wire_error():
    for value in ("N", 7, None, [b"N"]):
        with pytest.raises(WireError, match="a message is bytes, got a builtins"):
            decode(value)
