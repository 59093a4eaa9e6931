"""The code each DVC stage group runs, from the import graph, and its fingerprint.

A stage group's code is exactly the library files its stages can import: the stage script, then every
``import ppml...`` / ``from ppml... import ...`` statement reachable from it, read from the source (function-
level imports included, so lazily imported modules count), with each package's ``__init__.py``. A train group
adds its algorithm's module and the launcher (``ppml.launch``) of each transport its experiments use: the links,
and the carriers they import (they register themselves with the links), come with it. So an edit to ``fdml.py``
changes only the fingerprints of the groups whose closure holds it.

The plan stage writes one fingerprint per group, ``reports/plan/<group>.txt`` (the sha256 and path of each of its
files), and each stage depends on its group's file alone: DVC re-runs exactly the stages whose code changed, and
its dvc.lock records one code dependency per stage instead of thirty.
"""

from __future__ import annotations

import ast
import functools
import hashlib
import json
import os
import sys
from pathlib import Path
from typing import Any, Mapping

ROOT = Path(__file__).resolve().parents[2]
SRC = ROOT / "src"

#: stage group -> (stage script, modules it loads by name rather than by an import statement)
Groups = dict[str, tuple[str, tuple[str, ...]]]

FIXED: Groups = {
    "download": ("stages/download.py", ()),
    "prepare": ("stages/prepare.py", ()),
    "account": ("stages/account.py", ()),
}


def groups(params: Mapping[str, Any]) -> Groups:
    """Every stage group of the pipeline: the fixed ones, report (which loads each paper's report module by name)
    and ``train_<algorithm>`` for every algorithm of the registry (its module, and the launcher of every
    transport but inprocess that one of its experiments in `params` uses: a group whose runs are all in-process
    does not depend on the links)."""
    from ppml.algorithms import ALGORITHMS
    from ppml.config import section_of_algorithm
    from ppml.experiment import LAUNCHERS
    from ppml.report import PAPER_REPORTS

    out: Groups = {**FIXED, "report": ("stages/report.py", tuple(PAPER_REPORTS))}
    for alg, module in ALGORITHMS.items():
        blocks = (params.get(section_of_algorithm(alg)) or {}).values()
        transports = sorted({b.get("transport", "inprocess") for b in blocks if isinstance(b, dict)})
        out[f"train_{alg}"] = ("stages/train.py", (module, *(LAUNCHERS[t] for t in transports if t in LAUNCHERS)))
    return out


@functools.cache
def _module_file(name: str) -> Path | None:
    """The file of module `name` under src/, or None when it is not a ppml module (cached: the tree does not
    change while a process reads it, and each group's closure asks for the same files again)."""
    if name != "ppml" and not name.startswith("ppml."):
        return None
    base = SRC.joinpath(*name.split("."))
    if (base / "__init__.py").is_file():
        return base / "__init__.py"
    if base.with_suffix(".py").is_file():
        return base.with_suffix(".py")
    return None


def _package_inits(name: str) -> list[Path]:
    parts = name.split(".")
    return [f for i in range(1, len(parts)) if (f := _module_file(".".join(parts[:i]))) is not None]


#: each file's import statements, by the sha256 of its bytes, kept beside Python's bytecode (gitignored):
#: parsing every module costs most of the plan stage, and an edit changes one or two files
CACHE = SRC / "ppml" / "__pycache__" / "codegraph-imports.json"

Statement = tuple[int, str, tuple[str, ...] | None]  # (level, module, names; None for ``import module``)


@functools.cache
def _cache() -> dict[str, list[Statement]]:
    try:
        data = json.loads(CACHE.read_text())
    except (OSError, ValueError):
        return {}
    if not isinstance(data, dict):
        return {}
    def valid(statements: Any) -> bool:
        return isinstance(statements, list) and all(
            isinstance(x, list) and len(x) == 3 and isinstance(x[0], int) and isinstance(x[1], str)
            and (x[2] is None or (isinstance(x[2], list) and all(isinstance(n, str) for n in x[2])))
            for x in statements)

    # a damaged or foreign file is ignored, never trusted: every entry is checked, the rest parsed again
    return {k: [(a, b, None if c is None else tuple(c)) for a, b, c in v] for k, v in data.items() if valid(v)}


_used: dict[str, list[Statement]] = {}


def _statements(path: Path) -> list[Statement]:
    """The import statements anywhere in `path`'s body (function-level ones included), from the cache when
    the file's bytes are the same."""
    data = path.read_bytes()
    digest = hashlib.sha256(data).hexdigest()
    found = _cache().get(digest)
    if found is None:
        found = []
        for node in ast.walk(ast.parse(data, filename=str(path))):
            if isinstance(node, ast.Import):
                found += [(0, alias.name, None) for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                found.append((node.level, node.module or "", tuple(alias.name for alias in node.names)))
    _used[digest] = found
    return found


def _save_cache() -> None:
    """Keep the statements of the files read in this process (none when Python writes no bytecode either)."""
    if sys.dont_write_bytecode or _used == _cache():
        return
    try:
        CACHE.parent.mkdir(exist_ok=True)
        tmp = CACHE.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps(_used))
        os.replace(tmp, CACHE)
    except OSError:  # a read-only tree: the next run parses again
        pass


@functools.cache
def _imports(path: Path) -> frozenset[str]:
    """Names of the ppml modules `path` imports anywhere in its body (``from a import b``: ``a.b`` when that
    is a module, else ``a``). Cached: every group's closure walks the same files."""
    # the package a relative import starts from: a module's folder (for __init__.py, its own package)
    package = ".".join(path.relative_to(SRC).parts[:-1]) if path.is_relative_to(SRC) else ""
    out: set[str] = set()
    for level, base, names in _statements(path):
        if names is None:
            out.add(base)
            continue
        if level:
            parent = package.split(".")[: len(package.split(".")) - level + 1]
            base = ".".join([*parent, base] if base else parent)
        for name in names:
            out.add(f"{base}.{name}" if _module_file(f"{base}.{name}") else base)
    return frozenset(n for n in out if _module_file(n) is not None)


def closure(script: str, modules: tuple[str, ...] = ()) -> list[str]:
    """Sorted repository paths of the stage script and every ppml file reachable from it and `modules`."""
    seen: set[Path] = set()
    todo = [ROOT / script] + [f for m in modules if (f := _module_file(m)) is not None]
    todo += [f for m in modules for f in _package_inits(m)]
    while todo:
        path = todo.pop()
        if path in seen:
            continue
        seen.add(path)
        for name in _imports(path):
            todo.append(_module_file(name))
            todo.extend(_package_inits(name))
    return sorted(str(p.relative_to(ROOT)) for p in seen)


def fingerprint(group: str, files: list[str]) -> str:
    """The text of ``reports/plan/<group>.txt``: a header, then ``<sha256>  <path>`` per file (sha256sum's
    format, so ``sha256sum -c`` checks it from the repository's root)."""
    lines = [f"# {group}: the code its stages run (ppml.codegraph), one file per line; stage plan writes this"]
    lines += [f"{hashlib.sha256((ROOT / f).read_bytes()).hexdigest()}  {f}" for f in files]
    return "\n".join(lines) + "\n"


def fingerprints(params: Mapping[str, Any]) -> dict[str, str]:
    """Group -> the text of its fingerprint file."""
    out = {group: fingerprint(group, closure(script, modules)) for group, (script, modules) in groups(params).items()}
    _save_cache()
    return out
