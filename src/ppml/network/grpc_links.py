"""Links carried by gRPC: one bidirectional stream per pair over mutual TLS (:mod:`ppml.network.links`).

The listener is a gRPC server requiring a client certificate from a CA it trusts; it reads the dialer's
identity from ``auth_context`` (subject-alternative names and common name). The dialer checks the listener's
certificate against the peer's identity (``grpc.ssl_target_name_override``). Frames are the gRPC messages of
the stream, at most :data:`~ppml.network.links.MAX_FRAME` bytes either way.
"""

from __future__ import annotations

import queue
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Iterator

from ppml.network.errors import ProtocolError
from ppml.network.links import CLOSE_TIMEOUT, MAX_FRAME, Link, Links

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
        credentials = grpc.ssl_channel_credentials(root_certificates=self._credentials.ca,
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
                last = f"{exc.code().name}: {exc.details()}"
                if any(word in (exc.details() or "").lower() for word in _HANDSHAKE):
                    channel.close()
                    raise ProtocolError(f"{self.me!r} could not open an authenticated link to {peer!r} at "
                                        f"{address} (its certificate must speak as {identity!r} and be signed by a "
                                        f"CA this party trusts, and this party's by one it trusts): {last}") from None
            if time.monotonic() > deadline:
                channel.close()
                raise ProtocolError(f"{self.me!r} could not reach {peer!r} at {address} within "
                                    f"{self._connect_timeout:g} s ({last})")
            time.sleep(0.05)
        link = self._register(_GrpcLink(peer, self._hello()))
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
            link = self._register(_GrpcLink(self._identify(names), self._hello()))
        except ProtocolError as exc:
            context.abort(self._grpc.StatusCode.PERMISSION_DENIED, str(exc))
        threading.Thread(target=self._receive, args=(link, frames), name=f"link-{self.me}-{link.peer}",
                         daemon=True).start()
        yield from link.frames()
