"""Links: the bytes between two parties, over one mutually authenticated, encrypted connection per pair.

Each party listens on one address and opens a connection to every peer after it in the run's address order;
the peers before it open theirs to it. So each pair shares one long-lived connection, encrypted and
authenticated both ways (mutual TLS: each side presents a certificate signed by a CA the other trusts):

- the dialer checks that the listener's certificate speaks as the peer it dialed (TLS host-name check against
  the peer's expected identity, never the address);
- the listener reads the dialer's identity from its certificate (its DNS subject-alternative names, or its
  common name only when it has none: :func:`~ppml.network.tls.identities`) and accepts the connection only
  from a peer it expects to dial it, once.

Nothing a sender writes says who it is: every message on a connection is the authenticated peer's. A
connection carries frames encoded by the codec (so decoding is bounded): first ``("hello", session, facts)``
from each side, which must match (the same experiment, parameters and seed, and the same public facts of the
prepared data: row counts, the split, who holds which columns; a mismatch names the differing facts before any
message is sent), then ``("m", [(tag, seq, bytes), ...])``, one frame per batch of messages, and at the end ``("bye",)`` or ``("abort", reason)``; a listener that
refuses a dialer says ``("refused", why)``. A party batches what it sends to one peer until its program may
block on a receive (:meth:`Links.flush`, called by :class:`~ppml.network.peer.PeerNetwork` before every
receive) or the batch reaches :data:`BATCH_BYTES`.

Two carriers move the frames, chosen by ``links`` (:data:`CARRIERS`): ``tls`` (the default), the standard
library's TLS over a TCP socket with length-prefixed frames (:mod:`ppml.network.tls_links`), and ``grpc``, a
gRPC bidirectional stream over mutual TLS (:mod:`ppml.network.grpc_links`; what FATE, Flower and RayFed use
between parties). This module imports neither: each registers itself here when it is imported
(:func:`register_carrier`), and whoever opens links (a launcher) imports the carriers it may choose;
:func:`make_links` names a carrier that was never registered. Both meet the same contract;
bench/transport.py measures both (gRPC's per-message cost in Python is several times the socket's,
docs/performance.md). Who reads: on ``tls`` the party's program itself, whenever it waits (for a
message, for room to send, or for its peers' bye: :attr:`Links.direct`), so a message reaches it without a
hand-over between threads; gRPC's streams are read by a thread per link.

Bounds and faults: a frame is at most :data:`MAX_FRAME` bytes (refused on both sides); what a receiver holds
per sender is bounded by the peer network; connecting has :data:`CONNECT_TIMEOUT` (an unreachable peer is
named with its address; a TLS failure — a certificate from another CA, a wrong name — is reported as soon as
the handshake fails; the links a party dials are opened at once, and an error on any of its links ends the
wait at once, naming that peer); a connection that breaks before the peer said bye, a refused identity, a
hello from another run, or a malformed frame ends the run with a :class:`~ppml.network.ProtocolError` naming
the peer. Errors are one line and bounded: what a peer or the operating system says is cut to a few hundred
characters with its control characters escaped (:func:`printable`: a peer's words never move a terminal's
cursor or hide text), and the refusals a listener saw are summarized (:data:`MAX_REASON`). A peer's bye tells
the party's network that nothing more comes from it (:meth:`~ppml.network.peer.PeerNetwork.finished`): a
wait for a message from a peer that finished ends at once, naming it.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any, Callable, Iterator

from ppml.network.codec import decode, encode
from ppml.network.endpoint import CARRIERS
from ppml.network.errors import ProtocolError, WireError
from ppml.network.peer import HELD_BYTES, PeerNetwork, pump_until
from ppml.network.tls import Credentials, check_presented

log = logging.getLogger(__name__)

__all__ = ["Links", "make_links", "register_carrier", "carrier_links", "run_program", "CARRIERS",
           "CONNECT_TIMEOUT", "MAX_FRAME", "BATCH_BYTES", "OWN_FACTS", "PARAM_FACTS", "shorten", "printable"]

CONNECT_TIMEOUT = 60.0
"""Seconds to open every link of a run (a peer on the same network answers within a second)."""

MAX_FRAME = HELD_BYTES + 2**20
"""Largest frame a link carries: what a receiver may hold from one sender, plus room for the framing."""

BATCH_BYTES = 4 * 2**20
"""A batch for one peer is sent when it reaches this many bytes, even if the program has not blocked."""

CLOSE_TIMEOUT = 10.0
"""Seconds to let the connections end after every peer said bye."""

ABORT_LINGER = 2.0
"""Seconds a party that failed lets its peers read its abort before it drops the connections."""

MAX_REASON = 300
"""Characters kept of one reason that a peer or the operating system gave (a refusal, a failed handshake)."""

MAX_FACTS = 256
"""Most facts of the prepared data that a hello carries (keys and str values at most :data:`MAX_REASON`
characters each)."""

OWN_FACTS = "shard."
"""Prefix of the facts a party derives from its own shard (the digest of its aligned ids): compared only with
a peer that holds a shard too (a party without data, such as the Paillier arbiter, has none)."""

PARAM_FACTS = "param."
"""Prefix of the facts that give the experiment's parameters key by key (:func:`ppml.launch.party.param_facts`):
a difference there is named first, as the parameters'."""

_DIAL_GRACE = 2.0
"""Seconds past the connect deadline that a dialing thread gets to report why it did not link."""


def shorten(text: str, limit: int = MAX_REASON) -> str:
    """`text` on one line, at most `limit` characters, every control character escaped (what a peer or the
    operating system says: :func:`printable`)."""
    line = printable(" ".join(str(text).split()))
    return line if len(line) <= limit else line[:limit - 3] + "..."


def printable(text: str) -> str:
    """`text` with every character that is not printable (escape sequences, other control and format
    characters such as bidirectional overrides) written as its Python escape (``\\x1b``, ``\\u202e``): a
    peer's words reach a log or terminal as text, never as commands to it."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in text)


class Refusals:
    """The connections a listener refused or whose handshake failed, summarized in bounded memory: the first
    few distinct reasons (each cut to :data:`MAX_REASON` characters) and how many there were in all."""

    KEPT = 3

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._reasons: list[str] = []
        self.count = 0

    def append(self, why: str) -> None:
        why = shorten(why)
        with self._lock:
            self.count += 1
            if why not in self._reasons and len(self._reasons) < self.KEPT:
                self._reasons.append(why)

    def __bool__(self) -> bool:
        return self.count > 0

    def __str__(self) -> str:
        with self._lock:
            more = self.count - len(self._reasons)
            return "; ".join(self._reasons) + (f" (and {more} more)" if more > 0 else "")


class Link:
    """One peer's connection: what waits to be sent, and what is known of its state. A carrier's subclass
    sends frames (:meth:`send`) and ends the connection (:meth:`end`, :meth:`cancel`)."""

    def __init__(self, peer: str) -> None:
        self.peer = peer
        self.batch: list[tuple[str, int, bytes]] = []
        self.batch_bytes = 0
        self.hello = threading.Event()
        self.bye = threading.Event()
        self.done = threading.Event()
        self.error: str | None = None

    def send(self, frame: bytes) -> None:
        raise NotImplementedError

    def end(self) -> None:
        """Nothing more will be sent (after bye or abort)."""
        raise NotImplementedError

    def cancel(self) -> None:
        """Drop the connection now (a peer that broke the protocol)."""
        self.end()

    def close(self) -> None:
        """Release what the connection holds, once it ended."""


class Links:
    """This party's links to its peers for one run; a carrier subclass moves the frames.

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
    connect_timeout : float, optional
        Seconds :meth:`connect` may take.
    facts : dict of str to scalar, optional
        The public facts of this party's prepared data that every party shares (a launcher's, see
        :func:`ppml.launch.party.data_facts`): carried by the hello and compared field by field, so that a
        peer whose data differ is named with the differing facts. None: no facts (nothing to compare).
    """

    carrier = ""
    direct = False
    """Whether the waiting program reads the links itself (:meth:`_pump`) rather than a reader thread per link."""

    def __init__(self, network: PeerNetwork, credentials: Credentials, identities: dict[str, str], *, listen: str,
                 session: str, pairs: set[frozenset] | None = None,
                 connect_timeout: float = CONNECT_TIMEOUT, facts: dict[str, Any] | None = None) -> None:
        self.me = network._me
        self._network = network
        self._credentials = credentials
        self._identities = dict(identities)
        self._session = session
        self._facts = _check_facts(facts or {}, "this party's data facts", ValueError)
        self._connect_timeout = float(connect_timeout)
        order = list(network.names)
        mine = order.index(self.me)
        peers = [n for n in order if n != self.me and (pairs is None or frozenset((n, self.me)) in pairs)]
        self._dial = [n for n in peers if order.index(n) > mine]
        self._accept = [n for n in peers if order.index(n) < mine]
        self._links: dict[str, Link] = {}
        self._lock = threading.Lock()
        self._refused = Refusals()
        self._dialing: dict[str, str | None] = {}  # per peer dialed by connect: None while dialing, then its error or ""
        self._closed = False
        self._never = threading.Event()  # waited on for a pause that reads the links meanwhile
        self._presented: dict[str, dict[str, Any]] = {}  # per peer: what its accepted certificate presented
        self.address = self._listen(listen)
        if self.direct:
            network.attach(self.post, self.flush, self._pump, self._wake)
        else:
            network.attach(self.post, self.flush)

    # -- what a carrier provides --------------------------------------------------------------------------

    def _listen(self, listen: str) -> str:
        """Start accepting connections at `listen`; the address it listens at."""
        raise NotImplementedError

    def _open(self, peer: str, address: str, deadline: float) -> None:
        """Connect to `peer` at `address` (retrying until `deadline` while nobody answers; a TLS refusal is
        final), :meth:`_register` its link and start :meth:`_receive` on it."""
        raise NotImplementedError

    def _stop(self) -> None:
        """Stop listening."""
        raise NotImplementedError

    def _pump(self, seconds: float) -> None:
        """A direct carrier's: read and handle what arrives on the links within `seconds` (at most), returning
        once something arrived or :meth:`_wake` was called."""
        raise NotImplementedError

    def _wake(self) -> None:
        """A direct carrier's: end a :meth:`_pump` now."""

    def _wait(self, event: threading.Event, seconds: float) -> bool:
        """Wait until `event` is set, at most `seconds`, reading the links meanwhile when the carrier is direct."""
        return pump_until(event.is_set, seconds, self._pump) if self.direct else event.wait(seconds)

    # -- opening ------------------------------------------------------------------------------------------

    def connect(self, addresses: dict[str, str]) -> None:
        """Open the links this party dials, and wait until every link of the run has said hello.

        The links are dialed at once, each in its own thread, while this party reads the links that are open
        (their hellos). The first error on any link (a peer that cannot be reached or refuses this party, a
        hello from another run, a link that broke, a peer that stopped) ends the wait at once, naming that
        peer; a peer that stays silent is named at the connect timeout.

        Raises
        ------
        ProtocolError
            Naming the peer and its address, when it cannot be reached or refuses this party (or this party
            refuses it), or when a link fails before every peer said hello, or at the connect timeout.
        """
        deadline = time.monotonic() + self._connect_timeout
        for peer in self._dial:
            if peer not in addresses:
                raise ProtocolError(f"{self.me!r} has no address for {peer!r}")
        for peer in self._dial:
            self._dialing[peer] = None
            threading.Thread(target=self._dial_one, args=(peer, addresses[peer], deadline),
                             name=f"dial-{self.me}-{peer}", daemon=True).start()
        peers = self._dial + self._accept
        while True:
            error = self._connect_error(peers)
            if error is not None:
                raise ProtocolError(error)
            if all(peer in self._links and self._links[peer].hello.is_set() for peer in peers):
                return
            now = time.monotonic()
            if now > deadline and (now > deadline + _DIAL_GRACE
                                   or not any(self._dialing[p] is None for p in self._dial)):
                late = next(p for p in peers if not (p in self._links and self._links[p].hello.is_set()))
                if late in self._dial:
                    raise ProtocolError(f"{self.me!r} could not link to {late!r} at {addresses[late]} within "
                                        f"{self._connect_timeout:g} s (no hello)")
                refused = f"; refused: {self._refused}" if self._refused else ""
                raise ProtocolError(f"{late!r} did not link to {self.me!r} (listening at {self.address}) within "
                                    f"{self._connect_timeout:g} s{refused}")
            self._wait(self._never, 0.02)  # reads the links that are open (their hellos, a refusal, an abort)

    def _dial_one(self, peer: str, address: str, deadline: float) -> None:
        """:meth:`_open` `peer` in a thread of its own; what went wrong is left for :meth:`connect`."""
        error = ""
        try:
            self._open(peer, address, deadline)
        except ProtocolError as exc:
            error = shorten(str(exc), 3 * MAX_REASON)
        except Exception as exc:  # noqa: BLE001 - the carrier's failure, named by connect
            error = shorten(f"{self.me!r} could not link to {peer!r} at {address} ({_carrier_error(exc)})",
                         3 * MAX_REASON)
        self._dialing[peer] = error
        if error and self.direct:
            self._wake()

    def _connect_error(self, peers: list[str]) -> str | None:
        """The first error, in `peers`' order, of a link being opened or open; None while there is none."""
        for peer in peers:
            if self._dialing.get(peer):
                return self._dialing[peer]
            link = self._links.get(peer)
            if link is not None and link.error is not None:
                return link.error
        if self._network.aborted is not None:
            return self._network.aborted
        return None

    def _register(self, link: Link) -> Link:
        with self._lock:
            if link.peer in self._links or self._closed:
                raise ProtocolError(f"{link.peer!r} opened a second link to {self.me!r}")
            self._links[link.peer] = link
            return link

    def _identify(self, names: list[str]) -> str:
        """The peer a dialer whose certificate speaks as `names` is; a ProtocolError saying why it is refused."""
        peer = next((p for p in self._accept if self._identities[p] in names), None)
        if peer is None:
            shown = shorten(repr(names[:4]) + (f" and {len(names) - 4} more" if len(names) > 4 else ""), 200)
            why = (f"{self.me!r} refused a link from a certificate speaking as {shown}: not a peer that links to "
                   f"it ({', '.join(repr(self._identities[p]) for p in self._accept) or 'none'})")
            self._refused.append(why)
            log.warning("%s", why)
            raise ProtocolError(why)
        return peer

    # -- who a peer is: what a carrier's handshake checks ---------------------------------------------------

    def identity_of(self, peer: str) -> str:
        """The name `peer`'s certificate must speak as."""
        return self._identities[peer]

    def ca_of(self, peer: str) -> bytes:
        """The CA certificate(s) (PEM) this party trusts for `peer`, and for no other peer."""
        return self._credentials.ca_of(peer)

    def accept_certificate(self, peer: str, certificate: bytes | None) -> None:
        """Accept `certificate` (DER or PEM), presented in a handshake, as `peer`'s: signed by the CA this
        party trusts for `peer`, speaking as `peer`'s identity and, where pinned, with its fingerprint
        (:func:`~ppml.network.tls.check_presented`). What it presented is kept for :meth:`describe`.

        Raises
        ------
        ProtocolError
            Naming the peer, the issuer presented and the one expected; also kept among the refusals that a
            listener reports when a peer does not link.
        """
        try:
            if not certificate:
                raise ValueError(f"{self.me!r} refused {peer!r}: it presented no certificate")
            credentials = self._credentials
            presented = check_presented(certificate, peer, self._identities[peer], credentials.ca_of(peer),
                                        credentials.pins.get(peer), self.me)
        except ValueError as exc:
            self._refused.append(str(exc))
            log.warning("%s", exc)
            raise ProtocolError(str(exc)) from None
        self._presented[peer] = presented

    def _hello(self) -> bytes:
        return encode(("hello", self._session, self._facts))[0]

    def _check_hello(self, link: Link, session: Any, facts: Any) -> None:
        """Refuse a hello from another run, or from a peer whose parameters or prepared data differ from this
        party's: the facts that differ are named, the parameters' first (``param.<key>``, in the block's order),
        then the models' (``model.``, :mod:`ppml.launch.model`), then the data's, and the session when nothing
        else tells the runs apart."""
        theirs = _check_facts(facts, f"{link.peer!r}'s hello", WireError)
        keys = list(self._facts) + [k for k in theirs if k not in self._facts]
        keys = [k for k in keys if not k.startswith(OWN_FACTS) or (k in self._facts and k in theirs)]
        differ = [k for k in keys if self._facts.get(k) != theirs.get(k)]
        if differ:
            params = [k for k in differ if k.startswith(PARAM_FACTS)]
            models = [k for k in differ if k.startswith("model.")]
            what = "parameters" if params else "model" if models else "data"
            differ = params or models or differ
            shown = ", ".join(f"{k}: {shorten(repr(self._facts.get(k)), 60)} here, {shorten(repr(theirs.get(k)), 60)} "
                              "there" for k in differ[:4])
            more = f" (and {len(differ) - 4} more)" if len(differ) > 4 else ""
            verb = "differs" if what == "model" else "differ"
            raise ProtocolError(f"{link.peer!r} is in another run: its {what} {verb} in {shown}{more}")
        if session != self._session:
            raise ProtocolError(f"{link.peer!r} is in another run or has other parameters (its session "
                                f"{shorten(str(session), 80)!r}, this party's {self._session!r})")

    # -- moving bytes -------------------------------------------------------------------------------------

    def _receive(self, link: Link, frames: Iterator[bytes]) -> None:
        """Deliver what arrives on `link` until it ends; an end before bye, or a bad frame, breaks it."""
        try:
            for raw in frames:
                self._on_frame(link, raw)
            self._ended(link)
        except BaseException as exc:
            self._failed(link, exc)
        finally:
            link.done.set()

    def _ended(self, link: Link) -> None:
        """`link`'s peer ended the connection: well after its bye, else the link broke."""
        if not link.bye.is_set():
            self._broken(link, "it closed the link before it finished")

    def _failed(self, link: Link, exc: BaseException) -> None:
        """Reading `link` raised `exc`: a bad frame or refusal breaks it; so does a carrier failure before bye."""
        if isinstance(exc, (WireError, ProtocolError)):
            self._broken(link, str(exc))
            if str(exc).startswith(f"{link.peer!r} is in another run"):
                link.end()  # not a reset: the peer reads this party's hello and names the difference itself
            else:
                link.cancel()
        elif isinstance(exc, Exception):  # the carrier's failure (a reset connection, a gRPC status)
            if not link.bye.is_set():
                self._broken(link, _carrier_error(exc))
        else:
            raise exc

    def _on_frame(self, link: Link, raw: bytes) -> None:
        frame = decode(raw)
        kind = frame[0] if isinstance(frame, tuple) and frame and isinstance(frame[0], str) else None
        if kind == "hello" and len(frame) == 3 and not link.hello.is_set():
            self._check_hello(link, frame[1], frame[2])
            link.hello.set()
        elif kind == "refused" and len(frame) == 2 and isinstance(frame[1], str):
            raise ProtocolError(f"{link.peer!r} refused the link: {shorten(frame[1], 500)}")
        elif not link.hello.is_set():
            raise WireError(f"{link.peer!r} sent a {kind!r} frame before its hello")
        elif kind == "m" and len(frame) == 2 and isinstance(frame[1], list):
            for item in frame[1]:
                if not (isinstance(item, tuple) and len(item) == 3):
                    raise WireError(f"{link.peer!r} sent a malformed message entry")
                self._network.deliver(link.peer, *item)
        elif kind == "bye" and len(frame) == 1:
            link.bye.set()
            self._network.finished(link.peer)
        elif kind == "abort" and len(frame) == 2 and isinstance(frame[1], str):
            link.error = f"{link.peer!r} stopped ({shorten(frame[1], 500)})"
            self._network.abort(link.error)
            link.bye.set()
        else:
            raise WireError(f"{link.peer!r} sent a frame that is not one a link carries ({kind!r:.40})")

    def _broken(self, link: Link, why: str) -> None:
        if link.error is None:
            own = why.startswith((f"{link.peer!r} refused", f"{link.peer!r} is in another run"))
            link.error = why if own else f"the link to {link.peer!r} broke ({shorten(why, 3 * MAX_REASON)})"
        self._network.abort(link.error)

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

    def _send_batch(self, link: Link) -> None:
        frame = encode(("m", link.batch))[0]
        link.batch, link.batch_bytes = [], 0
        self._send(link, frame)

    def _send(self, link: Link, frame: bytes) -> None:
        try:
            link.send(frame)
        except Exception as exc:  # noqa: BLE001 - a connection that broke while sending: the run ends
            self._broken(link, _carrier_error(exc))

    # -- closing ------------------------------------------------------------------------------------------

    def close(self, error: str | None = None, timeout: float = 60.0) -> None:
        """End every link: say bye (or abort with `error`), wait for every peer's bye, then stop.

        After an abort the peers have :data:`ABORT_LINGER` seconds to read it before the connections drop.

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
            self._send(link, last)
        problem = None
        if error is None:
            deadline = time.monotonic() + timeout
            for link in links:
                if not self._wait(link.bye, max(0.0, deadline - time.monotonic())) and link.error is None:
                    link.error = f"{link.peer!r} did not finish within {timeout:g} s of {self.me!r}"
                if link.error is not None and problem is None:
                    problem = link.error
        for link in links:
            link.end()
        deadline = time.monotonic() + (CLOSE_TIMEOUT if error is None else ABORT_LINGER)
        for link in links:
            if not self._wait(link.done, max(0.0, deadline - time.monotonic())):
                link.cancel()
        for link in links:
            link.close()
        self._stop()
        if problem is not None:
            raise ProtocolError(problem)

    def describe(self) -> dict[str, Any]:
        """This party's identity, address and carrier, and what each peer's certificate presented (identity,
        issuer, sha256 fingerprint: :meth:`accept_certificate`), for comm.json."""
        return {"identity": self._credentials.name, "address": self.address, "links": self.carrier,
                "presented": {p: dict(v) for p, v in sorted(self._presented.items())}}


def _carrier_error(exc: BaseException) -> str:
    code = getattr(exc, "code", None)
    if callable(code):  # a gRPC status
        details = exc.details() if hasattr(exc, "details") else ""
        return shorten(f"{getattr(code(), 'name', 'error')}: {details or 'the stream ended abruptly'}")
    return shorten(f"{type(exc).__name__}: {exc}") if str(exc) else type(exc).__name__


def _check_facts(facts: Any, what: str, error: type[Exception]) -> dict[str, Any]:
    """`facts` if it is a dict of at most :data:`MAX_FACTS` str keys to None, bool, int, float or str (keys
    and str values of at most :data:`MAX_REASON` characters), else `error` naming `what`."""
    if not isinstance(facts, dict) or len(facts) > MAX_FACTS:
        raise error(f"{what}: the data facts must be a dict of at most {MAX_FACTS} entries")
    for key, value in facts.items():
        if not (isinstance(key, str) and len(key) <= MAX_REASON and (
                value is None or isinstance(value, (bool, int, float))
                or (isinstance(value, str) and len(value) <= MAX_REASON))):
            raise error(f"{what}: data fact {shorten(repr(key), 60)} is not a short name with a scalar value")
    return dict(facts)


_REGISTERED: dict[str, Callable[..., Links]] = {}
"""The carriers registered so far (:func:`register_carrier`): name -> the :class:`Links` subclass of each."""


def register_carrier(name: str, factory: Callable[..., Links]) -> None:
    """Make carrier `name` (one of :data:`CARRIERS`) available to :func:`make_links`: its module calls this
    when it is imported. `factory` takes :class:`Links`' arguments (its subclass for the carrier).

    Raises
    ------
    ValueError
        When `name` is not one of :data:`CARRIERS`, or is registered already with another factory.
    """
    if name not in CARRIERS:
        raise ValueError(f"cannot register carrier {name!r}: links must be one of {list(CARRIERS)}")
    known = _REGISTERED.get(name)
    if known is not None and known is not factory:
        raise ValueError(f"carrier {name!r} is registered already ({known.__module__}.{known.__qualname__})")
    _REGISTERED[name] = factory


def carrier_links(name: str) -> Callable[..., Links]:
    """The factory (:class:`Links` subclass) registered for carrier `name`.

    Raises
    ------
    ValueError
        When `name` is not one of :data:`CARRIERS`.
    LookupError
        When no module registered `name` (its module was never imported), naming the carriers that are.
    """
    if name not in CARRIERS:
        raise ValueError(f"links must be one of {list(CARRIERS)}, got {name!r}")
    factory = _REGISTERED.get(name)
    if factory is None:
        registered = ", ".join(sorted(_REGISTERED)) or "none"
        raise LookupError(f"carrier {name!r} is not registered (registered: {registered}): the module that "
                          "provides it registers it when imported, so whoever opens links imports it first")
    return factory


def make_links(carrier: str, network: PeerNetwork, credentials: Credentials, identities: dict[str, str], **kwargs
               ) -> Links:
    """Links of `carrier` (:data:`CARRIERS`; its module must have been imported: :func:`carrier_links`)."""
    return carrier_links(carrier)(network, credentials, identities, **kwargs)


def run_program(links: Links, program: Any, party: Any, kwargs: dict[str, Any], *, timeout: float
                ) -> dict[str, Any]:
    """Run one role program over its links and close them: what the program returned, and this party's records.

    The links close with bye when the program returns, after every peer has finished too (waiting at most
    twice the run's `timeout` plus 10 s: a peer still running gives up its own waits within `timeout`, so its
    error, not this party's, names what went wrong), and with abort, naming what the program raised, when it
    fails; the error is then raised here unchanged.
    """
    close_timeout = 2 * timeout + 10.0
    from threadpoolctl import threadpool_info, threadpool_limits

    net = links._network
    name = links.me
    start = time.perf_counter()
    try:
        # one BLAS thread, as the train stage runs: the same floating-point results as in-process
        with threadpool_limits(limits=1):
            threads = max((p["num_threads"] for p in threadpool_info() if p["user_api"] == "blas"), default=0)
            result = program(net.endpoint(name), party, **kwargs)
    except BaseException as exc:
        links.close(error=f"{type(exc).__name__}: {exc}".splitlines()[0][:300], timeout=close_timeout)
        raise
    net.step = "finished; waiting for the other parties to finish"
    links.close(timeout=close_timeout)
    net.step = "finished"
    return {"result": result, "rounds": net._rounds[name], "seconds": time.perf_counter() - start,
            "blas_threads": threads,
            "messages": [(m.dst, m.tag, m.round, m.nbytes, m.ciphertexts) for m in net.messages]}
