"""The prepare stage end to end on tiny fixtures: parameters, every reader, alignment, splits, determinism."""

import importlib.util
import json
import os
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp
import yaml

from ppml.config import ParamError, load_params
from ppml.data import readers
from ppml.data.normalize import block_rows, zscore
from ppml.data.prepare import READERS, dataset_params, prepare_dataset
from ppml.data.prepared import DataUnavailable, load_prepared
from ppml.data.synthetic import logistic_dataset

ROOT = Path(__file__).resolve().parents[3]

SYNTH = {"source": "synthetic", "n": 300, "partition": "vertical", "parties": ["party1", "party2", "party3"],
         "split": [4, 3, 3], "label_holder": "party2", "alignment": "psi", "private_fraction": 0.02,
         "test_fraction": 0.2, "normalize": "zscore_block_rows"}


def params(key="tiny", **block):
    return dataset_params({"datasets": {key: block}}, key)


def raw_dir(tmp_path, files=None, *, available=True, reason=None):
    raw = tmp_path / "raw"
    for name, text in (files or {}).items():
        (raw / name).parent.mkdir(parents=True, exist_ok=True)
        (raw / name).write_text(text)
    raw.mkdir(exist_ok=True)
    status = {"dataset": "tiny", "available": available}
    if reason:
        status["reason"] = reason
    (raw / "status.json").write_text(json.dumps(status))
    return raw


def run(tmp_path, block, files=None, *, key="tiny", seed=42, out="prepared"):
    out_dir = tmp_path / out
    manifest = prepare_dataset(key, params(key, **block), raw_dir(tmp_path, files), out_dir,
                               rng=np.random.default_rng(seed))
    return manifest, out_dir


def check_vertical(parties, manifest):
    """Rows line up across parties, ids are canonical, labels stay with the label holder."""
    first = parties[0]
    for p in parties:
        assert np.array_equal(p.ids, first.ids) and np.array_equal(p.test_ids, first.test_ids)
        entry = next(e for e in manifest["parties"] if e["name"] == p.name)
        assert p.is_label_holder == entry["label_holder"] == (p.name == manifest["alignment"]["label_holder"])
        assert (p.y_test is not None) == p.is_label_holder
        assert entry["rows_after"] == p.n_samples + p.X_test.shape[0] == manifest["alignment"]["shared_ids"]
    assert np.array_equal(first.ids, np.sort(first.ids))
    assert np.array_equal(first.test_ids, np.sort(first.test_ids))


# ---------------------------------------------------------------------------------------------------------
# synthetic data: the alignment checked against the generator


def test_synthetic_vertical_end_to_end(tmp_path):
    manifest, out = run(tmp_path, SYNTH)
    loaded, parties, evaluation = load_prepared(out)
    assert loaded == manifest and evaluation is None
    assert [p.name for p in parties] == ["party1", "party2", "party3"]
    assert [p.n_features for p in parties] == [4, 3, 3]
    check_vertical(parties, manifest)
    # 6 private ids per party: each party lacks the other two parties' 12, and 18 are lost at alignment.
    assert [e["rows_before"] for e in manifest["parties"]] == [288, 288, 288]
    assert manifest["alignment"]["shared_ids"] == 282
    assert manifest["alignment"]["dropped"] == {"party1": 6, "party2": 6, "party3": 6}
    assert manifest["alignment"]["messages"] == 3 * 2 + 2  # two PSI runs, then the aligned ids to both
    holder = parties[1]
    counts = np.bincount(np.r_[holder.y, holder.y_test])
    assert manifest["split"]["test"] == holder.X_test.shape[0] == sum(round(0.2 * c) for c in counts)

    # Rebuild the generator's table from the same stream and check every party's values entity by entity.
    ids, X, y = logistic_dataset(n=300, d=10, rng=np.random.default_rng(42).spawn(2)[0])
    index = {e: k for k, e in enumerate(ids)}
    train = [index[e] for e in holder.ids]
    test = [index[e] for e in holder.test_ids]
    assert np.array_equal(holder.y, y[train]) and np.array_equal(holder.y_test, y[test])
    for p, block in zip(parties, (slice(0, 4), slice(4, 7), slice(7, 10))):
        expected_train, expected_test = (block_rows(Z) for Z in zscore(X[train, block], X[test, block]))
        np.testing.assert_allclose(p.X, expected_train, atol=1e-12)
        np.testing.assert_allclose(p.X_test, expected_test, atol=1e-12)


def test_output_is_byte_deterministic(tmp_path):
    _, first = run(tmp_path, SYNTH, out="a")
    _, second = run(tmp_path, SYNTH, out="b")
    _, other_seed = run(tmp_path, SYNTH, seed=43, out="c")
    files = sorted(p.name for p in first.iterdir())
    assert files == ["manifest.json", "party1.npz", "party2.npz", "party3.npz"]
    assert all((first / f).read_bytes() == (second / f).read_bytes() for f in files)
    assert (first / "party1.npz").read_bytes() != (other_seed / "party1.npz").read_bytes()


def test_plain_alignment_gives_the_same_data(tmp_path):
    _, psi_dir = run(tmp_path, SYNTH, out="psi")
    manifest, plain_dir = run(tmp_path, {**SYNTH, "alignment": "plain"}, out="plain")
    assert manifest["alignment"]["method"] == "plain"
    for name in ("party1", "party2", "party3"):
        assert (psi_dir / f"{name}.npz").read_bytes() == (plain_dir / f"{name}.npz").read_bytes()


# ---------------------------------------------------------------------------------------------------------
# readers on tiny copies of each format


def libsvm_lines(X, y):
    rows = []
    for x, label in zip(X, y):
        tokens = [f"{j + 1}:{v:g}" for j, v in enumerate(x) if v]
        rows.append(" ".join([("+1" if label else "-1")] + tokens) + " \n")
    return "".join(rows)


def test_libsvm_stays_sparse_and_keeps_its_test_file(tmp_path):
    g = np.random.default_rng(1)
    X = (g.random((60, 7)) < 0.4).astype(float)
    X[:, 0] = 1.0  # no row is empty in party1's block
    y = g.random(60) < 0.3
    files = {"tiny": libsvm_lines(X[:40], y[:40]), "tiny.t": libsvm_lines(X[40:], y[40:])}
    block = {"reader": "libsvm", "partition": "vertical", "parties": ["party1", "party2"], "split": [4, 3],
             "label_holder": "party1", "alignment": "psi", "private_fraction": 0.05,
             "normalize": "block_rows"}
    manifest, out = run(tmp_path, block, files)
    _, parties, _ = load_prepared(out)
    check_vertical(parties, manifest)
    assert manifest["split"]["method"] == "source test rows"
    assert all(isinstance(m, sp.csr_array) for p in parties for m in (p.X, p.X_test))
    assert all(i.startswith("train-") for i in parties[0].ids)
    assert all(i.startswith("test-") for i in parties[0].test_ids)
    row = {f"train-{k + 1:02d}": k for k in range(40)} | {f"test-{k + 1:02d}": 40 + k for k in range(20)}
    rows = [row[i] for i in np.r_[parties[0].ids, parties[0].test_ids]]
    for p, block_cols in zip(parties, (slice(0, 4), slice(4, 7))):
        np.testing.assert_allclose(sp.vstack([p.X, p.X_test]).toarray(), block_rows(X[rows, block_cols]))
    assert np.array_equal(np.r_[parties[0].y, parties[0].y_test], y[rows])


def fate_files(g, n=40):
    ids = g.permutation(np.arange(100, 100 + n))
    guest = pd.DataFrame({"id": ids, "y": (g.random(n) < 0.4).astype(int),
                          **{f"x{j}": np.round(g.normal(size=n), 6) for j in range(3)}})
    host = pd.DataFrame({"id": ids, **{f"x{j}": np.round(g.normal(size=n), 6) for j in range(2)}})
    host = host.iloc[g.permutation(n)]  # the host's file has its own row order
    return guest, host


FATE = {"reader": "fate_hetero", "partition": "vertical", "parties": ["guest", "host"], "split": [3, 2],
        "label_holder": "guest", "alignment": "psi", "private_fraction": 0.05, "test_fraction": 0.25,
        "normalize": "fate_zscore"}


def test_fate_hetero_files_are_joined_by_id_and_kept_as_given(tmp_path):
    guest, host = fate_files(np.random.default_rng(2))
    files = {"fate/tiny_hetero_guest.csv": guest.to_csv(index=False),
             "fate/tiny_hetero_host.csv": host.to_csv(index=False)}
    manifest, out = run(tmp_path, FATE, files)
    _, (g, h), _ = load_prepared(out)
    check_vertical([g, h], manifest)
    assert g.columns == ("x0", "x1", "x2") and h.columns == ("x0", "x1")
    by_id = {name: frame.set_index(frame["id"].astype(str))
             for name, frame in (("guest", guest), ("host", host))}
    np.testing.assert_array_equal(g.X, by_id["guest"].loc[g.ids, ["x0", "x1", "x2"]].to_numpy())
    np.testing.assert_array_equal(h.X_test, by_id["host"].loc[h.test_ids, ["x0", "x1"]].to_numpy())
    np.testing.assert_array_equal(g.y_test, by_id["guest"].loc[g.test_ids, "y"].to_numpy())
    counts = np.bincount(np.r_[g.y, g.y_test])  # 36 shared of 40 ids: 2 private to each party
    assert manifest["split"] == {"method": "stratified", "test_fraction": 0.25,
                                 "train": 36 - sum(round(0.25 * c) for c in counts),
                                 "test": sum(round(0.25 * c) for c in counts)}


def test_fate_hetero_refuses_another_split_and_mismatched_files(tmp_path):
    guest, host = fate_files(np.random.default_rng(3))
    files = {"fate/tiny_hetero_guest.csv": guest.to_csv(index=False),
             "fate/tiny_hetero_host.csv": host.iloc[1:].to_csv(index=False)}
    with pytest.raises(ValueError, match="must hold the same ids"):
        run(tmp_path, FATE, files)
    files["fate/tiny_hetero_host.csv"] = host.to_csv(index=False)
    with pytest.raises(ValueError, match=r"split \[2, 3\] does not match the source's own party files"):
        run(tmp_path, {**FATE, "split": [2, 3]}, files)


def test_fate_hetero_files_may_be_dealt_to_more_parties_than_files(tmp_path):
    """A guest and two hosts from FATE's two files (Credit 1's host file of 10 as 5 + 5): the host file's
    columns are divided between the hosts, in order; the files are another registry key's (``files_of``)."""
    guest, host = fate_files(np.random.default_rng(2))
    files = {"fate/other_hetero_guest.csv": guest.to_csv(index=False),
             "fate/other_hetero_host.csv": host.to_csv(index=False)}
    three = {**FATE, "parties": ["guest", "host_1", "host_2"], "split": [3, 1, 1], "private_fraction": 0.02,
             "files_of": "default_credit"}
    # the reader looks for the files of the registry key that files_of names
    with pytest.raises(FileNotFoundError, match="default_credit_hetero_guest.csv"):
        run(tmp_path, three, files, key="tiny_2h")
    files = {name.replace("other", "default_credit"): text for name, text in files.items()}
    manifest, out = run(tmp_path, three, files, key="tiny_2h")
    _, (g, h1, h2), _ = load_prepared(out)
    check_vertical([g, h1, h2], manifest)
    assert (g.columns, h1.columns, h2.columns) == (("x0", "x1", "x2"), ("x0",), ("x1",))
    assert manifest["params"]["files_of"] == "default_credit"
    by_id = host.set_index(host["id"].astype(str))
    np.testing.assert_array_equal(np.hstack([h1.X, h2.X]), by_id.loc[g.ids, ["x0", "x1"]].to_numpy())
    # every column a party of its own is fine; a party holding columns of both files is not
    manifest, _ = run(tmp_path, {**three, "parties": [f"p{i}" for i in range(5)], "split": [1] * 5,
                                 "label_holder": "p0"}, files, key="tiny_2h", out="five")
    assert [e["columns"] for e in manifest["parties"]] == [1] * 5
    for split in ([2, 2, 1], [4, 1]):
        block = {**three, "parties": [f"p{i}" for i in range(len(split))], "split": split, "label_holder": "p0"}
        with pytest.raises(ValueError, match=rf"split \[{', '.join(map(str, split))}\] does not match the "
                                             r"source's own party files, which hold \[3, 2\] columns: each "
                                             r"file's columns must go to one or more consecutive parties"):
            run(tmp_path, block, files, key="tiny_2h", out="bad")


def test_a_manifest_records_files_of_only_when_set(tmp_path):
    """Datasets that read their own files keep the manifests they had before ``files_of`` existed."""
    manifest, _ = run(tmp_path, SYNTH)
    assert "files_of" not in manifest["params"]
    with pytest.raises(ParamError, match=r"files_of is only for registry data, got 'a9a' with source "
                                         r"'synthetic'"):
        params(**SYNTH, files_of="a9a")
    with pytest.raises(ParamError, match=r"files_of must be a registry dataset \(.*\), got 'nowhere'"):
        params(**{**FATE, "files_of": "nowhere"})


def test_give_credit_follows_fates_recipe(tmp_path):
    g = np.random.default_rng(4)
    names = ["RevolvingUtilizationOfUnsecuredLines", "age", "NumberOfTime30-59DaysPastDueNotWorse",
             "DebtRatio", "MonthlyIncome", "NumberOfOpenCreditLinesAndLoans", "NumberOfTimes90DaysLate",
             "NumberRealEstateLoansOrLines", "NumberOfTime60-89DaysPastDueNotWorse", "NumberOfDependents"]
    values = g.integers(0, 50, size=(30, 10)).astype(float)
    values[[2, 5], 4] = np.nan  # MonthlyIncome and NumberOfDependents have gaps in the real file
    values[7, 9] = np.nan
    frame = pd.DataFrame(values, columns=names)
    frame.insert(0, "SeriousDlqin2yrs", (g.random(30) < 0.3).astype(int))
    frame.index = np.arange(1, 31)
    block = {**FATE, "reader": "give_credit", "split": [5, 5], "test_fraction": 0.2}
    manifest, out = run(tmp_path, block, {"cs-training.csv": frame.to_csv(na_rep="NA")})
    _, (guest, host), _ = load_prepared(out)
    check_vertical([guest, host], manifest)
    filled = frame[names].fillna(0.0)
    expected = np.round((filled - filled.mean()) / filled.std(ddof=0), 6)
    expected.index = expected.index.astype(str)
    assert guest.columns[0] == "NumberOfOpenCreditLinesAndLoans" and host.columns[-1] == "MonthlyIncome"
    np.testing.assert_array_equal(guest.X, expected.loc[guest.ids, list(guest.columns)].to_numpy())
    np.testing.assert_array_equal(host.X_test, expected.loc[host.test_ids, list(host.columns)].to_numpy())


def adult_line(g, label, *, missing=False):
    fields = [str(g.integers(17, 90)), "?" if missing else g.choice(["Private", "State-gov"]),
              str(g.integers(10000, 500000)), g.choice(["Bachelors", "HS-grad", "Masters"]),
              str(g.integers(1, 16)),
              g.choice(["Never-married", "Divorced"]), g.choice(["Sales", "Tech-support"]), "Husband",
              g.choice(["White", "Black"]), g.choice(["Male", "Female"]), str(g.integers(0, 5000)), "0",
              str(g.integers(10, 80)), g.choice(["United-States", "Cuba"]), label]
    return ", ".join(fields)


def test_adult_is_dealt_out_horizontally_with_an_evaluator(tmp_path):
    g = np.random.default_rng(5)
    data = [adult_line(g, g.choice(["<=50K", ">50K"]), missing=k == 3) for k in range(30)]
    test = [adult_line(g, g.choice(["<=50K.", ">50K."])) for _ in range(15)]
    files = {"adult.data": "\n".join(data) + "\n\n",
             "adult.test": "|1x3 Cross validator\n" + "\n".join(test) + "\n"}
    block = {"reader": "adult", "partition": "horizontal", "parties": ["agent1", "agent2", "agent3"],
             "train_rows": 30, "normalize": "max_abs_rows"}
    manifest, out = run(tmp_path, block, files)
    _, agents, evaluator = load_prepared(out)
    assert manifest["source"]["dropped_missing"] == 1 and manifest["source"]["rows"] == 44
    assert [a.n_samples for a in agents] == [10, 10, 10] and evaluator.n_samples == 14
    assert evaluator.name == "evaluator" and evaluator.y is not None
    assert all(a.is_label_holder for a in agents)
    all_ids = np.concatenate([a.ids for a in agents] + [evaluator.ids])
    assert len(set(all_ids)) == 44 and "data-04" not in all_ids  # the record with a '?'
    columns = agents[0].columns
    assert columns[:6] == readers.ADULT_NUMERIC and "workclass=Private" in columns and "sex=Female" in columns
    X_train = np.vstack([a.X for a in agents])
    assert np.all(np.linalg.norm(X_train, axis=1) <= 1 + 1e-12)
    assert np.all(np.linalg.norm(evaluator.X, axis=1) <= 1 + 1e-12)
    assert manifest["alignment"]["method"] == "none"


def test_nips2003_files_split_columns_into_three_blocks(tmp_path):
    g = np.random.default_rng(6)
    files = {}
    for part, n in (("train", 20), ("valid", 8)):
        matrix = g.integers(0, 999, (n, 5))
        files[f"tiny_{part}.data"] = "".join(" ".join(map(str, row)) + " \n" for row in matrix)
        files[f"tiny_{part}.labels"] = "".join(f"{v}\n" for v in g.choice([-1, 1], n))
    block = {"reader": "nips2003", "partition": "vertical", "parties": ["party1", "party2", "party3"],
             "split": [2, 2, 1], "label_holder": "party1", "alignment": "plain", "private_fraction": 0.0,
             "normalize": "zscore_block_rows"}
    manifest, out = run(tmp_path, block, files)
    _, parties, _ = load_prepared(out)
    check_vertical(parties, manifest)
    assert [p.n_features for p in parties] == [2, 2, 1]
    assert manifest["split"]["train"] == 20 and manifest["split"]["test"] == 8
    assert all(i.startswith("valid-") for i in parties[0].test_ids)


# ---------------------------------------------------------------------------------------------------------
# unavailable data and failures


def test_unavailable_optional_dataset_writes_only_a_manifest(tmp_path):
    raw = raw_dir(tmp_path, available=False, reason="no copy in mirror")
    manifest = prepare_dataset("tiny", params(**{**SYNTH, "required": False}), raw, tmp_path / "out",
                               rng=np.random.default_rng(0))
    assert manifest["available"] is False and manifest["reason"] == "no copy in mirror"
    assert [p.name for p in (tmp_path / "out").iterdir()] == ["manifest.json"]
    with pytest.raises(DataUnavailable, match="no copy in mirror"):
        load_prepared(tmp_path / "out")


def test_unavailable_required_dataset_is_an_error(tmp_path):
    raw = raw_dir(tmp_path, available=False, reason="no copy in mirror")
    with pytest.raises(DataUnavailable, match="is required.*no copy in mirror"):
        prepare_dataset("tiny", params(**SYNTH), raw, tmp_path / "out", rng=np.random.default_rng(0))
    assert not (tmp_path / "out").exists()


def test_a_failure_leaves_the_previous_output_and_no_temporary_files(tmp_path):
    out = tmp_path / "prepared"
    out.mkdir()
    (out / "old.txt").write_text("previous run")
    block = {"reader": "libsvm", "partition": "vertical", "parties": ["a", "b"], "split": [2, 2],
             "label_holder": "a", "alignment": "psi", "private_fraction": 0.0, "normalize": "block_rows"}
    with pytest.raises(readers.DataFormatError, match="line 2"):
        run(tmp_path, block, {"tiny": "+1 1:1\n-1 9:1\n", "tiny.t": "+1 1:1\n"})
    assert [p.name for p in out.iterdir()] == ["old.txt"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["prepared", "raw"]
    run(tmp_path, SYNTH)
    assert "old.txt" not in os.listdir(out)


# ---------------------------------------------------------------------------------------------------------
# parameters


@pytest.mark.parametrize("change, message", [
    ({"split": None}, "datasets.tiny: split is required for vertical data"),
    ({"split": [4, 6]}, "split must give the columns of each of the 3 parties"),
    ({"split": [4, 0, 6]}, r"datasets.tiny.split\[1\] must be > 0"),
    ({"label_holder": "party9"}, "label_holder must be one of the parties"),
    ({"private_fraction": 0.4}, "private_fraction times the 3 parties must be < 1"),
    ({"normalize": "max_abs_rows"}, "normalize must be one of .* for vertical data"),
    ({"test_fraction": None}, "test_fraction is required: this source has no test rows of its own"),
    ({"train_rows": 100}, "train_rows is only for horizontal data"),
    ({"reader": "libsvm"}, "reader must be omitted for synthetic data"),
    ({"n": None}, "n is required for synthetic data"),
    ({"parties": ["party1", "party1", "party3"]}, "parties must be distinct"),
    ({"parties": ["party1", "party/2", "party3"]}, "they name files"),
    ({"alignment": "bloom"}, r"alignment .*must be one of \['psi', 'plain'\]"),
    ({"shuffle": True}, "datasets.tiny.shuffle is not a parameter of DatasetParams"),
])
def test_invalid_parameters_are_named(change, message):
    block = {k: v for k, v in {**SYNTH, **change}.items() if v is not None}
    with pytest.raises(ParamError, match=message):
        params(**block)


@pytest.mark.parametrize("change, message", [
    ({"test_fraction": 0.2}, "test_fraction must be omitted: this source has its own test rows"),
    ({"source": "synthetic", "n": 10}, "reader must be omitted"),
    ({"reader": None}, "reader is required for registry data"),
    ({"normalize": "zscore_block_rows"}, "would densify the sparse libsvm data"),
])
def test_invalid_registry_parameters_are_named(change, message):
    block = {"reader": "libsvm", "partition": "vertical", "parties": ["a", "b"], "split": [2, 2],
             "label_holder": "a", "alignment": "psi", "private_fraction": 0.0, "normalize": "block_rows"}
    block = {k: v for k, v in {**block, **change}.items() if v is not None}
    with pytest.raises(ParamError, match=message):
        params(**block)


def test_horizontal_parameters():
    block = {"reader": "adult", "partition": "horizontal", "parties": ["agent1", "agent2"], "train_rows": 10,
             "normalize": "max_abs_rows"}
    assert params(**block).train_rows == 10
    for change, message in [({"label_holder": "agent1"}, "label_holder is only for vertical data"),
                            ({"parties": ["agent1", "evaluator"]}, "'evaluator' is reserved"),
                            ({"normalize": "block_rows"}, "for horizontal data"),
                            ({"train_rows": None}, "train_rows is required for horizontal data"),
                            ({"reader": "libsvm"}, "needs a reader whose files name their columns")]:
        with pytest.raises(ParamError, match=message):
            params(**{k: v for k, v in {**block, **change}.items() if v is not None})


def test_the_projects_datasets_are_valid():
    datasets = load_params(ROOT / "params.yaml")["datasets"]
    built = {key: dataset_params({"datasets": datasets}, key) for key in datasets}
    assert {p.reader for p in built.values() if p.source == "registry"} <= set(READERS)
    a9a = built["a9a"]
    assert a9a.split == (66, 57) and a9a.parties == ("party1", "party2") and a9a.label_holder == "party1"
    credit, two_hosts = built["default_credit"], built["default_credit_2h"]
    assert two_hosts.files_of == "default_credit" and two_hosts.split == (13, 5, 5)
    assert two_hosts.parties == ("guest", "host_1", "host_2") and two_hosts.label_holder == "guest"
    same = ("reader", "normalize", "alignment", "private_fraction", "test_fraction", "required")
    assert {k: getattr(two_hosts, k) for k in same} == {k: getattr(credit, k) for k in same}


# ---------------------------------------------------------------------------------------------------------
# the stage's command line


def load_stage():
    spec = importlib.util.spec_from_file_location("prepare_stage", ROOT / "stages" / "prepare.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_stage_writes_the_dataset_and_reports_errors_in_one_line(tmp_path, capsys):
    stage = load_stage()
    (tmp_path / "params.yaml").write_text(yaml.safe_dump({"seed": 42, "datasets": {"tiny": SYNTH}}))
    raw = raw_dir(tmp_path)
    args = ["--params", str(tmp_path / "params.yaml"), "--raw", str(raw), "--out", str(tmp_path / "out")]
    assert stage.main(["--dataset", "tiny", *args]) == 0
    assert load_prepared(tmp_path / "out")[0]["seed"] == 42
    assert stage.main(["--dataset", "missing", *args]) == 2
    assert capsys.readouterr().err.strip() == "prepare@missing: params: missing key datasets.missing"


# ---------------------------------------------------------------------------------------------------------
# the real give_credit file against FATE's published split (needs the mirror)


@pytest.mark.slow
def test_give_credit_recipe_reproduces_fates_published_values(tmp_path):
    mirror = os.environ.get("DATA_MIRROR")
    if not mirror:
        pytest.skip("DATA_MIRROR is not set")
    import lzma

    base = Path(mirror) / "give_credit"
    (tmp_path / "cs-training.csv").write_bytes(lzma.open(base / "cs-training.csv.xz").read())
    table = READERS["give_credit"].load(tmp_path, key="give_credit", params=None, rng=None)
    fate = pd.read_csv(lzma.open(base / "fate" / "give_credit_homo_test.csv.xz"), dtype={"id": str})
    row = pd.Index(table.ids).get_indexer(fate["id"])
    assert (row >= 0).all()
    np.testing.assert_allclose(table.X[row], fate[[f"x{j}" for j in range(10)]].to_numpy(), rtol=0, atol=1e-9)
    np.testing.assert_array_equal(table.y[row], fate["y"].to_numpy())
