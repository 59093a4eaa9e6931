"""Links carried by the standard library's TLS: one TCP connection per pair, mutual TLS, length-prefixed frames.

Trust is per peer (:func:`~ppml.network.tls.check_presented`). The listener cannot know who dials before the
handshake: its TLS layer accepts a certificate of any CA it trusts (``CERT_REQUIRED``), it reads the dialer's
identity from it (:func:`~ppml.network.tls.identities`: its DNS subject-alternative names when it has any, else
its common name), and then, before any frame, accepts it only if that peer's own CA signed it and, where
pinned, it has that peer's fingerprint; else it tells the dialer why (a ``refused`` frame). The dialer knows
whom it dials: its TLS context trusts that peer's CA alone and checks that the certificate speaks as the peer
(``server_hostname`` = the peer's identity), then checks the pinned fingerprint; a refusal names the peer, the
issuer presented and the one expected. What each peer presented (identity, issuer, fingerprint) is in
:meth:`TlsLinks.describe`. Every frame is an 8-byte little-endian length and that many bytes, at most
:data:`~ppml.network.links.MAX_FRAME`; the length is checked before anything is read. TCP_NODELAY: a frame
leaves at once.

Admission: a listener serves its peers whatever unauthenticated connections come and go. One thread accepts
and watches, with one ``poll``, every connection that has sent nothing yet (no thread each); a connection
waits there at most :data:`FIRST_BYTES_TIMEOUT` s for its first bytes (a TLS ClientHello). That set holds at
most :data:`MAX_PENDING` connections (less when a quarter of the process's descriptor limit is less, so that a
flood cannot take the descriptors the links need), :data:`MAX_PENDING_PER_SOURCE` per source address; one
beyond makes room by closing the oldest of its source first, then the oldest of all, never the newcomer.
Only a connection that has sent bytes gets a thread for its handshake: at most :data:`MAX_HANDSHAKES` are
under way (:data:`MAX_HANDSHAKES_PER_SOURCE` per source), each for at most :data:`HANDSHAKE_TIMEOUT` s; one
beyond ends the oldest (of its source first) rather than wait, and at most :data:`MAX_HANDSHAKE_THREADS`
threads run handshakes at all. Why an honest dialer gets through: it sends its ClientHello at once (while it
still waits in the kernel's queue, which is :data:`BACKLOG` deep), so it is the newest of the silent set and
leaves it at its first ``poll``, and a handshake between parties takes milliseconds; silent connections, however
many and however fast they are reopened, only close each other. Should it be closed all the same, the dialer
tries again until its connect deadline (a connection closed during the handshake is not a refusal).

A listener stays up whatever arrives: an error of ``accept`` (such as EMFILE, the process out of file
descriptors: it then closes its oldest silent connection, or backs off for :data:`ACCEPT_BACKOFF` s when it
holds none) or of a handshake is logged, one bounded line per kind at most every :data:`LOG_EVERY` s (with how
many were left out), and the listener goes on.
"""

from __future__ import annotations

import collections
import errno
import logging
import os
import resource
import select
import socket
import ssl
import struct
import tempfile
import threading
import time
from typing import Any

from ppml.network.codec import encode
from ppml.network.errors import ProtocolError, WireError
from ppml.network.links import MAX_FRAME, Link, Links, register_carrier, shorten
from ppml.network.tls import Credentials, identities, issuer_of, subjects

log = logging.getLogger(__name__)

__all__ = ["TlsLinks", "presented_by", "refused_listener", "tls_context"]

_LEN = struct.Struct("<Q")
_CHUNK = 2**16
_SEND_CHUNK = 2**18

HANDSHAKE_TIMEOUT = 10.0
"""Seconds a connection has to complete its TLS handshake (a listener ends it after that); also the bound of
each step of a dialer's handshake, and of the listener's reads and writes until the link is open."""

FIRST_BYTES_TIMEOUT = 2.0
"""Seconds an accepted connection may stay silent before a listener closes it (a dialer's ClientHello comes at
once)."""

MAX_PENDING = 1024
"""Most accepted connections a listener holds while they have sent nothing (fewer when a quarter of the
process's descriptor limit is fewer); the oldest is closed to make room for a newer one."""

MAX_PENDING_PER_SOURCE = 128
"""Most silent connections from one source address (at most half of all): a source beyond closes its own
oldest, not another source's."""

MAX_HANDSHAKES = 16
"""Most connections one listener holds in their TLS handshake at once; one more ends the oldest."""

MAX_HANDSHAKES_PER_SOURCE = MAX_HANDSHAKES // 2
"""Most handshakes under way from one source address: a source beyond ends its own oldest, not another's."""

MAX_HANDSHAKE_THREADS = 2 * MAX_HANDSHAKES
"""Most threads running a listener's handshakes: those under way, those just ended to make room (they end
within moments) and those past their handshake (refusing a dialer, or saying hello). A connection that sent
its first bytes waits for one (at most :data:`MAX_HANDSHAKES` so, the oldest closed first)."""

BACKLOG = 1024
"""Connections the kernel holds for a listener before it accepts them (capped by ``net.core.somaxconn``)."""

ACCEPT_BATCH = 64
"""Most connections accepted in one turn of a listener's loop, between two looks at the silent ones."""

ACCEPT_BACKOFF = 0.1
"""Seconds a listener pauses after ``accept`` failed for want of file descriptors or memory while it holds no
silent connection to close, so that it does not spin while the connections it holds free them."""

LOG_EVERY = 5.0
"""Seconds between two log lines of the same kind of listener error (the ones between are counted)."""

_SCARCE = (errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM)


def tls_context(credentials: Credentials, server: bool, ca: bytes | None = None, alpn: list[str] | None = None
                ) -> ssl.SSLContext:
    """A TLS context presenting this party's certificate and verifying the other side's against `ca` (by
    default every CA this party trusts)."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER if server else ssl.PROTOCOL_TLS_CLIENT)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.verify_mode = ssl.CERT_REQUIRED
    context.load_verify_locations(cadata=(credentials.ca if ca is None else ca).decode("ascii"))
    if alpn:
        context.set_alpn_protocols(alpn)
    # the ssl module loads a key only from a file: a private one, removed at once
    with tempfile.TemporaryDirectory(prefix="ppml-key-") as directory:
        path = os.path.join(directory, "party.pem")
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(credentials.certificate + b"\n" + credentials.key)
        context.load_cert_chain(path)
    return context


def presented_by(address: str, identity: str, alpn: list[str] | None = None,
                 context: ssl.SSLContext | None = None) -> bytes | None:
    """The certificate (DER) the listener at `address` presents to a TLS client naming `identity`: verified
    with `context`, or unverified and without a client certificate (to name the issuer of one that was
    refused: the listener then refuses this handshake); None when none could be read."""
    if context is None:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
        if alpn:
            context.set_alpn_protocols(alpn)
    host, _, port = address.rpartition(":")
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=HANDSHAKE_TIMEOUT) as raw:
            with context.wrap_socket(raw, server_hostname=identity) as sock:
                return sock.getpeercert(binary_form=True)
    except (OSError, ValueError):
        return None


def refused_listener(links: Links, peer: str, address: str, why: Any, alpn: list[str] | None = None) -> str:
    """Why a dialer's handshake with `peer` at `address` failed: the peer, the issuer it presented (read by an
    unverified handshake) and the CA expected, and the TLS library's reason."""
    identity = links.identity_of(peer)
    presented = presented_by(address, identity, alpn)
    issuer = "an unreadable certificate" if presented is None else f"a certificate issued by {issuer_of(presented)!r}"
    expected = " or ".join(repr(s) for s in subjects(links.ca_of(peer)))
    return (f"{links.me!r} could not open an authenticated link to {peer!r} at {address} (its certificate must "
            f"speak as {identity!r} and be signed by a CA this party trusts for it, and this party's by one it "
            f"trusts): it presented {issuer}, expected one issued by {expected}: {why}")


class _TlsLink(Link):
    """One TLS connection. Blocking while it opens (handshake and hello, in the thread that opened it); then
    non-blocking, read and written only by the party's waiting program (:meth:`TlsLinks._pump`)."""

    def __init__(self, peer: str, sock: ssl.SSLSocket, owner: "TlsLinks") -> None:
        super().__init__(peer)
        self.sock = sock
        self.owner = owner
        self.ready = False  # opened: non-blocking, its hello sent; only then read by the pump
        self.eof = False
        self._write = threading.Lock()
        self._buf = bytearray()  # what arrived after the last whole frame
        self._body: bytearray | None = None  # a long frame being read straight into its own buffer
        self._got = 0

    def open(self, hello: bytes) -> None:
        """Send `hello` (still blocking), then turn non-blocking: from now on the pump reads it.

        A hello that cannot be sent (a listener that refused this party closes the connection) is left to
        the reads: they find the listener's refusal, its TLS alert, or the end of the connection.
        """
        try:
            self.send(hello)
        except OSError:
            pass
        self.sock.setblocking(False)
        self.ready = True

    def send(self, frame: bytes) -> None:
        head = _LEN.pack(len(frame))
        with self._write:
            if len(frame) < _CHUNK:
                self._put(head + frame)
            else:
                self._put(head)
                self._put(frame)

    def _put(self, data: bytes) -> None:
        if self.sock.gettimeout() != 0.0:
            self.sock.sendall(data)
            return
        view = memoryview(data)
        off, waited = 0, 0.0
        while off < len(view):
            try:
                off += self.sock.send(view[off:off + _SEND_CHUNK])  # retried with the same bytes when it blocks
                waited = 0.0
            except (ssl.SSLWantWriteError, ssl.SSLWantReadError, BlockingIOError):
                if self.owner.stopping():
                    return  # this party's run is over (an abort names why): nothing more goes out
                waited = self.owner.blocked(self, waited)

    def read_now(self) -> list[bytes]:
        """The whole frames that can be read now without blocking; :attr:`eof` once the peer ended the
        connection between two frames.

        Reads what the socket has (up to :data:`_CHUNK` bytes a call), so that frames that arrive together
        cost one read; the rest of a long frame goes straight into a buffer of its announced size, which is
        checked against :data:`~ppml.network.links.MAX_FRAME` before anything is allocated.
        """
        frames: list[bytes] = []
        while not self.eof:
            try:
                if self._body is not None:
                    k = self.sock.recv_into(memoryview(self._body)[self._got:])
                    if k == 0:
                        raise WireError(f"{self.peer!r} ended the connection inside a frame ({self._got} of "
                                        f"{len(self._body)} bytes)")
                    self._got += k
                    if self._got == len(self._body):
                        frames.append(self._body)
                        self._body = None
                    continue
                chunk = self.sock.recv(_CHUNK)
            except (ssl.SSLWantReadError, ssl.SSLWantWriteError, BlockingIOError):
                break
            if not chunk:
                if self._buf:
                    raise WireError(f"{self.peer!r} ended the connection inside a frame header")
                self.eof = True
                break
            self._buf += chunk
            frames += self._split()
        return frames

    def _split(self) -> list[bytes]:
        buf, pos, frames = self._buf, 0, []
        while len(buf) - pos >= _LEN.size:
            (n,) = _LEN.unpack_from(buf, pos)
            if n > MAX_FRAME:
                raise WireError(f"{self.peer!r} announced a {n}-byte frame; a link carries at most {MAX_FRAME}")
            start, end = pos + _LEN.size, pos + _LEN.size + n
            if len(buf) >= end:
                frames.append(bytes(buf[start:end]))
                pos = end
                continue
            if n > _CHUNK:  # a long frame: the rest goes straight into a buffer of its size
                self._body = bytearray(n)
                self._got = len(buf) - start
                self._body[:self._got] = buf[start:]
                pos = len(buf)
            break
        del buf[:pos]
        return frames

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


class _Silent:
    """The accepted connections that have sent nothing yet, oldest first, watched by the listener's one poll
    object (no thread each); bounded by :meth:`make_room` and :meth:`expire`, owned by the accepting thread."""

    def __init__(self, poller: select.poll) -> None:
        self.poller = poller
        self.conns: dict[int, tuple[socket.socket, str, float]] = {}  # per descriptor: socket, source, deadline
        self._by_source: dict[str, dict[int, None]] = {}  # per source: its descriptors, oldest first

    def add(self, sock: socket.socket, source: str, deadline: float) -> int:
        fd = sock.fileno()
        self.conns[fd] = (sock, source, deadline)
        self._by_source.setdefault(source, {})[fd] = None
        self.poller.register(fd, select.POLLIN)
        return fd

    def take(self, fd: int) -> tuple[socket.socket, str, float]:
        """Remove `fd`'s connection from the set (unwatched before anyone closes it) and return it."""
        entry = self.conns.pop(fd)
        self.poller.unregister(fd)
        mine = self._by_source[entry[1]]
        del mine[fd]
        if not mine:
            del self._by_source[entry[1]]
        return entry

    def drop(self, fd: int) -> None:
        self.take(fd)[0].close()

    def drop_oldest(self) -> bool:
        """Close the oldest connection; whether there was one."""
        if not self.conns:
            return False
        self.drop(next(iter(self.conns)))
        return True

    def make_room(self, source: str, total: int, per_source: int) -> int:
        """Close the oldest connections until one more from `source` fits: its source's own oldest while that
        holds `per_source`, then the oldest of all while there are `total`; how many were closed."""
        closed = 0
        while len(self._by_source.get(source, ())) >= per_source:
            self.drop(next(iter(self._by_source[source])))
            closed += 1
        while len(self.conns) >= total:
            self.drop(next(iter(self.conns)))
            closed += 1
        return closed

    def expire(self, now: float) -> int:
        """Close the connections past their deadline (the oldest first: deadlines follow the order of arrival);
        how many were closed."""
        closed = 0
        while self.conns:
            fd, (_, _, deadline) = next(iter(self.conns.items()))
            if deadline > now:
                break
            self.drop(fd)
            closed += 1
        return closed

    def next_deadline(self) -> float | None:
        return next(iter(self.conns.values()))[2] if self.conns else None

    def close_all(self) -> None:
        while self.drop_oldest():
            pass


def _pending_cap() -> int:
    """:data:`MAX_PENDING`, or a quarter of this process's descriptor limit when that is less."""
    soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    if soft == resource.RLIM_INFINITY or soft <= 0:
        return MAX_PENDING
    return max(1, min(MAX_PENDING, soft // 4))


class TlsLinks(Links):
    """:class:`~ppml.network.links.Links` over TLS sockets of the standard library, read by the waiting program.

    No thread reads a link once it is open: a party's program reads its links itself whenever it waits (for a
    message, or to end the run), so a message costs no hand-over between threads. A send that finds the
    connection full waits for it while reading what arrives (so two parties sending to each other at once do
    not block each other), at most the run's timeout.
    """

    carrier = "tls"
    direct = True

    def _listen(self, listen: str) -> str:
        host, _, port = listen.rpartition(":")
        self._server_context = tls_context(self._credentials, server=True)  # every CA trusted: then per peer
        self._client_contexts = {peer: tls_context(self._credentials, server=False, ca=self._credentials.ca_of(peer))
                                 for peer in self._dial}
        try:
            self._socket = socket.create_server((host.strip("[]"), int(port)), backlog=BACKLOG)
        except OSError as exc:
            raise ProtocolError(f"{self.me!r} cannot listen at {listen} ({exc.strerror or exc})") from None
        self._socket.setblocking(False)
        self._stopping = False
        # per handshake under way: a dup of its socket (to end it whatever its thread does), its deadline, source
        self._shaking: dict[object, tuple[socket.socket, float, str]] = {}
        self._shaking_lock = threading.Lock()  # also guards _threads
        self._threads = 0  # threads running a handshake (or what follows it) now
        self._noted: dict[str, list[float]] = {}  # per kind of listener error: when last logged, how many since
        self._noted_lock = threading.Lock()
        self._wake_r, self._wake_w = socket.socketpair()  # ends a pump
        self._poke_r, self._poke_w = socket.socketpair()  # wakes the accepting thread
        for end in (self._wake_r, self._wake_w, self._poke_r, self._poke_w):
            end.setblocking(False)
        self._acceptor = threading.Thread(target=self._accepting, name=f"accept-{self.me}", daemon=True)
        self._acceptor.start()
        return f"{host}:{self._socket.getsockname()[1]}"

    def _stop(self) -> None:
        self._stopping = True
        try:
            self._socket.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self._poke()
        self._acceptor.join(5.0)  # it closes the silent connections it holds, and ends within a poll
        self._socket.close()
        with self._shaking_lock:  # the handshakes under way end now (their threads close them)
            entries = list(self._shaking.values())
            self._shaking.clear()
        for watch, _, _ in entries:
            _end(watch)
        for end in (self._wake_r, self._wake_w, self._poke_r, self._poke_w):
            end.close()

    # -- reading, by the waiting program --------------------------------------------------------------

    def _open_links(self) -> list[_TlsLink]:
        return [link for link in list(self._links.values()) if link.ready and not link.done.is_set()]

    def _pump(self, seconds: float) -> None:
        links = self._open_links()
        # what TLS already decrypted is not seen by select: read it first
        ready = [link for link in links if link.sock.pending()]
        if not ready:
            try:
                readable, _, _ = select.select([link.sock for link in links] + [self._wake_r], [], [],
                                               max(0.0, seconds))
            except (OSError, ValueError):  # a socket closed under it: handled by the reads below
                readable = [link.sock for link in links]
            ready = [link for link in links if link.sock in readable]
            if self._wake_r in readable:
                self._drain_wake()
        for link in ready:
            self._consume(link)

    def _consume(self, link: _TlsLink) -> None:
        """Handle what `link` has now; its end or failure is handled as a reader thread's would be."""
        try:
            for raw in link.read_now():
                self._on_frame(link, raw)
            if link.eof:
                self._ended(link)
                link.done.set()
        except BaseException as exc:
            link.done.set()
            self._failed(link, exc)

    def _wake(self) -> None:
        try:
            self._wake_w.send(b"!")
        except OSError:  # full (a wake is pending anyway) or closed (the links ended)
            pass

    def _drain_wake(self) -> None:
        _drain(self._wake_r)

    def stopping(self) -> bool:
        """Whether this party's run is over (aborted): a send that cannot go on is dropped."""
        return self._network.aborted is not None

    def blocked(self, link: _TlsLink, waited: float) -> float:
        """`link` cannot take more now: wait until it can, reading every link meanwhile; the seconds waited
        for it so far (a ProtocolError once that exceeds the run's timeout)."""
        timeout = self._network.timeout
        if waited >= timeout:
            raise ProtocolError(f"{link.peer!r} took nothing from {self.me!r} for {timeout:g} s")
        start = time.monotonic()
        links = self._open_links()
        try:
            readable, _, _ = select.select([other.sock for other in links] + [self._wake_r], [link.sock], [],
                                           min(1.0, timeout - waited))
        except (OSError, ValueError):
            readable = []
        if self._wake_r in readable:
            self._drain_wake()
        for other in links:
            if other.sock in readable or other.sock.pending():
                self._consume(other)
        return waited + time.monotonic() - start

    # -- admission, by the accepting thread (see the module docstring) --------------------------------

    def _accepting(self) -> None:
        """Accept connections until :meth:`_stop`, hold the silent ones, hand those that spoke to a handshake
        thread; no error ends the loop."""
        poller = select.poll()
        listener, poke = self._socket.fileno(), self._poke_r.fileno()
        poller.register(listener, select.POLLIN)
        poller.register(poke, select.POLLIN)
        silent = _Silent(poller)
        spoke: collections.deque[tuple[socket.socket, str, float]] = collections.deque()  # waiting for a thread
        try:
            while not self._stopping:
                try:
                    if not self._turn(poller, listener, poke, silent, spoke):
                        return
                except Exception as exc:  # noqa: BLE001 - whatever it is, the listener stays up
                    self._note("accept", f"{self.me!r} could not accept a connection ({type(exc).__name__}: {exc})")
                    time.sleep(ACCEPT_BACKOFF)
        finally:
            silent.close_all()
            for sock, _, _ in spoke:
                sock.close()

    def _turn(self, poller: select.poll, listener: int, poke: int, silent: _Silent,
              spoke: collections.deque) -> bool:
        """One turn of the accepting loop: end what is past its time, wait for what comes next, take it in;
        False once the listening socket is closed."""
        self._reap()
        now = time.monotonic()
        late = silent.expire(now)
        while spoke and spoke[0][2] <= now:
            spoke.popleft()[0].close()
            late += 1
        if late:
            self._note("silent", f"{self.me!r} closed {late} connection(s) that did not start a handshake within "
                                 f"{FIRST_BYTES_TIMEOUT:g} s")
        self._promote(spoke)
        wake = [now + 0.5] + [d for d in (silent.next_deadline(), spoke[0][2] if spoke else None) if d is not None]
        with self._shaking_lock:
            wake += [until for _, until, _ in self._shaking.values()]
        events = poller.poll(max(0.0, min(wake) - now) * 1000.0)
        accept = False
        for fd, _ in events:
            if fd == listener:
                accept = True
            elif fd == poke:
                _drain(self._poke_r)
            elif fd in silent.conns:
                self._first_bytes(silent, spoke, fd)
        alive = self._accept_some(silent, spoke) if accept else True
        self._promote(spoke)
        return alive

    def _accept_some(self, silent: _Silent, spoke: collections.deque) -> bool:
        """Accept up to :data:`ACCEPT_BATCH` connections into the silent set, each making room there by closing
        older ones (never itself); False once the listening socket is closed."""
        total = _pending_cap()
        per_source = min(MAX_PENDING_PER_SOURCE, max(1, total // 2))
        for _ in range(ACCEPT_BATCH):
            try:
                raw, address = self._socket.accept()
            except (BlockingIOError, InterruptedError):
                return True
            except OSError as exc:
                if self._stopping or exc.errno in (errno.EBADF, errno.EINVAL):
                    return False
                self._note("accept", f"{self.me!r} could not accept a connection ({exc.strerror or exc})")
                if exc.errno in _SCARCE and silent.drop_oldest():
                    continue  # a descriptor freed by the oldest silent connection, for the newest
                time.sleep(ACCEPT_BACKOFF if exc.errno in _SCARCE else 0.01)
                return True
            source = str(address[0]) if isinstance(address, tuple) else str(address)
            closed = silent.make_room(source, total, per_source)
            if closed:
                self._note("evicted", f"{self.me!r} closed {closed} silent connection(s) to make room for newer "
                                      f"ones (at most {total} wait for their first bytes, {per_source} per source)")
            raw.setblocking(False)
            self._first_bytes(silent, spoke, silent.add(raw, source, time.monotonic() + FIRST_BYTES_TIMEOUT))
        return True

    def _first_bytes(self, silent: _Silent, spoke: collections.deque, fd: int) -> None:
        """`fd` is readable (or just accepted): a connection that sent bytes leaves the silent set for a
        handshake thread; one that ended first is closed; one with nothing yet stays."""
        try:
            first = silent.conns[fd][0].recv(1, socket.MSG_PEEK)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            first = b""
        if not first:
            silent.drop(fd)
            return
        if len(spoke) >= MAX_HANDSHAKES:  # every handshake thread is busy: the oldest waiting makes room
            spoke.popleft()[0].close()
            self._note("evicted", f"{self.me!r} closed a connection waiting for a handshake thread to make room "
                                  f"for a newer one (at most {MAX_HANDSHAKE_THREADS} threads)")
        spoke.append(silent.take(fd))

    def _promote(self, spoke: collections.deque) -> None:
        """Start the handshakes of the connections that spoke, oldest first, while a thread may be had."""
        while spoke:
            with self._shaking_lock:
                if self._threads >= MAX_HANDSHAKE_THREADS:
                    return  # a thread that ends pokes the loop
            raw, source, _ = spoke.popleft()
            self._admit(raw, source)

    def _admit(self, raw: socket.socket, source: str) -> None:
        """Start `raw`'s handshake in a thread of its own. With :data:`MAX_HANDSHAKES` under way (or
        :data:`MAX_HANDSHAKES_PER_SOURCE` from `source`), the oldest of them (of `source` first) is ended to
        make room; only a process out of descriptors or threads closes `raw` at once."""
        key = object()
        with self._shaking_lock:
            mine = [k for k, (_, _, s) in self._shaking.items() if s == source]
            victim = (mine[0] if len(mine) >= MAX_HANDSHAKES_PER_SOURCE
                      else next(iter(self._shaking)) if len(self._shaking) >= MAX_HANDSHAKES else None)
            ended = self._shaking.pop(victim) if victim is not None else None
        if ended is not None:
            _end(ended[0])
            self._note("ended", f"{self.me!r} ended the oldest handshake to make room for a newer one (at most "
                                f"{MAX_HANDSHAKES} at once, {MAX_HANDSHAKES_PER_SOURCE} per source)")
        try:
            watch = raw.dup()  # to end a handshake that takes too long, whatever its thread is doing
        except OSError as exc:
            raw.close()
            self._note("excess", f"{self.me!r} closed a connection at once ({exc.strerror or exc})")
            if exc.errno in _SCARCE:
                time.sleep(ACCEPT_BACKOFF)
            return
        with self._shaking_lock:
            self._shaking[key] = (watch, time.monotonic() + HANDSHAKE_TIMEOUT, source)
            self._threads += 1
        try:
            threading.Thread(target=self._welcoming, args=(raw, key), name=f"link-{self.me}-in", daemon=True).start()
        except RuntimeError as exc:  # no thread to be had
            with self._shaking_lock:
                self._threads -= 1
            self._unwatch(key)
            raw.close()
            self._note("excess", f"{self.me!r} closed a connection at once ({exc})")
            time.sleep(ACCEPT_BACKOFF)

    def _welcoming(self, raw: socket.socket, key: object) -> None:
        try:
            self._welcome(raw, key)
        except Exception as exc:  # noqa: BLE001 - one connection's failure: logged, the listener goes on
            raw.close()
            self._note("welcome", f"{self.me!r} dropped a connection ({type(exc).__name__}: {exc})")
        finally:
            self._unwatch(key)
            with self._shaking_lock:
                self._threads -= 1
            self._poke()  # a connection that spoke may wait for this thread

    def _unwatch(self, key: object) -> bool:
        """Stop watching `key`'s handshake; whether it was still watched (not ended meanwhile)."""
        with self._shaking_lock:
            entry = self._shaking.pop(key, None)
        if entry is not None:
            entry[0].close()
        return entry is not None

    def _reap(self) -> None:
        """End the handshakes that are past :data:`HANDSHAKE_TIMEOUT` (their threads then fail and close them)."""
        now = time.monotonic()
        with self._shaking_lock:
            late = [key for key, (_, until, _) in self._shaking.items() if until < now]
            entries = [self._shaking.pop(key) for key in late]
        for watch, _, _ in entries:
            _end(watch)
        if entries:
            self._note("slow", f"{self.me!r} dropped {len(entries)} connection(s) whose handshake took more "
                               f"than {HANDSHAKE_TIMEOUT:g} s")

    def _poke(self) -> None:
        try:
            self._poke_w.send(b"!")
        except OSError:  # full (a poke is pending anyway) or closed (the links stopped)
            pass

    def _note(self, kind: str, message: str) -> None:
        """Log `message` (one line, bounded), at most once per :data:`LOG_EVERY` s per `kind`."""
        now = time.monotonic()
        with self._noted_lock:
            last = self._noted.setdefault(kind, [-LOG_EVERY, 0])
            if now - last[0] < LOG_EVERY:
                last[1] += 1
                return
            since = f" ({last[1]} more like it in the last {now - last[0]:.0f} s)" if last[1] else ""
            last[0], last[1] = now, 0
        log.warning("%s%s", shorten(message), since)

    def _welcome(self, raw: socket.socket, key: object) -> None:
        """A dialer: after a verified handshake, linked if its certificate speaks as a peer expected to dial.

        Once its handshake is done it is no longer one that a newer connection may end (:meth:`_unwatch`);
        what follows is bounded by the socket's timeout, and a refusal by a second (:func:`_refuse`).
        """
        raw.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        raw.settimeout(HANDSHAKE_TIMEOUT)
        try:
            sock = self._server_context.wrap_socket(raw, server_side=True)
        except (OSError, ssl.SSLError) as exc:
            self._refused.append(f"a TLS handshake failed ({exc})")
            raw.close()
            return
        if not self._unwatch(key):  # ended meanwhile (to make room, past its time, or the links stopped)
            sock.close()
            return
        try:
            certificate = sock.getpeercert(binary_form=True)
            peer = self._identify(identities(certificate) if certificate else [])
            self.accept_certificate(peer, certificate)
            link = self._register(_TlsLink(peer, sock, self))
        except ProtocolError as exc:
            _refuse(sock, str(exc))
            return
        sock.settimeout(None)
        link.open(self._hello())

    def _open(self, peer: str, address: str, deadline: float) -> None:
        identity = self._identities[peer]
        host, _, port = address.rpartition(":")
        last = "no answer"
        # the listener may not be up yet, or may have closed the connection at once (too many handshakes under
        # way): try until the deadline; but a TLS refusal is final
        while True:
            left = deadline - time.monotonic()
            try:
                raw = socket.create_connection((host.strip("[]"), int(port)), timeout=max(0.05, min(5.0, left)))
            except OSError as exc:
                last = shorten(exc.strerror or type(exc).__name__, 200)
            else:
                sock = self._handshake(raw, peer, address, identity)
                if sock is not None:
                    break
                last = "it closed the connection during the TLS handshake"
            if self._closed:
                raise ProtocolError(f"{self.me!r} stopped linking to {peer!r}: its links are closed")
            if time.monotonic() > deadline:
                raise ProtocolError(f"{self.me!r} could not reach {peer!r} at {address} within "
                                    f"{self._connect_timeout:g} s ({last})")
            time.sleep(0.05)
        try:
            self.accept_certificate(peer, sock.getpeercert(binary_form=True))
        except ProtocolError as exc:
            _refuse(sock, str(exc))  # the listener is told, as a dialer would be
            raise
        sock.settimeout(None)
        try:
            link = self._register(_TlsLink(peer, sock, self))
        except ProtocolError:
            sock.close()
            raise
        link.open(self._hello())

    def _handshake(self, raw: socket.socket, peer: str, address: str, identity: str) -> ssl.SSLSocket | None:
        """The TLS connection over `raw` to `peer`; None when the listener closed it during the handshake (to
        be tried again); a ProtocolError when TLS refused it."""
        raw.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        raw.settimeout(HANDSHAKE_TIMEOUT)
        try:
            return self._client_contexts[peer].wrap_socket(raw, server_hostname=identity)
        except (ConnectionError, ssl.SSLEOFError, ssl.SSLZeroReturnError, TimeoutError):
            raw.close()
            return None
        except (OSError, ssl.SSLError, ssl.CertificateError) as exc:
            raw.close()
            raise ProtocolError(refused_listener(self, peer, address, shorten(str(exc)))) from None


def _end(sock: socket.socket) -> None:
    """End the connection `sock` (a dup of) is, whatever the thread using it is doing, and close `sock`."""
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    sock.close()


def _drain(sock: socket.socket) -> None:
    try:
        while sock.recv(4096):
            pass
    except OSError:
        pass


def _refuse(sock: ssl.SSLSocket, why: str) -> None:
    """Tell a dialer why it is refused, and end the connection once it read that (within a second): closing
    with its hello unread would reset the connection, and the refusal could be lost."""
    frame = encode(("refused", why))[0]
    try:
        sock.sendall(_LEN.pack(len(frame)) + frame)
        sock.shutdown(socket.SHUT_WR)
        sock.settimeout(1.0)
        deadline = time.monotonic() + 1.0
        while sock.recv(_CHUNK) and time.monotonic() < deadline:
            pass
    except OSError:
        pass
    finally:
        sock.close()


register_carrier(TlsLinks.carrier, TlsLinks)
