"""DVC stage report: tables, figures and checked claims from every run, beside the published numbers.

    python stages/report.py --params params.yaml --runs reports/runs --privacy reports/privacy.json --out reports
"""

from __future__ import annotations

import argparse
import logging
import sys

import matplotlib

matplotlib.use("Agg")

from ppml.config import ParamError, load_params, section  # noqa: E402
from ppml.io import read_json, write_json  # noqa: E402
from ppml.report.base import ReportOutput, load_runs  # noqa: E402
from ppml.report.claims import build_all, claims_markdown, summary_metrics  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--params", default="params.yaml")
    parser.add_argument("--runs", required=True)
    parser.add_argument("--privacy", required=True)
    parser.add_argument("--out", required=True)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    try:
        experiments = section(load_params(args.params), "experiments")
    except ParamError as exc:
        print(f"report: {exc}", file=sys.stderr)
        return 2
    runs = load_runs(args.runs, experiments, read_json(args.privacy))
    out = ReportOutput(args.out)
    claims = build_all(runs, out)
    write_json(f"{args.out}/claims.json", [c.to_dict() for c in claims])
    out.text("claims.md", claims_markdown(claims))
    write_json(f"{args.out}/metrics/claims.json", summary_metrics(claims))
    logging.info("report: %s", summary_metrics(claims))
    return 0


if __name__ == "__main__":
    sys.exit(main())
