"""``python -m ppml.party``: run one party of an experiment in its own process, linked to its peers over
mutually authenticated TLS (``transport: grpc``; see :mod:`ppml.network.party` and the README's
three-organization walkthrough).

    python -m ppml.party --experiment NAME --party PARTY --peers peers.yaml [--params params.yaml]
                         [--data DIR] [--out DIR]

Exit status: 0 done, 2 bad input (named by file and key), 1 the run failed (a peer unreachable, refused, failed
or gone; named).
"""

from __future__ import annotations

import argparse
import logging
import sys

from ppml.config import ParamError
from ppml.data.prepared import ShardError
from ppml.network.errors import ProtocolError
from ppml.network.links import CONNECT_TIMEOUT
from ppml.network.party import fail_line, run_party


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ppml.party", description=__doc__.splitlines()[0])
    parser.add_argument("--experiment", required=True, help="the experiment of params.yaml to run")
    parser.add_argument("--party", required=True, help="this process's party (its address in the run)")
    parser.add_argument("--peers", required=True, help="the peers file: addresses, CA, this party's certificate")
    parser.add_argument("--params", default="params.yaml")
    parser.add_argument("--data", help="the prepared dataset directory (default data/prepared/<dataset>)")
    parser.add_argument("--out", help="where this party writes (default reports/party/<experiment>/<party>)")
    parser.add_argument("--connect-timeout", type=float, default=CONNECT_TIMEOUT,
                        help=f"seconds to link to every peer (default {CONNECT_TIMEOUT:g})")
    parser.add_argument("--result", help=argparse.SUPPRESS)  # the local launcher's pickle of every output
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format=f"%(levelname)s {args.party} %(name)s: %(message)s")
    try:
        run_party(experiment=args.experiment, party=args.party, peers_file=args.peers, params_file=args.params,
                  data_dir=args.data, out_dir=args.out, result_file=args.result,
                  connect_timeout=args.connect_timeout)
    except (ParamError, FileNotFoundError, ShardError) as exc:
        print(fail_line(args.party, exc), file=sys.stderr)
        return 2
    except ProtocolError as exc:
        print(fail_line(args.party, exc), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
