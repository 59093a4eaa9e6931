"""Each stage group's code deps in dvc.yaml are exactly the files its import graph reaches.

tools/code_deps.py reads the import statements of the stage scripts and the library; this test fails when
dvc.yaml lists a file the stage cannot import (an edit there would re-run it for nothing) or misses one it
does (an edit there would leave stale results). A second check runs the imports for real, so the static
reading of the graph cannot miss what Python actually loads.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]


def _code_deps():
    spec = importlib.util.spec_from_file_location("code_deps", ROOT / "tools" / "code_deps.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


CODE_DEPS = _code_deps()
GROUPS = {**CODE_DEPS.GROUPS, **CODE_DEPS.report_group(), **CODE_DEPS.train_groups()}


def test_dvc_yaml_code_deps_equal_the_import_graph():
    problems = CODE_DEPS.differences(yaml.safe_load((ROOT / "dvc.yaml").read_text()))
    assert not problems, "run `python tools/code_deps.py --write`:\n" + "\n".join(problems)


def test_every_algorithm_has_its_train_group_and_params_section():
    from ppml.algorithms import ALGORITHMS
    from ppml.config import section_of_algorithm

    stages = yaml.safe_load((ROOT / "dvc.yaml").read_text())["stages"]
    for algorithm in ALGORITHMS:
        group = stages[f"train_{algorithm}"]
        assert group["foreach"] == "${" + section_of_algorithm(algorithm) + "}"
        assert f"{section_of_algorithm(algorithm)}.${{key}}" in group["do"]["params"]


def test_fdml_edit_reaches_only_the_fdml_group():
    expected = CODE_DEPS.expected()
    holding = {g for g, files in expected.items() if "src/ppml/algorithms/fdml.py" in files}
    assert holding == {"train_fdml"}
    holding = {g for g, files in expected.items() if "src/ppml/algorithms/paillier_sgd.py" in files}
    assert holding == {"train_paillier_sgd"}


def _loaded_ppml_files(script: str, modules: tuple[str, ...]) -> set[str]:
    """Files of ppml modules loaded after importing the stage script (without running it) and `modules`."""
    code = "\n".join([
        "import importlib, importlib.util, json, sys",
        "spec = importlib.util.spec_from_file_location('stage', sys.argv[1])",
        "spec.loader.exec_module(importlib.util.module_from_spec(spec))",
        "for name in sys.argv[2:]:",
        "    importlib.import_module(name)",
        "print(json.dumps(sorted(m.__file__ for n, m in sys.modules.items()",
        "                        if n.split('.')[0] == 'ppml' and getattr(m, '__file__', None))))",
    ])
    out = subprocess.run([sys.executable, "-c", code, script, *modules], cwd=ROOT, capture_output=True,
                         text=True, check=True)
    return {str(Path(f).resolve().relative_to(ROOT.resolve())) for f in json.loads(out.stdout)}


@pytest.mark.parametrize("group", sorted(GROUPS))
def test_static_graph_covers_what_python_loads(group):
    script, modules = GROUPS[group]
    missing = _loaded_ppml_files(script, modules) - set(CODE_DEPS.closure(script, modules))
    assert not missing, f"{group}: the static import graph misses {sorted(missing)}"


def test_stale_code_lists_only_changed_code_deps():
    spec = importlib.util.spec_from_file_location("stale_code", ROOT / "tools" / "stale_code.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    status = {
        "train_fdml@fdml-a9a": [{"changed deps": {"src/ppml/algorithms/fdml.py": "modified",
                                                  "data/prepared/a9a": "deleted"}}],
        "train_pp_admm@pp_admm-adult-eps1": [{"changed deps": {"data/prepared/adult": "deleted"}}],
        "download@a9a": [{"changed outs": {"data/raw/a9a": "deleted"}}],
        "report": ["always changed"],
    }
    assert module.stale_code(status) == {"train_fdml@fdml-a9a": ["src/ppml/algorithms/fdml.py (modified)"]}
