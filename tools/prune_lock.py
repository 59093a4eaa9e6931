"""Drop dvc.lock's entries for stages dvc.yaml no longer has; with ``--check``, list them and exit 1 instead.

    python tools/prune_lock.py           # what `make repro` and `make retrain` run after DVC
    python tools/prune_lock.py --check   # CI: the committed lock names only stages that exist

DVC rewrites a stage's own entry in dvc.lock and never removes one: a renamed or deleted experiment leaves its
entry behind for good. Every stage DVC runs parses and rewrites the whole lock, so those entries cost each
`dvc exp run -S` edit seconds per stage (half of the lock was such entries, from a stage group renamed long
ago). The stage names are read from dvc.yaml, each ``foreach`` over a params mapping expanded to
``<group>@<key>``, so this needs no DVC process. Entries are cut out as text, one ``  <name>:`` block each, so
the rest of the file keeps DVC's own formatting byte for byte; the file is replaced whole.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

import yaml

from ppml.config import load_params
from ppml.io import atomic_path

ROOT = Path(__file__).resolve().parents[1]
FOREACH = re.compile(r"^\$\{\s*([A-Za-z_][\w.]*)\s*\}$")
ENTRY = re.compile(r"^  (\S[^:]*):\s*$")  # a stage's block in dvc.lock's `stages:` mapping


def stage_names(dvc_yaml: Path, params: dict) -> set[str]:
    """Every stage of `dvc_yaml`, each ``foreach: ${mapping}`` expanded to ``<group>@<key>``."""
    out: set[str] = set()
    for name, stage in (yaml.safe_load(dvc_yaml.read_text()).get("stages") or {}).items():
        if "foreach" not in stage:
            out.add(name)
            continue
        match = FOREACH.match(str(stage["foreach"]))
        if match is None:
            raise ValueError(f"{dvc_yaml}: stages.{name}.foreach must be ${{<params mapping>}}, got "
                             f"{stage['foreach']!r}")
        items = params
        for part in match.group(1).split("."):
            items = items.get(part) if isinstance(items, dict) else None
        if not isinstance(items, dict):
            raise ValueError(f"{dvc_yaml}: stages.{name}.foreach names {match.group(0)}, which is not a mapping "
                             "of the params files")
        out.update(f"{name}@{key}" for key in items)
    return out


def split_entries(text: str) -> tuple[list[str], dict[str, list[str]]]:
    """(the lines before the first stage entry, stage name -> its block's lines) of a dvc.lock."""
    head: list[str] = []
    blocks: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in text.splitlines(keepends=True):
        match = ENTRY.match(line)
        if match is not None:
            current = blocks.setdefault(match.group(1), [])
        elif current is None:
            head.append(line)
            continue
        elif line.strip() and not line.startswith("    "):
            raise ValueError(f"dvc.lock: unexpected line after the stage entries: {line.rstrip()!r}")
        current.append(line)
    return head, blocks


def orphans(root: Path = ROOT) -> list[str]:
    """dvc.lock's stage entries that no stage of dvc.yaml has, in the lock's order."""
    names = stage_names(root / "dvc.yaml", load_params(root / "params.yaml"))
    _, blocks = split_entries((root / "dvc.lock").read_text())
    return [name for name in blocks if name not in names]


def prune(root: Path = ROOT) -> list[str]:
    """Remove the orphan entries from dvc.lock; returns their names."""
    gone = orphans(root)
    if gone:
        lock = root / "dvc.lock"
        head, blocks = split_entries(lock.read_text())
        kept = [line for name, block in blocks.items() if name not in gone for line in block]
        with atomic_path(lock) as tmp:
            tmp.write_text("".join(head + kept))
    return gone


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="list the orphan entries and exit 1 if any")
    args = parser.parse_args(argv)
    if args.check:
        gone = orphans()
        for name in gone:
            print(f"dvc.lock: entry {name!r} has no stage in dvc.yaml")
        if gone:
            print(f"{len(gone)} orphan dvc.lock entries: run `python tools/prune_lock.py`", file=sys.stderr)
        return 1 if gone else 0
    gone = prune()
    print(f"prune_lock: {len(gone)} dvc.lock entries of stages dvc.yaml no longer has removed"
          + (f" ({', '.join(gone[:3])}{', ...' if len(gone) > 3 else ''})" if gone else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
