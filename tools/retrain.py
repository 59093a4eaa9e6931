"""Re-run every stage of the pipeline for real (``dvc repro --force``), showing which stage runs and what is left.

    python tools/retrain.py            # what `make retrain` runs (then `make docs`)
    python tools/retrain.py --dry      # the stages and the expected time, nothing run

A fresh clone's `make repro` re-uses the committed results (dvc.lock says they are current) and only downloads
and prepares the data; this re-trains everything. Progress is one line per stage: n of N, the elapsed time, and
the expected time left, from the last run's own clocks (each run's ``seconds`` per seed times its seeds, in
reports/runs/<name>/timing.json) plus the bookkeeping seen so far per stage. DVC's own output goes to
.dvc/tmp/retrain.log; on a failure its last lines are printed and the exit code is DVC's.
Commit the results afterwards; ``make compare A=<the commit before>`` then shows which verdicts moved (it reads
committed reports only).
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
LOG = ROOT / ".dvc" / "tmp" / "retrain.log"
RUNNING = re.compile(r"^Running stage '([^']+)':")


def stages() -> list[str]:
    """Every stage of dvc.yaml, foreach groups expanded, in dvc's listing order."""
    out = subprocess.run([sys.executable, "-m", "dvc", "stage", "list", "--name-only"], cwd=ROOT,
                         capture_output=True, text=True, check=True).stdout
    return [line.strip() for line in out.splitlines() if line.strip()]


def expected_seconds(stage: str) -> float:
    """The last run's own clock of a train stage (seconds per seed times seeds), else 0."""
    if not stage.startswith("train_"):
        return 0.0
    run = ROOT / "reports" / "runs" / stage.split("@", 1)[1]
    try:
        seconds = json.loads((run / "timing.json").read_text())["values"]["seconds"]
        seeds = json.loads((run / "run.json").read_text()).get("seeds", 1)
        return float(seconds) * float(seeds)
    except (OSError, ValueError, KeyError, TypeError):
        return 0.0


def clock(seconds: float) -> str:
    seconds = int(round(seconds))
    return f"{seconds // 3600}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dry", action="store_true", help="list the stages and the expected time only")
    args = parser.parse_args(argv)
    names = stages()
    expected = {name: expected_seconds(name) for name in names}
    print(f"retrain: {len(names)} stages; the last run's own clocks add up to {clock(sum(expected.values()))} "
          f"(bookkeeping and the data stages come on top)", flush=True)
    if args.dry:
        return 0
    LOG.parent.mkdir(parents=True, exist_ok=True)
    start = time.monotonic()
    done: list[str] = []
    current, current_start = None, start
    with LOG.open("w") as log:
        proc = subprocess.Popen([sys.executable, "-m", "dvc", "repro", "--force"], cwd=ROOT, text=True,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, bufsize=1)
        assert proc.stdout is not None
        for line in proc.stdout:
            log.write(line)
            log.flush()
            match = RUNNING.match(line)
            if not match:
                continue
            now = time.monotonic()
            if current is not None:
                done.append(current)
            current, current_start = match.group(1), now
            elapsed = now - start
            # bookkeeping per stage so far: the elapsed time beyond the finished stages' own clocks
            overhead = max(0.0, elapsed - sum(expected.get(n, 0.0) for n in done)) / max(1, len(done))
            left = sum(expected.get(n, 0.0) + overhead for n in names if n not in done)
            print(f"[{len(done) + 1}/{len(names)}] {current}  elapsed {clock(elapsed)}, about {clock(left)} left",
                  flush=True)
        rc = proc.wait()
    total = time.monotonic() - start
    if rc != 0:
        tail = LOG.read_text().splitlines()[-30:]
        print("\n".join(tail), file=sys.stderr)
        print(f"retrain: dvc repro failed (exit {rc}) after {clock(total)}, at stage {current}; the whole log is "
              f"{LOG.relative_to(ROOT)}", file=sys.stderr)
        return rc
    print(f"retrain: {len(done) + (current is not None)} stages re-run in {clock(total)}; the log is "
          f"{LOG.relative_to(ROOT)}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
