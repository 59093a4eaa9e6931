"""The Ray transport: every party in its own process, on one machine or several.

The same role programs as the in-process default (:mod:`ppml.runtime`) run here, one Ray actor per network
address. Each actor loads only its own shard, runs its party's program and is the only holder of what that
program creates (the arbiter's Paillier private key, a party's model). Ray places, starts and supervises the
processes and reports their deaths; the messages do not go through Ray: every pair of parties is linked
directly (:mod:`ppml.network.links`: one mutually authenticated TLS connection per pair, certificates made for
the run, whose hello compares the public facts of each party's prepared data: a node whose copy of the data
was prepared differently is named at the hello), because an actor call costs about 1.3 ms of CPU, several times a message on a link. The receiver
decodes with the bounded codec and holds a bounded amount per sender (:mod:`ppml.network.peer`). Random
generators are not shipped: each party's process creates its own from their descriptions
(:mod:`ppml.privacy.noise`).

Cluster. Without ``RAY_ADDRESS`` a run starts a local cluster and shuts it down at the end. With it, the run
joins that cluster and places party ``<name>`` on a node that advertises the custom resource
``party:<name>`` (``ray start --address ... --resources '{"party:guest": 1}'``), so a party's data never
leaves its machine; each node must hold its own party's shard at the same path as the coordinator's checkout.
A Ray cluster is ONE trust domain: any member can run code on any node (token authentication only keeps
outsiders out). That fits the machines of one organization, not mutually distrusting ones; those need a
cluster per party and authenticated links between them (as SecretFlow's RayFed does). See the README.

Faults. Every wait has a timeout: joining the cluster at ``RAY_ADDRESS`` :data:`CONNECT_TIMEOUT` (60 s;
Ray's own retries would last ten minutes), starting the parties :data:`STARTUP_TIMEOUT`, opening the links
:data:`~ppml.network.links.CONNECT_TIMEOUT` (60 s), every wait for a message (and a send to a peer that takes
nothing) ``timeout`` of the experiment block, and the end of the run, when each party waits for its peers' bye,
twice that plus 10 s (:func:`~ppml.network.links.run_program`). A cluster that cannot be joined, or a party
that raises, dies, or waits too long, ends the run with :class:`~ppml.network.ProtocolError` naming the
address, or the party and its protocol step (after every other party is stopped); nothing is returned, so the
stage writes nothing.
"""

from __future__ import annotations

import logging
import os
import secrets
import socket
import threading
import time
from contextlib import contextmanager
from dataclasses import replace
from typing import Any, Iterator

from ppml.config import ParamError
from ppml.data.prepared import ShardError
from ppml.network import grpc_links, tls_links  # noqa: F401 - they register the carriers ``links`` may name
from ppml.network.endpoint import MAX_TIMEOUT, Network
from ppml.network.errors import ProtocolError
from ppml.network.links import CONNECT_TIMEOUT as LINK_TIMEOUT
from ppml.network.links import make_links, run_program
from ppml.network.peer import PeerNetwork, adopt
from ppml.network.tls import Credentials, throwaway_set
from ppml.privacy.noise import create_all, describe_all
from ppml.runtime import Role, here

log = logging.getLogger(__name__)

__all__ = ["run_ray", "ray_cluster", "RESOURCE_PREFIX", "CONNECT_TIMEOUT", "STARTUP_TIMEOUT"]

RESOURCE_PREFIX = "party:"
"""A node advertising the custom resource ``party:<name>`` hosts party ``<name>`` when a run joins a cluster."""

CONNECT_TIMEOUT = 60.0
"""Seconds a run waits to join the cluster at ``RAY_ADDRESS`` (a healthy one answers within a second)."""

NICENESS = "RAY_worker_niceness"
"""The environment variable by which Ray's raylet sets a worker's niceness (its default is 15)."""

STARTUP_TIMEOUT = 120.0
"""Seconds to wait for every party's actor to start (and, on a joined cluster, for its node to exist)."""

class _PartyActor:
    """The process of one network address: its network side, its links to the peers, its shard, its program."""

    def __init__(self, name: str, names: tuple[str, ...], edges: Any, timeout: float, credentials: Credentials,
                 session: str, host: str | None, links: str, facts: dict[str, Any] | None = None,
                 manifest: str | None = None) -> None:
        self._name = name
        self._timeout = timeout
        pairs = None if edges is None else {frozenset(e) for e in edges}
        self._net = PeerNetwork(name, names, pairs, timeout)
        # a local cluster links over loopback; a joined one over the address of the node this party was placed on
        listen = f"{host or _node()['node_ip']}:0"
        # a party with a shard says what its own node's manifest says (its shard is read there), else the driver's
        facts = _facts_at(manifest) or facts
        self._links = make_links(links, self._net, credentials, {n: n for n in names if n != name}, listen=listen,
                                 session=session, pairs=pairs, facts=facts)

    def address(self) -> str:
        return self._links.address

    def connect(self, addresses: dict[str, str]) -> dict[str, Any]:
        self._links.connect(addresses)
        return here()

    def abort(self, why: str) -> None:
        self._net.abort(why)

    def status(self) -> str:
        return self._net.step

    def run(self, role: Role, shard_path: str | None) -> dict[str, Any]:
        from ppml.data.prepared import load_shard

        party = None
        try:
            if shard_path is not None:
                self._net.step = f"loading its shard {os.path.basename(shard_path)}"
                party = load_shard(shard_path)  # a damaged file is a one-line error naming it
            kwargs = create_all(role.kwargs)  # its generators, created here from their descriptions (see _ship)
        except BaseException as exc:
            self._links.close(error=f"{type(exc).__name__}: {exc}".splitlines()[0][:300], timeout=self._timeout)
            raise
        out = run_program(self._links, role.program, party, kwargs, timeout=self._timeout)
        return {**out, "where": {**here(), **_node(), **self._links.describe()}}


def _facts_at(manifest: str | None) -> dict[str, Any] | None:
    """The public facts (:func:`ppml.launch.party.data_facts`) of the manifest at path `manifest`; None when
    there is none (a path not given, or no such file on this node)."""
    from ppml.io import read_json
    from ppml.launch.party import data_facts

    if manifest is None or not os.path.isfile(manifest):
        return None
    return data_facts(read_json(manifest))


def _node() -> dict[str, str]:
    """The Ray node this actor runs on (its id and IP), which comm.json records beside host and pid so that a
    run's placement can be checked against the nodes advertising ``party:<name>`` (``ray list nodes``)."""
    import ray

    return {"node_id": ray.get_runtime_context().get_node_id(), "node_ip": ray.util.get_node_ip_address()}


def _ray():
    try:
        import ray
    except ImportError as exc:  # pragma: no cover - ray is a dependency
        raise ProtocolError("transport: ray needs the ray package (pip install -e .)") from exc
    return ray


@contextmanager
def ray_cluster(*, num_cpus: int | None = None, connect_timeout: float = CONNECT_TIMEOUT) -> Iterator[bool]:
    """Ray for one run; yields whether it joined an existing cluster (``RAY_ADDRESS``).

    A cluster this process already initialized (a test fixture's) is used as it is and left running;
    otherwise the run starts a local cluster, or joins ``RAY_ADDRESS`` (within `connect_timeout` seconds, else
    a :class:`~ppml.network.ProtocolError` naming the address), and shuts its connection down at the end (a
    local cluster goes with it).
    """
    ray = _ray()
    address = os.environ.get("RAY_ADDRESS")
    if ray.is_initialized():
        yield bool(address)
        return
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    if not address and not (os.environ.get("RAY_AUTH_TOKEN") or os.environ.get("RAY_AUTH_TOKEN_PATH")):
        # a cluster of our own: a fresh token for its lifetime, held in the environment its processes inherit,
        # rather than one Ray would write to the home directory
        os.environ["RAY_AUTH_TOKEN"] = secrets.token_hex(32)
    if address:
        _join(ray, address, connect_timeout)
    else:
        ray.init(num_cpus=num_cpus, include_dashboard=False, logging_level=logging.WARNING,
                 log_to_driver=False)
    try:
        yield bool(address)
    finally:
        ray.shutdown()


def _host_port(address: str) -> tuple[str, int] | None:
    """(host, port) of a Ray address ``host:port`` or ``ray://host:port``; None for ``auto`` and the like."""
    host, colon, port = address.split("://", 1)[-1].rstrip("/").rpartition(":")
    if not colon or not host or not port.isdigit():
        return None
    return host.strip("[]"), int(port)


class _NoThreadWarning(logging.Filter):
    """Drops Ray's warning that ray.init outside the main thread installs no SIGTERM handler: Python's default
    action (the process ends) is what a run needs, and the warning would print on every joined run."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "SIGTERM handler is not set" not in record.getMessage()


def _join(ray: Any, address: str, timeout: float) -> None:
    """``ray.init(address=...)`` within `timeout` seconds, else a ProtocolError naming the address.

    Ray retries an unreachable cluster for about ten minutes ("Failed to get cluster ID from GCS server"),
    whatever the run's timeouts, and its own timeout knobs are read when ray is imported, not per call. So a
    closed port or unreachable host is found first by a plain TCP connection (within the timeout), and
    ray.init runs in a thread that is given up at the deadline; Ray tries only once there
    (``RAY_gcs_server_port_wait_time_s``), so a thread given up on ends within a minute, and a connection it
    makes after the deadline is shut down.
    """
    deadline = time.monotonic() + timeout
    where = _host_port(address)
    if where is not None:
        try:
            socket.create_connection(where, timeout=timeout).close()
        except TimeoutError:
            raise ProtocolError(f"ray: cannot reach the cluster at RAY_ADDRESS={address} (no answer within "
                                f"{timeout:g} s)") from None
        except OSError as exc:
            raise ProtocolError(f"ray: cannot reach the cluster at RAY_ADDRESS={address} "
                                f"({exc.strerror or type(exc).__name__})") from None
    # one attempt instead of twenty, so that an attempt given up on ends within a minute (read at each call)
    set_here = "RAY_gcs_server_port_wait_time_s" not in os.environ
    if set_here:
        os.environ["RAY_gcs_server_port_wait_time_s"] = "1"
    lock = threading.Lock()
    state: dict[str, Any] = {}

    def connect() -> None:
        try:
            ray.init(address=address, logging_level=logging.WARNING, log_to_driver=False)
        except BaseException as exc:  # noqa: BLE001 - handed to the waiting thread
            with lock:
                state["error"] = exc
            return
        finally:
            if set_here:
                os.environ.pop("RAY_gcs_server_port_wait_time_s", None)
        with lock:
            if "given_up" in state:
                ray.shutdown()  # joined after the run failed: leave nothing connected
            else:
                state["joined"] = True

    quiet = _NoThreadWarning()
    worker_log = logging.getLogger("ray._private.worker")
    worker_log.addFilter(quiet)
    try:
        thread = threading.Thread(target=connect, name="ray-connect", daemon=True)
        thread.start()
        thread.join(max(0.0, deadline - time.monotonic()))
    finally:
        worker_log.removeFilter(quiet)
    with lock:
        if not state:
            state["given_up"] = True
            raise ProtocolError(f"ray: could not join the cluster at RAY_ADDRESS={address} within "
                                f"{timeout:g} s")
    if "error" in state:
        what = f"{type(state['error']).__name__}: {state['error']}".splitlines()[0]
        raise ProtocolError(f"ray: could not join the cluster at RAY_ADDRESS={address} ({what})")


def run_ray(roles: list[Role], network: Network, shard_paths: dict[str, str], *, links: str = "tls"
            ) -> dict[str, Any]:
    """Run the role programs, one Ray actor (process) per address, linked to each other directly; returns what
    each program returned.

    Ray places and supervises the processes; the messages go over links between them (one mutually
    authenticated connection per pair, carried by `links`: ``tls`` sockets or ``grpc`` streams;
    :mod:`ppml.network.links`) with certificates made for this run alone.
    `network` supplies the names, the graph and the timeout, and receives the traffic records (merged from
    every party's own), the rounds and where each party ran (:attr:`Network.where`).
    """
    if not 0 < network.timeout <= MAX_TIMEOUT:  # a wait past what the clocks represent kills every party
        raise ValueError(f"network timeout must be in (0, {MAX_TIMEOUT:g}] seconds, got {network.timeout!r}")
    ray = _ray()
    actor_class = ray.remote(_PartyActor)
    names = tuple(n for n in network.names if n in {r.name for r in roles})
    _, _, credentials = throwaway_set(names)
    session = secrets.token_hex(8)
    # the manifest beside the shards (as the prepare stage writes them): every party's hello carries its facts
    manifest = next((os.path.join(os.path.dirname(str(p)), "manifest.json") for p in shard_paths.values()), None)
    facts = _facts_at(manifest)
    with ray_cluster(num_cpus=max(2, len(roles))) as joined:
        actors: dict[str, Any] = {}
        try:
            for role in roles:
                # Ray starts its workers at niceness 15: on a busy machine a party would then wait for the CPU at
                # every message (measured: FDML 30-150 ms per iteration instead of 2-6 ms); a party runs at 0
                options: dict[str, Any] = {"num_cpus": 0, "max_concurrency": 4,
                                           "runtime_env": {"env_vars": {NICENESS: "0"}}}
                if joined:
                    options["resources"] = {f"{RESOURCE_PREFIX}{role.name}": 0.001}
                actors[role.name] = actor_class.options(**options).remote(
                    role.name, names, None if network.edges is None else [tuple(e) for e in network.edges],
                    network.timeout, credentials[role.name], session, None if joined else "127.0.0.1", links,
                    facts, None if role.shard is None else manifest)
            where = _start(ray, actors, joined)
            log.info("ray: %d parties started and linked (%s)", len(actors),
                     ", ".join(f"{n}@{w['host']}:{w['pid']}" for n, w in where.items()))
            outputs = _collect(ray, actors, {
                actors[role.name].run.remote(_ship(role),
                                             None if role.shard is None else str(shard_paths[role.shard])):
                role.name for role in roles})
        finally:
            for handle in actors.values():
                ray.kill(handle)
    return adopt(network, outputs)


def _ship(role: Role) -> Role:
    """`role` as it goes to its party's process: every generator in its kwargs replaced by its description.

    Generators are not shipped (DESIGN.md §4): the party's process creates its own from the description
    (:func:`ppml.privacy.noise.create`), so an ``os`` generator stays one and a seeded one continues its
    stream draw for draw.
    """
    return replace(role, kwargs=describe_all(role.kwargs))


def _start(ray: Any, actors: dict[str, Any], joined: bool) -> dict[str, Any]:
    """Start every party's process and its listener, then let each open its links; where each runs."""
    refs = {actor.address.remote(): name for name, actor in actors.items()}
    ready, waiting = ray.wait(list(refs), num_returns=len(refs), timeout=STARTUP_TIMEOUT)
    if waiting:
        missing = sorted(refs[r] for r in waiting)
        hint = (f"; is there a node with the resource {', '.join(RESOURCE_PREFIX + m for m in missing)}?"
                if joined else "")
        raise ProtocolError(f"ray: {', '.join(map(repr, missing))} did not start within {STARTUP_TIMEOUT:g} s{hint}")
    addresses = {refs[r]: _get(ray, r, refs[r]) for r in ready}
    refs = {actor.connect.remote(addresses): name for name, actor in actors.items()}
    ready, waiting = ray.wait(list(refs), num_returns=len(refs), timeout=LINK_TIMEOUT + 10)
    if waiting:
        raise ProtocolError(f"ray: {', '.join(sorted(map(repr, (refs[r] for r in waiting))))} did not link to "
                            f"their peers within {LINK_TIMEOUT:g} s")
    return {refs[r]: _get(ray, r, refs[r]) for r in ready}


def _get(ray: Any, ref: Any, name: str) -> Any:
    try:
        return ray.get(ref)
    except Exception as exc:  # noqa: BLE001 - a party that could not listen or link: its own words
        cause = getattr(exc, "cause", None) or exc
        raise ProtocolError(f"party {name!r} failed to start ({type(cause).__name__}: {cause})".splitlines()[0]) \
            from None


def _collect(ray: Any, actors: dict[str, Any], refs: dict[Any, str]) -> dict[str, Any]:
    outputs: dict[str, Any] = {}
    pending = list(refs)
    while pending:
        done, pending = ray.wait(pending, num_returns=1)
        ref = done[0]
        name = refs[ref]
        try:
            outputs[name] = ray.get(ref)
        except Exception as exc:  # a program that raised, or a process that died
            name, exc = _first_cause(ray, refs, name, exc, pending)
            error = _failure(ray, actors, name, exc, set(refs.values()) - set(outputs) - {name})
            # a parameter that does not fit this party's data, or a damaged shard: input errors, named as such
            if isinstance(error.cause, (ParamError, ShardError)):
                raise error.cause from None
            raise error from None
    return outputs


def _first_cause(ray: Any, refs: dict[Any, str], name: str, exc: Exception, pending: list[Any]
                 ) -> tuple[str, Exception]:
    """The party whose failure started it, and its error: a party that died or raised on its own, rather than
    one that stopped because its link to that party broke (which may be seen first)."""
    if not isinstance(getattr(exc, "cause", None) or exc, ProtocolError):
        return name, exc
    done, _ = ray.wait(pending, num_returns=len(pending), timeout=3.0)
    for ref in done:
        try:
            ray.get(ref)
        except Exception as other:  # noqa: BLE001 - the one to report if it is a root cause
            if isinstance(other, ray.exceptions.RayActorError) or \
                    not isinstance(getattr(other, "cause", None) or other, ProtocolError):
                return refs[ref], other
    return name, exc


def _failure(ray: Any, actors: dict[str, Any], name: str, exc: Exception, running: set[str]) -> ProtocolError:
    """Stop every other party; the error names the failed party, what it raised and where the others were."""
    why = f"party {name!r} failed"
    for other in running:
        actors[other].abort.remote(why)
    steps = {}
    for other in sorted(running):
        try:
            steps[other] = ray.get(actors[other].status.remote(), timeout=5)
        except Exception:  # noqa: BLE001 - a second dead party: say so, keep the first error
            steps[other] = "unreachable"
    cause = getattr(exc, "cause", None) or exc
    if isinstance(exc, ray.exceptions.RayActorError):
        what = "its process died"
    else:
        what = f"{type(cause).__name__}: {cause}".splitlines()[0]
    others = "; ".join(f"{n}: {s}" for n, s in steps.items())
    error = ProtocolError(f"party {name!r} failed ({what})" + (f"; the others were at: {others}" if others else ""))
    error.cause = cause
    return error
