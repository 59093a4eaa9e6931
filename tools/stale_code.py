"""List the DVC stages whose code dependencies differ from dvc.lock; exit 1 if there is any.

    python tools/stale_code.py

CI runs this on a fresh clone after the tests (with bytecode writing on): a stage listed here would re-run on
every user's machine although nobody changed its code, either because the committed dvc.lock is stale or
because something the tests wrote (``__pycache__``, caches) entered a dependency hash. The code deps are stage
plan's (src/ppml and stages) and every other stage's fingerprint file (reports/plan/<group>.txt). Data dependencies
that are merely absent (a clone has no data/ until `make repro`) are not code and are not listed.
"""

from __future__ import annotations

import json
import subprocess
import sys

#: code deps: the sources (stage plan's), and the fingerprints every other stage depends on
CODE = ("src/", "stages", "reports/plan/")


def stale_code(status: dict) -> dict[str, list[str]]:
    """stage -> its code deps that ``dvc status --json`` reports as changed."""
    out: dict[str, list[str]] = {}
    for stage, changes in status.items():
        for change in changes if isinstance(changes, list) else []:
            deps = change.get("changed deps", {}) if isinstance(change, dict) else {}
            code = sorted(f"{path} ({what})" for path, what in deps.items() if path.startswith(CODE))
            if code:
                out[stage] = code
    return out


def main() -> int:
    proc = subprocess.run([sys.executable, "-m", "dvc", "status", "--json"], capture_output=True, text=True,
                          check=False)
    if proc.returncode != 0:
        print(f"dvc status failed: {proc.stderr.strip()[-2000:]}", file=sys.stderr)
        return 1
    stale = stale_code(json.loads(proc.stdout or "{}"))
    for stage, deps in sorted(stale.items()):
        print(f"{stage}: {', '.join(deps)}")
    if stale:
        print(f"{len(stale)} stage(s) list a code dependency that differs from dvc.lock", file=sys.stderr)
    return 1 if stale else 0


if __name__ == "__main__":
    sys.exit(main())
