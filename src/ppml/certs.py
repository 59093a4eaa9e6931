"""``python -m ppml.certs``: throwaway CAs, a key and certificate per party, and peers files, for trying
``transport: grpc`` with every party on one machine.

    python -m ppml.certs DIR --parties guest host arbiter [--host 127.0.0.1] [--base-port 47000] [--ca-per-party]

Lists ``<host>:<base-port + i>`` for the i-th party. Without ``--ca-per-party``: one CA for every party, and
``DIR/ca.pem``, ``DIR/<party>.pem``, ``DIR/<party>.key`` (readable by its owner only) and ``DIR/peers.yaml``,
one file for every party (``rehearsal: true``: it holds every party's key). With ``--ca-per-party``: one CA per
party, as three organizations would have, and per party a directory ``DIR/<party>/`` as that organization
would hold it: ``peers.yaml`` with only its own key and every peer's entry naming that peer's own CA
certificate, ``ca-<name>.pem`` of every party, its own ``<party>.pem`` and ``<party>.key``, and its CA's key
``ca-<party>.key`` (to issue more certificates). A real deployment brings the certificates its organizations
issue (:mod:`ppml.network.peers`).
"""

from __future__ import annotations

import argparse
import os
import random
import socket
import sys
import time
from pathlib import Path

from ppml.network.peers import write_peers, write_peers_per_party
from ppml.network.tls import Credentials, issue, make_ca, throwaway_set


def free_base(n: int, host: str = "127.0.0.1") -> int:
    """A port P such that P .. P+n-1 are free on `host` (for ``--base-port`` when rehearsing on one machine), below
    Linux's ephemeral ports (32768 and up): the parties' own outgoing connections cannot take one of them between
    this check and their bind."""
    rng = random.Random(os.getpid() ^ time.monotonic_ns())
    for _ in range(500):
        base = rng.randrange(20000, 32000 - n)
        socks = []
        try:
            for port in range(base, base + n):
                s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
                socks.append(s)
                s.bind((host, port))
        except OSError:
            continue
        finally:
            for s in socks:
                s.close()
        return base
    raise RuntimeError(f"no {n} consecutive free ports on {host}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ppml.certs", description=__doc__.splitlines()[0])
    parser.add_argument("dir", type=Path)
    parser.add_argument("--parties", nargs="+", required=True)
    parser.add_argument("--host", default="127.0.0.1", help="the address every party listens at")
    parser.add_argument("--base-port", type=int, default=47000)
    parser.add_argument("--ca-per-party", action="store_true",
                        help="one CA per party and one peers file per party (DIR/<party>/peers.yaml)")
    args = parser.parse_args(argv)
    if len(set(args.parties)) != len(args.parties):
        parser.error(f"--parties must be distinct, got {args.parties}")
    if not (0 < args.base_port and args.base_port + len(args.parties) <= 65536):
        parser.error(f"--base-port must leave room for {len(args.parties)} ports, got {args.base_port}")
    addresses = {name: f"{args.host}:{args.base_port + i}" for i, name in enumerate(args.parties)}
    hosts = (args.host, "localhost")
    if args.ca_per_party:
        cas = {name: make_ca(f"ppml throwaway CA of {name}") for name in args.parties}
        credentials = {}
        for name, (ca, ca_key) in cas.items():
            certificate, key = issue(ca, ca_key, name, hosts=hosts)
            credentials[name] = Credentials(name, certificate, key, ca)
        files = write_peers_per_party(args.dir, cas, credentials, addresses)
        print(f"{args.dir}: {len(files)} parties, one CA each: " + ", ".join(str(f) for f in files.values()))
        return 0
    _, _, credentials = throwaway_set(args.parties, hosts=hosts)
    file = write_peers(args.dir, credentials, addresses)
    print(f"{file}: {len(args.parties)} parties, CA {args.dir / 'ca.pem'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
