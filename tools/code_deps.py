"""Each DVC stage group's code dependencies, from the import graph; checks or rewrites them in dvc.yaml.

    python tools/code_deps.py           # exit 1 and list the differences when dvc.yaml disagrees
    python tools/code_deps.py --write   # rewrite the deps lists of dvc.yaml (comments and layout kept)

A stage's code dependencies are exactly the library files it can import: the stage script, then every
``import ppml...`` / ``from ppml... import ...`` statement reachable from it, read from the source (function-
level imports included, so lazily imported modules count), with each package's ``__init__.py``. A train group
adds its algorithm's module, and the launcher (``ppml.launch``) of each transport its experiments use: the
links, and the carriers it imports (they register themselves with the links), come with it. So editing
``fdml.py`` re-runs only the stages whose closure holds it, and tests/test_dvc_deps.py fails whenever dvc.yaml
and this graph disagree.
"""

from __future__ import annotations

import argparse
import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src"

#: stage group -> (stage script, extra modules it loads by name rather than by an import statement)
GROUPS: dict[str, tuple[str, tuple[str, ...]]] = {
    "download": ("stages/download.py", ()),
    "prepare": ("stages/prepare.py", ()),
    "account": ("stages/account.py", ()),
}


def report_group() -> dict[str, tuple[str, tuple[str, ...]]]:
    """The report stage loads each paper's report module by name (``ppml.report.PAPER_REPORTS``)."""
    sys.path.insert(0, str(SRC))
    from ppml.report import PAPER_REPORTS

    return {"report": ("stages/report.py", tuple(PAPER_REPORTS))}


def train_groups() -> dict[str, tuple[str, tuple[str, ...]]]:
    """``train_<algorithm>`` for every algorithm of the registry: its module (loaded by name), and the launcher
    of every transport but inprocess that one of its experiments in params.yaml uses (also loaded by name,
    ``ppml.experiment.LAUNCHERS``): a group whose runs are all in-process does not depend on the links."""
    sys.path.insert(0, str(SRC))
    import yaml

    from ppml.algorithms import ALGORITHMS
    from ppml.config import section_of_algorithm
    from ppml.experiment import LAUNCHERS

    params = yaml.safe_load((ROOT / "params.yaml").read_text())
    groups = {}
    for alg, module in ALGORITHMS.items():
        blocks = (params.get(section_of_algorithm(alg)) or {}).values()
        transports = sorted({b.get("transport", "inprocess") for b in blocks if isinstance(b, dict)})
        groups[f"train_{alg}"] = ("stages/train.py", (module, *(LAUNCHERS[t] for t in transports if t in LAUNCHERS)))
    return groups


def _module_file(name: str) -> Path | None:
    """The file of module `name` under src/, or None when it is not a ppml module."""
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


def _imports(path: Path) -> set[str]:
    """Names of the ppml modules `path` imports anywhere in its body (``from a import b``: ``a.b`` when that
    is a module, else ``a``)."""
    tree = ast.parse(path.read_text(), filename=str(path))
    # the package a relative import starts from: a module's folder (for __init__.py, its own package)
    package = ".".join(path.relative_to(SRC).parts[:-1]) if path.is_relative_to(SRC) else ""
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*parent, base] if base else parent)
            for alias in node.names:
                out.add(f"{base}.{alias.name}" if _module_file(f"{base}.{alias.name}") else base)
    return {n for n in out if _module_file(n) is not None}


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


def expected() -> dict[str, list[str]]:
    """Stage group -> the code files its deps must list."""
    groups = {**GROUPS, **report_group(), **train_groups()}
    return {group: closure(script, modules) for group, (script, modules) in groups.items()}


def _stage_deps(stage: dict) -> list:
    return (stage.get("do") or stage)["deps"]


def differences(dvc_yaml: dict) -> list[str]:
    """Human-readable differences between dvc.yaml's code deps and the import graph (empty when equal)."""
    stages = dvc_yaml["stages"]
    problems = []
    for group, files in expected().items():
        if group not in stages:
            problems.append(f"dvc.yaml has no stage group {group!r}")
            continue
        listed = [d for d in _stage_deps(stages[group]) if d.startswith(("src/", "stages/"))]
        missing, extra = sorted(set(files) - set(listed)), sorted(set(listed) - set(files))
        if missing:
            problems.append(f"{group}: missing {', '.join(missing)}")
        if extra:
            problems.append(f"{group}: lists files it does not import: {', '.join(extra)}")
    return problems


def write(path: Path) -> None:
    """Rewrite the code part of every group's deps in `path`, keeping its data deps and the rest of the file."""
    from ruamel.yaml import YAML

    yaml = YAML()
    yaml.width = 4096
    yaml.indent(mapping=2, sequence=4, offset=2)
    data = yaml.load(path.read_text())
    for group, files in expected().items():
        deps = _stage_deps(data["stages"][group])
        keep = [d for d in deps if not str(d).startswith(("src/", "stages/"))]
        deps.clear()
        deps.extend([*files, *keep])
    with path.open("w") as fh:
        yaml.dump(data, fh)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help="rewrite dvc.yaml's code deps")
    args = parser.parse_args(argv)
    path = ROOT / "dvc.yaml"
    if args.write:
        write(path)
        return 0
    import yaml

    problems = differences(yaml.safe_load(path.read_text()))
    for line in problems:
        print(line)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
