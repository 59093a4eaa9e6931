"""``python -m ppml.party``: run one party of an experiment in its own process, linked to its peers over
mutually authenticated TLS (``transport: grpc``; see :mod:`ppml.launch.party` and the README's
three-organization walkthrough).

    python -m ppml.party --experiment NAME --party PARTY --peers peers.yaml [--params params.yaml]
                         [--data DIR] [--out DIR] [--resume]

With ``--prepare``, the party prepares its own shard of a dataset from its own raw file instead, aligning ids
with the dataset's other parties over the same links (:mod:`ppml.launch.prepare`):

    python -m ppml.party --prepare --dataset KEY (or --experiment NAME) --party PARTY --peers peers.yaml
                         --raw FILE [--out DIR] [--params params.yaml] [--holding dealt|own]

With ``--predict``, the data parties score new rows together with the model blocks their training wrote
(:mod:`ppml.launch.predict`): each its own raw CSV of new rows (ids and its own features, no labels); the guest
writes ``predictions.csv``:

    python -m ppml.party --predict --experiment NAME --party PARTY --peers peers.yaml --raw FILE
                         [--model DIR] [--seed-index I] [--out DIR] [--params params.yaml]

Exit status: 0 done, 2 bad input (named by file and key), 1 the run failed (a peer unreachable, refused, failed
or gone; named).
"""

from __future__ import annotations

import argparse
import logging
import sys
from typing import Callable

from ppml.config import ParamError
from ppml.data.prepared import ShardError
from ppml.launch.party import fail_line, run_party
from ppml.network.errors import ProtocolError
from ppml.network.links import CONNECT_TIMEOUT


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ppml.party", description=" ".join(__doc__.split("\n\n")[0].split()))
    parser.add_argument("--experiment", help="the experiment of params.yaml to run (with --prepare: its dataset)")
    parser.add_argument("--party", required=True, help="this process's party (its address in the run)")
    parser.add_argument("--peers", required=True, help="the peers file: addresses, CA, this party's certificate")
    parser.add_argument("--params", default="params.yaml")
    parser.add_argument("--data", help="the prepared dataset directory (default data/prepared/<dataset>)")
    parser.add_argument("--out", help="where this party writes (default reports/party/<experiment>/<party>)")
    parser.add_argument("--connect-timeout", type=float, default=CONNECT_TIMEOUT,
                        help=f"seconds to link to every peer (default {CONNECT_TIMEOUT:g})")
    parser.add_argument("--resume", action="store_true",
                        help="continue from the latest epoch every party holds a checkpoint of (Paillier protocols)")
    parser.add_argument("--result", help=argparse.SUPPRESS)  # the local launcher's pickle of every output
    prepare = parser.add_argument_group("prepare (each party its own data)")
    prepare.add_argument("--prepare", action="store_true", help="prepare this party's shard instead of training")
    prepare.add_argument("--dataset", help="the dataset of params.yaml to prepare")
    prepare.add_argument("--raw", help="this party's raw CSV file (its id column; the label holder's also the label)")
    prepare.add_argument("--holding", choices=("dealt", "own"), default="dealt",
                         help="dealt (default): the prepare stage's shards, from files sharing one id column; "
                              "own: each file is its party's own table")
    prepare.add_argument("--psi-max-request", type=int, metavar="N",
                         help="a party other than the label holder, with --holding own: answer a private set "
                              "intersection request of at most N ids (with dealt: its own file's row count)")
    predict = parser.add_argument_group("predict (score new rows together)")
    predict.add_argument("--predict", action="store_true", help="score --raw's rows with the other data parties")
    predict.add_argument("--model", help="this party's training output directory holding model/ (default "
                                         "reports/party/<experiment>/<party>)")
    predict.add_argument("--seed-index", type=int, default=0, help="which seed's model (default 0)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format=f"%(levelname)s {args.party} %(name)s: %(message)s")
    if args.prepare and args.predict:
        parser.error("--prepare and --predict exclude each other")
    if args.prepare:
        return _prepare(parser, args)
    if args.predict:
        return _predict(parser, args)
    if args.experiment is None:
        parser.error("--experiment is required (or --prepare)")
    return _exit_status(args.party, lambda: run_party(
        experiment=args.experiment, party=args.party, peers_file=args.peers, params_file=args.params,
        data_dir=args.data, out_dir=args.out, result_file=args.result, connect_timeout=args.connect_timeout,
        resume=args.resume),
        bad_input=(ParamError, FileNotFoundError, ShardError))


def _exit_status(party: str, run: Callable[[], object], *, bad_input: tuple[type[BaseException], ...]) -> int:
    """0 when `run` finishes; 2 for bad input, 1 when the run failed (a peer); the error on one line."""
    try:
        run()
    except bad_input as exc:
        print(fail_line(party, exc), file=sys.stderr)
        return 2
    except ProtocolError as exc:
        print(fail_line(party, exc), file=sys.stderr)
        return 1
    return 0


def _prepare(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    """``--prepare``: this party's own shard and the manifest (:func:`ppml.launch.prepare.prepare_party`)."""
    from ppml.launch.prepare import prepare_party

    if (args.dataset is None) == (args.experiment is None):
        parser.error("--prepare needs --dataset or --experiment (one of them)")
    def run() -> None:
        prepare_party(dataset=args.dataset or _dataset_of(args.experiment, args.params), party=args.party,
                      raw_file=args.raw, peers_file=args.peers, params_file=args.params, out_dir=args.out,
                      holding=args.holding, connect_timeout=args.connect_timeout,
                      max_request=args.psi_max_request)

    # ValueError: ParamError, DataFormatError, AlignmentError, normalization
    return _exit_status(args.party, run, bad_input=(FileNotFoundError, ValueError))


def _predict(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    """``--predict``: this party's side of joint scoring (:func:`ppml.launch.predict.predict_party`)."""
    from ppml.launch.predict import predict_party

    if args.experiment is None or args.raw is None:
        parser.error("--predict needs --experiment and --raw (this party's new rows)")
    return _exit_status(args.party, lambda: predict_party(
        experiment=args.experiment, party=args.party, peers_file=args.peers, raw_file=args.raw,
        params_file=args.params, model_dir=args.model, out_dir=args.out, seed_index=args.seed_index,
        max_request=args.psi_max_request, connect_timeout=args.connect_timeout),
        bad_input=(FileNotFoundError, ValueError))


def _dataset_of(experiment: str, params_file: str) -> str:
    """The dataset of `experiment` in the params file."""
    from ppml.config import all_experiments, load_params

    experiments = all_experiments(load_params(params_file))
    if experiment not in experiments:
        raise ParamError(f"{params_file}: no experiment {experiment!r} in any of the experiment sections")
    return str(experiments[experiment][1]["dataset"])


if __name__ == "__main__":
    sys.exit(main())
