"""Links carried by the standard library's TLS: one TCP connection per pair, mutual TLS, length-prefixed frames.

The listener accepts a connection only after a TLS handshake that verified the dialer's certificate against
the CA it trusts (``CERT_REQUIRED``), and reads the dialer's identity from it (DNS subject-alternative names and
common name). The dialer verifies the listener's certificate and that it speaks as the peer it dialed
(``server_hostname`` = the peer's identity, checked by the TLS library). Every frame is an 8-byte
little-endian length and that many bytes, at most :data:`~ppml.network.links.MAX_FRAME`; the length is checked
before anything is read. TCP_NODELAY: a frame leaves at once.
"""

from __future__ import annotations

import os
import socket
import ssl
import struct
import tempfile
import threading
import time
from typing import Iterator

from ppml.network.errors import ProtocolError, WireError
from ppml.network.links import MAX_FRAME, Link, Links
from ppml.network.tls import Credentials

__all__ = ["TlsLinks"]

_LEN = struct.Struct("<Q")
_CHUNK = 2**16

HANDSHAKE_TIMEOUT = 10.0
"""Seconds a connection has to complete its TLS handshake and say hello."""


def _context(credentials: Credentials, server: bool) -> ssl.SSLContext:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER if server else ssl.PROTOCOL_TLS_CLIENT)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.verify_mode = ssl.CERT_REQUIRED
    context.load_verify_locations(cadata=credentials.ca.decode("ascii"))
    # the ssl module loads a key only from a file: a private one, removed at once
    with tempfile.TemporaryDirectory(prefix="ppml-key-") as directory:
        path = os.path.join(directory, "party.pem")
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(credentials.certificate + b"\n" + credentials.key)
        context.load_cert_chain(path)
    return context


def _names(cert: dict) -> list[str]:
    names = [v for k, v in cert.get("subjectAltName", ()) if k == "DNS"]
    names += [v for rdn in cert.get("subject", ()) for k, v in rdn if k == "commonName"]
    return list(dict.fromkeys(names))


class _TlsLink(Link):
    def __init__(self, peer: str, sock: ssl.SSLSocket) -> None:
        super().__init__(peer)
        self.sock = sock
        self._write = threading.Lock()

    def send(self, frame: bytes) -> None:
        with self._write:
            self.sock.sendall(_LEN.pack(len(frame)) + frame if len(frame) < 65536 else _LEN.pack(len(frame)))
            if len(frame) >= 65536:
                self.sock.sendall(frame)

    def frames(self) -> Iterator[bytes]:
        """The frames that arrive, until the peer ends the connection between two frames.

        Reads what the socket has (up to :data:`_CHUNK` bytes a call), so that frames that arrive together
        cost one read; the rest of a long frame goes straight into a buffer of its announced size, which is
        checked against :data:`~ppml.network.links.MAX_FRAME` before anything is allocated.
        """
        buf = bytearray()
        while True:
            while len(buf) < _LEN.size:
                chunk = self.sock.recv(_CHUNK)
                if not chunk:
                    if not buf:
                        return
                    raise WireError(f"{self.peer!r} ended the connection inside a frame header")
                buf += chunk
            (n,) = _LEN.unpack_from(buf)
            if n > MAX_FRAME:
                raise WireError(f"{self.peer!r} announced a {n}-byte frame; a link carries at most {MAX_FRAME}")
            end = _LEN.size + n
            if len(buf) >= end:
                frame = bytes(buf[_LEN.size:end])
                del buf[:end]
                yield frame
                continue
            frame = bytearray(n)
            got = len(buf) - _LEN.size
            frame[:got] = buf[_LEN.size:]
            buf = bytearray()
            view = memoryview(frame)
            while got < n:
                k = self.sock.recv_into(view[got:])
                if k == 0:
                    raise WireError(f"{self.peer!r} ended the connection inside a frame ({got} of {n} bytes)")
                got += k
            yield frame

    def end(self) -> None:
        try:
            self.sock.shutdown(socket.SHUT_WR)
        except OSError:
            pass

    def cancel(self) -> None:
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    def close(self) -> None:
        self.sock.close()


class TlsLinks(Links):
    """:class:`~ppml.network.links.Links` over TLS sockets of the standard library."""

    carrier = "tls"

    def _listen(self, listen: str) -> str:
        host, _, port = listen.rpartition(":")
        self._server_context = _context(self._credentials, server=True)
        self._client_context = _context(self._credentials, server=False)
        try:
            self._socket = socket.create_server((host.strip("[]"), int(port)), backlog=64)
        except OSError as exc:
            raise ProtocolError(f"{self.me!r} cannot listen at {listen} ({exc.strerror or exc})") from None
        self._stopping = False
        threading.Thread(target=self._accepting, name=f"accept-{self.me}", daemon=True).start()
        return f"{host}:{self._socket.getsockname()[1]}"

    def _stop(self) -> None:
        self._stopping = True
        try:
            self._socket.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self._socket.close()

    def _accepting(self) -> None:
        while not self._stopping:
            try:
                raw, _ = self._socket.accept()
            except OSError:
                return
            threading.Thread(target=self._welcome, args=(raw,), name=f"link-{self.me}-in", daemon=True).start()

    def _welcome(self, raw: socket.socket) -> None:
        """A dialer: after a verified handshake, linked if its certificate speaks as a peer expected to dial."""
        raw.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        raw.settimeout(HANDSHAKE_TIMEOUT)
        try:
            sock = self._server_context.wrap_socket(raw, server_side=True)
        except (OSError, ssl.SSLError) as exc:
            self._refused.append(f"a TLS handshake failed ({exc})")
            raw.close()
            return
        try:
            peer = self._identify(_names(sock.getpeercert() or {}))
            link = self._register(_TlsLink(peer, sock))
        except ProtocolError as exc:
            refusal = _TlsLink("?", sock)
            try:
                refusal.send(_refused(str(exc)))
            except OSError:
                pass
            sock.close()
            return
        sock.settimeout(None)
        link.send(self._hello())
        self._receive(link, link.frames())

    def _open(self, peer: str, address: str, deadline: float) -> None:
        identity = self._identities[peer]
        host, _, port = address.rpartition(":")
        last = "no answer"
        while True:  # the listener may not be up yet: try until the deadline, but a TLS refusal is final
            left = deadline - time.monotonic()
            try:
                raw = socket.create_connection((host.strip("[]"), int(port)), timeout=max(0.05, min(5.0, left)))
                break
            except OSError as exc:
                last = exc.strerror or type(exc).__name__
            if time.monotonic() > deadline:
                raise ProtocolError(f"{self.me!r} could not reach {peer!r} at {address} within "
                                    f"{self._connect_timeout:g} s ({last})")
            time.sleep(0.05)
        raw.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        raw.settimeout(HANDSHAKE_TIMEOUT)
        try:
            sock = self._client_context.wrap_socket(raw, server_hostname=identity)
        except (OSError, ssl.SSLError, ssl.CertificateError) as exc:
            raw.close()
            raise ProtocolError(f"{self.me!r} could not open an authenticated link to {peer!r} at {address} (its "
                                f"certificate must speak as {identity!r} and be signed by a CA this party trusts, "
                                f"and this party's by one it trusts): {exc}") from None
        sock.settimeout(None)
        link = self._register(_TlsLink(peer, sock))
        link.send(self._hello())
        threading.Thread(target=self._receive, args=(link, link.frames()), name=f"link-{self.me}-{peer}",
                         daemon=True).start()


def _refused(why: str) -> bytes:
    from ppml.network.codec import encode

    return encode(("refused", why))[0]
