"""DVC stage train_<algorithm>@<experiment>: run one experiment of params.yaml and write its run directory.

    python stages/train.py --experiment NAME --params params.yaml --data data/prepared/DS --out reports/runs/NAME

Writes {history,ledger,comm,privacy,timing,run,metrics}.json; privacy.json is the run's own accounting
(ppml.accounting.run_privacy), gathered by the account stage; metrics.json last: it marks a complete run.
"""

from __future__ import annotations

import argparse
import logging
import sys

from threadpoolctl import threadpool_limits

from ppml.accounting import run_privacy
from ppml.config import ParamError, all_experiments, load_params, section
from ppml.data.prepared import ShardError
from ppml.experiment import SECTION_ALGORITHMS, run
from ppml.io import write_json
from ppml.network import ProtocolError


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--experiment", required=True)
    parser.add_argument("--params", default="params.yaml")
    parser.add_argument("--data", required=True, help="prepared dataset directory")
    parser.add_argument("--out", required=True, help="run directory to write")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")

    # what a failure is prefixed with: the DVC stage of a pipeline experiment, else the experiment
    label = f"experiment {args.experiment}"
    try:
        params = load_params(args.params)
        experiments = all_experiments(params)
        if args.experiment not in experiments:
            raise ParamError(f"params: no experiment {args.experiment!r} in any of the experiment sections")
        where, block = experiments[args.experiment]
        if where in SECTION_ALGORITHMS:
            label = f"train_{SECTION_ALGORITHMS[where]}@{args.experiment}"
        seed = section(params, "seed")
        # One BLAS thread: the algorithms' matrix products are small enough that threads only contend on a
        # 2-core machine, and a fixed thread count keeps floating-point results repeatable run to run.
        with threadpool_limits(limits=1):
            outputs = run(args.experiment, block, args.data, seed=seed, section=where)
    except (ParamError, FileNotFoundError, ShardError) as exc:  # bad input: params, missing or damaged shards
        print(f"{label}: {exc}", file=sys.stderr)
        return 2
    except ProtocolError as exc:  # a party failed, died or timed out: nothing is written
        print(f"{label}: {exc}", file=sys.stderr)
        return 1
    outputs["privacy"] = run_privacy(args.experiment, block, outputs["ledger"])  # an error becomes its entry
    for part in ("history", "ledger", "comm", "privacy", "timing", "run", "metrics"):
        write_json(f"{args.out}/{part}.json", outputs[part])
    m = {**outputs["run"], **outputs["metrics"], **outputs["timing"]["values"]}
    logging.info("%s: %s", args.experiment, {k: m.get(k) for k in ("status", "test_accuracy", "test_logloss",
                                                                     "test_auc", "seconds") if k in m})
    logging.info("%s: privacy: %s", args.experiment, outputs["privacy"]["status"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
