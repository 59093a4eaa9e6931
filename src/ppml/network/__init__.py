"""The only path between parties, in layers; each layer uses only the ones below it.

- :mod:`~ppml.network.codec`: payloads to bytes and back; received bytes are untrusted (bounded decoding,
  only :class:`WireError`).
- :mod:`~ppml.network.expect`: what a receiver expects of a peer's payload (type, dtype, shape, finite,
  range); a payload that is not raises :class:`ProtocolError` naming its sender and tag.
- :mod:`~ppml.network.endpoint`: :class:`Network` and :class:`Endpoint`: names, the graph, traffic records per
  tag and role, timeouts; the in-process transport, run in the deterministic order of
  :mod:`~ppml.network.scheduler`.
- :mod:`~ppml.network.peer`: one party's side of a network whose peers are other processes: per-sender order
  and bounds on what is held.
- :mod:`~ppml.network.tls` and :mod:`~ppml.network.peers`: certificates and the peers file.
- :mod:`~ppml.network.links`: the bytes between two parties over one mutually authenticated connection (TLS
  sockets or a gRPC stream).
- Launchers: :mod:`~ppml.network.ray_launcher` (``transport: ray``), :mod:`~ppml.network.party` (one party of
  ``transport: grpc``, ``python -m ppml.party``) and :mod:`~ppml.network.local` (every party of a grpc run
  as a process on this machine).

Importing this package loads the codec and the in-process network only; gRPC and Ray load with their layers.
"""

from ppml.network.codec import MAX_DEPTH, decode, encode, register_wire_type
from ppml.network.endpoint import (CARRIERS, CONTROL, DEFAULT_TIMEOUT, EVALUATION, MAX_TIMEOUT, Endpoint, Message,
                                   Network, traffic_kind)
from ppml.network.errors import ProtocolError, WireError
from ppml.network import expect

__all__ = ["Network", "Endpoint", "Message", "encode", "decode", "register_wire_type", "WireError", "ProtocolError",
           "EVALUATION", "CONTROL", "traffic_kind", "MAX_DEPTH", "DEFAULT_TIMEOUT", "MAX_TIMEOUT", "CARRIERS", "expect"]
