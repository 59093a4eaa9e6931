"""Issue 12, "Nothing silent": extreme values, the check after normalization, strict user CSV reading,
and the staging directories a killed prepare leaves behind."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

from ppml.config import ParamError
from ppml.data.download import download_dataset
from ppml.data.normalize import HORIZONTAL, VERTICAL, block_rows, clip_rows, collapse, zscore
from ppml.data.prepare import NormalizationError, check_normalized, dataset_params, prepare_dataset
from ppml.data.prepared import load_prepared
from ppml.data.readers import DataFormatError, read_libsvm, read_user_csv

ROOT = Path(__file__).resolve().parents[3]
SYNTH = {"source": "synthetic", "n": 60, "partition": "vertical", "parties": ["a", "b"], "split": [3, 2],
         "label_holder": "a", "alignment": "plain", "private_fraction": 0.0, "test_fraction": 0.25,
         "normalize": "zscore_block_rows"}
USER = {"source": "user", "reader": "user_csv", "path": "data/user/mine.csv", "label_column": "y",
        "positive_label": "1", "partition": "horizontal", "parties": ["p1", "p2"], "train_rows": 8,
        "normalize": "max_abs_rows"}


def params(block, key="mine"):
    return dataset_params({"datasets": {key: block}}, key)


def write(path, text):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


# ---------------------------------------------------------------------------------------------------------
# normalization of huge and tiny values


@pytest.mark.parametrize("sparse", [False, True])
def test_block_rows_of_huge_and_tiny_rows_are_unit_rows(sparse):
    X = np.array([[1e308, -1e308, 0.0], [3.0, 4.0, 0.0], [0.0, 0.0, 0.0], [1e-170, 0.0, 1e-170]])
    out = block_rows(sp.csr_array(X) if sparse else X)
    out = out.toarray() if sparse else out
    s = np.sqrt(0.5)
    np.testing.assert_allclose(out, [[s, -s, 0], [0.6, 0.8, 0], [0, 0, 0], [s, 0, s]], rtol=1e-15)


def test_clip_rows_puts_a_huge_row_on_the_sphere():
    out = clip_rows(np.array([[1e308, 1e308], [0.3, 0.4]]))
    np.testing.assert_allclose(out, [[np.sqrt(0.5), np.sqrt(0.5)], [0.3, 0.4]], rtol=1e-15)


def test_zscore_of_huge_and_tiny_columns_equals_that_of_the_scaled_columns():
    g = np.random.default_rng(0)
    base = g.normal(size=(30, 3))
    X = base * [1e308 / 4, 1e-170, 1.0]  # squares overflow / underflow in the first two columns
    X_test = g.normal(size=(5, 3)) * [1e308 / 4, 1e-170, 1.0]
    out_train, out_test = zscore(X, X_test)
    ref_train, ref_test = zscore(base, X_test / [1e308 / 4, 1e-170, 1.0])
    np.testing.assert_allclose(out_train, ref_train, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(out_test, ref_test, rtol=1e-12, atol=1e-12)


def test_zscore_of_a_column_whose_centring_overflows():
    X = np.array([[1e308, 1.0], [-1e308, 2.0], [1e308, 3.0], [-1e308, 4.0]])
    out, _ = zscore(X, X[:1])
    np.testing.assert_allclose(out[:, 0], [1, -1, 1, -1])
    assert collapse(X, out, train=True) is None


def test_the_plain_formula_is_kept_bit_for_bit_on_ordinary_data():
    g = np.random.default_rng(1)
    X, X_test = g.normal(size=(50, 4)) * [1, 10, 100, 0], g.normal(size=(9, 4))
    mean, std = X.mean(axis=0), X.std(axis=0)
    std[std == 0] = 1.0
    out_train, out_test = zscore(X, X_test)
    assert np.array_equal(out_train, (X - mean) / std) and np.array_equal(out_test, (X_test - mean) / std)
    norms = np.linalg.norm(X, axis=1)
    assert np.array_equal(block_rows(X), X * (1.0 / norms)[:, None])


def test_libsvm_rows_of_1e308_are_normalized_not_zeroed(tmp_path):
    path = write(tmp_path / "f", "+1 1:1e308 2:1e308\n-1 1:1 3:2\n")
    X, _ = read_libsvm(path, n_features=3)
    out = VERTICAL["block_rows"](X, X)[0].toarray()
    np.testing.assert_allclose(np.linalg.norm(out, axis=1), 1.0)


# ---------------------------------------------------------------------------------------------------------
# the check after normalization


def test_collapse_finds_non_finite_values_zeroed_rows_and_zeroed_columns():
    X = np.array([[1.0, 2.0], [3.0, 5.0], [0.0, 7.0]])
    assert collapse(X, X, train=True) is None
    assert collapse(X, X * [[1], [np.inf], [1]], train=False) == ("non-finite row", 1)
    assert collapse(X, X * [[1], [0], [1]], train=False) == ("zero row", 1)
    Z = X.copy()
    Z[:, 0] = 0.0
    assert collapse(X, Z, train=True) == ("zero column", 0)
    assert collapse(X, Z, train=False) is None  # test rows: no column statistics to compare
    constant = np.array([[2.0, 1.0], [2.0, 3.0]])
    assert collapse(constant, zscore(constant, constant)[0], train=True) is None  # centring is fine


def test_collapse_on_sparse_blocks():
    X = sp.csr_array(np.array([[1.0, 0.0], [0.0, 2.0]]))
    assert collapse(X, X, train=True) is None
    assert collapse(X, sp.csr_array(np.array([[1.0, 0.0], [0.0, 0.0]])), train=True) == ("zero row", 1)
    assert collapse(X, sp.csr_array(np.array([[np.nan, 0.0], [0.0, 1.0]])), train=True) == (
        "non-finite row", 0)


def test_a_failed_check_names_party_row_and_column():
    ids, columns = np.array(["r1", "r2"]), ("age", "hours")
    X = np.array([[1.0, 2.0], [3.0, 4.0]])
    with pytest.raises(NormalizationError, match="party guest: block_rows normalization left test row with "
                                                 "id 'r2' with only zeros"):
        check_normalized("block_rows", X, X * [[1], [0]], ids, columns, party="guest", train=False)
    with pytest.raises(NormalizationError, match="left column 'hours' with only zeros"):
        check_normalized("block_rows", X, X * [1, 0], ids, columns, party="guest", train=True)


def test_prepare_fails_naming_dataset_and_party_when_normalization_zeroes_a_row(tmp_path, monkeypatch):
    def zero_first_test_row(X_train, X_test):
        X_train, X_test = HORIZONTAL["max_abs_rows"](X_train, X_test)
        X_test[0] = 0.0
        return X_train, X_test

    monkeypatch.setitem(HORIZONTAL, "broken", zero_first_test_row)
    text = "a,b,y\n" + "".join(f"{k + 1},{k},{k % 2}\n" for k in range(10))
    raw = tmp_path / "raw"
    download_dataset("mine", raw, required=True, source="user", path=write(tmp_path / "u.csv", text))
    built = params(USER)
    object.__setattr__(built, "normalize", "broken")  # past validation, as a buggy method would be
    with pytest.raises(NormalizationError, match="dataset 'mine', party evaluator: broken normalization left "
                                                 "test row with id 'row-[0-9]+' with only zeros"):
        prepare_dataset("mine", built, raw, tmp_path / "out", rng=np.random.default_rng(0))
    assert not (tmp_path / "out").exists() and not list(tmp_path.glob(".out.*.tmp"))


# ---------------------------------------------------------------------------------------------------------
# user CSV: labels, stray cells, categorical columns, missing tokens, BOM, symlinks


def read(tmp_path, text, **kwargs):
    kwargs = {"label_column": "y", "positive_label": "1", **kwargs}
    return read_user_csv(write(tmp_path / "u.csv", text), **kwargs)


@pytest.mark.parametrize("text, kwargs, line, value, problem", [
    ("a,y\n1,1\n2, 1.0\n3,0\n", {}, 3, "1.0", "equals the positive label '1' as a number"),
    ("a,y\n1,1\n2,0\n3,yes\n", {}, 4, "yes", "a third distinct label in column 'y' \\(first two: '1', '0'\\)"),
    ("a,y\n1,1\n2,0\n3,yes\n", {"negative_label": "0"}, 4, "yes", "neither the positive label '1' nor"),
    ("a,y\n1,1\n2,2\n", {"negative_label": "0"}, 1, "0", "no label in column 'y' is the negative label"),
])
def test_labels_other_than_the_two_allowed_are_errors(tmp_path, text, kwargs, line, value, problem):
    with pytest.raises(DataFormatError, match=problem) as info:
        read(tmp_path, text, **kwargs)
    assert (info.value.line, info.value.value) == (line, value)


def test_other_labels_negative_counts_them_as_zero_and_counts_are_returned(tmp_path):
    _, _, labels, counts = read(tmp_path, "a,y\n1,1\n2,0\n3,yes\n4,1\n", other_labels="negative")
    assert labels.tolist() == [1, 0, 0, 1] and counts == {"1": 2, "0": 1, "yes": 1}
    _, _, labels, _ = read(tmp_path, "a,y\n1,1\n2,0\n3, 0 \n", negative_label="0")
    assert labels.tolist() == [1, 0, 0]


@pytest.mark.parametrize("stray, line", [("abc", 4), ("N/A", None), ("?", None), ("-", 4)])
def test_stray_text_in_a_numeric_column_is_an_error(tmp_path, stray, line):
    text = f"a,b,y\n1,x,1\n2,x,0\n{stray},x,1\n4,x,0\n5,x,1\n"
    if line is None:  # default missing tokens: the record is kept with a missing value
        _, features, _, _ = read(tmp_path, text)
        assert np.isnan(features["a"].iloc[2]) and features["a"].dtype == np.float64
        return
    with pytest.raises(DataFormatError, match="not a number in numeric column 'a' \\(4 of 5 present cells "
                                              "are numbers; declare the column in categorical") as info:
        read(tmp_path, text)
    assert (info.value.line, info.value.value) == (line, stray)


def test_missing_values_are_configurable(tmp_path):
    text = "a,y\n1,1\n-,0\nNA,1\n4,0\n"
    _, features, _, _ = read(tmp_path, text, missing_values=("-", "NA"))
    assert np.isnan(features["a"].to_numpy()[[1, 2]]).all()
    with pytest.raises(DataFormatError, match="not a number in numeric column 'a'") as info:
        read(tmp_path, text, missing_values=("-",))
    assert (info.value.line, info.value.value) == (4, "NA")


def test_a_number_in_a_text_column_is_an_error_unless_declared_categorical(tmp_path):
    text = "a,job,y\n1,sales,1\n2,tech,0\n3,7,1\n4,tech,0\n"
    with pytest.raises(DataFormatError, match="a number in text column 'job'") as info:
        read(tmp_path, text)
    assert (info.value.line, info.value.value) == (4, "7")
    _, features, _, _ = read(tmp_path, text, categorical=("job",))
    assert features["job"].tolist() == ["sales", "tech", "7", "tech"]


def test_declared_categorical_codes_are_one_hot_encoded(tmp_path):
    text = "race,x,y\n" + "".join(f"{k % 3 + 1},{k},{k % 2}\n" for k in range(12))
    raw = tmp_path / "raw"
    download_dataset("mine", raw, required=True, source="user", path=write(tmp_path / "u.csv", text))
    manifest = prepare_dataset("mine", params({**USER, "categorical": ["race"]}), raw, tmp_path / "out",
                               rng=np.random.default_rng(0))
    assert manifest["source"]["one_hot"] == ["race"] and manifest["source"]["label_counts"] == {"0": 6, "1": 6}
    _, agents, _ = load_prepared(tmp_path / "out")
    assert agents[0].columns == ("x", "race=1", "race=2", "race=3")


def test_a_byte_order_mark_is_ignored(tmp_path):
    path = tmp_path / "u.csv"
    path.write_bytes("\ufeffid,a,y\nr1,1,1\nr2,2,0\n".encode())
    ids, features, _, _ = read_user_csv(path, label_column="y", positive_label="1", id_column="id")
    assert ids.tolist() == ["r1", "r2"] and list(features.columns) == ["a"]


def test_a_symlink_out_of_data_user_is_refused(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    outside = write(tmp_path / "elsewhere" / "secret.csv", "a,y\n1,1\n2,0\n")
    (tmp_path / "data/user").mkdir(parents=True)
    (tmp_path / "data/user/mine.csv").symlink_to(outside)
    with pytest.raises(ParamError, match="datasets.mine: path must lie under data/user/ once symlinks are "
                                         "resolved, got 'data/user/mine.csv', which resolves to "):
        params(USER)
    (tmp_path / "data/user/sub").symlink_to(tmp_path / "elsewhere")
    with pytest.raises(ParamError, match="once symlinks are resolved"):
        params({**USER, "path": "data/user/sub/secret.csv"})
    inside = write(tmp_path / "data/user/real.csv", "a,y\n")
    (tmp_path / "data/user/link.csv").symlink_to(inside)
    assert params({**USER, "path": "data/user/link.csv"}).path == "data/user/link.csv"


@pytest.mark.parametrize("change, message", [
    ({"negative_label": "1"}, "datasets.mine: negative_label must differ from positive_label, got '1'"),
    ({"negative_label": "0", "other_labels": "negative"}, "other_labels negative makes negative_label"),
    ({"other_labels": "zero"}, "datasets.mine.other_labels must be one of \\['error', 'negative'\\], got 'zero'"),
    ({"categorical": "race"}, "datasets.mine.categorical has the wrong type"),
    ({"categorical": ["y"]}, "datasets.mine: categorical\\[0\\] must not be the label or id column, got 'y'"),
    ({"categorical": ["a", "a"]}, "categorical\\[1\\] repeats 'a'"),
    ({"missing_values": ["NA", 3]}, "datasets.mine.missing_values\\[1\\] must be a string, got 3"),
    ({"missing_values": ["1"]}, "missing_values\\[0\\] must not be a label, got '1'"),
    ({"missing_values": [" NA"]}, "missing_values\\[0\\] must not have surrounding spaces"),
])
def test_new_user_parameters_are_validated(change, message):
    with pytest.raises(ParamError, match=message):
        params({**USER, **change})


@pytest.mark.parametrize("name, value", [("negative_label", "0"), ("other_labels", "negative"),
                                         ("categorical", ["a"]), ("missing_values", ["NA"])])
def test_new_user_parameters_are_refused_for_other_sources(name, value):
    with pytest.raises(ParamError, match=f"{name} is only for user data"):
        params({**SYNTH, name: value})


# ---------------------------------------------------------------------------------------------------------
# staging directories


def test_stale_staging_directories_of_this_dataset_only_are_removed(tmp_path):
    raw = tmp_path / "raw"
    download_dataset("tiny", raw, required=True, source="synthetic")
    stale = [tmp_path / ".tiny.abcd_123.tmp", tmp_path / ".tiny.zzzzzzzz.tmp"]
    kept = [tmp_path / ".tiny2.abcdefgh.tmp", tmp_path / ".other.abcdefgh.tmp", tmp_path / ".tiny.abc.tmp",
            tmp_path / "tiny.abcdefgh.tmp"]
    for d in stale + kept:
        (d / "sub").mkdir(parents=True)
    (tmp_path / ".tiny.qqqqqqqq.tmp").write_text("a file, not a staging directory")
    prepare_dataset("tiny", params(SYNTH, "tiny"), raw, tmp_path / "tiny", rng=np.random.default_rng(0))
    assert not any(d.exists() for d in stale) and all(d.exists() for d in kept)
    assert (tmp_path / ".tiny.qqqqqqqq.tmp").is_file() and (tmp_path / "tiny" / "a.npz").is_file()


KILLABLE = """
import sys, time
import numpy as np
import ppml.data.prepare as prepare
from ppml.io import save_party

def stalled_save(path, party):
    save_party(path, party)
    open(sys.argv[3], "w").close()  # tell the test that staging holds a file
    time.sleep(60)

prepare.save_party = stalled_save
params = prepare.dataset_params({"datasets": {"tiny": %r}}, "tiny")
prepare.prepare_dataset("tiny", params, sys.argv[1], sys.argv[2], rng=np.random.default_rng(1))
"""


def test_a_killed_prepare_keeps_the_old_output_and_the_next_run_cleans_up(tmp_path):
    raw, out, flag = tmp_path / "raw", tmp_path / "prepared" / "tiny", tmp_path / "flag"
    download_dataset("tiny", raw, required=True, source="synthetic")
    prepare_dataset("tiny", params(SYNTH, "tiny"), raw, out, rng=np.random.default_rng(0))
    before = {p.name: p.read_bytes() for p in out.iterdir()}

    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    proc = subprocess.Popen([sys.executable, "-c", KILLABLE % SYNTH, str(raw), str(out), str(flag)], env=env)
    try:
        deadline = time.monotonic() + 30
        while not flag.exists():
            assert proc.poll() is None and time.monotonic() < deadline, "prepare ended before staging"
            time.sleep(0.02)
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    staging = list(out.parent.glob(".tiny.*.tmp"))
    assert len(staging) == 1 and (staging[0] / "a.npz").is_file()
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before  # the old output is intact

    prepare_dataset("tiny", params(SYNTH, "tiny"), raw, out, rng=np.random.default_rng(0))
    assert not list(out.parent.glob(".tiny.*.tmp"))
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before
