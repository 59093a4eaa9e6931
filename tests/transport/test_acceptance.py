"""The pipeline's own experiments on Ray: a copy of each block with ``transport: ray``, run by the train stage,
gives the in-process metrics (every non-timing field) and bytes, with a process per party.

Slow (real prepared data, minutes): run by ``make test-all`` after ``make repro`` has prepared the data.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]

CASES = {  # experiment: overrides that keep it short
    "admm_sharing-a9a-sigma0": {"max_epochs": 10},
    "fdml-a9a": {"epochs": 2},
    "pp_admm-adult-eps1": {"seeds": 1},
    "ipp_admm-adult-eps1": {"seeds": 1},
    "paillier_sqn-default_credit-b1000": {"key_bits": 1024, "max_epochs": 2},
}


def _timing(key: str) -> bool:
    return "seconds" in key


@pytest.mark.slow
@pytest.mark.usefixtures("ray_cluster")
@pytest.mark.parametrize("experiment", sorted(CASES))
def test_pipeline_experiment_on_ray_matches_inprocess(experiment, tmp_path):
    from ppml.config import all_experiments, load_params, section_of_algorithm
    from stages.train import main

    params = load_params(ROOT / "params.yaml")
    _, block = all_experiments(params)[experiment]
    data = ROOT / "data" / "prepared" / block["dataset"]
    if not (data / "manifest.json").is_file():
        pytest.skip(f"{data} is not prepared (run make repro first)")
    block = {**block, **CASES[experiment]}
    section = section_of_algorithm(block["algorithm"])
    file = tmp_path / "params.yaml"
    file.write_text(yaml.safe_dump({"seed": params["seed"], section: {
        "inprocess": block, "ray": {**block, "transport": "ray"}}}))
    out = {}
    for name in ("inprocess", "ray"):
        assert main(["--experiment", name, "--params", str(file), "--data", str(data),
                     "--out", str(tmp_path / name)]) == 0
        out[name] = {part: json.loads((tmp_path / name / f"{part}.json").read_text())
                     for part in ("run", "metrics", "comm")}
    local, remote = ({**out[name]["run"], **out[name]["metrics"]} for name in ("inprocess", "ray"))
    assert (local.pop("transport"), remote.pop("transport")) == ("inprocess", "ray")
    differ = {k: (local.get(k), remote.get(k)) for k in set(local) | set(remote)
              if k != "experiment" and not _timing(k) and local.get(k) != remote.get(k)}
    encrypted = block.get("encrypted", False)
    assert not differ
    sent = [sum(r["bytes"] for r in out[name]["comm"]["runs"]) for name in ("inprocess", "ray")]
    if encrypted:  # fresh random ciphertexts are written at the width of the widest: a few bytes either way
        assert abs(sent[0] - sent[1]) < 1e-4 * sent[0]
    else:
        assert sent[0] == sent[1]
    for run in out["ray"]["comm"]["runs"]:
        assert len({w["pid"] for w in run["parties"].values()}) >= 2
