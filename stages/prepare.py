"""DVC stage prepare@<dataset>: deal a downloaded dataset out to its parties, aligned by id.

    python stages/prepare.py --dataset KEY --params params.yaml --raw data/raw/KEY --out data/prepared/KEY
"""

from __future__ import annotations

import argparse
import logging
import sys

import numpy as np

from ppml.config import ParamError, check, load_params, section
from ppml.data.prepare import dataset_params, prepare_dataset
from ppml.data.prepared import DataUnavailable


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", required=True)
    parser.add_argument("--params", default="params.yaml")
    parser.add_argument("--raw", required=True, help="downloaded dataset directory (with status.json)")
    parser.add_argument("--out", required=True, help="prepared dataset directory to write")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")

    try:
        params = load_params(args.params)
        seed = section(params, "seed")
        if isinstance(seed, bool) or not isinstance(seed, int):
            raise ParamError(f"seed must be an integer, got {seed!r}")
        check("seed", seed, ge=0)
        dataset = dataset_params(params, args.dataset)
        manifest = prepare_dataset(args.dataset, dataset, args.raw, args.out, rng=np.random.default_rng(seed))
    except (DataUnavailable, FileNotFoundError, ValueError) as exc:
        # ParamError, DataFormatError and AlignmentError are ValueErrors; their messages name the key path,
        # the file and line, or the party and id.
        print(f"prepare@{args.dataset}: {exc}", file=sys.stderr)
        return 2
    if manifest["available"]:
        logging.info("%s: %s, split %s", args.dataset,
                     {p["name"]: f"{p['train_rows']}+{p['test_rows']} rows x {p['columns']} cols"
                      for p in manifest["parties"]}, manifest["split"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
