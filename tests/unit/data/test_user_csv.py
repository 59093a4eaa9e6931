"""A user's own CSV file (``source: user``): reading, copying, parameters, and the prepare stage end to end."""

import hashlib
import importlib.util
import re
from pathlib import Path

import numpy as np
import pytest
import yaml

from ppml.config import ParamError
from ppml.data.download import (USER_FILE, DataUnavailableError, DownloadError, download_dataset,
                                read_status)
from ppml.data.normalize import HORIZONTAL
from ppml.data.prepare import dataset_params, prepare_dataset
from ppml.data.prepared import load_prepared
from ppml.data.readers import DataFormatError, read_user_csv

ROOT = Path(__file__).resolve().parents[3]

USER = {"required": True, "source": "user", "reader": "user_csv", "path": "data/user/mine.csv",
        "label_column": "income", "positive_label": "1", "id_column": "serial", "other_labels": "negative",
        "partition": "horizontal",
        "parties": ["agent1", "agent2", "agent3"], "train_rows": 12, "normalize": "max_abs_rows"}
#: The one-hot columns of :func:`user_table`: numeric ones in file order, then each categorical column's
#: levels in sorted order ('WA' is only on a record with a missing value, so it is no level).
COLUMNS = ("age", "hours", "state=CA", "state=NY", "state=TX", "sex=F", "sex=M")


def params(block):
    return dataset_params({"datasets": {"mine": block}}, "mine")


def user_table(n=20, *, seed=3):
    """A CSV text of `n` records with ids ``s<k>``, records 4 and 7 incomplete; and the expected encoding.

    Returns the text, and for every complete record its id, its row of :data:`COLUMNS` and its label.
    """
    g = np.random.default_rng(seed)
    lines = ["serial,age,state,sex,hours,income"]
    expected = {}
    for k in range(n):
        age, hours = int(g.integers(18, 90)), round(float(g.uniform(1, 60)), 1)
        state, sex = g.choice(["CA", "NY", "TX"]), g.choice(["F", "M"])
        label = str(g.choice(["1", "0", "2"]))  # '2' is another negative class
        cells = [f"s{k}", str(age), state, sex, str(hours), label]
        if k == 4:
            cells[1] = ""
        if k == 7:
            cells[2:4] = ["WA", "NA"]
        lines.append(",".join(cells))
        if k not in (4, 7):
            row = [age, hours] + [state == s for s in ("CA", "NY", "TX")] + [sex == s for s in ("F", "M")]
            expected[f"s{k}"] = (np.array(row, dtype=np.float64), int(label == "1"))
    return "\n".join(lines) + "\n", expected


def write(path, text):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


# ---------------------------------------------------------------------------------------------------------
# the reader


def test_reader_types_columns_and_labels_by_their_cells(tmp_path):
    path = write(tmp_path / "u.csv", "id,age,job,y\n a,30, Sales ,yes\nb,NA,Tech,no\nc,41.5,,maybe\n")
    ids, features, labels, counts = read_user_csv(path, label_column="y", positive_label="yes",
                                                  id_column="id", other_labels="negative")
    assert counts == {"yes": 1, "no": 1, "maybe": 1}
    assert list(ids) == [" a", "b", "c"]  # ids are taken as written
    assert list(features.columns) == ["age", "job"]
    assert features["age"].dtype == np.float64
    np.testing.assert_array_equal(features["age"].to_numpy(), [30.0, np.nan, 41.5])
    assert features["job"].tolist()[:2] == ["Sales", "Tech"] and np.isnan(features["job"].iloc[2])
    assert labels.dtype == np.int8 and labels.tolist() == [1, 0, 0]


def test_rows_are_numbered_without_an_id_column(tmp_path):
    rows = "".join(f"{k},{k % 2}\n" for k in range(12))
    ids, features, labels, _ = read_user_csv(write(tmp_path / "u.csv", "x,y\n" + rows), label_column="y",
                                             positive_label="1")
    assert ids[0] == "row-01" and ids[-1] == "row-12" and list(features.columns) == ["x"]
    assert labels.tolist() == [k % 2 for k in range(12)]


@pytest.mark.parametrize("text, id_column, line, value, problem", [
    ("a,b\n1,2\n", None, 1, "y", "missing column"),
    ("id,a,y\n1,2,1\n", "key", 1, "key", "missing column"),
    ("a,y\n1,1\n2\n3,0\n", None, 3, "2", "expected 2 fields, found 1"),
    ("a,y\n1,1\n2, \n3,0\n", None, 3, "", "missing label in column 'y'"),
    ("a,y\n1,1\n2,0\n3,NA\n", None, 4, "NA", "missing label in column 'y'"),
    ("id,a,y\n7,1,1\n8,2,0\n7,3,0\n", "id", 4, "7", r"duplicate id \(first on line 2\)"),
    ("a,y\n1,1\ninf,0\n", None, 3, "inf", "infinite value in column 'a'"),
    ("a,y\n1,2\n2,0\n", None, 1, "1", "is different from the positive label .*'2', '0'"),
    ("a,y\n1,1.0\n2,0.0\n", None, 2, "1.0", "equals the positive label '1' as a number but is written"),
])
def test_reader_errors_name_file_line_and_value(tmp_path, text, id_column, line, value, problem):
    path = write(tmp_path / "u.csv", text)
    with pytest.raises(DataFormatError, match=problem) as info:
        read_user_csv(path, label_column="y", positive_label="1", id_column=id_column)
    assert (info.value.path, info.value.line, info.value.value) == (str(path), line, value)


# ---------------------------------------------------------------------------------------------------------
# the download stage


def test_download_copies_the_file_and_records_its_sha256(tmp_path):
    source = write(tmp_path / "data/user/mine.csv", "a,y\n1,1\n2,0\n")
    out = tmp_path / "raw"
    for text in ("a,y\n1,1\n2,0\n", "a,y\n1,0\n2,1\n3,1\n"):  # the second call replaces the first copy
        source.write_text(text)
        status = download_dataset("mine", out, required=True, source="user", path=source)
        assert (out / USER_FILE).read_text() == text
        assert status == read_status(out) == {
            "dataset": "mine", "available": True, "synthetic": False, "source": "user", "path": str(source),
            "files": {USER_FILE: hashlib.sha256(text.encode()).hexdigest()}}
        assert sorted(p.name for p in out.iterdir()) == ["status.json", USER_FILE]  # no temp file left


def test_missing_required_user_file_says_where_to_put_it(tmp_path):
    out = tmp_path / "raw"
    with pytest.raises(DataUnavailableError, match=re.escape(
            "dataset 'mine' is not available: data/user/absent.csv (named by datasets.mine.path in "
            "params.yaml) does not exist; put your CSV file there")):
        download_dataset("mine", out, required=True, source="user", path="data/user/absent.csv")
    assert not out.exists()


def test_missing_optional_user_file_is_recorded_as_unavailable(tmp_path):
    status = download_dataset("mine", tmp_path / "raw", required=False, source="user",
                              path=tmp_path / "absent.csv")
    assert status == read_status(tmp_path / "raw")
    assert status["available"] is False and "absent.csv (named by datasets.mine.path" in status["reason"]


def test_a_path_is_needed_for_and_only_for_user_data(tmp_path):
    with pytest.raises(DownloadError, match="a path is needed for, and only for, source 'user'"):
        download_dataset("mine", tmp_path, required=True, source="user")
    with pytest.raises(DownloadError, match="a path is needed for, and only for, source 'user'"):
        download_dataset("tiny", tmp_path, required=True, source="synthetic", path="data/user/x.csv")


def test_the_download_stage_passes_the_path_through(tmp_path, monkeypatch):
    spec = importlib.util.spec_from_file_location("download_stage", ROOT / "stages" / "download.py")
    stage = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(stage)
    monkeypatch.chdir(tmp_path)  # params paths are relative to the repository root
    write(tmp_path / "params.yaml", yaml.safe_dump({"datasets": {"mine": USER}}))
    text, _ = user_table()
    write(tmp_path / USER["path"], text)
    assert stage.main(["--dataset", "mine", "--params", "params.yaml", "--out", "data/raw/mine"]) == 0
    assert (tmp_path / "data/raw/mine" / USER_FILE).read_text() == text


# ---------------------------------------------------------------------------------------------------------
# parameters


def test_user_parameters():
    built = params(USER)
    assert (built.path, built.label_column, built.positive_label, built.id_column) == (
        "data/user/mine.csv", "income", "1", "serial")
    assert params({**USER, "path": "data/user/ipums/us.csv"}).path == "data/user/ipums/us.csv"
    assert params({k: v for k, v in USER.items() if k != "id_column"}).id_column is None


@pytest.mark.parametrize("path", ["mine.csv", "data/mine.csv", "data/user", "data/users/mine.csv",
                                  "/data/user/mine.csv", "data/user/../mine.csv", "../data/user/mine.csv"])
def test_user_path_must_lie_under_data_user(path):
    with pytest.raises(ParamError, match=re.escape(
            f"datasets.mine: path must be a file under data/user/ relative to the repository root (so that "
            f"DVC tracks it), got {path!r}")):
        params({**USER, "path": path})


@pytest.mark.parametrize("change, message", [
    ({"path": None}, "datasets.mine: path is required for user data"),
    ({"label_column": None}, "label_column is required for user data"),
    ({"positive_label": None}, "positive_label is required for user data"),
    ({"positive_label": 1}, "datasets.mine.positive_label must be a string, got 1"),
    ({"reader": None}, r"reader is required for user data \(one of \['user_csv'\]\)"),
    ({"reader": "adult"}, "reader must be user_csv for, and only for, source user; got reader 'adult'"),
    ({"id_column": "income"}, "id_column must differ from label_column, got 'income' for both"),
    ({"n": 10}, "n is only for synthetic data"),
])
def test_invalid_user_parameters_are_named(change, message):
    block = {k: v for k, v in {**USER, **change}.items() if v is not None}
    with pytest.raises(ParamError, match=message):
        params(block)


@pytest.mark.parametrize("name, value", [("path", "data/user/mine.csv"), ("label_column", "income"),
                                         ("positive_label", "1"), ("id_column", "serial")])
def test_user_fields_are_refused_for_other_sources(name, value):
    adult = {"reader": "adult", "partition": "horizontal", "parties": ["agent1", "agent2"], "train_rows": 10,
             "normalize": "max_abs_rows"}
    synthetic = {"source": "synthetic", "n": 50, "partition": "vertical", "parties": ["a", "b"],
                 "split": [2, 2], "label_holder": "a", "alignment": "plain", "private_fraction": 0.0,
                 "test_fraction": 0.2, "normalize": "block_rows"}
    for block in (adult, synthetic):
        with pytest.raises(ParamError, match=f"{name} is only for user data \\(source: user\\), got '"):
            params({**block, name: value})
    with pytest.raises(ParamError, match="reader must be user_csv for, and only for, source user"):
        params({**adult, "reader": "user_csv"})


# ---------------------------------------------------------------------------------------------------------
# the prepare stage


def downloaded(tmp_path, text):
    """The user's file put in place by the download stage, as the prepare stage finds it."""
    source = write(tmp_path / "data/user/mine.csv", text)
    download_dataset("mine", tmp_path / "raw", required=True, source="user", path=source)
    return tmp_path / "raw"


def test_user_csv_prepared_as_horizontal_data_for_three_agents(tmp_path):
    text, expected = user_table()
    manifest = prepare_dataset("mine", params(USER), downloaded(tmp_path, text), tmp_path / "prepared",
                               rng=np.random.default_rng(7))
    assert manifest["source"] == {"source": "user", "reader": "user_csv", "rows": 18, "columns": 7,
                                  "records": 20, "dropped_missing": 2, "one_hot": ["state", "sex"],
                                  "label_counts": {"2": 5, "0": 10, "1": 5}}
    _, agents, evaluator = load_prepared(tmp_path / "prepared")
    assert [a.name for a in agents] == ["agent1", "agent2", "agent3"]
    assert [a.n_samples for a in agents] == [4, 4, 4] and evaluator.n_samples == 6
    train_ids = np.concatenate([a.ids for a in agents])
    assert sorted(np.concatenate([train_ids, evaluator.ids])) == sorted(expected)
    for party in agents + [evaluator]:
        assert party.columns == COLUMNS
        assert party.y.tolist() == [expected[i][1] for i in party.ids]
    # The agents' rows, stacked, are the expected encoding normalized as max_abs_rows does it.
    X_train, X_test = HORIZONTAL["max_abs_rows"](np.array([expected[i][0] for i in train_ids]),
                                                 np.array([expected[i][0] for i in evaluator.ids]))
    np.testing.assert_allclose(np.vstack([a.X for a in agents]), X_train)
    np.testing.assert_allclose(evaluator.X, X_test)


def test_user_csv_prepared_as_vertical_data(tmp_path):
    text, expected = user_table(40)
    block = {**USER, "partition": "vertical", "parties": ["host", "guest"], "split": [2, 5],
             "label_holder": "guest", "alignment": "plain", "private_fraction": 0.0, "test_fraction": 0.25,
             "normalize": "block_rows", "train_rows": None}
    block = {k: v for k, v in block.items() if v is not None}
    manifest = prepare_dataset("mine", params(block), downloaded(tmp_path, text), tmp_path / "prepared",
                               rng=np.random.default_rng(7))
    assert manifest["split"]["train"] + manifest["split"]["test"] == len(expected) == 38
    _, (host, guest), evaluator = load_prepared(tmp_path / "prepared")
    assert evaluator is None and host.y is None
    assert host.columns + guest.columns == COLUMNS and host.columns == ("age", "hours")
    assert guest.y.tolist() == [expected[i][1] for i in guest.ids]
    assert guest.y_test.tolist() == [expected[i][1] for i in guest.test_ids]
