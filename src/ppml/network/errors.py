"""The network's two errors: bytes that are not a message, and a run that cannot go on."""

from __future__ import annotations

__all__ = ["WireError", "ProtocolError"]


class WireError(TypeError, ValueError):
    """A payload that cannot be sent, or received bytes that are not a message :func:`encode` wrote."""


class ProtocolError(RuntimeError):
    """A run that cannot go on: a party failed, died, or waited too long for a message; a peer that is not who
    the protocol expects, or a link that broke. Names the party or the peer."""
