"""DVC stage account: gather every run's privacy accounting (papers' bounds and tight bounds side by side).

    python stages/account.py --params params.yaml --runs reports/runs --out reports/privacy.json

Each train stage accounts its own run into reports/runs/<algorithm>/<name>/privacy.json (ppml.config.run_dir,
ppml.accounting.run_privacy); this stage only reads those, in the order of params.yaml, into
``{"runs": [...], "missing": [...]}``: a run with no privacy side (``privacy_side: false``) has no entry, a run
whose file is absent is listed in ``missing``. It imports no accountant, so it takes seconds and a change to the
accounting re-runs the train stages instead.
"""

from __future__ import annotations

import argparse
import logging
import re
import sys
from collections import Counter
from pathlib import Path
from typing import Any

from ppml.config import ParamError, all_experiments, load_params, run_dir
from ppml.io import read_json, write_json


def read_entry(path: Path, name: str) -> dict[str, Any]:
    """A run's privacy.json, checked: an object whose ``name`` is the run's and whose ``status`` is a string."""
    entry = read_json(path)
    if not isinstance(entry, dict):
        raise ValueError(f"{path}: expected a JSON object, got {type(entry).__name__}")
    if entry.get("name") != name:
        raise ValueError(f"{path}: name is {entry.get('name')!r} but the run directory is {name!r}")
    if not isinstance(entry.get("status"), str):
        raise ValueError(f"{path}: status must be a string, got {entry.get('status')!r}")
    return entry


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--params", default="params.yaml")
    parser.add_argument("--runs", required=True)
    parser.add_argument("--out", required=True)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    try:
        experiments = {name: block for name, (_, block) in all_experiments(load_params(args.params)).items()}
        paths = {name: run_dir(args.runs, name, block) / "privacy.json" for name, block in experiments.items()}
    except ParamError as exc:
        print(f"account: {exc}", file=sys.stderr)
        return 2
    runs, missing = [], []
    for name, block in experiments.items():
        path = paths[name]
        if not path.exists():  # e.g. `dvc repro -s account` before every train stage has run
            logging.warning("%s: %s is missing (stage train_%s has not trained it); listed as missing", name, path,
                            block.get("algorithm"))
            missing.append(name)
            continue
        try:
            entry = read_entry(path, name)
        except ValueError as exc:  # written atomically by the train stage: a damaged file is bad input
            print(f"account: {exc}", file=sys.stderr)
            return 2
        if entry.get("privacy_side") is not False:
            runs.append(entry)
            logging.debug("%s: %s", name, entry["status"])
    write_json(args.out, {"runs": runs, "missing": missing})
    # one line, not one per run: how many runs have each status (its first clause), each run's in the file
    kinds = Counter(re.split(r"[:;(]", str(entry["status"]), maxsplit=1)[0].strip() for entry in runs)
    logging.info("account: %d runs in %s: %s%s", len(runs), args.out,
                 ", ".join(f"{count} {kind}" for kind, count in kinds.most_common()),
                 f"; {len(missing)} missing" if missing else "")
    return 0


if __name__ == "__main__":
    sys.exit(main())
