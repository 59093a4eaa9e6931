"""DVC stage plan: check every experiment's parameters, then fingerprint the code each stage group runs.

    python stages/plan.py --params params.yaml --out reports/plan

Every other stage depends on its group's fingerprint, reports/plan/<group>.txt (ppml.codegraph), so this stage
runs first: a bad value in params.yaml or params/*.yaml fails here, within seconds and before DVC has removed any
stage's outputs, and the committed results stay as they were. Nothing is written unless every experiment's
parameters are valid; then each fingerprint file is replaced whole (an unchanged one keeps its bytes, so DVC
re-runs only the stages whose code changed).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ppml.codegraph import fingerprints
from ppml.config import ParamError, all_experiments, load_params
from ppml.experiment import experiment_params
from ppml.io import atomic_path

RESTORE = ("nothing was run and no output was removed; to undo a `dvc exp run -S` edit: "
           "git checkout -- params.yaml params/")


def problems(params: dict) -> list[str]:
    """Every experiment's parameter errors (each names its key path and value), in the order of the files."""
    out = []
    datasets = params.get("datasets") or {}
    for name, (where, block) in all_experiments(params).items():
        try:
            experiment_params(name, block, section=where)
        except ParamError as exc:
            out.append(str(exc))
            continue
        if block["dataset"] not in datasets:
            out.append(f"{where}.{name}.dataset: no dataset {block['dataset']!r} in params.yaml's datasets "
                       f"({', '.join(datasets)})")
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--params", default="params.yaml")
    parser.add_argument("--out", required=True, help="directory of the fingerprint files")
    args = parser.parse_args(argv)
    try:
        params = load_params(args.params)
        errors = problems(params)
    except ParamError as exc:
        errors = [str(exc)]
    if errors:
        for line in errors:
            print(f"plan: {line}", file=sys.stderr)
        print(f"plan: {len(errors)} parameter error(s); {RESTORE}", file=sys.stderr)
        return 2
    out = Path(args.out)
    texts = fingerprints(params)
    for group, text in texts.items():
        with atomic_path(out / f"{group}.txt") as tmp:
            tmp.write_text(text)
    for stale in sorted(set(p.stem for p in out.glob("*.txt")) - set(texts)):
        (out / f"{stale}.txt").unlink()
    print(f"plan: {len(all_experiments(params))} experiments checked; {len(texts)} code fingerprints in {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
