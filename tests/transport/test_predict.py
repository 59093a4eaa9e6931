"""Each organization keeps its own block, and the data parties score new rows together (``--predict``).

Guest, host and arbiter train a plaintext-mode Paillier SGD model in three processes on loopback; each data party
writes only its own block, the blocks equal the in-process run's weights, and the parties' manifests agree on
every block's digest. Then guest and host each give their own new raw rows (other orders, ids the other lacks) and
score them together over TLS, PSI included: the guest's predictions equal the in-process model's joint scores on
the shared rows. A block from another run is refused at the hello, naming it; a changed block, another party's
block or a model of another experiment is refused before linking.
"""

from __future__ import annotations

import csv
import json
import subprocess
from pathlib import Path

import numpy as np
import pytest

from ppml.algorithms._hetero_lr import ARBITER, joint_scores
from ppml.config import ParamError
from ppml.io import read_json
from ppml.launch.model import block_sha256, load_model
from tests.transport.test_grpc import LINKED, WAIT, Launcher, make_certs, run_inprocess, write_params
from tests.algorithms.vertical_data import write_prepared
from tests.transport.test_ray import vertical_parties

BLOCK = {"algorithm": "paillier_sgd", "dataset": "toy_vertical", "batch_size": 40, "encrypted": False,
         "key_bits": 1024, "eta": 0.5, "lam": 0.01, "max_epochs": 3}
NAMES = ("party1", "party2", ARBITER)


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """(root, launcher, parties, peers, params, in-process weights) after a three-process training."""
    root = tmp_path_factory.mktemp("predict")
    parties = vertical_parties(np.random.default_rng(11), n=120, n_test=60, widths=(5, 4))
    data = write_prepared(root / "data", parties)
    manifest = read_json(data / "manifest.json")
    (data / "manifest.json").write_text(json.dumps({**manifest, "normalization": {"method": "fate_zscore"}}))
    params = write_params(root / "params.yaml", BLOCK, "tls")
    peers = make_certs(root / "certs", NAMES)
    launcher = Launcher(root)
    try:
        for name in NAMES:
            launcher.start(name, peers=peers, params=params, data=data)
        assert launcher.wait() == {n: 0 for n in NAMES}, launcher.stderrs()
        local = run_inprocess("local", params, data, root / "inprocess")
        weights = read_json(local / "history.json")["runs"][0]["extra"]["weights"]
        yield root, launcher, parties, peers, params, weights
    finally:
        launcher.stop()


def test_each_data_party_keeps_only_its_own_block(trained):
    root, launcher, parties, _, _, weights = trained
    guest, host = parties
    blocks = {}
    for p in parties:
        block, manifest = load_model(launcher.out(p.name), experiment="exp", party=p.name, seed_index=0)
        assert block["features"] == list(p.columns)
        blocks[p.name] = (block, manifest)
    assert blocks["party1"][0]["weights"] + [blocks["party1"][0]["intercept"]] == weights["party1"]
    assert blocks["party2"][0]["weights"] == weights["party2"] and "intercept" not in blocks["party2"][0]
    digests = {n: block_sha256(b) for n, (b, _) in blocks.items()}
    assert blocks["party1"][1]["parties"] == blocks["party2"][1]["parties"] == digests
    assert blocks["party1"][1]["guest"] == "party1"
    # no file of a party holds another party's weights; the arbiter holds no block and no key
    for p, other in ((guest, host), (host, guest)):
        text = "".join(f.read_text() for f in launcher.out(p.name).rglob("*.json"))
        assert all(repr(w) not in text for w in blocks[other.name][0]["weights"])
    arbiter = launcher.out(ARBITER)
    assert not (arbiter / "model").exists() and (arbiter / "arbiter.json").is_file()
    assert "private" not in json.dumps(read_json(arbiter / "arbiter.json")["runs"])
    for name in NAMES:  # every party's own clock
        assert read_json(launcher.out(name) / "timing.json")["values"]["seconds"] > 0
    assert read_json(launcher.out("party1") / "timing.json")["values"]["seconds_per_epoch"] > 0


def write_raw(path: Path, ids, X: np.ndarray, columns) -> Path:
    with open(path, "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["id", *columns])
        for i, row in zip(ids, X):
            writer.writerow([i, *map(repr, row.tolist())])
    return path


def predict(launcher: Launcher, root: Path, party: str, raw: Path, peers: Path, params: Path, *,
            model: Path | None = None, label: str | None = None) -> subprocess.Popen:
    label = label or f"predict-{party}"
    return launcher.spawn(label, ["--predict", "--experiment", "exp", "--party", party, "--peers", str(peers),
                                  "--params", str(params), "--raw", str(raw),
                                  "--model", str(model or launcher.out(party)), "--out", str(root / "scored" / label),
                                  "--connect-timeout", str(LINKED)])


def new_rows(root: Path, parties, rng: np.random.Generator) -> tuple[dict[str, Path], np.ndarray]:
    """Each party's raw file of the test rows in its own order, with ids the other lacks; the shared ids."""
    guest, host = parties
    n = len(guest.test_ids)
    keep = {guest.name: rng.permutation(n)[: n - 3], host.name: rng.permutation(n)[: n - 2]}
    files = {}
    for p in parties:
        rows = keep[p.name]
        ids = list(p.test_ids[rows]) + [f"only-{p.name}-{k}" for k in range(2)]
        X = np.vstack([p.X_test[rows], rng.normal(size=(2, p.X_test.shape[1])) * 0.1])
        files[p.name] = write_raw(root / f"new-{p.name}.csv", ids, X, p.columns)
    shared = np.intersect1d(guest.test_ids[keep[guest.name]], host.test_ids[keep[host.name]])
    return files, shared


def test_guest_and_host_score_new_rows_together_as_the_in_process_model(trained):
    root, launcher, parties, peers, params, weights = trained
    guest, host = parties
    files, shared = new_rows(root, parties, np.random.default_rng(3))
    for p in parties:
        predict(launcher, root, p.name, files[p.name], peers, params)
    codes = launcher.wait([f"predict-{p.name}" for p in parties], timeout=WAIT)
    assert codes == {f"predict-{p.name}": 0 for p in parties}, launcher.stderrs()
    with open(root / "scored" / "predict-party1" / "predictions.csv") as f:
        got = list(csv.DictReader(f))
    assert [r["id"] for r in got] == sorted(shared.tolist())
    index = {i: k for k, i in enumerate(guest.test_ids)}
    rows = np.array([index[i] for i in sorted(shared.tolist())])
    expected = joint_scores(host.X_test[rows], guest.X_test[rows], np.array(weights["party2"]),
                            np.array(weights["party1"]))
    scores = np.array([float(r["score"]) for r in got])
    np.testing.assert_allclose(scores, expected, rtol=0, atol=1e-12)
    np.testing.assert_allclose([float(r["probability"]) for r in got], 1 / (1 + np.exp(-expected)), atol=1e-12)
    assert not (root / "scored" / "predict-party2" / "predictions.csv").exists()  # the host learns no score
    record = read_json(root / "scored" / "predict-party2" / "predict.json")
    assert (record["rows"], record["aligned"]) == (len(host.test_ids), len(shared))  # n - 2 kept, 2 of its own


def test_a_block_from_another_run_is_refused_at_the_hello_naming_it(trained, tmp_path):
    """The host brings a block of the same experiment whose weights differ (re-digested, so its own files are
    consistent): the guest recorded another digest of the host's block at the end of training, so both refuse."""
    root, launcher, parties, peers, params, _ = trained
    forged = tmp_path / "forged"
    model = forged / "model"
    model.mkdir(parents=True)
    block = json.loads((launcher.out("party2") / "model" / "seed0.json").read_text())
    block["weights"] = [w + 1.0 for w in block["weights"]]
    (model / "seed0.json").write_text(json.dumps(block, indent=2) + "\n")
    manifest = read_json(launcher.out("party2") / "model" / "seed0.manifest.json")
    digest = block_sha256(block)
    manifest = {**manifest, "model_sha256": digest, "parties": {**manifest["parties"], "party2": digest}}
    (model / "seed0.manifest.json").write_text(json.dumps(manifest))
    files, _ = new_rows(tmp_path, parties, np.random.default_rng(4))
    predict(launcher, root, "party1", files["party1"], peers, params, label="refuse-guest")
    predict(launcher, root, "party2", files["party2"], peers, params, model=forged, label="refuse-host")
    codes = launcher.wait(["refuse-guest", "refuse-host"], timeout=WAIT)
    assert codes == {"refuse-guest": 1, "refuse-host": 1}, launcher.stderrs()
    line = launcher.fail_line("refuse-guest", "party1")
    assert "'party2' is in another run: its model differs in model.party2.sha256" in line, line
    assert not (root / "scored" / "refuse-guest").exists()


def test_a_changed_block_or_another_partys_or_experiments_model_is_refused(trained, tmp_path):
    _, launcher, *_ = trained
    out = launcher.out("party2")
    with pytest.raises(ParamError, match="of experiment 'exp', not of 'other'"):
        load_model(out, experiment="other", party="party2", seed_index=0)
    with pytest.raises(ParamError, match="the model of party 'party2', not of 'party1'"):
        load_model(out, experiment="exp", party="party1", seed_index=0)
    with pytest.raises(FileNotFoundError, match="no model of seed index 1"):
        load_model(out, experiment="exp", party="party2", seed_index=1)
    changed = tmp_path / "changed"
    (changed / "model").mkdir(parents=True)
    for f in (out / "model").iterdir():
        (changed / "model" / f.name).write_bytes(f.read_bytes())
    path = changed / "model" / "seed0.json"
    block = json.loads(path.read_text())
    block["weights"][0] += 2.0**-40  # the manifest still records the trained block's digest
    path.write_text(json.dumps(block, indent=2) + "\n")
    with pytest.raises(ParamError, match="its sha256 is not the one seed0.manifest.json records"):
        load_model(changed, experiment="exp", party="party2", seed_index=0)
