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
- :mod:`~ppml.network.links`: the bytes between two parties over one mutually authenticated connection, moved
  by a carrier that registers itself with it when imported: :mod:`~ppml.network.tls_links` (TLS sockets) or
  :mod:`~ppml.network.grpc_links` (a gRPC stream).

No module here imports a ppml module outside this package but :mod:`ppml.config` (its ``ParamError``, for a
bad peers file); the launchers that start parties over these layers are above the algorithms, in
:mod:`ppml.launch`. Importing this package loads the codec and the in-process network only; the carriers
load when a launcher imports them (gRPC itself when a gRPC link opens).
"""

from ppml.network.codec import MAX_DEPTH, decode, encode, register_wire_type
from ppml.network.endpoint import (CARRIERS, CONTROL, DEFAULT_TIMEOUT, EVALUATION, MAX_TIMEOUT, Endpoint, Message,
                                   Network, traffic_kind)
from ppml.network.errors import ProtocolError, WireError
from ppml.network import expect

__all__ = ["Network", "Endpoint", "Message", "encode", "decode", "register_wire_type", "WireError", "ProtocolError",
           "EVALUATION", "CONTROL", "traffic_kind", "MAX_DEPTH", "DEFAULT_TIMEOUT", "MAX_TIMEOUT", "CARRIERS", "expect"]
