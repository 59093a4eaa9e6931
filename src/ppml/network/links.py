"""Links: the bytes between two parties, over one mutually authenticated gRPC stream per pair.

Each party listens on one address (a gRPC server with mutual TLS: it requires a client certificate from a
CA it trusts) and opens a bidirectional stream to every peer after it in the run's address order; the peers
before it open theirs to it. So each pair shares one long-lived connection, encrypted and authenticated both
ways:

- the dialer checks that the listener's certificate speaks as the peer it dialed (TLS host-name check against
  the peer's expected identity, never the address);
- the listener reads the dialer's identity from its certificate (``auth_context``: subject-alternative names
  and common name) and accepts the stream only from a peer it expects to dial it, once.

Nothing a sender writes says who it is: every message on a stream is the authenticated peer's. A stream
carries frames encoded by the codec (so decoding is bounded): first ``("hello", session)`` from each side,
which must match (the same experiment, parameters and seed), then ``("m", [(tag, seq, bytes), ...])``, one
frame per batch of messages, and at the end ``("bye",)`` or ``("abort", reason)``. A party batches what it
sends to one peer until its program may block on a receive (:meth:`Links.flush`, called by
:class:`~ppml.network.peer.PeerNetwork` before every receive) or the batch reaches :data:`BATCH_BYTES`.

Bounds and faults: a frame is at most :data:`MAX_FRAME` bytes (gRPC refuses larger ones on both sides);
what a receiver holds per sender is bounded by the peer network; connecting has :data:`CONNECT_TIMEOUT`
(an unreachable peer is named with its address; a TLS failure — a certificate from another CA, a wrong name —
is reported as soon as the handshake fails); a stream that breaks before the peer said bye, a refused
identity, a hello from another run, or a malformed frame ends the run with a
:class:`~ppml.network.ProtocolError` naming the peer.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Iterator

from ppml.network.codec import decode, encode
from ppml.network.errors import ProtocolError, WireError
from ppml.network.peer import HELD_BYTES, PeerNetwork
from ppml.network.tls import Credentials

log = logging.getLogger(__name__)

__all__ = ["Links", "CONNECT_TIMEOUT", "MAX_FRAME", "BATCH_BYTES"]

SERVICE = "ppml.Link"

CONNECT_TIMEOUT = 60.0
"""Seconds to open every link of a run (a peer on the same network answers within a second)."""

MAX_FRAME = HELD_BYTES + 2**20
"""Largest frame a link carries: what a receiver may hold from one sender, plus room for the framing."""

BATCH_BYTES = 4 * 2**20
"""A batch for one peer is sent when it reaches this many bytes, even if the program has not blocked."""

CLOSE_TIMEOUT = 10.0
"""Seconds to let the streams end after every peer said bye."""

_HANDSHAKE = ("handshake", "certificate", "peer name", "ssl", "tls")


def _options() -> list[tuple[str, Any]]:
    return [("grpc.max_send_message_length", MAX_FRAME), ("grpc.max_receive_message_length", MAX_FRAME),
            ("grpc.keepalive_time_ms", 30_000), ("grpc.keepalive_timeout_ms", 10_000)]


class _Link:
    """One peer's stream: what waits to be sent, and what is known of its state."""

    __slots__ = ("peer", "out", "batch", "batch_bytes", "hello", "bye", "done", "error", "channel", "call")

    def __init__(self, peer: str) -> None:
        self.peer = peer
        self.out: queue.SimpleQueue[bytes | None] = queue.SimpleQueue()
        self.batch: list[tuple[str, int, bytes]] = []
        self.batch_bytes = 0
        self.hello = threading.Event()
        self.bye = threading.Event()
        self.done = threading.Event()
        self.error: str | None = None
        self.channel: Any = None
        self.call: Any = None


class Links:
    """This party's links to its peers for one run.

    Parameters
    ----------
    network : PeerNetwork
        This party's side of the network: sends go out through :meth:`post`; what arrives is delivered to it.
    credentials : Credentials
        This party's certificate and key, and the CA certificates it trusts.
    identities : dict of str to str
        For every address of the run other than this party: the name its certificate must speak as.
    listen : str
        ``host:port`` to listen at (port 0: any free port; :attr:`address` says which).
    session : str
        What both ends of a link must agree on (the experiment, a digest of its parameters, the seed).
    pairs : set of frozenset, optional
        The pairs that may talk (a graph's edges); every pair when None.
    """

    def __init__(self, network: PeerNetwork, credentials: Credentials, identities: dict[str, str], *, listen: str,
                 session: str, pairs: set[frozenset] | None = None,
                 connect_timeout: float = CONNECT_TIMEOUT) -> None:
        import grpc

        self._grpc = grpc
        self.me = network._me
        self._network = network
        self._credentials = credentials
        self._identities = dict(identities)
        self._session = session
        self._connect_timeout = float(connect_timeout)
        order = list(network.names)
        mine = order.index(self.me)
        peers = [n for n in order if n != self.me and (pairs is None or frozenset((n, self.me)) in pairs)]
        self._dial = [n for n in peers if order.index(n) > mine]
        self._accept = [n for n in peers if order.index(n) < mine]
        self._links: dict[str, _Link] = {}
        self._lock = threading.Lock()
        self._refused: list[str] = []
        self._closed = False
        self._server = grpc.server(ThreadPoolExecutor(max_workers=len(peers) + 4, thread_name_prefix=f"link-{self.me}"),
                                   options=_options(), maximum_concurrent_rpcs=len(peers) + 4)
        self._server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(
            SERVICE, {"Stream": grpc.stream_stream_rpc_method_handler(self._serve)}),))
        server_credentials = grpc.ssl_server_credentials([(credentials.key, credentials.certificate)],
                                                         root_certificates=credentials.ca, require_client_auth=True)
        try:
            port = self._server.add_secure_port(listen, server_credentials)
        except RuntimeError as exc:
            port, why = 0, str(exc)
        else:
            why = "address in use or not this machine's"
        if not port:
            raise ProtocolError(f"{self.me!r} cannot listen at {listen} ({why})")
        self.address = f"{listen.rsplit(':', 1)[0]}:{port}"
        self._server.start()
        network.attach(self.post, self.flush)

    # -- opening ------------------------------------------------------------------------------------------

    def connect(self, addresses: dict[str, str]) -> None:
        """Open the links this party dials, and wait until every link of the run has said hello.

        Raises
        ------
        ProtocolError
            Naming the peer and its address, when it cannot be reached or refuses this party (or this party
            refuses it) within the connect timeout.
        """
        deadline = time.monotonic() + self._connect_timeout
        for peer in self._dial:
            if peer not in addresses:
                raise ProtocolError(f"{self.me!r} has no address for {peer!r}")
            self._open(peer, addresses[peer], deadline)
        for peer in self._dial + self._accept:
            while True:
                link = self._links.get(peer)
                if link is not None and link.error is not None:
                    raise ProtocolError(link.error)
                if link is not None and link.hello.wait(0.01):
                    break
                if time.monotonic() > deadline:
                    refused = f"; refused: {'; '.join(self._refused)}" if self._refused else ""
                    raise ProtocolError(f"{peer!r} did not link to {self.me!r} (listening at {self.address}) within "
                                        f"{self._connect_timeout:g} s{refused}")

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
        link = self._register(peer)
        link.channel = channel
        link.call = channel.stream_stream(f"/{SERVICE}/Stream")(self._outgoing(link), wait_for_ready=True)
        threading.Thread(target=self._receive, args=(link, link.call), name=f"link-{self.me}-{peer}",
                         daemon=True).start()

    def _register(self, peer: str) -> _Link:
        with self._lock:
            if peer in self._links or self._closed:
                raise ProtocolError(f"{peer!r} opened a second link to {self.me!r}")
            link = self._links[peer] = _Link(peer)
            return link

    def _serve(self, frames: Iterator[bytes], context: Any) -> Iterator[bytes]:
        """A peer's stream: accepted only from a certificate speaking as a peer expected to dial this party."""
        auth = context.auth_context()
        names = [v.decode("utf-8", "replace") for key in ("x509_subject_alternative_name", "x509_common_name")
                 for v in auth.get(key, ())]
        peer = next((p for p in self._accept if self._identities[p] in names), None)
        if peer is None:
            why = (f"{self.me!r} refused a link from a certificate speaking as {names}: not a peer that links to "
                   f"it ({', '.join(repr(self._identities[p]) for p in self._accept) or 'none'})")
            self._refused.append(why)
            log.warning("%s", why)
            context.abort(self._grpc.StatusCode.PERMISSION_DENIED, why)
        try:
            link = self._register(peer)
        except ProtocolError as exc:
            self._refused.append(str(exc))
            context.abort(self._grpc.StatusCode.ALREADY_EXISTS, str(exc))
        link.call = context
        threading.Thread(target=self._receive, args=(link, frames), name=f"link-{self.me}-{peer}",
                         daemon=True).start()
        yield from self._outgoing(link)

    # -- moving bytes -------------------------------------------------------------------------------------

    def _outgoing(self, link: _Link) -> Iterator[bytes]:
        yield encode(("hello", self._session))[0]
        while True:
            frame = link.out.get()
            if frame is None:
                return
            yield frame

    def _receive(self, link: _Link, frames: Iterator[bytes]) -> None:
        grpc = self._grpc
        try:
            for raw in frames:
                self._on_frame(link, raw)
            if not link.bye.is_set():
                self._broken(link, "it closed the link before it finished")
        except grpc.RpcError as exc:
            if not link.bye.is_set():  # a server's stream of a peer that vanished raises a bare RpcError
                code = exc.code().name if hasattr(exc, "code") else "CANCELLED"
                details = (exc.details() if hasattr(exc, "details") else str(exc)) or "the stream ended abruptly"
                self._broken(link, f"{code}: {details}")
        except (WireError, ProtocolError) as exc:
            self._broken(link, str(exc))
            self._cancel(link)
        finally:
            link.done.set()

    def _on_frame(self, link: _Link, raw: bytes) -> None:
        frame = decode(raw)
        kind = frame[0] if isinstance(frame, tuple) and frame and isinstance(frame[0], str) else None
        if kind == "hello" and len(frame) == 2:
            if frame[1] != self._session:
                raise ProtocolError(f"{link.peer!r} is in another run or has other parameters (its session "
                                    f"{str(frame[1])[:80]!r}, this party's {self._session!r})")
            link.hello.set()
        elif not link.hello.is_set():
            raise WireError(f"{link.peer!r} sent a {kind!r} frame before its hello")
        elif kind == "m" and len(frame) == 2 and isinstance(frame[1], list):
            for item in frame[1]:
                if not (isinstance(item, tuple) and len(item) == 3):
                    raise WireError(f"{link.peer!r} sent a malformed message entry")
                self._network.deliver(link.peer, *item)
        elif kind == "bye" and len(frame) == 1:
            link.bye.set()
        elif kind == "abort" and len(frame) == 2 and isinstance(frame[1], str):
            link.error = f"{link.peer!r} stopped ({frame[1][:500]})"
            self._network.abort(link.error)
            link.bye.set()
        else:
            raise WireError(f"{link.peer!r} sent a frame that is not one a link carries ({kind!r:.40})")

    def _broken(self, link: _Link, why: str) -> None:
        if link.error is None:
            link.error = f"the link to {link.peer!r} broke ({why})"
        self._network.abort(link.error)

    def _cancel(self, link: _Link) -> None:
        link.out.put(None)
        try:
            if link.channel is not None:
                link.call.cancel()
        except Exception:  # noqa: BLE001 - already ended
            pass

    def post(self, dst: str, tag: str, seq: int, data: bytes) -> None:
        """Queue one message for `dst`; it leaves with the batch (see :meth:`flush`)."""
        link = self._links.get(dst)
        if link is None:
            raise ProtocolError(f"{self.me!r} has no link to {dst!r}")
        if len(data) > HELD_BYTES:
            raise ProtocolError(f"{self.me!r} cannot send a {len(data)}-byte {tag!r} to {dst!r}: a link carries "
                                f"messages of at most {HELD_BYTES} bytes")
        with self._lock:
            link.batch.append((tag, seq, data))
            link.batch_bytes += len(data)
            if link.batch_bytes >= BATCH_BYTES:
                self._send_batch(link)

    def flush(self) -> None:
        """Send every peer's batch: called before each receive, when the program may block."""
        with self._lock:
            for link in self._links.values():
                if link.batch:
                    self._send_batch(link)

    def _send_batch(self, link: _Link) -> None:
        link.out.put(encode(("m", link.batch))[0])
        link.batch, link.batch_bytes = [], 0

    # -- closing ------------------------------------------------------------------------------------------

    def close(self, error: str | None = None, timeout: float = 60.0) -> None:
        """End every link: say bye (or abort with `error`), wait for every peer's bye, then stop.

        Raises
        ------
        ProtocolError
            When the run ended well here but a peer failed, broke its link or did not finish within `timeout`.
        """
        self.flush()
        with self._lock:
            self._closed = True
            links = list(self._links.values())
        last = encode(("bye",) if error is None else ("abort", error))[0]
        for link in links:
            link.out.put(last)
        problem = None
        if error is None:
            deadline = time.monotonic() + timeout
            for link in links:
                if not link.bye.wait(max(0.0, deadline - time.monotonic())) and link.error is None:
                    link.error = f"{link.peer!r} did not finish within {timeout:g} s of {self.me!r}"
                if link.error is not None and problem is None:
                    problem = link.error
        for link in links:
            link.out.put(None)
        deadline = time.monotonic() + CLOSE_TIMEOUT
        for link in links:
            link.done.wait(max(0.0, deadline - time.monotonic()))
        for link in links:
            if link.channel is not None:
                link.channel.close()
        self._server.stop(grace=1.0).wait(CLOSE_TIMEOUT)
        if problem is not None:
            raise ProtocolError(problem)

    def describe(self) -> dict[str, Any]:
        """This party's identity and address, for comm.json."""
        return {"identity": self._credentials.name, "address": self.address}


def run_program(links: Links, program: Any, party: Any, kwargs: dict[str, Any], *, timeout: float
                ) -> dict[str, Any]:
    """Run one role program over its links and close them: what the program returned, and this party's records.

    The links close with bye when the program returns, after every peer has finished too (waiting at most
    twice the run's `timeout` plus 10 s: a peer still running gives up its own waits within `timeout`, so its
    error, not this party's, names what went wrong), and with abort, naming what the program raised, when it
    fails; the error is then raised here unchanged.
    """
    close_timeout = 2 * timeout + 10.0
    from threadpoolctl import threadpool_limits

    net = links._network
    name = links.me
    start = time.perf_counter()
    try:
        # one BLAS thread, as the train stage runs: the same floating-point results as in-process
        with threadpool_limits(limits=1):
            result = program(net.endpoint(name), party, **kwargs)
    except BaseException as exc:
        links.close(error=f"{type(exc).__name__}: {exc}".splitlines()[0][:300], timeout=close_timeout)
        raise
    net.step = "finished; waiting for the other parties to finish"
    links.close(timeout=close_timeout)
    net.step = "finished"
    return {"result": result, "rounds": net._rounds[name], "seconds": time.perf_counter() - start,
            "messages": [(m.dst, m.tag, m.round, m.nbytes, m.ciphertexts) for m in net.messages]}
