"""DVC stage report: tables, figures and checked claims from every run, beside the published numbers.

    python stages/report.py --params params.yaml --runs reports/runs --privacy reports/privacy.json --out reports
"""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

from ppml.config import ParamError, all_experiments, load_params  # noqa: E402
from ppml.io import staged_outputs, write_json  # noqa: E402
from ppml.report.base import (ReportInputError, ReportOutput, check_evidence, load_runs,  # noqa: E402
                              read_privacy, use_palette)
from ppml.report.claims import build_all, claims_markdown, summary_metrics  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--params", default="params.yaml")
    parser.add_argument("--runs", required=True)
    parser.add_argument("--privacy", required=True)
    parser.add_argument("--out", required=True)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    use_palette()
    try:
        experiments = {name: block for name, (_, block) in all_experiments(load_params(args.params)).items()}
    except ParamError as exc:
        print(f"report: {exc}", file=sys.stderr)
        return 2
    # Everything is built beside the outputs and swapped in only at the end: a failure (or a kill) midway
    # leaves the previous outputs as they were, never a mix of old and new.
    try:
        with staged_outputs(args.out, dirs=("tables", "plots"), prefix=".report-staging-",
                            files=("claims.json", "claims.md", "metrics/claims.json")) as new:
            runs = load_runs(args.runs, experiments, read_privacy(args.privacy))
            out = ReportOutput(args.out, dest=new)
            claims = build_all(runs, out)
            write_json(new / "claims.json", [c.to_dict() for c in claims])
            out.text("claims.md", claims_markdown(claims))
            write_json(new / "metrics" / "claims.json", summary_metrics(claims))
            # params.yaml sits at the repository's root: evidence paths are relative to it
            check_evidence(claims, repo=Path(args.params).resolve().parent, out=new, runs=args.runs)
    except (ReportInputError, ParamError) as exc:  # ParamError: an experiment names no algorithm (run_dir)
        print(f"report: {exc}", file=sys.stderr)
        return 2
    logging.info("report: %s", summary_metrics(claims))
    return 0


if __name__ == "__main__":
    sys.exit(main())
