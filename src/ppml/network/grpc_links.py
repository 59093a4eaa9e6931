"""Links carried by gRPC: one bidirectional stream per pair over mutual TLS (:mod:`ppml.network.links`).

Trust is per peer (:func:`~ppml.network.tls.check_presented`). The listener is a gRPC server requiring a
client certificate from any CA it trusts (it cannot know who dials before the handshake); it reads the
dialer's identity from the certificate the stream's connection presented (``x509_pem_cert`` of
``auth_context``, read by :func:`~ppml.network.tls.identities`: its DNS subject-alternative names when it has
any, else its common name) and accepts the stream only if that peer's own CA signed the certificate and, where
pinned, it has that peer's fingerprint; else it ends the stream with ``PERMISSION_DENIED`` saying why. The
dialer's channel trusts the peer's CA alone (``root_certificates``) and checks the peer's identity
(``grpc.ssl_target_name_override``); a handshake the channel refused is followed by an unverified one of its
own, to name the issuer presented.

The listener proves, over the very stream that carries the run, that it holds the key of the certificate the
dialer accepts (gRPC's Python API does not show a client the server's certificate, so the pin cannot be
checked on the channel's TLS connection itself). Before anything else on the stream:

1. the dialer sends ``("prove", nonce)``, 32 fresh random bytes, and nothing more yet;
2. the listener, once it accepted the dialer, answers ``("proof", certificate, signature)``: its certificate
   (DER) and its signature by its TLS private key (ECDSA with SHA-256, RSA-PSS with SHA-256 and a 32-byte
   salt, or Ed25519) over :func:`proof_message`: the label :data:`PROOF_LABEL`, the nonce, the listener's
   identity and the sha256 fingerprint of the dialer's certificate as the listener received it; then its
   hello;
3. the dialer accepts that certificate as the peer's (:meth:`~ppml.network.links.Links.accept_certificate`:
   CA, identity, pin) and verifies the signature with its public key over the same message, with the
   fingerprint of its own certificate; only then does it send its hello (the session and the data facts).

A listener signs only over a stream whose client certificate it accepted, and names in the signature the
certificate it saw: so a proof relayed from the real peer over another connection (whose client certificate is
not this dialer's, as nobody else holds this dialer's key) does not verify, nor does one for another nonce,
another party or another certificate than the one pinned. A missing, malformed or wrong proof, or one that has
not come by the connect deadline, ends the dial with a :class:`~ppml.network.ProtocolError` naming the peer,
before this party has said anything of its run. What each peer presented is in :meth:`GrpcLinks.describe`.
Frames are the gRPC messages of the stream (encoded by the codec), at most
:data:`~ppml.network.links.MAX_FRAME` bytes either way.

A listener stays up under a flood of connections: gRPC's core closes a connection beyond :func:`max_incoming`
(a quarter of the process's descriptor limit, at most :data:`MAX_INCOMING`) at once, and one that has not
completed its handshake within :data:`HANDSHAKE_TIMEOUT` s; so descriptors remain for the party's own dials
and files, and a dialer whose connection was closed during its handshake tries again until its connect
deadline. What gRPC says reaches an error on one bounded line, its control characters escaped
(:func:`~ppml.network.links.shorten`).
"""

from __future__ import annotations

import codecs
import queue
import resource
import secrets
import struct
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable, Iterator

from ppml.network.codec import decode, encode
from ppml.network.errors import ProtocolError, WireError
from ppml.network.links import CLOSE_TIMEOUT, MAX_FRAME, Link, Links, register_carrier, shorten
from ppml.network.tls import der_of, fingerprint, identities
from ppml.network.tls_links import refused_listener

__all__ = ["GrpcLinks", "proof_message", "sign_proof", "verify_proof", "max_incoming", "PROOF_LABEL"]

SERVICE = "ppml.Link"

PROOF_LABEL = b"ppml/grpc-link-proof/v1\x00"
"""What a listener's proof signs first: a signature over this message is never one of another protocol's."""

NONCE_BYTES = 32
"""Length of the dialer's nonce."""

MAX_CERTIFICATE = 2**16
"""Longest certificate (DER bytes) a proof may carry."""

MAX_SIGNATURE = 2**11
"""Longest signature a proof may carry (an 8192-bit RSA key's takes 1024 bytes)."""

HANDSHAKE_TIMEOUT = 10.0
"""Seconds a connection has to complete its TLS handshake with a listener (gRPC's core closes it after that;
its default is 120 s): a flood of silent connections holds the listener's connections for no longer."""

MAX_INCOMING = 1024
"""Most connections a listener holds at once (fewer when a quarter of the descriptor limit is fewer)."""

# what gRPC's details say when the TLS handshake refused a certificate (ours or the listener's): final
_HANDSHAKE = ("handshake", "certificate", "peer name", "ssl", "tls", "verification check", "socket closed")
# ... unless the listener closed the connection during the handshake (at its connection or descriptor limit,
# or past its handshake timeout): "Handshake read failed (Socket closed)", "... (recvmsg:Connection reset ...)"
_CLOSED = ("handshake read failed", "handshake write failed", "endpoint closing")


def max_incoming(accepting: int) -> int:
    """The most connections a listener expecting `accepting` dialers holds at once: a quarter of this
    process's descriptor limit (the rest stays for its own dials and files), at most :data:`MAX_INCOMING`,
    and at least room for its dialers and a few attempts of theirs."""
    soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    limit = MAX_INCOMING if soft == resource.RLIM_INFINITY else min(MAX_INCOMING, soft // 4)
    return max(limit, accepting + 4)


def _options() -> list[tuple[str, Any]]:
    return [("grpc.max_send_message_length", MAX_FRAME), ("grpc.max_receive_message_length", MAX_FRAME),
            ("grpc.keepalive_time_ms", 30_000), ("grpc.keepalive_timeout_ms", 10_000),
            # a listener that is not up yet is tried again within 0.1-0.5 s, not gRPC's default 1 s and more
            ("grpc.initial_reconnect_backoff_ms", 100), ("grpc.min_reconnect_backoff_ms", 100),
            ("grpc.max_reconnect_backoff_ms", 500)]


# -- the listener's proof ---------------------------------------------------------------------------------


def proof_message(nonce: bytes, identity: str, dialer: str) -> bytes:
    """What a listener speaking as `identity` signs for the dialer whose certificate has fingerprint
    `dialer` (``sha256:<hex>``), on the stream where it received `nonce`: :data:`PROOF_LABEL`, the nonce, the
    identity's length (2 bytes, big-endian) and UTF-8 bytes, then the fingerprint in ASCII."""
    name = identity.encode("utf-8")
    return PROOF_LABEL + nonce + struct.pack(">H", len(name)) + name + dialer.encode("ascii")


def _crypto() -> Any:
    """The modules of `cryptography` a proof needs, loaded by the first call (a listener's: so that a dial at
    the descriptor limit needs no file to load them)."""
    from types import SimpleNamespace

    from cryptography import x509
    from cryptography.exceptions import InvalidSignature
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec, ed25519, padding, rsa

    return SimpleNamespace(x509=x509, InvalidSignature=InvalidSignature, hashes=hashes,
                           serialization=serialization, ec=ec, ed25519=ed25519, padding=padding, rsa=rsa)


def _pss(c: Any) -> Any:
    return c.padding.PSS(mgf=c.padding.MGF1(c.hashes.SHA256()), salt_length=c.padding.PSS.DIGEST_LENGTH)


def _signer(key_pem: bytes) -> Callable[[bytes], bytes]:
    """A function signing a message with the private key `key_pem` (EC, RSA or Ed25519; PEM).

    Raises
    ------
    ValueError
        For a key of another kind, or one that is not a PEM private key.
    """
    c = _crypto()
    key = c.serialization.load_pem_private_key(key_pem, password=None)
    if isinstance(key, c.ec.EllipticCurvePrivateKey):
        return lambda message: key.sign(message, c.ec.ECDSA(c.hashes.SHA256()))
    if isinstance(key, c.rsa.RSAPrivateKey):
        return lambda message: key.sign(message, _pss(c), c.hashes.SHA256())
    if isinstance(key, c.ed25519.Ed25519PrivateKey):
        return key.sign
    raise ValueError(f"a {type(key).__name__} cannot sign a link proof (EC, RSA or Ed25519 keys can)")


def sign_proof(key_pem: bytes, message: bytes) -> bytes:
    """`message` signed by the private key `key_pem` (PEM): ECDSA-SHA256, RSA-PSS-SHA256 or Ed25519."""
    return _signer(key_pem)(message)


def verify_proof(certificate: bytes, message: bytes, signature: bytes) -> None:
    """Check that the key of `certificate` (DER or PEM) signed `message` (:func:`sign_proof`).

    Raises
    ------
    ValueError
        When it did not (or the certificate's key is of another kind).
    """
    c = _crypto()
    key = c.x509.load_der_x509_certificate(der_of(certificate)).public_key()
    try:
        if isinstance(key, c.ec.EllipticCurvePublicKey):
            key.verify(signature, message, c.ec.ECDSA(c.hashes.SHA256()))
        elif isinstance(key, c.rsa.RSAPublicKey):
            key.verify(signature, message, _pss(c), c.hashes.SHA256())
        elif isinstance(key, c.ed25519.Ed25519PublicKey):
            key.verify(signature, message)
        else:
            raise ValueError(f"a {type(key).__name__} cannot sign a link proof")
    except c.InvalidSignature:
        raise ValueError("the signature is not one by the certificate's key over this message") from None


def _names(pem: bytes) -> list[str]:
    """The names the certificate `pem` speaks as; none when there is none or it cannot be read."""
    try:
        return identities(pem) if pem else []
    except ValueError:
        return []


# -- the links --------------------------------------------------------------------------------------------


class _GrpcLink(Link):
    def __init__(self, peer: str) -> None:
        super().__init__(peer)
        self.out: queue.SimpleQueue[bytes | None] = queue.SimpleQueue()
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
        if self.call is not None:
            self.call.cancel()

    def close(self) -> None:
        if self.channel is not None:
            self.channel.close()


class GrpcLinks(Links):
    """:class:`~ppml.network.links.Links` over gRPC bidirectional streams."""

    carrier = "grpc"

    def _listen(self, listen: str) -> str:
        import grpc
        import grpc._channel  # noqa: F401 - loaded now: a dial may be at the descriptor limit, no file to spare

        codecs.lookup("unicode_escape")  # so is the codec escaping what gRPC says in an error (shorten)
        self._grpc = grpc
        try:
            self._sign = _signer(self._credentials.key)
        except ValueError as exc:
            raise ProtocolError(f"{self.me!r} cannot listen at {listen}: its key cannot prove it holds it "
                                f"({shorten(str(exc))})") from None
        slots = len(self._dial) + len(self._accept) + 4
        options = _options() + [("grpc.max_allowed_incoming_connections", max_incoming(len(self._accept))),
                                ("grpc.server_handshake_timeout_ms", int(HANDSHAKE_TIMEOUT * 1000))]
        workers = ThreadPoolExecutor(max_workers=slots, thread_name_prefix=f"link-{self.me}")
        self._server = grpc.server(workers, options=options, maximum_concurrent_rpcs=slots)
        self._server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(
            SERVICE, {"Stream": grpc.stream_stream_rpc_method_handler(self._serve)}),))
        own = self._credentials
        server_credentials = grpc.ssl_server_credentials([(own.key, own.certificate)], root_certificates=own.ca,
                                                         require_client_auth=True)
        try:
            port = self._server.add_secure_port(listen, server_credentials)
        except RuntimeError as exc:
            port, why = 0, str(exc)
        else:
            why = "address in use or not this machine's"
        if not port:
            raise ProtocolError(f"{self.me!r} cannot listen at {listen} ({shorten(why)})")
        self._server.start()
        return f"{listen.rsplit(':', 1)[0]}:{port}"

    def _stop(self) -> None:
        self._server.stop(grace=1.0).wait(CLOSE_TIMEOUT)

    # -- dialing ------------------------------------------------------------------------------------------

    def _open(self, peer: str, address: str, deadline: float) -> None:
        grpc = self._grpc
        identity = self._identities[peer]
        credentials = grpc.ssl_channel_credentials(root_certificates=self._credentials.ca_of(peer),
                                                   private_key=self._credentials.key,
                                                   certificate_chain=self._credentials.certificate)
        channel = grpc.secure_channel(address, credentials, options=_options() + [
            ("grpc.ssl_target_name_override", identity), ("grpc.default_authority", identity)])
        try:
            self._reach(channel, peer, address, deadline)
            link = _GrpcLink(peer)
            nonce = secrets.token_bytes(NONCE_BYTES)
            link.send(encode(("prove", nonce))[0])  # nothing else goes out before the listener proved itself
            link.call = channel.stream_stream(f"/{SERVICE}/Stream")(link.frames(), wait_for_ready=True)
            try:
                self._check_proof(link, address, nonce, deadline)
                self._register(link)
            except ProtocolError:
                link.cancel()
                raise
        except ProtocolError:
            channel.close()
            raise
        link.channel = channel
        link.send(self._hello())
        threading.Thread(target=self._receive, args=(link, link.call), name=f"link-{self.me}-{peer}",
                         daemon=True).start()

    def _reach(self, channel: Any, peer: str, address: str, deadline: float) -> None:
        """Wait until the listener answers over an authenticated connection (a TLS refusal is final)."""
        grpc = self._grpc
        probe = channel.unary_unary(f"/{SERVICE}/Probe")
        last = "no answer"
        while True:  # the listener may not be up yet: try until the deadline
            try:
                probe(b"", timeout=max(0.05, min(1.0, deadline - time.monotonic())), wait_for_ready=False)
                return
            except grpc.RpcError as exc:
                if exc.code() == grpc.StatusCode.UNIMPLEMENTED:  # it answered over an authenticated connection
                    return
                last = _status(exc)
                details = (exc.details() or "").lower()
                closed = any(word in details for word in _CLOSED)  # during the handshake: tried again
                if not closed and any(word in details for word in _HANDSHAKE):
                    raise ProtocolError(refused_listener(self, peer, address, last, alpn=["h2"])) from None
            if self._closed:
                raise ProtocolError(f"{self.me!r} stopped linking to {peer!r}: its links are closed")
            if time.monotonic() > deadline:
                raise ProtocolError(f"{self.me!r} could not reach {peer!r} at {address} within "
                                    f"{self._connect_timeout:g} s ({last})")
            time.sleep(0.05)

    def _check_proof(self, link: _GrpcLink, address: str, nonce: bytes, deadline: float) -> None:
        """Read the listener's proof (its first frame, by `deadline`) and accept it, or refuse the peer."""
        peer = link.peer
        refused = f"{self.me!r} refused {peer!r} at {address}"
        late = threading.Event()

        def give_up() -> None:
            late.set()
            link.call.cancel()

        timer = threading.Timer(max(0.0, deadline - time.monotonic()), give_up)
        timer.daemon = True
        timer.start()
        try:
            raw = next(link.call)
        except StopIteration:
            raise ProtocolError(f"{refused}: it ended the stream without proving that it holds its "
                                "certificate's key") from None
        except self._grpc.RpcError as exc:
            if late.is_set():
                raise ProtocolError(f"{refused}: it did not prove that it holds its certificate's key within "
                                    f"{self._connect_timeout:g} s") from None
            raise ProtocolError(f"{self.me!r} could not link to {peer!r} at {address} ({_status(exc)})"
                                ) from None
        finally:
            timer.cancel()
        try:
            frame = decode(raw)
        except WireError as exc:
            raise ProtocolError(f"{refused}: its first frame is not a proof ({shorten(str(exc))})") from None
        if not (isinstance(frame, tuple) and len(frame) == 3 and frame[0] == "proof"
                and isinstance(frame[1], bytes) and 0 < len(frame[1]) <= MAX_CERTIFICATE
                and isinstance(frame[2], bytes) and 0 < len(frame[2]) <= MAX_SIGNATURE):
            kind = frame[0] if isinstance(frame, tuple) and frame and isinstance(frame[0], str) else None
            raise ProtocolError(f"{refused}: its first frame is not a proof of holding its certificate's key "
                                f"(a {shorten(repr(kind or type(frame).__name__), 40)} frame)")
        certificate, signature = frame[1], frame[2]
        if not _names(certificate):
            raise ProtocolError(f"{refused}: the certificate in its proof cannot be read")
        self.accept_certificate(peer, certificate)  # the CA of the peer, its identity, its pin
        message = proof_message(nonce, self._identities[peer], fingerprint(self._credentials.certificate))
        try:
            verify_proof(certificate, message, signature)
        except ValueError as exc:
            self._presented.pop(peer, None)
            raise ProtocolError(f"{refused}: its proof does not verify ({shorten(str(exc), 80)}): it must sign "
                                "this stream's nonce, its identity and this party's certificate as it received "
                                f"it, with the key of the certificate it presented ({fingerprint(certificate)})"
                                ) from None

    # -- listening ----------------------------------------------------------------------------------------

    def _serve(self, frames: Iterator[bytes], context: Any) -> Iterator[bytes]:
        """A peer's stream: accepted only from a certificate speaking as a peer expected to dial this one."""
        pem = b"".join(context.auth_context().get("x509_pem_cert", ()))
        try:
            peer = self._identify(_names(pem))
            self.accept_certificate(peer, pem)
            link = self._register(_GrpcLink(peer))
        except ProtocolError as exc:
            context.abort(self._grpc.StatusCode.PERMISSION_DENIED, str(exc))
        threading.Thread(target=self._receive, args=(link, self._prove(link, frames, fingerprint(pem))),
                         name=f"link-{self.me}-{link.peer}", daemon=True).start()
        yield from link.frames()

    def _prove(self, link: _GrpcLink, frames: Iterator[bytes], dialer: str) -> Iterator[bytes]:
        """`frames` after the dialer's first, which asks for this party's proof: answered with it, then the
        hello (see the module docstring)."""
        for raw in frames:
            frame = decode(raw)
            if not (isinstance(frame, tuple) and len(frame) == 2 and frame[0] == "prove"
                    and isinstance(frame[1], bytes) and len(frame[1]) == NONCE_BYTES):
                raise WireError(f"{link.peer!r} did not open its stream asking for this party's proof (a "
                                f"{NONCE_BYTES}-byte nonce)")
            signature = self._sign(proof_message(frame[1], self._credentials.name, dialer))
            link.send(encode(("proof", der_of(self._credentials.certificate), signature))[0])
            link.send(self._hello())
            break
        yield from frames


def _status(exc: Any) -> str:
    """A gRPC error on one bounded line."""
    return shorten(f"{exc.code().name}: {exc.details() or 'the stream ended abruptly'}")


register_carrier(GrpcLinks.carrier, GrpcLinks)
