"""DVC stage train_<algorithm>: run that algorithm's experiments that are not current; write each run directory.

    python stages/train.py --algorithm ALG --params params.yaml --code reports/plan/train_ALG.txt
        --data data/prepared --out reports/runs/ALG --metrics reports/metrics/ALG.json
    python stages/train.py --experiment NAME --params params.yaml --data data/prepared/DATASET --out DIR

The experiments are section ``<algorithm>_experiments`` of params/<algorithm>.yaml. Every one is checked first;
a bad value fails before anything is run or written. Then each run whose inputs changed (ppml.trained: its
parameter block, the seed, its prepared data, the code fingerprint) is trained and its directory
``<out>/<experiment>/`` replaced whole: {history,ledger,comm,privacy,timing,run,metrics}.json, then inputs.json.
privacy.json is the run's own accounting (ppml.accounting.run_privacy), gathered by the account stage.
Directories of experiments no longer in the section are removed. Last, `--metrics` gathers every run's
metrics.json (DVC's metrics file of the stage). ``--experiment`` runs one experiment of any section (``experiments``
included), current or not, into `--out`, and writes nothing else: a one-off run outside the pipeline.
"""

from __future__ import annotations

import argparse
import logging
import sys
import time
from pathlib import Path

from threadpoolctl import threadpool_limits

from ppml.accounting import run_privacy
from ppml.config import ParamError, all_experiments, load_params, section, section_of_algorithm
from ppml.data.prepared import ShardError
from ppml.experiment import SECTION_ALGORITHMS, experiment_params, run
from ppml.io import read_json, write_json
from ppml.network import ProtocolError
from ppml.trained import PARTS, data_files, inputs, is_current, prune, write_run

log = logging.getLogger("train")
RESTORE = "nothing was run and no output was removed; to undo a `dvc exp run -S` edit: git checkout -- params/"


def _problems(blocks: dict, where: str, datasets: dict, data_root: Path) -> list[str]:
    """Every experiment's parameter errors, and the prepared datasets that are missing."""
    out = []
    for name, block in blocks.items():
        try:
            experiment_params(name, block, section=where)
        except ParamError as exc:
            out.append(str(exc))
            continue
        if block["dataset"] not in datasets:
            out.append(f"{where}.{name}.dataset: no dataset {block['dataset']!r} in params/datasets.yaml "
                       f"({', '.join(datasets)})")
        elif not (data_root / block["dataset"] / "manifest.json").is_file():
            out.append(f"{where}.{name}: {data_root / block['dataset']} is not prepared (run the prepare stage)")
    return out


def _train(name: str, block: dict, data_dir: Path, *, seed: int, where: str) -> dict:
    # One BLAS thread: the algorithms' matrix products are small enough that threads only contend on a
    # 2-core machine, and a fixed thread count keeps floating-point results repeatable run to run.
    with threadpool_limits(limits=1):
        outputs = run(name, block, data_dir, seed=seed, section=where)
    outputs["privacy"] = run_privacy(name, block, outputs["ledger"])  # an error becomes its entry
    m = {**outputs["run"], **outputs["metrics"], **outputs["timing"]["values"]}
    log.info("%s: %s; privacy: %s", name, {k: m.get(k) for k in ("status", "test_accuracy", "test_logloss",
                                                                  "test_auc", "seconds") if k in m},
             outputs["privacy"]["status"])
    return outputs


def _last_seconds(run_dir: Path) -> float | None:
    """The previous run's own clock (seconds per seed times seeds), for the progress line; None if unknown."""
    try:
        seconds = read_json(run_dir / "timing.json")["values"]["seconds"]
        return float(seconds) * float(read_json(run_dir / "run.json").get("seeds", 1))
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _one_off(args, params: dict) -> int:
    label = f"experiment {args.experiment}"  # what a failure is prefixed with
    try:
        experiments = all_experiments(params)
        if args.experiment not in experiments:
            raise ParamError(f"params: no experiment {args.experiment!r} in any of the experiment sections")
        where, block = experiments[args.experiment]
        if where in SECTION_ALGORITHMS:
            label = f"train_{SECTION_ALGORITHMS[where]}@{args.experiment}"
        outputs = _train(args.experiment, block, Path(args.data), seed=section(params, "seed"), where=where)
    except (ParamError, FileNotFoundError, ShardError) as exc:  # bad input: params, missing or damaged shards
        print(f"{label}: {exc}", file=sys.stderr)
        return 2
    except ProtocolError as exc:  # a party failed, died or timed out: nothing is written
        print(f"{label}: {exc}", file=sys.stderr)
        return 1
    for part in PARTS:
        write_json(Path(args.out) / f"{part}.json", outputs[part])
    return 0


def _stage(args, params: dict) -> int:
    label = f"train_{args.algorithm}"
    where = section_of_algorithm(args.algorithm)
    if where not in SECTION_ALGORITHMS:
        raise ParamError(f"--algorithm: no algorithm {args.algorithm!r} (algorithms: "
                         f"{', '.join(SECTION_ALGORITHMS.values())})")
    blocks = params.get(where) or {}
    if not isinstance(blocks, dict):
        raise ParamError(f"params: {where} must be a mapping of experiment names to blocks, got {blocks!r:.80}")
    data_root, out = Path(args.data), Path(args.out)
    errors = _problems(blocks, where, params.get("datasets") or {}, data_root)
    if errors:
        for line in errors:
            print(f"{label}: {line}", file=sys.stderr)
        print(f"{label}: {len(errors)} parameter error(s); {RESTORE}", file=sys.stderr)
        return 2
    seed, code = section(params, "seed"), Path(args.code).read_text()
    data = {ds: data_files(data_root / ds) for ds in sorted({b["dataset"] for b in blocks.values()})}
    wanted = {name: inputs(name, block, seed=seed, data=data[block["dataset"]], code=code)
              for name, block in blocks.items()}
    todo = [name for name in blocks if not is_current(out / name, wanted[name])]
    removed = prune(out, set(blocks))
    expected = sum(s for name in todo if (s := _last_seconds(out / name)) is not None)
    log.info("%s: %d experiments, %d current, %d to train (about %.0f s by their last clocks)%s", label,
             len(blocks), len(blocks) - len(todo), len(todo), expected,
             f"; removed {', '.join(removed)}" if removed else "")
    start = time.monotonic()
    for i, name in enumerate(todo, 1):
        last = _last_seconds(out / name)
        # one line per run, in a fixed form that tools/retrain.py reads for its progress
        print(f"{label}: run {i} of {len(todo)}: {name} (last time {last if last is None else round(last)} s)",
              flush=True)
        try:
            outputs = _train(name, blocks[name], data_root / blocks[name]["dataset"], seed=seed, where=where)
        except (ParamError, FileNotFoundError, ShardError) as exc:  # bad input: missing or damaged shards
            print(f"{label}@{name}: {exc}", file=sys.stderr)
            return 2
        except ProtocolError as exc:  # a party failed, died or timed out: this run's directory is untouched
            print(f"{label}@{name}: {exc}", file=sys.stderr)
            return 1
        write_run(out / name, outputs, wanted[name])
    metrics = {name: read_json(out / name / "metrics.json") for name in blocks}
    write_json(args.metrics, metrics)
    log.info("%s: %d trained in %.1f s; metrics of all %d in %s", label, len(todo), time.monotonic() - start,
             len(metrics), args.metrics)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--algorithm", help="the algorithm whose experiments to run (the DVC stage)")
    parser.add_argument("--experiment", help="run this one experiment instead, into --out")
    parser.add_argument("--params", default="params.yaml")
    parser.add_argument("--code", help="the stage's code fingerprint, reports/plan/train_<algorithm>.txt")
    parser.add_argument("--data", required=True,
                        help="the prepared datasets' directory, data/prepared (with --experiment: the dataset's)")
    parser.add_argument("--out", required=True, help="the algorithm's runs directory (with --experiment: the run's)")
    parser.add_argument("--metrics", help="the stage's metrics file, every run's metrics by experiment")
    args = parser.parse_args(argv)
    if (args.algorithm is None) == (args.experiment is None):
        parser.error("give exactly one of --algorithm and --experiment")
    if args.algorithm is not None and (args.code is None or args.metrics is None):
        parser.error("--algorithm needs --code and --metrics")
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    try:
        params = load_params(args.params)
        return _one_off(args, params) if args.experiment is not None else _stage(args, params)
    except (ParamError, FileNotFoundError, ShardError) as exc:
        print(f"train: {exc}", file=sys.stderr)
        return 2
    except ProtocolError as exc:
        print(f"train: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
