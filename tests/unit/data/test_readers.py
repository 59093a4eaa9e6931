import lzma
import os
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from sklearn.datasets import load_svmlight_file

from ppml.data.readers import (ADULT_COLUMNS, DataFormatError, read_adult, read_csv_table, read_dense_matrix,
                               read_labels, read_libsvm)

REPO = Path(__file__).resolve().parents[3]
MIRROR = Path(os.environ.get("DATA_MIRROR") or REPO.parent / "shared" / "datasets")
needs_mirror = pytest.mark.skipif(not MIRROR.is_dir(), reason="no dataset mirror (set DATA_MIRROR)")


def _write(tmp_path: Path, text: str, name: str = "f.txt") -> Path:
    path = tmp_path / name
    path.write_bytes(text.encode())
    return path


def _fails(call, path: Path, *, line: int, value: str, problem: str) -> None:
    with pytest.raises(DataFormatError, match=problem) as info:
        call(path)
    error = info.value
    assert (error.path, error.line, error.value) == (str(path), line, value)
    assert str(error).startswith(f"{path}, line {line}: ") and repr(value) in str(error)


@pytest.fixture(scope="module")
def raw(tmp_path_factory):
    """Decompress a mirror file (once per module) and return its path."""
    cache = tmp_path_factory.mktemp("raw")

    def get(dataset: str, name: str) -> Path:
        out = cache / dataset / name
        if not out.exists():
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_bytes(lzma.decompress((MIRROR / dataset / f"{name}.xz").read_bytes()))
        return out
    return get


# ---------------------------------------------------------------- LIBSVM

def test_libsvm_reads_indices_values_and_both_label_codings(tmp_path):
    X, y = read_libsvm(_write(tmp_path, "+1 1:0.5 4:2 \n-1\n-1 2:1e-3 3:-7\n"), n_features=5)
    assert X.format == "csr" and X.dtype == np.float64 and X.shape == (3, 5)
    np.testing.assert_array_equal(X.toarray(), [[0.5, 0, 0, 2, 0], [0, 0, 0, 0, 0], [0, 1e-3, -7, 0, 0]])
    np.testing.assert_array_equal(y, [1, 0, 0])
    assert y.dtype == np.int8
    _, y01 = read_libsvm(_write(tmp_path, "1 1:1\n0 2:1", "g.txt"), n_features=2)  # no final newline
    np.testing.assert_array_equal(y01, [1, 0])


def test_libsvm_matches_scikit_learn_on_random_data(tmp_path):
    rng = np.random.default_rng(0)
    dense = np.where(rng.random((40, 30)) < 0.2, rng.normal(size=(40, 30)).round(4), 0.0)
    labels = rng.choice([-1, 1], size=40)
    lines = [" ".join([f"{label:+d}"] + [f"{j + 1}:{v}" for j, v in enumerate(row) if v != 0])
             for label, row in zip(labels, dense)]
    path = _write(tmp_path, "\n".join(lines) + "\n")
    X, y = read_libsvm(path, n_features=32)
    X_ref, y_ref = load_svmlight_file(str(path), n_features=32)
    np.testing.assert_array_equal(X.toarray(), X_ref.toarray())
    np.testing.assert_array_equal(y, (y_ref > 0).astype(np.int8))


@pytest.mark.parametrize("text, line, value, problem", [
    ("+1 1:1\n\n-1 2:1\n", 2, "", "empty line"),
    ("+1 1:1\n-1 2\n", 2, "2", "not index:value"),
    ("+1 a:1\n", 1, "a:1", "index is not a 64-bit integer"),
    ("+1 1.5:1\n", 1, "1.5:1", "index is not a 64-bit integer"),
    ("+1 1:1\n-1 99999999999999999999:1\n", 2, "99999999999999999999:1", "index is not a 64-bit integer"),
    ("+1 1:x\n", 1, "1:x", "value is not a number"),
    ("+1 1:2:3\n", 1, "1:2:3", "value is not a number"),
    ("+1 1:1\n-1 0:1\n", 2, "0:1", r"index outside 1\.\.4"),
    ("+1 5:1\n", 1, "5:1", r"index outside 1\.\.4"),
    ("+1 1:1 3:1 3:2\n", 1, "3:2", "not greater than the previous"),
    ("-1 1:1\n+1 3:1 2:1\n", 2, "2:1", "not greater than the previous"),
    ("+1 1:nan\n", 1, "1:nan", "NaN or infinite"),
    ("+1 1:1\n+1 2:-inf\n", 2, "2:-inf", "NaN or infinite"),
    ("+1 1:1\n2 1:1\n", 2, "2", "label outside"),
    ("yes 1:1\n", 1, "yes", "label is not a number"),
    ("+1 1:1\n0 1:1\n-1 2:1\n", 3, "-1", "mix the -1/\\+1 and 0/1 codings"),
    ("", 1, "", "empty file"),
])
def test_libsvm_errors_name_file_line_and_value(tmp_path, text, line, value, problem):
    _fails(lambda p: read_libsvm(p, n_features=4), _write(tmp_path, text), line=line, value=value,
           problem=problem)


def test_libsvm_needs_a_positive_feature_count(tmp_path):
    with pytest.raises(ValueError, match="n_features must be a positive integer, got 0"):
        read_libsvm(_write(tmp_path, "+1 1:1\n"), n_features=0)


@needs_mirror
def test_libsvm_reads_a9a(raw):
    X, y = read_libsvm(raw("a9a", "a9a"), n_features=123)
    assert X.shape == (32561, 123) and int(y.sum()) == 7841
    assert set(np.unique(X.data)) == {1.0} and X[:, [122]].nnz == 1  # index 123 occurs once (line 19610)
    X_test, y_test = read_libsvm(raw("a9a", "a9a.t"), n_features=123)
    assert X_test.shape == (16281, 123) and int(y_test.sum()) == 3846 and X_test[:, [122]].nnz == 0


# ---------------------------------------------------------------- Adult

ADULT_TEST = (
    "|1x3 Cross validator\n"
    "25, Private, 226802, 11th, 7, Never-married, Machine-op-inspct, Own-child, Black, Male, 0, 0, 40, "
    "United-States, <=50K.\n"
    "38, ?, 89814, HS-grad, 9, Married-civ-spouse, ?, Husband, White, Male, 0, 0, 50, ?, >50K.\n"
    "\n"
)


def test_adult_test_file_skips_its_first_line_and_label_dots(tmp_path):
    frame = read_adult(_write(tmp_path, ADULT_TEST))
    assert tuple(frame.columns) == ADULT_COLUMNS and len(frame) == 2
    np.testing.assert_array_equal(frame["income"], [0, 1])
    assert frame["income"].dtype == np.int8 and frame["age"].dtype == np.float64
    assert frame.loc[0, "fnlwgt"] == 226802 and frame.loc[1, "hours-per-week"] == 50
    assert frame.loc[0, "workclass"] == "Private" and frame.loc[0, "native-country"] == "United-States"
    assert frame.loc[1, ["workclass", "occupation", "native-country"]].isna().all()
    assert frame.loc[0].notna().all()


def _adult(row: str, extra: str = "") -> str:
    good = ("39, State-gov, 77516, Bachelors, 13, Never-married, Adm-clerical, Not-in-family, White, Male, "
            "2174, 0, 40, United-States, <=50K\n")
    return good + row + "\n" + extra


@pytest.mark.parametrize("text, line, value, problem", [
    (_adult("50, Private, 83311, Bachelors, 13, Married, Exec, Husband, White, Male, 0, 0, 13, <=50K"), 2,
     "50, Private, 83311, Bachelors, 13, Married, Exec, Husband, White, Male, 0, 0, 13, <=50K",
     "expected 15 fields, found 14"),
    (_adult("", "38, Private, 1, HS-grad, 9, Divorced, Sales, Unmarried, White, Male, 0, 0, 40, Cuba, >50K"),
     2, "", "blank line"),
    (_adult("old, Private, 1, HS-grad, 9, Divorced, Sales, Unmarried, White, Male, 0, 0, 40, Cuba, >50K"), 2,
     "old", "not a number in column 'age'"),
    (_adult("38, Private, 1, HS-grad, 9, Divorced, Sales, Unmarried, White, Male, inf, 0, 40, Cuba, >50K"), 2,
     "inf", "infinite value in column 'capital-gain'"),
    (_adult("38, Private, 1, HS-grad, 9, , Sales, Unmarried, White, Male, 0, 0, 40, Cuba, >50K"), 2,
     "", "empty field marital-status"),
    (_adult("38, Private, 1, HS-grad, 9, Divorced, Sales, Unmarried, White, Male, 0, 0, 40, Cuba, >50"), 2,
     ">50", "income is not"),
    ("|1x3 Cross validator\n\n", 2, "", "no records"),
])
def test_adult_errors_name_file_line_and_value(tmp_path, text, line, value, problem):
    _fails(read_adult, _write(tmp_path, text), line=line, value=value, problem=problem)


@needs_mirror
def test_adult_reads_the_uci_files(raw):
    train = read_adult(raw("adult", "adult.data"))
    assert len(train) == 32561 and int(train["income"].sum()) == 7841
    assert int(train.isna().any(axis=1).sum()) == 2399
    test = read_adult(raw("adult", "adult.test"))
    assert len(test) == 16281 and int(test["income"].sum()) == 3846
    assert int(test.isna().any(axis=1).sum()) == 1221


# ---------------------------------------------------------------- CSV tables

def test_csv_table_splits_ids_features_and_labels_in_file_order(tmp_path):
    path = _write(tmp_path, '"b","id","y","a"\n1.5,x7,1,-2\n2,x3,0,3e2\n', "t.csv")
    ids, features, labels = read_csv_table(path, id_column="id", label_column="y")
    assert ids.dtype.kind == "U" and list(ids) == ["x7", "x3"]
    assert list(features.columns) == ["b", "a"] and (features.dtypes == np.float64).all()
    np.testing.assert_array_equal(features.to_numpy(), [[1.5, -2.0], [2.0, 300.0]])
    assert labels.dtype == np.int8 and list(labels) == [1, 0]
    ids, features, labels = read_csv_table(path, id_column="id")
    assert labels is None and list(features.columns) == ["b", "y", "a"]


def test_csv_table_maps_the_positive_label_and_allows_missing_when_asked(tmp_path):
    path = _write(tmp_path, ",label,f,g\r\n1,-1,NA,1\r\n2,1,3,\r\n", "t.csv")  # unnamed id column, CRLF
    ids, features, labels = read_csv_table(path, id_column="", label_column="label", expected_labels=(-1, 1),
                                           allow_missing=True)
    assert list(ids) == ["1", "2"] and list(labels) == [0, 1]
    np.testing.assert_array_equal(features.isna().to_numpy(), [[True, False], [False, True]])


def _table(*rows: str, header: str = "id,y,f") -> str:
    return "\n".join((header,) + rows) + "\n"


@pytest.mark.parametrize("text, kwargs, line, value, problem", [
    (_table("1,0,2"), {"id_column": "ID"}, 1, "ID", r"missing column \(columns: id, y, f\)"),
    (_table("1,0,2"), {"label_column": "label"}, 1, "label", "missing column"),
    (_table("1,0,2", header="id,y,y"), {}, 1, "y", "repeated in the header"),
    (_table("1,0,2", "2,1,3", "1,1,4"), {}, 4, "1", r"duplicate id \(first on line 2\)"),
    (_table("1,0,2", ",1,3"), {}, 3, "", "empty id"),
    (_table("1,0,2", "2,1"), {}, 3, "2,1", "expected 3 fields, found 2"),
    (_table("1,0,2", "2,1,3,4"), {}, 3, "2,1,3,4", "expected 3 fields, found 4"),
    (_table("1,0,2", "", "2,1,3"), {}, 3, "", "empty line"),
    (_table("1,0,2", "2,1,two"), {}, 3, "two", "not a number in column 'f'"),
    (_table("1,0,inf"), {}, 2, "inf", "infinite value in column 'f'"),
    (_table("1,0,2", "2,1,NA"), {}, 3, "NA", "missing value in column 'f'"),
    (_table("1,0,2", "2,1,"), {"allow_missing": False}, 3, "", "missing value in column 'f'"),
    (_table("1,2,2"), {}, 2, "2", r"label outside \(0, 1\)"),
    (_table("1,,2"), {"allow_missing": True}, 2, "", "not a number in column 'y'"),
    (_table(), {}, 2, "", "no data rows"),
    ('id,y,f\n"1\n2",0,1\n3,0,x\n', {}, 4, "x", "not a number"),  # a quoted newline shifts the lines
    ("", {}, 1, "", "no header line"),
])
def test_csv_table_errors_name_file_line_and_value(tmp_path, text, kwargs, line, value, problem):
    options = {"id_column": "id", "label_column": "y", **kwargs}
    _fails(lambda p: read_csv_table(p, **options), _write(tmp_path, text, "t.csv"), line=line, value=value,
           problem=problem)


def test_csv_table_rejects_text_that_is_not_utf8(tmp_path):
    path = tmp_path / "t.csv"
    path.write_bytes(b"id,y,f\n1,0,2\n2,0,\xff\n")
    _fails(lambda p: read_csv_table(p, id_column="id"), path, line=3, value="\ufffd", problem="not UTF-8")
    with pytest.raises(ValueError, match=r"expected_labels must be two distinct labels"):
        read_csv_table(path, id_column="id", expected_labels=(1, 1))


@needs_mirror
def test_csv_table_reads_the_credit_files(raw):
    uci_path = raw("default_credit", "UCI_Credit_Card.csv")
    label = "default.payment.next.month"
    ids, features, labels = read_csv_table(uci_path, id_column="ID", label_column=label)
    assert features.shape == (30000, 23) and int(labels.sum()) == 6636
    reference = pd.read_csv(uci_path)
    np.testing.assert_array_equal(features.to_numpy(), reference.drop(columns=["ID", label]))
    guest_path = raw("default_credit", "fate/default_credit_hetero_guest.csv")
    guest_ids, guest, guest_labels = read_csv_table(guest_path, id_column="id", label_column="y")
    host_ids, host, _ = read_csv_table(raw("default_credit", "fate/default_credit_hetero_host.csv"),
                                       id_column="id")
    assert guest.shape == (30000, 13) and host.shape == (30000, 10) and guest_ids[0] == "25115"
    assert set(guest_ids) == set(host_ids) == set(ids)
    by_id = dict(zip(ids, labels))
    assert all(by_id[i] == label for i, label in zip(guest_ids, guest_labels))


@needs_mirror
def test_csv_table_reads_give_me_some_credit_with_its_missing_values(raw):
    path = raw("give_credit", "cs-training.csv")
    ids, features, labels = read_csv_table(path, id_column="", label_column="SeriousDlqin2yrs",
                                           allow_missing=True)
    assert features.shape == (150000, 10) and int(labels.sum()) == 10026 and ids[-1] == "150000"
    assert features.isna().sum().to_dict() == {**{c: 0 for c in features.columns}, "MonthlyIncome": 29731,
                                               "NumberOfDependents": 3924}


# ---------------------------------------------------------------- dense matrices and label files

def test_dense_matrix_and_labels(tmp_path):
    X = read_dense_matrix(_write(tmp_path, "1 2 3 \n4 5 6 \n"), n_features=3)
    np.testing.assert_array_equal(X, [[1, 2, 3], [4, 5, 6]])
    assert X.dtype == np.float64
    y = read_labels(_write(tmp_path, "1\n-1\n1\n", "l.txt"))
    assert y.dtype == np.int8 and list(y) == [1, 0, 1]
    assert list(read_labels(_write(tmp_path, "0\n1\n", "m.txt"), expected=(0, 1))) == [0, 1]


@pytest.mark.parametrize("text, line, value, problem", [
    ("1 2 3\n4 5\n", 2, "4 5", "expected 3 values, found 2"),
    ("1 2 3\n\n", 2, "", "empty line"),
    ("1 2 3\n4 x 6\n", 2, "x", "value is not a number"),
    ("1 nan 3\n", 1, "nan", "NaN or infinite"),
])
def test_dense_matrix_errors_name_file_line_and_value(tmp_path, text, line, value, problem):
    _fails(lambda p: read_dense_matrix(p, n_features=3), _write(tmp_path, text), line=line, value=value,
           problem=problem)


@pytest.mark.parametrize("text, line, value, problem", [
    ("1\n-1 1\n", 2, "-1 1", "one label per line"),
    ("1\n\n-1\n", 2, "", "one label per line"),
    ("1\none\n", 2, "one", "label is not a number"),
    ("1\n0\n", 2, "0", r"label outside \(-1, 1\)"),
])
def test_label_file_errors_name_file_line_and_value(tmp_path, text, line, value, problem):
    _fails(read_labels, _write(tmp_path, text), line=line, value=value, problem=problem)


@needs_mirror
@pytest.mark.parametrize("dataset, d, n_train, positives, checksum", [
    ("madelon", 500, 2000, 1000, 488083511),
    ("arcene", 10000, 100, 44, 70726744),
])
def test_nips2003_files_match_their_published_checksums(raw, dataset, d, n_train, positives, checksum):
    X = read_dense_matrix(raw(dataset, f"{dataset}_train.data"), n_features=d)
    y = read_labels(raw(dataset, f"{dataset}_train.labels"))
    assert X.shape == (n_train, d) and X.sum() == checksum and int(y.sum()) == positives


# --- issue 18: numbers parse as the CSV readers parse them (no digit-group underscores) ----------------


UNDERSCORE = r"not a number \(a digit-group underscore, which the CSV readers refuse too\)"


@pytest.mark.parametrize("text, line, value", [
    ("+1 1:1 3:0.5\n-1 1:1_0\n", 2, "1:1_0"),  # float() reads 1_0 as 10
    ("+1 1:1 3:0.5\n-1 1_0:1\n", 2, "1_0:1"),
    ("+1 1:1\n-0_1 2:3\n", 2, "-0_1"),  # float() reads it as -1, a valid label
    ("1 1:2.5_0\n", 1, "1:2.5_0"),
])
def test_libsvm_numbers_with_underscores_are_refused(tmp_path, text, line, value):
    _fails(lambda p: read_libsvm(p, n_features=12), _write(tmp_path, text), line=line, value=value,
           problem=UNDERSCORE)
    # what the CSV readers do with the same number
    number = next(part for part in value.split(":") if "_" in part)
    csv = _write(tmp_path, f"id,x,y\na,{number},1\n", name="t.csv")
    with pytest.raises(DataFormatError, match="not a number in column 'x'"):
        read_csv_table(csv, id_column="id", label_column="y")


def test_dense_matrix_and_label_files_refuse_underscores_too(tmp_path):
    _fails(lambda p: read_dense_matrix(p, n_features=2), _write(tmp_path, "1 2\n3 4_5\n"), line=2,
           value="4_5", problem=UNDERSCORE)
    _fails(read_labels, _write(tmp_path, "1\n-1\n-0_1\n"), line=3, value="-0_1", problem=UNDERSCORE)
