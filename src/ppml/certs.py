"""``python -m ppml.certs``: a throwaway CA, a key and certificate per party, and a peers file, for trying
``transport: grpc`` with every party on one machine.

    python -m ppml.certs DIR --parties guest host arbiter [--host 127.0.0.1] [--base-port 47000]

Writes ``DIR/ca.pem``, ``DIR/<party>.pem``, ``DIR/<party>.key`` (readable by its owner only) and
``DIR/peers.yaml`` listing ``<host>:<base-port + i>`` for the i-th party. A real deployment brings the
certificates its organizations issue and writes each party a peers file with only its own key
(:mod:`ppml.network.peers`).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ppml.network.peers import write_peers
from ppml.network.tls import throwaway_set


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ppml.certs", description=__doc__.splitlines()[0])
    parser.add_argument("dir", type=Path)
    parser.add_argument("--parties", nargs="+", required=True)
    parser.add_argument("--host", default="127.0.0.1", help="the address every party listens at")
    parser.add_argument("--base-port", type=int, default=47000)
    args = parser.parse_args(argv)
    if len(set(args.parties)) != len(args.parties):
        parser.error(f"--parties must be distinct, got {args.parties}")
    if not (0 < args.base_port and args.base_port + len(args.parties) <= 65536):
        parser.error(f"--base-port must leave room for {len(args.parties)} ports, got {args.base_port}")
    _, _, credentials = throwaway_set(args.parties, hosts=(args.host, "localhost"))
    file = write_peers(args.dir, credentials,
                       {name: f"{args.host}:{args.base_port + i}" for i, name in enumerate(args.parties)})
    print(f"{file}: {len(args.parties)} parties, CA {args.dir / 'ca.pem'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
