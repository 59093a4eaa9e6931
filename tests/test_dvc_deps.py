"""The stages' library dependencies in dvc.yaml cover every module the stage actually imports.

Stages list the parts of src/ppml they run rather than all of it (so that editing the report code does not
invalidate hours of training); this test keeps those lists honest.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from ppml.algorithms import ALGORITHMS

ROOT = Path(__file__).resolve().parents[1]

IMPORTS = {
    "download": ["stages/download.py"],
    "prepare": ["stages/prepare.py"],
    "train": ["stages/train.py", "-mppml.transport_ray"] + [f"-m{m}" for m in sorted(set(ALGORITHMS.values()))],
    "train_encrypted": ["stages/train.py", "-mppml.algorithms.paillier_sgd", "-mppml.algorithms.paillier_sqn",
                        "-mppml.data.prepared", "-mppml.transport_ray"],
}


def _loaded_ppml_files(scripts: list[str]) -> set[str]:
    """Files of ppml modules loaded after importing each stage script (without running it) and modules."""
    code = "\n".join([
        "import importlib, importlib.util, json, sys",
        "for target in sys.argv[1:]:",
        "    if target.startswith('-m'):",
        "        importlib.import_module(target[2:])",
        "    else:",
        "        spec = importlib.util.spec_from_file_location('stage', target)",
        "        spec.loader.exec_module(importlib.util.module_from_spec(spec))",
        "print(json.dumps(sorted(m.__file__ for n, m in sys.modules.items()",
        "                        if n.split('.')[0] == 'ppml' and getattr(m, '__file__', None))))",
    ])
    out = subprocess.run([sys.executable, "-c", code, *scripts], cwd=ROOT, capture_output=True, text=True,
                         check=True)
    return {str(Path(f).resolve().relative_to((ROOT / "src").resolve())) for f in json.loads(out.stdout)}


@pytest.mark.parametrize("stage", sorted(IMPORTS))
def test_stage_deps_cover_imported_modules(stage):
    deps = yaml.safe_load((ROOT / "dvc.yaml").read_text())["stages"][stage]["do"]["deps"]
    lib = [d[len("src/"):] for d in deps if d.startswith("src/ppml")]
    missing = [f for f in sorted(_loaded_ppml_files(IMPORTS[stage]))
               if not any(f == d or f.startswith(d.rstrip("/") + "/") for d in lib)]
    assert not missing, f"dvc.yaml stage {stage!r} does not list the library files it imports: {missing}"
