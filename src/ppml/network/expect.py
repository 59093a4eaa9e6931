"""What a receiver expects of a peer's payload: checks that name the sender where a bad payload arrives.

The codec (:mod:`ppml.network.codec`) guarantees that a payload is made of plain values; it cannot know what the
protocol expects of them. A role program checks each value it receives from another party against what its
public facts say it must be (batch sizes, feature counts, row counts) before it uses it, with the functions
here: a short vector, an array of the wrong dtype or shape, a NaN or a value out of range then ends the run
with a :class:`~ppml.network.errors.ProtocolError` naming the sender, the message's tag and what was wrong, on
one bounded line, e.g. ``'host' sent 'share' of shape (50,), expected (1000,)`` or ``'agent2' sent 'theta'
holding NaN at index 3`` (rather than a ValueError deep in the receiver's arithmetic, which blames the
receiver). A field of a dict payload is named after the tag: ``'server' sent 'residual' with 'residual' of
shape (3,), expected (4,)``.

The checks only read: each returns the value it was given, unconverted, so an honest run's numbers are those
of a run without them.

Dtype kinds (`dtype`): ``"float"`` (numpy kind ``f``), ``"int"`` (``i``, ``u``), ``"bool"`` (``b``) and
``"number"`` (``b``, ``i``, ``u``, ``f``: labels, which a party may hold as booleans, integers or floats).
"""

from __future__ import annotations

from typing import Any, Iterable, Sequence

import numpy as np

from ppml.network.errors import ProtocolError

__all__ = ["array", "vector", "scalar", "integer", "flag", "text", "mapping", "DTYPES"]

DTYPES: dict[str, str] = {"float": "f", "int": "iu", "bool": "b", "number": "biuf"}
"""The dtype kinds a check accepts, by name: numpy ``dtype.kind`` letters."""

_NAMES = {"float": "a float", "int": "an integer", "bool": "a boolean", "number": "a numeric"}
_LIMIT = 60  # characters of a received value, a key or a type name quoted in a message


def _subject(sender: str, tag: str, what: str | None) -> str:
    base = f"{_short(sender)} sent {_short(tag)}"
    return base if what is None else f"{base} with {_short(what)}"


def _short(value: Any) -> str:
    """repr of `value`, at most :data:`_LIMIT` characters (a peer chooses it: keep messages bounded)."""
    text = repr(value)
    return text if len(text) <= _LIMIT else text[:_LIMIT - 3] + "..."


def _type(value: Any) -> str:
    return _short(type(value).__name__).strip("'")


def _fail(sender: str, tag: str, what: str | None, problem: str) -> ProtocolError:
    return ProtocolError(f"{_subject(sender, tag, what)} {problem}")


def _kind(dtype: str) -> str:
    if dtype not in DTYPES:
        raise ValueError(f"dtype must be one of {sorted(DTYPES)}, got {dtype!r}")
    return DTYPES[dtype]


def _number(value: Any) -> str:
    return f"{value:.6g}" if isinstance(value, (float, np.floating)) else _short(value)


def _at(flat: int, shape: tuple[int, ...]) -> str:
    """Where element `flat` of an array of `shape` is, for a message (nothing for a scalar)."""
    if not shape:
        return ""
    if len(shape) == 1:
        return f" at index {flat}"
    return f" at index {tuple(int(i) for i in np.unravel_index(flat, shape))}"


def _check_values(arr: np.ndarray, *, sender: str, tag: str, what: str | None, finite: bool,
                  low: float | None, high: float | None) -> None:
    if arr.size == 0 or arr.dtype.kind == "b":
        return
    if finite and arr.dtype.kind == "f":
        bad = ~np.isfinite(arr)
        if bad.any():
            at = int(np.flatnonzero(bad.ravel())[0])
            value = arr.ravel()[at]
            raise _fail(sender, tag, what, f"holding {'NaN' if np.isnan(value) else _number(value)}"
                                           f"{_at(at, arr.shape)}")
    if low is None and high is None:
        return
    out = np.zeros(arr.shape, dtype=bool)
    if low is not None:
        out |= arr < low
    if high is not None:
        out |= arr > high
    if out.any():  # NaN compares False: with finite=False it is let through
        at = int(np.flatnonzero(out.ravel())[0])
        bounds = f"[{'-inf' if low is None else _number(low)}, {'inf' if high is None else _number(high)}]"
        raise _fail(sender, tag, what, f"holding {_number(arr.ravel()[at])}{_at(at, arr.shape)}, "
                                       f"outside {bounds}")


def array(payload: Any, *, sender: str, tag: str, shape: Sequence[int | None], dtype: str = "float",
          finite: bool = True, low: float | None = None, high: float | None = None,
          what: str | None = None) -> np.ndarray:
    """`payload` as the numpy array the protocol expects, or a :class:`ProtocolError` naming `sender`.

    Parameters
    ----------
    payload : object
        What arrived.
    sender, tag : str
        Who sent it and the message's tag (named in the error).
    shape : sequence of int or None
        The exact shape; None in a dimension accepts any length there.
    dtype : {"float", "int", "bool", "number"}
        The dtype kind (:data:`DTYPES`).
    finite : bool, default True
        Refuse NaN and infinities (float arrays).
    low, high : float, optional
        Inclusive bounds on every element.
    what : str, optional
        The field of the message it is (a key of a dict payload).

    Returns
    -------
    ndarray
        `payload` itself, unconverted.

    Raises
    ------
    ProtocolError
        ``'<sender>' sent '<tag>' [with '<what>'] <problem>``: not an array, another dtype kind, another shape,
        a non-finite value or one out of range (with its index).
    """
    kind = _kind(dtype)
    expected = tuple(shape)
    if not isinstance(payload, np.ndarray):
        raise _fail(sender, tag, what, f"of type {_type(payload)}, expected {_NAMES[dtype]} array of shape "
                                       f"{_shape(expected)}")
    if payload.dtype.kind not in kind:
        raise _fail(sender, tag, what, f"of dtype {_short(str(payload.dtype)).strip(chr(39))}, expected "
                                       f"{_NAMES[dtype]} array")
    if payload.ndim != len(expected) or any(e is not None and n != e for n, e in zip(payload.shape, expected)):
        raise _fail(sender, tag, what, f"of shape {_shape(payload.shape)}, expected {_shape(expected)}")
    _check_values(payload, sender=sender, tag=tag, what=what, finite=finite, low=low, high=high)
    return payload


def _shape(shape: Sequence[int | None]) -> str:
    dims = ["*" if n is None else str(n) for n in shape[:8]] + (["..."] if len(shape) > 8 else [])
    return f"({dims[0]},)" if len(dims) == 1 else f"({', '.join(dims)})"


def vector(payload: Any, *, sender: str, tag: str, length: int | None, dtype: str = "float", finite: bool = True,
           low: float | None = None, high: float | None = None, what: str | None = None) -> np.ndarray:
    """A one-dimensional array of `length` elements (None: any); see :func:`array`."""
    return array(payload, sender=sender, tag=tag, shape=(length,), dtype=dtype, finite=finite, low=low,
                 high=high, what=what)


def scalar(payload: Any, *, sender: str, tag: str, finite: bool = True, low: float | None = None,
           high: float | None = None, what: str | None = None) -> float:
    """A real number (a Python or numpy float or int, not a bool); returned unconverted.

    Raises
    ------
    ProtocolError
        Another type, a non-finite value (unless `finite` is False) or one outside ``[low, high]``.
    """
    if isinstance(payload, (bool, np.bool_)) or not isinstance(payload, (int, float, np.integer, np.floating)):
        raise _fail(sender, tag, what, f"of type {_type(payload)}, expected a number")
    try:
        value = np.asarray(payload, dtype=float)
    except OverflowError:
        raise _fail(sender, tag, what, f"equal to {_integer(payload)}, beyond the range of a float") from None
    _check_values(value, sender=sender, tag=tag, what=what, finite=finite, low=low, high=high)
    return payload


def integer(payload: Any, *, sender: str, tag: str, low: int | None = None, high: int | None = None,
            what: str | None = None) -> int:
    """An integer (Python or numpy, not a bool) in ``[low, high]``; returned unconverted."""
    if isinstance(payload, (bool, np.bool_)) or not isinstance(payload, (int, np.integer)):
        raise _fail(sender, tag, what, f"of type {_type(payload)}, expected an integer")
    if (low is not None and payload < low) or (high is not None and payload > high):
        bounds = f"[{'-inf' if low is None else low}, {'inf' if high is None else high}]"
        raise _fail(sender, tag, what, f"equal to {_integer(payload)}, outside {bounds}")
    return payload


def flag(payload: Any, *, sender: str, tag: str, what: str | None = None) -> bool:
    """A boolean (Python or numpy); returned unconverted."""
    if not isinstance(payload, (bool, np.bool_)):
        raise _fail(sender, tag, what, f"of type {_type(payload)}, expected a boolean")
    return payload


def text(payload: Any, *, sender: str, tag: str, max_length: int | None = None, what: str | None = None) -> str:
    """A str of at most `max_length` characters; returned unconverted."""
    if not isinstance(payload, str):
        raise _fail(sender, tag, what, f"of type {_type(payload)}, expected a str")
    if max_length is not None and len(payload) > max_length:
        raise _fail(sender, tag, what, f"of {len(payload)} characters, expected at most {max_length}")
    return payload


def mapping(payload: Any, keys: Iterable[str], *, sender: str, tag: str, optional: Iterable[str] = (),
            what: str | None = None) -> dict:
    """A dict with every key of `keys`, and no key outside `keys` and `optional`; returned unconverted.

    Raises
    ------
    ProtocolError
        Not a dict, a missing key or an unexpected one (the first few named).
    """
    required = tuple(keys)
    if not isinstance(payload, dict):
        raise _fail(sender, tag, what, f"of type {_type(payload)}, expected a dict with keys "
                                       f"{_keys(required)}")
    missing = [k for k in required if k not in payload]
    if missing:
        raise _fail(sender, tag, what, f"without {_keys(missing)}")
    allowed = set(required) | set(optional)
    extra = [k for k in payload if k not in allowed]
    if extra:
        raise _fail(sender, tag, what, f"with unexpected {_keys(extra)}")
    return payload


def _integer(value: Any) -> str:
    """An integer a peer sent, written in bounded space (Python refuses to print very long ones)."""
    value = int(value)
    return str(value) if abs(value) < 10**18 else f"an integer of {value.bit_length()} bits"


def _keys(keys: Sequence[Any]) -> str:
    shown = ", ".join(_short(k) for k in list(keys)[:5])
    return shown + (f" and {len(keys) - 5} more" if len(keys) > 5 else "")
