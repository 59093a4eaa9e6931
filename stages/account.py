"""DVC stage account: privacy accounting of every run (papers' bounds and tight bounds side by side).

    python stages/account.py --params params.yaml --runs reports/runs --out reports/privacy.json
"""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path
from typing import Any

from ppml.accounting import account_run
from ppml.config import ParamError, all_experiments, load_params
from ppml.io import read_json, write_json


def failed_entry(name: str, block: dict[str, Any], exc: Exception) -> dict[str, Any]:
    """The entry for a run whose accounting raised: not certified, no epsilon, the error as status."""
    return {"name": name, "algorithm": block.get("algorithm"), "dataset": block.get("dataset"),
            "certified": False, "paper": None, "tight": None,
            "status": f"accounting failed: {type(exc).__name__}: {exc}"}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--params", default="params.yaml")
    parser.add_argument("--runs", required=True)
    parser.add_argument("--out", required=True)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    try:
        experiments = {name: block for name, (_, block) in all_experiments(load_params(args.params)).items()}
    except ParamError as exc:
        print(f"account: {exc}", file=sys.stderr)
        return 2
    runs, missing = [], []
    for name, block in experiments.items():
        ledger_path = Path(args.runs) / name / "ledger.json"
        if not ledger_path.exists():  # e.g. `dvc repro -s account` before every train stage has run
            logging.warning("%s: %s is missing (train_%s@%s has not run); listed as missing", name, ledger_path,
                            block.get("algorithm"), name)
            missing.append(name)
            continue
        try:  # one run's failure is recorded in its own entry and never stops the others
            ledger = read_json(ledger_path)
            if not isinstance(ledger, dict):
                raise ValueError(f"{ledger_path}: expected a JSON object, got {type(ledger).__name__}")
            entry = account_run(name, block, ledger)
        except Exception as exc:  # noqa: BLE001
            logging.error("%s: accounting failed (%s): %s: %s", name, ledger_path, type(exc).__name__, exc)
            entry = failed_entry(name, block, exc)
        if entry is not None:
            runs.append(entry)
            logging.info("%s: %s", name, entry["status"])
    write_json(args.out, {"runs": runs, "missing": missing})
    return 0


if __name__ == "__main__":
    sys.exit(main())
