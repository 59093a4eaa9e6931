"""params.yaml and params/*.yaml are written so that ``dvc exp run -S file:key=value`` changes only that key's line.

``dvc exp run -S`` edits params.yaml through ``dvc.utils.hydra.apply_overrides``: it loads the whole file
with a round-trip YAML reader, applies the overrides and writes every section back. Flow collections
(``[66, 57]``, ``{a: 1, b: 2}``) and anchors with merge keys (``<<: *base``) come back rewritten, so one
override would reformat hundreds of lines; block style without anchors keeps an override to its own lines.
"""

from __future__ import annotations

import difflib
import shutil
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
FILES = ["params.yaml", *yaml.safe_load((ROOT / "params.yaml").read_text())["params_files"]]


#: ``dvc exp run -S`` overrides in four files, a list among them, each with the text it must leave on its
#: line(s) (file -> key path -> new value; a list gives one value per item line).
OVERRIDES = {
    "params.yaml": {("seed",): "2021"},
    "params/pp_admm.yaml": {("pp_admm_experiments", "pp_admm-adult-eps1", "seeds"): "6"},
    "params/fdml.yaml": {("fdml_experiments", "fdml-a9a", "eta"): "16.0"},
    "params/datasets.yaml": {("datasets", "a9a", "split"): ["60", "63"]},
}


def _node(root: yaml.Node, path: tuple[str, ...]) -> yaml.Node:
    """The node at `path` (mapping keys) of a composed YAML document."""
    node = root
    for key in path:
        node = next(value for name, value in node.value if name.value == key)
    return node


def _changed_lines(before: str, after: str) -> list[int]:
    """1-based numbers of the lines of `before` that `after` replaces or drops (insertions: the next line)."""
    lines = set()
    matcher = difflib.SequenceMatcher(a=before.splitlines(), b=after.splitlines(), autojunk=False)
    for tag, i1, i2, _, _ in matcher.get_opcodes():
        if tag != "equal":
            lines.update(range(i1 + 1, max(i2, i1 + 1) + 1))
    return sorted(lines)


def _flow_collections(text: str) -> list[str]:
    """"line N: <line>" for every flow-style list or mapping (``[...]``, ``{...}``) outside comments."""
    lines = text.splitlines()
    return [f"line {token.start_mark.line + 1}: {lines[token.start_mark.line].strip()}"
            for token in yaml.scan(text)
            if isinstance(token, (yaml.FlowSequenceStartToken, yaml.FlowMappingStartToken))]


@pytest.mark.parametrize("name", FILES)
def test_no_anchors_merge_keys_or_flow_mappings(name):
    text = (ROOT / name).read_text()
    offending = [f"line {i}: {line.strip()}" for i, line in enumerate(text.splitlines(), 1)
                 if not line.lstrip().startswith("#")
                 and ("<<:" in line or ": &" in line or ": *" in line or ": {" in line)]
    assert not offending, f"{name} must be block style without anchors: " + "; ".join(offending[:5])


@pytest.mark.parametrize("name", FILES)
def test_no_flow_style_lists_or_mappings(name):
    flow = _flow_collections((ROOT / name).read_text())
    assert not flow, (f"{name} must write lists and mappings in block style (one item per line), since "
                      "dvc exp run -S rewrites flow style: " + "; ".join(flow[:5]))


def test_the_flow_style_check_names_the_line():
    text = "seed: 1  # [not a list]\ndatasets:\n  a9a:\n    split: [66, 57]\n    parties:\n    - {name: a}\n"
    assert _flow_collections(text) == ["line 4: split: [66, 57]", "line 6: - {name: a}"]


@pytest.mark.parametrize("name", sorted(OVERRIDES))
def test_dvc_exp_run_set_param_changes_only_the_overridden_lines(tmp_path, name):
    from dvc.utils.hydra import apply_overrides

    before = (ROOT / name).read_text()
    root = yaml.compose(before)
    expected = before.splitlines(keepends=True)
    overrides, lines = [], []
    for path, new in OVERRIDES[name].items():
        node = _node(root, path)
        items, values = (node.value, new) if isinstance(new, list) else ([node], [new])
        assert len(items) == len(values), f"{'.'.join(path)} has {len(items)} items, the test {len(values)}"
        for item, value in zip(items, values):
            assert item.value != value, f"{'.'.join(path)} is already {value}: the override changes nothing"
            line, start, end = item.start_mark.line, item.start_mark.column, item.end_mark.column
            expected[line] = expected[line][:start] + value + expected[line][end:]
            lines.append(line + 1)
        overrides.append(f"{'.'.join(path)}=" + (f"[{','.join(new)}]" if isinstance(new, list) else new))
    copy = tmp_path / Path(name).name
    shutil.copy(ROOT / name, copy)
    apply_overrides(copy, overrides)
    after = copy.read_text()
    diff = "\n".join(difflib.unified_diff(before.splitlines(), after.splitlines(), name,
                                          "after dvc exp run -S", lineterm="", n=0))
    assert _changed_lines(before, after) == sorted(lines), f"{' '.join(overrides)} rewrote:\n{diff[:3000]}"
    assert after == "".join(expected), f"{' '.join(overrides)} wrote other values than expected:\n{diff}"
