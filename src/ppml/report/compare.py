"""What changed in the committed reports between two revisions, as Markdown a reviewer reads before merging.

``python -m ppml.report.compare REV_A REV_B`` (``make compare A=REV B=REV``) reads only what git holds at
each revision — ``reports/claims.json``, ``reports/runs/<algorithm>/<name>/{run,metrics,timing}.json`` (or
``reports/runs/<name>/...`` at revisions from before one folder per algorithm), ``reports/tables/*.md`` and
``reports/privacy.json`` — and prints:

* the ledger's counts at each revision (paper claims and diagnostics apart) and the claims whose verdict
  moved, appeared or disappeared, with both verdicts (and the cause of a non-PASS paper claim); ledgers from
  before kinds and verdicts are read too;
* for every run present at both revisions (runs are matched by experiment name, whichever layout each revision
  has), the headline metrics (:data:`HEADLINE`) that changed, grouped by
  algorithm; runs added and removed; the tables whose text changed;
* apart from them, the training time per algorithm at each revision (timing.json's ``seconds``; a revision
  from before timing.json has its timing fields in metrics.json): a clock measures the machine's load as much
  as the method, so it is shown, never compared as a result;
* privacy status changes (certified, the paper's and the tight epsilon).

It is read-only: no checkout, no dvc. One ``git ls-tree`` per revision and one ``git cat-file --batch`` for
all files keep it to a few subprocesses whatever the number of runs.
"""

from __future__ import annotations

import argparse
import difflib
import json
import math
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ppml.report.base import PAPER_CLAIM
from ppml.report.claims import counts_line, entry_kind, entry_parts, entry_verdict
from ppml.timing import is_timing

#: the metrics compared per run (the headline columns of the report tables), in display order
#: (traffic is not among them: an asynchronous run's counts follow its scheduling, so they live in comm.json)
HEADLINE = ("test_error", "test_logloss", "test_auc", "test_accuracy", "train_objective", "epochs")

_CLAIMS, _PRIVACY = "reports/claims.json", "reports/privacy.json"
_RUNS, _TABLES = "reports/runs/", "reports/tables/"
#: the files of a run directory compared
_RUN_FILES = ("metrics.json", "run.json", "timing.json")


class CompareError(Exception):
    """A revision that git does not know, or a committed report file that cannot be parsed; one line."""


@dataclass
class Snapshot:
    """The committed report files of one revision."""

    rev: str
    commit: str
    claims: dict[str, dict[str, Any]] | None = None  # id -> claim; None when the revision has no claims.json
    runs: dict[str, dict[str, Any]] = field(default_factory=dict)  # run name -> run.json + metrics.json
    timing: dict[str, dict[str, Any]] = field(default_factory=dict)  # run name -> timing.json's values
    tables: dict[str, str] = field(default_factory=dict)  # table name -> markdown
    privacy: dict[str, dict[str, Any]] | None = None  # run name -> privacy.json entry


def _git(repo: Path, *args: str, stdin: bytes | None = None) -> bytes:
    proc = subprocess.run(["git", "-C", str(repo), *args], input=stdin, capture_output=True, check=False)
    if proc.returncode != 0:
        msg = proc.stderr.decode(errors="replace").strip().splitlines()
        raise CompareError(f"git {args[0]} failed: {msg[-1] if msg else f'exit {proc.returncode}'}")
    return proc.stdout


def resolve(repo: Path, rev: str) -> str:
    """The commit id `rev` names; :class:`CompareError` naming `rev` when git knows no such commit."""
    proc = subprocess.run(["git", "-C", str(repo), "rev-parse", "--verify", "--quiet", "--end-of-options",
                           f"{rev}^{{commit}}"], capture_output=True, check=False)
    if proc.returncode != 0 or not proc.stdout.strip():
        raise CompareError(f"unknown revision {rev!r} (not a commit in {repo})")
    return proc.stdout.decode().strip()


def _run_parts(path: str) -> list[str]:
    """The parts below ``reports/runs`` of a run file (:data:`_RUN_FILES`) in either layout: ``[algorithm, name,
    file]`` (one folder per algorithm, :func:`ppml.config.run_dir`) or ``[name, file]`` (the flat layout of older
    revisions); [] for any other path."""
    parts = path[len(_RUNS):].split("/") if path.startswith(_RUNS) else []
    return parts if len(parts) in (2, 3) and parts[-1] in _RUN_FILES else []


def _run_name(path: str) -> str:
    """The experiment whose run file `path` is (its directory's name), in either layout."""
    return _run_parts(path)[-2]


def _wanted(path: str) -> bool:
    if path in (_CLAIMS, _PRIVACY):
        return True
    if path.startswith(_RUNS):
        return bool(_run_parts(path))
    return path.startswith(_TABLES) and path.endswith(".md") and "/" not in path[len(_TABLES):]


def _unshadowed(found: dict[str, str]) -> dict[str, str]:
    """`found` without the flat-layout files of a run that the revision also holds in its algorithm's folder
    (a copy left behind by the move to one folder per algorithm: the algorithm's folder is the run)."""
    nested = {_run_name(path) for path in found if len(_run_parts(path)) == 3}
    return {path: oid for path, oid in found.items() if len(_run_parts(path)) != 2 or _run_name(path) not in nested}


def _list(repo: Path, commit: str) -> dict[str, str]:
    """path -> blob id of the report files `commit` holds."""
    out = _git(repo, "ls-tree", "-r", "-z", "--full-tree", commit, "--", "reports")
    found = {}
    for entry in out.split(b"\0"):
        if not entry:
            continue
        meta, _, path = entry.decode().partition("\t")
        _mode, kind, oid = meta.split()
        if kind == "blob" and _wanted(path):
            found[path] = oid
    return _unshadowed(found)


def _cat(repo: Path, oids: list[str]) -> dict[str, bytes]:
    """Contents of the blobs, read through one ``git cat-file --batch``."""
    unique = list(dict.fromkeys(oids))
    if not unique:
        return {}
    raw = _git(repo, "cat-file", "--batch", stdin="".join(f"{o}\n" for o in unique).encode())
    blobs, pos = {}, 0
    for oid in unique:
        end = raw.index(b"\n", pos)
        header = raw[pos:end].decode().split()
        if len(header) != 3:
            raise CompareError(f"git cat-file: unexpected answer {raw[pos:end][:80]!r} for {oid}")
        size = int(header[2])
        blobs[oid] = raw[end + 1:end + 1 + size]
        pos = end + 1 + size + 1
    return blobs


def _json(rev: str, path: str, data: bytes) -> Any:
    try:
        return json.loads(data)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise CompareError(f"{rev}:{path}: not valid JSON ({exc})") from None


def load(repo: str | Path, revs: list[str]) -> list[Snapshot]:
    """The report snapshots of `revs` (each resolved first, so a bad one fails before any reading)."""
    repo = Path(repo)
    commits = [resolve(repo, rev) for rev in revs]
    listings = [_list(repo, c) for c in commits]
    blobs = _cat(repo, [oid for listing in listings for oid in listing.values()])
    snaps = []
    for rev, commit, listing in zip(revs, commits, listings):
        snap = Snapshot(rev=rev, commit=commit)
        timed: set[str] = set()  # runs with a timing.json
        legacy: dict[str, dict[str, Any]] = {}  # timing fields found in metrics.json / run.json
        for path, oid in listing.items():
            data = blobs[oid]
            if path == _CLAIMS:
                claims = _json(rev, path, data)
                if not isinstance(claims, list):
                    raise CompareError(f"{rev}:{path}: expected a list of claims")
                snap.claims = {c["id"]: c for c in claims if isinstance(c, dict) and "id" in c}
            elif path == _PRIVACY:
                entries = _json(rev, path, data).get("runs", [])
                snap.privacy = {e["name"]: e for e in entries if isinstance(e, dict) and "name" in e}
            elif path.endswith("/timing.json"):
                timing = _json(rev, path, data)
                values = timing.get("values") if isinstance(timing, dict) else None
                if isinstance(values, dict):
                    name = _run_name(path)
                    timed.add(name)
                    snap.timing[name] = values
            elif path.startswith(_RUNS):  # run.json (what the run was) and metrics.json, merged per run
                fields = _json(rev, path, data)
                if isinstance(fields, dict):
                    name = _run_name(path)
                    old = {k: fields.pop(k) for k in list(fields) if is_timing(k)}  # before timing.json
                    if old:
                        legacy.setdefault(name, {}).update(old)
                    run = snap.runs.setdefault(name, {})
                    if path.endswith("/run.json"):
                        snap.runs[name] = {**fields, **run}
                    else:
                        run.update(fields)
            else:
                snap.tables[path[len(_TABLES):-len(".md")]] = data.decode(errors="replace")
        for name, values in legacy.items():  # a run's own timing.json, where it has one, wins
            if name not in timed:
                snap.timing[name] = values
        snaps.append(snap)
    return snaps


def _cell(v: Any) -> str:
    if v is None:
        return "—"
    if isinstance(v, bool):
        return str(v).lower()
    if isinstance(v, float):
        if math.isnan(v):
            return "nan"
        return f"{v:.4g}" if abs(v) >= 1e4 or (v != 0 and abs(v) < 1e-3) else f"{v:.4f}"
    return str(v).replace("|", "\\|").replace("\n", " ")


def _signed(v: float) -> str:
    if math.isnan(v):
        return "nan"
    return f"{v:+.4g}" if abs(v) >= 1e4 or (v != 0 and abs(v) < 1e-3) else f"{v:+.4f}"


def _number(v: Any) -> float | None:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def _differs(a: Any, b: Any) -> bool:
    x, y = _number(a), _number(b)
    if x is not None and y is not None:
        if math.isnan(x) or math.isnan(y):
            return math.isnan(x) != math.isnan(y)
        return not math.isclose(x, y, rel_tol=1e-12, abs_tol=0.0)
    return a != b


def _table(header: list[str], rows: list[list[Any]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    return lines + ["| " + " | ".join(_cell(v) for v in row) + " |" for row in rows]


def _names(names: list[str]) -> str:
    return ", ".join(f"`{n}`" for n in names)


def claims_section(a: Snapshot, b: Snapshot) -> list[str]:
    """The ledger at each revision (paper claims and diagnostics apart) and every claim whose verdict moved,
    appeared or disappeared, with both verdicts; then those whose kind changed. Ledgers from before kinds and
    verdicts are read as :func:`ppml.report.claims.entry_verdict` and ``entry_kind`` say."""
    lines = ["## Claims", ""]
    if a.claims is None or b.claims is None:
        missing = [s.rev for s in (a, b) if s.claims is None]
        return lines + [f"No `{_CLAIMS}` at {', '.join(missing)}: claims not compared.", ""]
    old, new = a.claims, b.claims
    common = [i for i in new if i in old]
    changed = [i for i in common if entry_verdict(old[i]) != entry_verdict(new[i])]
    added = [i for i in new if i not in old]
    removed = [i for i in old if i not in new]
    rekinded = [i for i in common if i not in changed and entry_kind(old[i]) != entry_kind(new[i])]
    lines += [f"{len(changed)} verdict changes, {len(added)} claims added, {len(removed)} removed "
              f"({len(old)} → {len(new)} claims).", "",
              f"- {a.rev}: {counts_line(list(old.values()))}", f"- {b.rev}: {counts_line(list(new.values()))}", ""]
    header = ["claim", "kind", f"verdict ({a.rev})", f"verdict ({b.rev})", f"cause ({b.rev})", f"ours ({a.rev})",
              f"ours ({b.rev})"]

    def row(i: str) -> list[Any]:
        before, after = old.get(i), new.get(i)
        return [i, entry_kind(after if after is not None else before),
                None if before is None else entry_verdict(before), None if after is None else entry_verdict(after),
                (after or {}).get("cause"), (before or {}).get("ours"), (after or {}).get("ours")]

    for title, ids in (("Verdict changed", changed), ("Added", added), ("Removed", removed)):
        if ids:
            lines += [f"### {title}", ""] + _table(header, [row(i) for i in ids]) + [""]
    if rekinded:
        lines += ["### Kind changed, verdict not", ""] + _table(
            ["claim", f"kind ({a.rev})", f"kind ({b.rev})", "verdict"],
            [[i, entry_kind(old[i]), entry_kind(new[i]), entry_verdict(new[i])] for i in rekinded]) + [""]
    return lines + _parts_section(a, b)


def _parts(claims: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Every part of the ledger's paper statements by its id (a statement without parts is its one part), so
    that ledgers from before statements had parts compare with today's reading by reading."""
    return {p["id"]: p for c in claims.values() if entry_kind(c) == PAPER_CLAIM for p in entry_parts(c)
            if isinstance(p, dict) and "id" in p}


def _parts_section(a: Snapshot, b: Snapshot) -> list[str]:
    """The parts (readings, settings, datasets) whose verdict moved, matched by their ids."""
    old, new = _parts(a.claims or {}), _parts(b.claims or {})
    moved = [i for i in new if i in old and entry_verdict(old[i]) != entry_verdict(new[i])]
    gone = [i for i in old if i not in new]
    lines = [f"Parts of the paper statements, matched by id: {len(moved)} verdict changes, "
             f"{len([i for i in new if i not in old])} added, {len(gone)} removed ({len(old)} → {len(new)} parts).",
             ""]
    if moved:
        lines += ["### Part verdict changed", ""] + _table(
            ["part", f"verdict ({a.rev})", f"verdict ({b.rev})", f"ours ({a.rev})", f"ours ({b.rev})"],
            [[i, entry_verdict(old[i]), entry_verdict(new[i]), old[i].get("ours"), new[i].get("ours")]
             for i in moved]) + [""]
    return lines


def _changed_keys(old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    """The run's status and headline metrics that differ between two revisions, in display order."""
    return [key for key in ("status", *HEADLINE) if _differs(old.get(key), new.get(key))]


def metrics_section(a: Snapshot, b: Snapshot) -> list[str]:
    lines = ["## Headline metrics", "",
             f"Per run present at both revisions: {', '.join(HEADLINE)} and the run status, where they "
             "changed. Timing fields (seconds, *_seconds, sim_time, …) are not results: they are under "
             "Timing.", ""]
    common = sorted(set(a.runs) & set(b.runs))
    groups: dict[str, list[list[Any]]] = {}
    for name in common:
        old, new = a.runs[name], b.runs[name]
        rows = []
        for key in _changed_keys(old, new):
            x, y = _number(old.get(key)), _number(new.get(key))
            delta = _signed(y - x) if x is not None and y is not None else None
            if isinstance(old.get(key), int) and isinstance(new.get(key), int) and delta is not None:
                delta = f"{new[key] - old[key]:+d}"
            rows.append([name, key, old.get(key), new.get(key), delta])
        if rows:
            groups.setdefault(str(new.get("algorithm", old.get("algorithm", "?"))), []).extend(rows)
    unchanged = len(common) - len({r[0] for rows in groups.values() for r in rows})
    lines += [f"{len(common)} runs at both revisions: {len(common) - unchanged} changed, "
              f"{unchanged} unchanged.", ""]
    for algorithm in sorted(groups):
        lines += [f"### {algorithm}", ""]
        lines += _table(["run", "metric", a.rev, b.rev, "Δ"], groups[algorithm]) + [""]
    added, removed = sorted(set(b.runs) - set(a.runs)), sorted(set(a.runs) - set(b.runs))
    if added:
        lines += [f"Runs added ({len(added)}): {_names(added)}", ""]
    if removed:
        lines += [f"Runs removed ({len(removed)}): {_names(removed)}", ""]
    return lines


def _training_seconds(snap: Snapshot, names: list[str]) -> dict[str, tuple[int, float]]:
    """algorithm -> (runs timed, their total seconds: each run's mean ``seconds`` per seed times its seeds)."""
    totals: dict[str, tuple[int, float]] = {}
    for name in names:
        seconds = _number(snap.timing.get(name, {}).get("seconds"))
        if seconds is None:
            continue
        fields = snap.runs.get(name, {})
        seeds = _number(fields.get("seeds")) or 1.0
        count, total = totals.get(str(fields.get("algorithm", "?")), (0, 0.0))
        totals[str(fields.get("algorithm", "?"))] = (count + 1, total + seconds * seeds)
    return totals


def timing_section(a: Snapshot, b: Snapshot) -> list[str]:
    """Training time per algorithm at each revision, over the runs present at both: shown, not compared."""
    lines = ["## Timing", "",
             "Training time of the runs present at both revisions, per algorithm (each run's `seconds` per seed "
             "times its seeds, from timing.json, or metrics.json before it existed). Wall clocks measure the "
             "machine's load as much as the method: read, not compared.", ""]
    common = sorted(set(a.runs) & set(b.runs))
    old, new = _training_seconds(a, common), _training_seconds(b, common)
    rows = [[algorithm, f"{old.get(algorithm, (0, 0.0))[0]} / {new.get(algorithm, (0, 0.0))[0]}",
             *(f"{side[algorithm][1]:.1f}" if algorithm in side else None for side in (old, new))]
            for algorithm in sorted(set(old) | set(new))]
    if not rows:
        return lines + ["No timed run at both revisions.", ""]
    return lines + _table(["algorithm", "runs timed", f"seconds ({a.rev})", f"seconds ({b.rev})"], rows) + [""]


def tables_section(a: Snapshot, b: Snapshot) -> list[str]:
    lines = ["## Tables", ""]
    rows = []
    for name in sorted(set(a.tables) | set(b.tables)):
        old, new = a.tables.get(name), b.tables.get(name)
        if old == new:
            continue
        if old is None or new is None:
            rows.append([f"{name}.md", "added" if old is None else "removed", None, None])
            continue
        diff = list(difflib.unified_diff(old.splitlines(), new.splitlines(), lineterm="", n=0))
        plus = sum(1 for d in diff if d.startswith("+") and not d.startswith("+++"))
        minus = sum(1 for d in diff if d.startswith("-") and not d.startswith("---"))
        rows.append([f"{name}.md", "changed", plus, minus])
    if not rows:
        return lines + [f"No table in `{_TABLES}` changed.", ""]
    return lines + _table(["table", "", "lines +", "lines −"], rows) + [""]


def _privacy_fields(entry: dict[str, Any]) -> dict[str, Any]:
    paper, tight = entry.get("paper") or {}, entry.get("tight") or {}
    return {"status": entry.get("status"), "certified": entry.get("certified"),
            "paper epsilon": paper.get("epsilon") if isinstance(paper, dict) else None,
            "tight epsilon": tight.get("epsilon") if isinstance(tight, dict) else None,
            "delta": entry.get("delta")}


def privacy_section(a: Snapshot, b: Snapshot) -> list[str]:
    lines = ["## Privacy", ""]
    if a.privacy is None or b.privacy is None:
        missing = [s.rev for s in (a, b) if s.privacy is None]
        return lines + [f"No `{_PRIVACY}` at {', '.join(missing)}: privacy not compared.", ""]
    rows = []
    for name in sorted(set(a.privacy) & set(b.privacy)):
        old, new = _privacy_fields(a.privacy[name]), _privacy_fields(b.privacy[name])
        rows += [[name, key, old[key], new[key]] for key in old if _differs(old[key], new[key])]
    lines += [f"{len({r[0] for r in rows})} runs changed privacy status or epsilon.", ""]
    if rows:
        lines += _table(["run", "field", a.rev, b.rev], rows) + [""]
    added = sorted(set(b.privacy) - set(a.privacy))
    removed = sorted(set(a.privacy) - set(b.privacy))
    if added:
        lines += [f"Accounted runs added ({len(added)}): "
                  + ", ".join(f"`{n}` ({_cell(b.privacy[n].get('status'))})" for n in added), ""]
    if removed:
        lines += [f"Accounted runs removed ({len(removed)}): {_names(removed)}", ""]
    return lines


def result_changes(a: Snapshot, b: Snapshot) -> list[str]:
    """What moved between the revisions, one phrase per part (empty when no result changed): claims, runs and
    their headline metrics or status, tables, privacy. Timing is not a result and is never counted; numbers
    equal to 12 significant digits (the last bits of a float) count as equal."""
    out = []
    if a.claims is not None and b.claims is not None:
        moved = [i for i in set(a.claims) | set(b.claims)
                 if i not in a.claims or i not in b.claims
                 or entry_verdict(a.claims[i]) != entry_verdict(b.claims[i])
                 or entry_kind(a.claims[i]) != entry_kind(b.claims[i])]
        if moved:
            out.append(f"claims {len(moved)}")
        old, new = _parts(a.claims), _parts(b.claims)
        parts = [i for i in set(old) | set(new) if i not in old or i not in new
                 or entry_verdict(old[i]) != entry_verdict(new[i])]
        if parts and not moved:  # a part shown but not counted moved: no statement did
            out.append(f"parts {len(parts)}")
    elif (a.claims is None) != (b.claims is None):
        out.append("the claims ledger")
    runs = [n for n in set(a.runs) | set(b.runs) if n not in a.runs or n not in b.runs
            or _changed_keys(a.runs[n], b.runs[n])]
    if runs:
        out.append(f"runs {len(runs)}")
    tables = [t for t in set(a.tables) | set(b.tables) if a.tables.get(t) != b.tables.get(t)]
    if tables:
        out.append(f"tables {len(tables)}")
    if a.privacy is not None and b.privacy is not None:
        private = [n for n in set(a.privacy) | set(b.privacy) if n not in a.privacy or n not in b.privacy
                   or any(_differs(x, y) for x, y in zip(_privacy_fields(a.privacy[n]).values(),
                                                          _privacy_fields(b.privacy[n]).values()))]
        if private:
            out.append(f"privacy entries {len(private)}")
    return out


def compare_markdown(a: Snapshot, b: Snapshot) -> str:
    moved = result_changes(a, b)
    head = [f"# Reports: {a.rev} ({a.commit[:10]}) → {b.rev} ({b.commit[:10]})", "",
            "Read from the committed report files only (nothing re-run).", "",
            ("**No changes**: no verdict, run, headline metric, table or privacy entry differs (timing aside)."
             if not moved else f"**Changed**: {', '.join(moved)}."), ""]
    body = (claims_section(a, b) + metrics_section(a, b) + timing_section(a, b) + tables_section(a, b)
            + privacy_section(a, b))
    return "\n".join(head + body).rstrip() + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ppml.report.compare",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("rev_a", nargs="?", default="HEAD~1", help="the older revision (default HEAD~1)")
    parser.add_argument("rev_b", nargs="?", default="HEAD", help="the newer revision (default HEAD)")
    parser.add_argument("--repo", default=".", help="the git repository (default: the current directory)")
    args = parser.parse_args(argv)
    try:
        a, b = load(args.repo, [args.rev_a, args.rev_b])
    except CompareError as exc:
        print(f"compare: {exc}", file=sys.stderr)
        return 2
    sys.stdout.write(compare_markdown(a, b))
    return 0


if __name__ == "__main__":
    sys.exit(main())
