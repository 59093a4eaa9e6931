"""Re-train every experiment of the pipeline for real (then account and report), showing progress and time left.

    python tools/retrain.py            # what `make retrain` runs (then `make docs`)
    python tools/retrain.py --dry      # the stages, the runs and the expected time, nothing run

A fresh clone's `make repro` re-uses the committed results (dvc.lock says they are current) and only downloads
and prepares the data; this re-trains everything (the data stages re-run only if their inputs changed, as in
`make repro`). A train stage keeps the runs whose recorded inputs are unchanged (ppml.trained), so this first
removes every run's inputs.json: DVC then sees the train stages' outputs changed and runs them, each training
all its runs again, then account and report. An interrupted retrain resumes with `make repro`, which trains only
the runs not yet redone. Progress is one line per stage and per run: n of N, the elapsed time, and the expected
time left, from the last run's own clocks (each run's ``seconds`` per seed times its seeds,
reports/runs/<algorithm>/<name>/timing.json) plus the bookkeeping seen so far. DVC's own output goes to
.dvc/tmp/retrain.log; on a failure its last lines are printed and the exit code is DVC's. Commit the results
afterwards; ``make compare A=<the commit before>`` then shows which verdicts moved (it reads committed reports).
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RUNS = ROOT / "reports" / "runs"
LOG = ROOT / ".dvc" / "tmp" / "retrain.log"
RUNNING = re.compile(r"^Running stage '([^']+)':")
RUN = re.compile(r"^(train_\w+): run (\d+) of (\d+): (\S+)")  # stages/train.py's line per run


def stages() -> list[str]:
    """Every stage of dvc.yaml, foreach groups expanded, in dvc's listing order."""
    out = subprocess.run([sys.executable, "-m", "dvc", "stage", "list", "--name-only"], cwd=ROOT,
                         capture_output=True, text=True, check=True).stdout
    return [line.strip() for line in out.splitlines() if line.strip()]


def run_seconds(run: Path) -> float:
    """A run directory's last own clock (seconds per seed times seeds), else 0."""
    try:
        seconds = json.loads((run / "timing.json").read_text())["values"]["seconds"]
        seeds = json.loads((run / "run.json").read_text()).get("seeds", 1)
        return float(seconds) * float(seeds)
    except (OSError, ValueError, KeyError, TypeError):
        return 0.0


def expected_runs(names: list[str]) -> dict[tuple[str, str], float]:
    """(train stage, experiment) -> its last own clock, for every run directory of every train stage."""
    out = {}
    for stage in names:
        if stage.startswith("train_"):
            folder = RUNS / stage.removeprefix("train_")
            for run in sorted(folder.iterdir()) if folder.is_dir() else []:
                if run.is_dir() and not run.name.startswith("."):
                    out[(stage, run.name)] = run_seconds(run)
    return out


def mark_stale() -> int:
    """Remove every run's inputs.json, so that each train stage re-trains all its runs; returns how many."""
    marks = sorted(RUNS.glob("*/*/inputs.json"))
    for mark in marks:
        mark.unlink()
    return len(marks)


def clock(seconds: float) -> str:
    seconds = int(round(seconds))
    return f"{seconds // 3600}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dry", action="store_true", help="list the stages and the expected time only")
    args = parser.parse_args(argv)
    names = stages()
    expected = expected_runs(names)
    print(f"retrain: {len(names)} stages, {len(expected)} runs; the last runs' own clocks add up to "
          f"{clock(sum(expected.values()))} (bookkeeping and the data stages come on top)", flush=True)
    if args.dry:
        return 0
    print(f"retrain: {mark_stale()} runs marked for training (their inputs.json removed)", flush=True)
    LOG.parent.mkdir(parents=True, exist_ok=True)
    start = time.monotonic()
    done: set[tuple[str, str]] = set()  # runs finished (another line followed theirs)
    stage, run, steps = None, None, 0
    with LOG.open("w") as log:
        proc = subprocess.Popen([sys.executable, "-m", "dvc", "repro"], cwd=ROOT, text=True,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, bufsize=1)
        assert proc.stdout is not None
        for line in proc.stdout:
            log.write(line)
            log.flush()
            at_stage, at_run = RUNNING.match(line), RUN.match(line)
            if not (at_stage or at_run):
                continue
            if run is not None:
                done.add(run)
            run = None
            if at_stage:
                stage, steps = at_stage.group(1), steps + 1
                where = f"[stage {steps}/{len(names)}] {stage}"
            else:
                run = (at_run.group(1), at_run.group(4))
                where = f"[stage {steps}/{len(names)}] {stage}, run {at_run.group(2)} of {at_run.group(3)}: {run[1]}"
            elapsed = time.monotonic() - start
            # bookkeeping so far: the elapsed time beyond the finished runs' own clocks, per stage begun
            overhead = max(0.0, elapsed - sum(expected.get(r, 0.0) for r in done)) / max(1, steps)
            left = sum(s for r, s in expected.items() if r not in done) + overhead * (len(names) - steps)
            print(f"{where}  elapsed {clock(elapsed)}, about {clock(left)} left", flush=True)
        rc = proc.wait()
    total = time.monotonic() - start
    if rc != 0:
        tail = LOG.read_text().splitlines()[-30:]
        print("\n".join(tail), file=sys.stderr)
        print(f"retrain: dvc repro failed (exit {rc}) after {clock(total)}, at stage {stage}; the whole log is "
              f"{LOG.relative_to(ROOT)}; `make repro` resumes with the runs not yet redone", file=sys.stderr)
        return rc
    print(f"retrain: {steps} stages and {len(done) + (run is not None)} runs re-run in {clock(total)}; the log is "
          f"{LOG.relative_to(ROOT)}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
