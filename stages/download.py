"""DVC stage download@<dataset>: put one dataset's verified raw files in place, or record it as unavailable.

    python stages/download.py --dataset KEY --params params.yaml --out data/raw/KEY

Uses ``datasets.KEY.required``, ``datasets.KEY.source``, ``datasets.KEY.files_of`` (another registry entry's
files) and, for ``source: user``, ``datasets.KEY.path`` (the whole block is validated here, by the same
declaration the prepare stage uses). When the environment variable
DATA_MIRROR names a directory laid out as ``<dataset>/<file>[.xz]`` (a relative path counts from the current
directory), files are taken from there first; otherwise, or for files it lacks, from their URLs.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from pathlib import Path

from ppml.config import ParamError, load_params
from ppml.data.download import DownloadError, download_dataset
from ppml.data.prepare import dataset_params


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", required=True)
    parser.add_argument("--params", default="params.yaml")
    parser.add_argument("--out", required=True, help="directory to fill (data/raw/KEY)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")

    mirror = os.environ.get("DATA_MIRROR") or None
    try:
        dataset = dataset_params(load_params(args.params), args.dataset)
        if mirror is not None:
            logging.info("DATA_MIRROR=%s (%s)", mirror, Path(mirror).resolve())
        status = download_dataset(args.dataset, args.out, required=dataset.required, mirror=mirror,
                                  source=dataset.source, path=dataset.path, files_of=dataset.files_of)
    except (ParamError, DownloadError, OSError) as exc:
        print(f"download@{args.dataset}: {exc}", file=sys.stderr)
        return 2
    if status["available"]:
        logging.info("%s: available (source: %s, %d files)", args.dataset, status["source"],
                     len(status["files"]))
    else:
        logging.warning("%s: not available, downstream stages will skip it: %s", args.dataset,
                        status["reason"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
