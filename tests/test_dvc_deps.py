"""Each stage depends on its group's code fingerprint, and the fingerprint holds exactly what the group imports.

ppml.codegraph reads the import statements of the stage scripts and the library; stage plan writes one
fingerprint per group (reports/plan/<group>.txt). These tests fail when dvc.yaml's stages stop naming their
group's fingerprint (an edit would then re-run nothing, or everything), when the committed fingerprints differ
from the tree (a stale dvc.lock), or when the static reading of the graph misses what Python actually loads.
"""

from __future__ import annotations

import functools
import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from ppml import codegraph
from ppml.config import load_params

ROOT = Path(__file__).resolve().parents[1]
PARAMS = load_params(ROOT / "params.yaml")
GROUPS = codegraph.groups(PARAMS)
DVC = yaml.safe_load((ROOT / "dvc.yaml").read_text())


def _body(stage: dict) -> dict:
    return stage.get("do") or stage


def test_every_stage_group_depends_on_its_own_fingerprint_and_no_source_file():
    stages = DVC["stages"]
    assert set(stages) == {"plan", *GROUPS}
    for group in GROUPS:
        deps = _body(stages[group])["deps"]
        assert deps[0] == f"reports/plan/{group}.txt", group
        assert not [d for d in deps if d.startswith(("src/", "stages/"))], group
    plan = stages["plan"]
    assert sorted(next(iter(o)) for o in plan["outs"]) == sorted(f"reports/plan/{g}.txt" for g in GROUPS)
    assert all(next(iter(o.values())) == {"cache": False, "persist": True} for o in plan["outs"])
    assert {"src/ppml", "stages"} <= set(plan["deps"])


def test_the_plan_stage_and_top_level_params_name_every_params_file():
    files = yaml.safe_load((ROOT / "params.yaml").read_text())["params_files"]
    assert DVC["vars"] == ["params/datasets.yaml"]  # only the data stages are templated
    assert DVC["params"] == ["params.yaml", *files]
    assert DVC["stages"]["plan"]["deps"][2:] == ["params.yaml", *files]
    assert sorted(files) == sorted(str(p.relative_to(ROOT)) for p in (ROOT / "params").glob("*.yaml"))


def test_committed_fingerprints_equal_the_tree():
    for group, text in codegraph.fingerprints(PARAMS).items():
        assert (ROOT / "reports" / "plan" / f"{group}.txt").read_text() == text, (
            f"reports/plan/{group}.txt is stale: run `dvc repro` (stage plan, then what it changed)")


def test_the_import_cache_never_changes_a_fingerprint(tmp_path, monkeypatch):
    """Fingerprints read through the cache of import statements equal those from parsing every file; a cache
    that is damaged, or holds another file's statements under a digest no file has, changes nothing."""
    def fresh(cache: Path, write: bool) -> dict[str, str]:
        monkeypatch.setattr(codegraph, "CACHE", cache)
        monkeypatch.setattr(sys, "dont_write_bytecode", not write)
        codegraph._cache.cache_clear()
        codegraph._imports.cache_clear()
        codegraph._used.clear()
        return codegraph.fingerprints(PARAMS)

    parsed = fresh(tmp_path / "none.json", write=False)
    assert not (tmp_path / "none.json").exists()  # no bytecode written: no cache either
    cache = tmp_path / "imports.json"
    assert fresh(cache, write=True) == parsed and cache.is_file()
    stored = json.loads(cache.read_text())
    assert fresh(cache, write=True) == parsed  # every file from the cache
    cache.write_text(json.dumps({"0" * 64: [[0, "ppml.algorithms.fdml", None]], **stored}))
    assert fresh(cache, write=True) == parsed and json.loads(cache.read_text()) == stored  # unused: dropped
    damaged = dict(stored)
    damaged[next(iter(stored))] = [[0, 5, "ppml"]]  # a real file's digest, a malformed entry: parsed again
    cache.write_text(json.dumps(damaged))
    assert fresh(cache, write=True) == parsed and json.loads(cache.read_text()) == stored
    cache.write_text("{not json")
    assert fresh(cache, write=True) == parsed
    fresh(tmp_path / "none.json", write=False)  # the next test starts from no cache held in memory


def test_every_algorithm_has_its_train_stage_with_persistent_outputs():
    from ppml.algorithms import ALGORITHMS

    stages = DVC["stages"]
    for algorithm in ALGORITHMS:
        stage = stages[f"train_{algorithm}"]
        assert f"--algorithm {algorithm} " in stage["cmd"], algorithm
        assert stage["deps"] == [f"reports/plan/train_{algorithm}.txt", "data/prepared", f"params/{algorithm}.yaml"]
        assert stage["params"] == ["seed"]
        assert stage["outs"] == [{f"reports/runs/{algorithm}": {"cache": False, "persist": True}}]
        assert stage["metrics"] == [{f"reports/metrics/{algorithm}.json": {"cache": False, "persist": True}}]


def test_the_report_outputs_persist_so_its_figures_can_be_reused():
    """DVC deletes a stage's outputs before it runs unless they persist: the report would find no PNG to re-use
    (ppml.report.figcache) and draw every figure again. It replaces each output whole itself."""
    report = DVC["stages"]["report"]
    outs = [*report["outs"], *report["metrics"]]
    assert outs and all(next(iter(o.values())) == {"cache": False, "persist": True} for o in outs)
    assert {next(iter(o)) for o in report["outs"]} == {"reports/tables", "reports/claims.json", "reports/claims.md",
                                                       "reports/plots"}


@functools.cache
def _closures() -> dict[str, frozenset[str]]:
    """Every stage group's code closure (the files an edit of which re-runs the group)."""
    return {g: frozenset(codegraph.closure(*GROUPS[g])) for g in GROUPS}


def _holding(path: str) -> set[str]:
    """The stage groups an edit of `path` re-runs."""
    return {g for g, files in _closures().items() if path in files}


def test_fdml_edit_reaches_only_the_fdml_group():
    assert _holding("src/ppml/algorithms/fdml.py") == {"train_fdml"}
    assert _holding("src/ppml/algorithms/paillier_sgd.py") == {"train_paillier_sgd"}


def test_a_cipher_edit_reaches_only_the_paillier_groups():
    """FDML's parties run in their own processes through ppml.launch.party, which names the Paillier
    coordinator (ppml.algorithms._hetero_names) but never imports the protocol: an edit of the cipher or the
    encrypted products re-runs the two Paillier stages, not FDML's 55 runs."""
    for changed in ("src/ppml/crypto/paillier.py", "src/ppml/crypto/costs.py", "src/ppml/algorithms/_hetero_lr.py"):
        assert _holding(changed) == {"train_paillier_sgd", "train_paillier_sqn"}, changed
    assert "src/ppml/launch/party.py" in _closures()["train_fdml"]


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
    missing = _loaded_ppml_files(script, modules) - set(codegraph.closure(script, modules))
    assert not missing, f"{group}: the static import graph misses {sorted(missing)}"


def test_stale_code_lists_only_changed_code_deps():
    module = _tool("stale_code")
    status = {
        "train_fdml@fdml-a9a": [{"changed deps": {"src/ppml/algorithms/fdml.py": "modified",
                                                  "data/prepared/a9a": "deleted"}}],
        "train_pp_admm@pp_admm-adult-eps1": [{"changed deps": {"data/prepared/adult": "deleted"}}],
        "download@a9a": [{"changed outs": {"data/raw/a9a": "deleted"}}],
        "plan": [{"changed deps": {"src/ppml": "modified"}}],
        "train_local@local-a9a": [{"changed deps": {"reports/plan/train_local.txt": "modified"}}],
        "report": ["always changed"],
    }
    assert module.stale_code(status) == {"train_fdml@fdml-a9a": ["src/ppml/algorithms/fdml.py (modified)"],
                                         "plan": ["src/ppml (modified)"],
                                         "train_local@local-a9a": ["reports/plan/train_local.txt (modified)"]}


def _tool(name: str):
    spec = importlib.util.spec_from_file_location(name, ROOT / "tools" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_committed_lock_names_only_stages_of_dvc_yaml():
    prune_lock = _tool("prune_lock")
    assert prune_lock.orphans(ROOT) == [], "dvc.lock holds entries of removed stages: run tools/prune_lock.py"
    # the expansion agrees with DVC's listing (the names of the committed lock, which DVC wrote)
    assert prune_lock.stage_names(ROOT / "dvc.yaml", PARAMS) == set(
        prune_lock.split_entries((ROOT / "dvc.lock").read_text())[1])


def test_prune_lock_cuts_only_the_orphan_blocks(tmp_path):
    prune_lock = _tool("prune_lock")
    (tmp_path / "params.yaml").write_text("seed: 1\nruns:\n  a: {x: 1}\n  b: {x: 2}\n")
    (tmp_path / "dvc.yaml").write_text("stages:\n  plan:\n    cmd: 'true'\n"
                                       "  train:\n    foreach: ${runs}\n    do:\n      cmd: echo ${key}\n")
    kept = "  train@a:\n    cmd: echo a\n    outs:\n    - path: x\n\n  plan:\n    cmd: 'true'\n"
    gone = "  train@old:\n    cmd: echo old\n    deps:\n    - path: y\n      md5: 00\n"
    (tmp_path / "dvc.lock").write_text("schema: '2.0'\nstages:\n" + gone + kept + "  old_group:\n    cmd: x\n")
    assert prune_lock.orphans(tmp_path) == ["train@old", "old_group"]
    assert prune_lock.prune(tmp_path) == ["train@old", "old_group"]
    assert (tmp_path / "dvc.lock").read_text() == "schema: '2.0'\nstages:\n" + kept
    assert prune_lock.orphans(tmp_path) == []
