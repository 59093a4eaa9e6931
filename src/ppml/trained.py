"""Which runs of a train stage are current, and writing a run directory whole.

A train stage (stages/train.py, one per algorithm) owns ``reports/runs/<algorithm>/``, one directory per
experiment (:func:`ppml.config.run_dir`). Each directory ends with ``inputs.json``: what the run was computed
from, i.e. its parameter block, the pipeline seed, the sha256 of every file of its prepared dataset and of the
stage's code fingerprint (``reports/plan/train_<algorithm>.txt``, ppml.codegraph), and one digest of them all.
When DVC re-runs the stage (its parameter file, data or code changed), a run whose recorded digest equals the
one computed now is current and kept as it is; every other run is trained again. So a one-run ``dvc exp run -S``
edit trains that run alone, a code edit re-trains the algorithm's every run, and ``make retrain`` (which
removes the inputs.json files, tools/retrain.py) re-trains all.

A run is written into a temporary sibling directory and renamed into place only when complete, so a run
directory is always the whole output of one run: a crash or a failure leaves the previous one (or none).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
from pathlib import Path
from typing import Any, Mapping

from ppml.io import read_json

log = logging.getLogger(__name__)

#: the files of a run directory, in the order they are written; inputs.json comes last
PARTS = ("history", "ledger", "comm", "privacy", "timing", "run", "metrics")
INPUTS = "inputs.json"
_TEMP = ".partial-"  # prefix of a run directory being written
_OLD = ".replaced-"  # prefix of the directory a finished run replaces, removed right after


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def data_files(data_dir: str | Path) -> dict[str, str]:
    """sha256 of every file of a prepared dataset directory, by its path relative to the directory."""
    root = Path(data_dir)
    if not (root / "manifest.json").is_file():
        raise FileNotFoundError(f"{root / 'manifest.json'}: not found (run the prepare stage first)")
    return {p.relative_to(root).as_posix(): _sha256(p) for p in sorted(root.rglob("*")) if p.is_file()}


def inputs(name: str, block: Mapping[str, Any], *, seed: Any, data: Mapping[str, str], code: str) -> dict:
    """What run `name` is computed from (see the module docstring), with ``digest``: the sha256 of the rest."""
    facts = {"experiment": name, "params": dict(block), "seed": seed, "dataset": block.get("dataset"),
             "data": dict(data), "code": hashlib.sha256(code.encode()).hexdigest()}
    canonical = json.dumps(facts, sort_keys=True, separators=(",", ":"), allow_nan=False)
    return {"digest": hashlib.sha256(canonical.encode()).hexdigest(), **facts}


def is_current(run_dir: str | Path, expected: Mapping[str, Any]) -> bool:
    """Whether `run_dir` holds every part of a run whose recorded inputs have `expected`'s digest."""
    run_dir = Path(run_dir)
    if not all((run_dir / f"{part}.json").is_file() for part in PARTS):
        return False
    try:
        recorded = read_json(run_dir / INPUTS)
    except (OSError, ValueError):  # absent (a forced re-run, an older layout) or damaged: not current
        return False
    return isinstance(recorded, dict) and recorded.get("digest") == expected["digest"]


def _write(path: Path, data: Any) -> None:
    path.write_text(json.dumps(data, indent=2, sort_keys=False, allow_nan=False) + "\n")


def write_run(run_dir: str | Path, outputs: Mapping[str, Any], recorded: Mapping[str, Any]) -> None:
    """Write a run's parts and then its inputs.json into a temporary sibling of `run_dir`, then put it in
    `run_dir`'s place (the previous directory, if any, is removed only after the new one is in place)."""
    run_dir = Path(run_dir)
    run_dir.parent.mkdir(parents=True, exist_ok=True)
    temp = run_dir.parent / f"{_TEMP}{run_dir.name}"
    old = run_dir.parent / f"{_OLD}{run_dir.name}"
    for leftover in (temp, old):
        if leftover.exists():
            shutil.rmtree(leftover)
    temp.mkdir()
    try:
        for part in PARTS:
            _write(temp / f"{part}.json", outputs[part])
        _write(temp / INPUTS, dict(recorded))
        if run_dir.exists():
            os.replace(run_dir, old)
        os.replace(temp, run_dir)
    finally:
        for leftover in (temp, old):
            if leftover.exists():
                shutil.rmtree(leftover)


def prune(out: str | Path, keep: set[str]) -> list[str]:
    """Remove the entries of `out` that are not run directories of `keep` (experiments no longer in the
    parameters, leftovers of an interrupted write); returns the names removed."""
    out = Path(out)
    removed = []
    for entry in sorted(out.iterdir()) if out.is_dir() else []:
        if entry.name in keep and entry.is_dir():
            continue
        shutil.rmtree(entry) if entry.is_dir() else entry.unlink()
        removed.append(entry.name)
    return removed
