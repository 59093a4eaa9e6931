"""params.yaml is written so that ``dvc exp run -S key=value`` changes only that key's line.

DVC edits params.yaml with its own round-trip YAML writer (``dvc.utils.serialize.modify_yaml``). Flow
mappings (``{a: 1, b: 2}``) and anchors with merge keys (``<<: *base``) are rewritten by it, so one edit
would reformat hundreds of lines; block style without anchors keeps an edit to one line.
"""

from __future__ import annotations

import difflib
import shutil
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
PARAMS = ROOT / "params.yaml"


def _scalar_leaves(node, path=()):
    if isinstance(node, dict):
        for key, value in node.items():
            yield from _scalar_leaves(value, (*path, key))
    elif not isinstance(node, list):
        yield path, node


def _changed(value):
    if isinstance(value, bool):
        return not value
    if isinstance(value, (int, float)):
        return value + 1
    return f"{value}x"


def _diff_lines(before: str, after: str) -> int:
    return sum(1 for line in difflib.unified_diff(before.splitlines(), after.splitlines(), lineterm="", n=0)
               if line[:1] in "+-" and not line.startswith(("+++", "---")))


def test_no_anchors_merge_keys_or_flow_mappings():
    text = PARAMS.read_text()
    offending = [f"line {i}: {line.strip()}" for i, line in enumerate(text.splitlines(), 1)
                 if not line.lstrip().startswith("#")
                 and ("<<:" in line or ": &" in line or ": *" in line or ": {" in line)]
    assert not offending, "params.yaml must be block style without anchors: " + "; ".join(offending[:5])


def test_one_key_changed_by_dvc_changes_at_most_two_lines(tmp_path):
    from dvc.utils.serialize import modify_yaml

    before = PARAMS.read_text()
    leaves = list(_scalar_leaves(yaml.safe_load(before)))
    # every top-level section's leaves, sampled evenly so the check stays fast
    sample = leaves[:: max(1, len(leaves) // 60)]
    assert len(sample) >= 30
    copy = tmp_path / "params.yaml"
    for path, value in sample:
        shutil.copy(PARAMS, copy)
        with modify_yaml(copy) as data:
            target = data
            for key in path[:-1]:
                target = target[key]
            target[path[-1]] = _changed(value)
        changed = _diff_lines(before, copy.read_text())
        assert changed <= 2, f"changing {'.'.join(map(str, path))} through DVC rewrote {changed} lines"


@pytest.mark.parametrize("key", ["seed"])
def test_a_top_level_key_changes_one_line(tmp_path, key):
    from dvc.utils.serialize import modify_yaml

    copy = tmp_path / "params.yaml"
    shutil.copy(PARAMS, copy)
    with modify_yaml(copy) as data:
        data[key] = _changed(data[key])
    assert _diff_lines(PARAMS.read_text(), copy.read_text()) == 2
