"""Links carried by gRPC: one bidirectional stream per pair over mutual TLS (:mod:`ppml.network.links`).

Trust is per peer (:func:`~ppml.network.tls.check_presented`). The listener is a gRPC server requiring a
client certificate from any CA it trusts (it cannot know who dials before the handshake); it reads the dialer's
identity from ``auth_context`` (subject-alternative names and common name) and accepts the stream only if that
peer's own CA signed the certificate (``x509_pem_cert``) and, where pinned, it has that peer's fingerprint; else
it ends the stream with ``PERMISSION_DENIED`` saying why. The dialer's channel trusts the peer's CA alone
(``root_certificates``) and checks the peer's identity (``grpc.ssl_target_name_override``). gRPC's Python API
does not show a dialer the listener's certificate: once the channel answered, the dialer reads it by a TLS
handshake of its own to the same address (verified the same way) and checks the pinned fingerprint on that
one; a handshake the channel refused is followed by an unverified one, to name the issuer presented. What
each peer presented is in :meth:`GrpcLinks.describe`. Frames are the gRPC messages of
the stream, at most :data:`~ppml.network.links.MAX_FRAME` bytes either way.
"""

from __future__ import annotations

import queue
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Iterator

from ppml.network.errors import ProtocolError
from ppml.network.links import CLOSE_TIMEOUT, MAX_FRAME, Link, Links, register_carrier, shorten
from ppml.network.tls_links import presented_by, refused_listener, tls_context

__all__ = ["GrpcLinks"]

SERVICE = "ppml.Link"

# what gRPC's details say when the TLS handshake refused a certificate (ours or the listener's): final, not retried
_HANDSHAKE = ("handshake", "certificate", "peer name", "ssl", "tls", "verification check", "socket closed")


def _options() -> list[tuple[str, Any]]:
    return [("grpc.max_send_message_length", MAX_FRAME), ("grpc.max_receive_message_length", MAX_FRAME),
            ("grpc.keepalive_time_ms", 30_000), ("grpc.keepalive_timeout_ms", 10_000),
            # a listener that is not up yet is tried again within 0.1-0.5 s, not gRPC's default 1 s and more
            ("grpc.initial_reconnect_backoff_ms", 100), ("grpc.min_reconnect_backoff_ms", 100),
            ("grpc.max_reconnect_backoff_ms", 500)]


class _GrpcLink(Link):
    def __init__(self, peer: str, hello: bytes) -> None:
        super().__init__(peer)
        self.out: queue.SimpleQueue[bytes | None] = queue.SimpleQueue()
        self.out.put(hello)
        self.channel: Any = None
        self.call: Any = None

    def frames(self) -> Iterator[bytes]:
        while True:
            frame = self.out.get()
            if frame is None:
                return
            yield frame

    def send(self, frame: bytes) -> None:
        self.out.put(frame)

    def end(self) -> None:
        self.out.put(None)

    def cancel(self) -> None:
        self.end()
        if self.channel is not None:
            self.call.cancel()

    def close(self) -> None:
        if self.channel is not None:
            self.channel.close()


class GrpcLinks(Links):
    """:class:`~ppml.network.links.Links` over gRPC bidirectional streams."""

    carrier = "grpc"

    def _listen(self, listen: str) -> str:
        import grpc

        self._grpc = grpc
        slots = len(self._dial) + len(self._accept) + 4
        self._server = grpc.server(ThreadPoolExecutor(max_workers=slots, thread_name_prefix=f"link-{self.me}"),
                                   options=_options(), maximum_concurrent_rpcs=slots)
        self._server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(
            SERVICE, {"Stream": grpc.stream_stream_rpc_method_handler(self._serve)}),))
        server_credentials = grpc.ssl_server_credentials([(self._credentials.key, self._credentials.certificate)],
                                                         root_certificates=self._credentials.ca,
                                                         require_client_auth=True)
        try:
            port = self._server.add_secure_port(listen, server_credentials)
        except RuntimeError as exc:
            port, why = 0, str(exc)
        else:
            why = "address in use or not this machine's"
        if not port:
            raise ProtocolError(f"{self.me!r} cannot listen at {listen} ({why})")
        self._server.start()
        return f"{listen.rsplit(':', 1)[0]}:{port}"

    def _stop(self) -> None:
        self._server.stop(grace=1.0).wait(CLOSE_TIMEOUT)

    def _open(self, peer: str, address: str, deadline: float) -> None:
        grpc = self._grpc
        identity = self._identities[peer]
        credentials = grpc.ssl_channel_credentials(root_certificates=self._credentials.ca_of(peer),
                                                   private_key=self._credentials.key,
                                                   certificate_chain=self._credentials.certificate)
        channel = grpc.secure_channel(address, credentials, options=_options() + [
            ("grpc.ssl_target_name_override", identity), ("grpc.default_authority", identity)])
        probe = channel.unary_unary(f"/{SERVICE}/Probe")
        last = "no answer"
        while True:  # the listener may not be up yet: try until the deadline, but a TLS refusal is final
            try:
                probe(b"", timeout=max(0.05, min(1.0, deadline - time.monotonic())), wait_for_ready=False)
                break
            except grpc.RpcError as exc:
                if exc.code() == grpc.StatusCode.UNIMPLEMENTED:  # the listener answered over an authenticated link
                    break
                last = shorten(f"{exc.code().name}: {exc.details()}")
                details = (exc.details() or "").lower()
                # a listener that closed the connection during the handshake (at its descriptor limit, or
                # holding too many connections) is tried again; a refusal is final
                if "endpoint closing" not in details and any(word in details for word in _HANDSHAKE):
                    channel.close()
                    raise ProtocolError(refused_listener(self, peer, address, last, alpn=["h2"])) from None
            if self._closed:
                channel.close()
                raise ProtocolError(f"{self.me!r} stopped linking to {peer!r}: its links are closed")
            if time.monotonic() > deadline:
                channel.close()
                raise ProtocolError(f"{self.me!r} could not reach {peer!r} at {address} within "
                                    f"{self._connect_timeout:g} s ({last})")
            time.sleep(0.05)
        context = tls_context(self._credentials, server=False, ca=self._credentials.ca_of(peer), alpn=["h2"])
        try:
            self.accept_certificate(peer, presented_by(address, identity, context=context))
            link = self._register(_GrpcLink(peer, self._hello()))
        except ProtocolError:
            channel.close()
            raise
        link.channel = channel
        link.call = channel.stream_stream(f"/{SERVICE}/Stream")(link.frames(), wait_for_ready=True)
        threading.Thread(target=self._receive, args=(link, link.call), name=f"link-{self.me}-{peer}",
                         daemon=True).start()

    def _serve(self, frames: Iterator[bytes], context: Any) -> Iterator[bytes]:
        """A peer's stream: accepted only from a certificate speaking as a peer expected to dial this party."""
        auth = context.auth_context()
        names = [v.decode("utf-8", "replace") for key in ("x509_subject_alternative_name", "x509_common_name")
                 for v in auth.get(key, ())]
        try:
            peer = self._identify(names)
            self.accept_certificate(peer, b"".join(auth.get("x509_pem_cert", ())))
            link = self._register(_GrpcLink(peer, self._hello()))
        except ProtocolError as exc:
            context.abort(self._grpc.StatusCode.PERMISSION_DENIED, str(exc))
        threading.Thread(target=self._receive, args=(link, frames), name=f"link-{self.me}-{link.peer}",
                         daemon=True).start()
        yield from link.frames()


register_carrier(GrpcLinks.carrier, GrpcLinks)
