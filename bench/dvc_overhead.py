"""DVC's bookkeeping around a small edit: a no-op `dvc status`, a bad `-S` value, and a one-run `-S` edit.

Runs in a scratch clone of the committed repository (``git clone`` of HEAD, with data/ and the DVC cache
hard-linked from this checkout when they are there, warmed as a used checkout is: bytecode compiled and the
plan stage's import cache filled; Python writes bytecode, as on a user's machine), so the checkout is never
touched:

1. ``dvc status`` with nothing changed, three times (the median is the figure);
2. ``dvc exp run -S`` with a value the algorithm refuses (``lam=-1``): seconds until it fails, and what
   ``git status`` shows afterwards (nothing but the edited params line, every output as committed);
3. DVC's own floor, nothing changed, every stage skipped: ``dvc repro`` and ``dvc exp run`` (twice each, the
   median), so the edit below can be read against what DVC spends with no stage to run;
4. ``dvc exp run -S 'params/local.yaml:local_experiments.local-a9a.lam=0.01'``: its wall time, split into each
   stage it ran (from the moment DVC announces a stage to the next) and the rest; "beyond the run" is the wall
   time less the train stage's own clock (timing.json's ``seconds`` times its seeds). The edit must train
   local-a9a alone (stages/train.py's line per run), else the bench fails.

Prints the machine's load average before and after: the figures hold for an idle machine.
Usage: ``python bench/dvc_overhead.py [--quick] [--json FILE]`` (FILE: the seconds measured), after committing
(the clone is of HEAD, whose dvc.lock must be current, else (4) re-runs whatever is stale). ``--quick`` (for the
test suite) runs (1) once and (2) only; (3) and (4) need data/prepared/a9a. On a fresh clone without data, (1)
measures a status that reports the missing data.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
GOOD = "params/local.yaml:local_experiments.local-a9a.lam=0.01"
BAD = "params/local.yaml:local_experiments.local-a9a.lam=-1"
TIMEOUT = 900  # seconds for any one command
TRAINED = re.compile(r"^train_\w+: run \d+ of \d+: (\S+)")


def _env() -> dict[str, str]:
    # as on a user's machine: Python writes bytecode (a machine that sets PYTHONDONTWRITEBYTECODE recompiles
    # every module in every stage)
    env = {k: v for k, v in os.environ.items() if not k.startswith("DVC_") and k != "PYTHONDONTWRITEBYTECODE"}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env["PYTHONPATH"] = "src"  # the clone's own code (relative: each stage runs from the clone's root)
    env.setdefault("DATA_MIRROR", str(ROOT.parent / "shared" / "datasets"))
    for key in ("GIT_AUTHOR_NAME", "GIT_COMMITTER_NAME"):
        env.setdefault(key, "bench")
    for key in ("GIT_AUTHOR_EMAIL", "GIT_COMMITTER_EMAIL"):
        env.setdefault(key, "bench@localhost")
    return env


def _dvc(repo: Path, *args: str) -> tuple[float, subprocess.CompletedProcess]:
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "dvc", *args], cwd=repo, env=_env(), capture_output=True,
                          text=True, timeout=TIMEOUT)
    return time.perf_counter() - start, done


def _timed_stages(repo: Path, *args: str) -> tuple[float, int, list[tuple[str, float]], list[str]]:
    """Run dvc, timing each stage from its "Running stage" line to the next line of that kind (or the end);
    also the experiments the train stages trained (stages/train.py's line per run)."""
    start = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "dvc", *args], cwd=repo, env=_env(), text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, bufsize=1)
    assert proc.stdout is not None
    marks: list[tuple[str, float]] = []
    trained: list[str] = []
    for line in proc.stdout:
        if line.startswith("Running stage '"):
            marks.append((line.split("'")[1], time.perf_counter()))
        elif (run := TRAINED.match(line)) is not None:
            trained.append(run.group(1))
    rc = proc.wait(timeout=TIMEOUT)
    end = time.perf_counter()
    stages = [(name, (marks[i + 1][1] if i + 1 < len(marks) else end) - at) for i, (name, at) in enumerate(marks)]
    return end - start, rc, stages, trained


def scratch_clone(into: Path) -> Path:
    repo = into / "repo"
    subprocess.run(["git", "clone", "--quiet", str(ROOT), str(repo)], check=True, env=_env(), timeout=TIMEOUT)
    for part in ("data", ".dvc/cache"):
        source = ROOT / part
        if source.is_dir():
            target = repo / part
            if target.exists():
                shutil.rmtree(target)
            subprocess.run(["cp", "-al", str(source), str(target)], check=True, timeout=TIMEOUT)
    # warm, as a checkout that has run anything is: bytecode compiled, the plan's import cache filled
    warm = ("import compileall, pathlib, ppml, ppml.codegraph as g, ppml.config as c; "
            "compileall.compile_dir(pathlib.Path(ppml.__file__).parent, quiet=1); "
            "g.fingerprints(c.load_params('params.yaml'))")
    subprocess.run([sys.executable, "-c", warm], cwd=repo, env=_env(), check=True, timeout=TIMEOUT)
    return repo


def noop(repo: Path, command: str) -> float:
    """Seconds of `dvc <command>` with nothing to run; fails if it ran (or failed) anything."""
    seconds, done = _dvc(repo, *command.split())
    if done.returncode != 0 or "Running stage" in done.stdout:
        raise SystemExit(f"no-op dvc {command} did not pass cleanly (exit {done.returncode}): {done.stderr[-400:]}")
    return seconds


def run_seconds(repo: Path, name: str) -> float:
    """The own clock of experiment `name` of params/local.yaml (seconds per seed times seeds)."""
    run = repo / "reports" / "runs" / "local" / name
    seconds = json.loads((run / "timing.json").read_text())["values"]["seconds"]
    return float(seconds) * float(json.loads((run / "run.json").read_text()).get("seeds", 1))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a small slice, for the test suite")
    parser.add_argument("--json", type=Path, help="also write the seconds measured to this file")
    args = parser.parse_args(argv)
    numbers: dict[str, float] = {}
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())} on {os.cpu_count()} cores")
    with tempfile.TemporaryDirectory(prefix="dvc-overhead-") as tmp:
        repo = scratch_clone(Path(tmp))
        has_data = (repo / "data" / "prepared" / "a9a").is_dir()
        times = []
        for _ in range(1 if args.quick else 3):
            seconds, done = _dvc(repo, "status", "-q")
            times.append(seconds)
        numbers["status_seconds"] = statistics.median(times)
        print(f"no-op dvc status: {statistics.median(times):.2f} s (median of {len(times)}: "
              f"{', '.join(f'{t:.2f}' for t in times)}){'' if has_data else '; no data/: it reports the missing data'}")

        seconds, done = _dvc(repo, "exp", "run", "-S", BAD)
        status = subprocess.run(["git", "status", "--porcelain"], cwd=repo, capture_output=True, text=True,
                                check=True).stdout.splitlines()
        refused = done.returncode != 0 and "lam" in done.stderr + done.stdout
        numbers["refused_seconds"] = seconds
        print(f"bad -S value ({BAD.split(':')[1]}): {'refused' if refused else 'NOT refused'} after {seconds:.2f} s; "
              f"git status afterwards: {status}")
        subprocess.run(["git", "checkout", "--", "params/"], cwd=repo, check=True)
        if not refused or status != [" M params/local.yaml"]:
            print("the bad value was not refused cleanly", file=sys.stderr)
            return 1

        if args.quick or not has_data:
            print("one-run -S edit: skipped (" + ("--quick" if args.quick else "no data/prepared/a9a in this "
                                                  "checkout: run `make repro` first") + ")")
        elif json.loads(_dvc(repo, "status", "--json")[1].stdout or "{}"):
            print("one-run -S edit: skipped (HEAD's dvc.lock is not current here: `dvc status` lists stale stages, "
                  "which the edit would re-run too)")
        else:
            for command in ("repro", "exp run"):
                floor = statistics.median(noop(repo, command) for _ in range(2))
                numbers[f"noop_{command.replace(' ', '_')}_seconds"] = floor
                print(f"no-op dvc {command} (nothing changed, every stage skipped; median of 2): {floor:.1f} s")
            total, rc, stages, trained = _timed_stages(repo, "exp", "run", "-S", GOOD)
            if rc != 0:
                print(f"dvc exp run -S {GOOD} failed (exit {rc})", file=sys.stderr)
                return 1
            if trained != ["local-a9a"]:
                print(f"the one-run edit trained {trained}, not local-a9a alone", file=sys.stderr)
                return 1
            own = run_seconds(repo, "local-a9a")
            numbers.update(edit_seconds=total, run_seconds=own, beyond_run_seconds=total - own)
            staged = sum(s for _, s in stages)
            print(f"one-run -S edit ({GOOD}): {total:.1f} s in all; the run's own clock {own:.1f} s; "
                  f"{total - own:.1f} s beyond the run")
            print(f"  experiments trained: {', '.join(trained) or 'none'}")
            for name, seconds in stages:
                print(f"  stage {name}: {seconds:.1f} s (from DVC's announcement to the next)")
            print(f"  before the first stage and between: {total - staged:.1f} s")
            print(f"  beyond the run, less the no-op exp run: {total - own - numbers['noop_exp_run_seconds']:.1f} s "
                  "(the four stages' processes, their lock writes and output hashing)")
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    if args.json:
        args.json.write_text(json.dumps(numbers, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
